"""Edit benchmark: `reuse` (EfficientEdit) vs AR vs FastCoder on real code edits.

    fastcoder bench edit [--model qwen2.5-coder-0.5b] [--dtype bfloat16] [--tasks N]

Tasks are real functions from the Python standard library (the interpreter's own
source files) with instructions that keep most of the code: add type hints, add a
docstring, rename a variable, add input validation, convert to f-strings (two or
more per kind). Each task runs every method back to back in one process (AR first,
then the others), each from a fresh session, through :func:`fastcoder.edit.edit_code`
with the editor's stop rule (the closing fence).

Methods:
- ``ar``: plain greedy decoding;
- ``reuse``: the engine's reuse drafter, the original code as the draft (what the CLI
  and the server run);
- ``fastcoder``: FastCoder without a reference (CACHE + live context; the prompt holds
  the original code, so the live context can draft from it too); no D_r/D_c, since the
  stdlib is in the common datastore and would leak the answer;
- ``reuse-fix``: the engine's reuse drafter with ``moved_code``: out of sync, the
  anchor moves past the step's tokens that still agreed, and when nothing follows the
  anchor the whole reference is searched with twice the tokens (moved code);
- ``reuse-fix-adapt``: reuse-fix plus a short first chain (24 tokens) after each
  re-sync (``short_after_resync``).

Reported per task and overall: decode speedup vs AR (decode ms/token, prefill
excluded), end-to-end speedup (prefill included), reuse share (tokens accepted from
the reference / generated tokens), mean accepted length (tokens per decode forward),
identical_to_ar (and the AR top-2 logit margin where an output first differs), and
for the reuse methods where the time goes: forward vs retrieval, the length of the
reuse chains, and the measured cost of verifying them.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import statistics
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from fastcoder.drafters import ReuseDrafter, Sources
from fastcoder.edit import (EDIT_FALLBACK_TREE, edit_code, edit_config, edit_prompt_text, edit_reference, edit_stop_rule,
                            edit_token_cap, finish_edit)
from fastcoder_bench.output import recording
from fastcoder_bench.suite.report import first_diff, margins_recorded


@dataclass(frozen=True)
class EditTask:
    file: str  # relative to the stdlib directory
    function: str  # "name" or "Class.name"
    kind: str
    instruction: str


HINTS = "Add type hints to the parameters and the return value of this function."
DOC = "Add a docstring to this function that explains what it does."
FSTR = "Convert the string formatting in this function to f-strings."

TASKS: tuple[EditTask, ...] = (
    EditTask("textwrap.py", "indent", "type hints", HINTS),
    EditTask("heapq.py", "_siftdown", "type hints", HINTS),
    EditTask("shlex.py", "quote", "type hints", HINTS),
    EditTask("heapq.py", "_siftup", "docstring", DOC),
    EditTask("string.py", "Template.get_identifiers", "docstring", DOC),
    EditTask("locale.py", "_grouping_intervals", "rename", "Rename the variable `last_interval` to `previous_interval`."),
    EditTask("json/decoder.py", "_decode_uXXXX", "rename", "Rename the variable `esc` to `hex_digits`."),
    EditTask("textwrap.py", "shorten", "validation", "At the start of the function, raise ValueError if `width` is not a positive integer."),
    EditTask("quopri.py", "encodestring", "validation", "At the start of the function, raise TypeError if `s` is not a bytes object."),
    EditTask("calendar.py", "HTMLCalendar.formatday", "f-strings", FSTR),
    EditTask("difflib.py", "_format_range_unified", "f-strings", FSTR),
    EditTask("json/encoder.py", "py_encode_basestring_ascii", "f-strings", FSTR),
)

METHODS = ("ar", "reuse", "fastcoder", "reuse-fix", "reuse-fix-adapt")


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def load_task_code(task: EditTask) -> tuple[str, int, int]:
    """(code, first line, last line) of the task's function, decorators included."""
    path = stdlib_dir() / task.file
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    parts = task.function.split(".")
    scope: Sequence[ast.stmt] = tree.body
    node = None
    for i, name in enumerate(parts):
        want = (ast.FunctionDef, ast.AsyncFunctionDef) if i == len(parts) - 1 else (ast.ClassDef,)
        node = next((n for n in scope if isinstance(n, want) and n.name == name), None)
        if node is None:
            raise LookupError(f"{task.function} not found in {path}")
        scope = node.body
    assert node is not None
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    last = node.end_lineno or node.lineno
    lines = text.splitlines(keepends=True)
    return "".join(lines[first - 1 : last]), first, last


# ------------------------------------------------------------------------------------------
# running
# ------------------------------------------------------------------------------------------


@dataclass
class StepLog:
    draft: int
    accepted: int
    reuse: int
    forward_ms: float


@dataclass
class Run:
    method: str
    tokens: list[int]
    text: str
    stats: object
    steps: list[StepLog] = field(default_factory=list)
    margins: list[float] = field(default_factory=list)


def run_method(engine, code: str, instruction: str, method: str, max_new_tokens: int | None = None) -> Run:
    steps: list[StepLog] = []
    last = {"fwd": 0.0, "reuse": 0}

    def on_step(committed, stats) -> None:
        fwd = stats.forward_s
        reuse = stats.accepted_by_source.get("reuse", 0)
        steps.append(StepLog(stats.draft_sizes[-1], stats.accept_lengths[-1], reuse - last["reuse"], 1000 * (fwd - last["fwd"])))
        last["fwd"], last["reuse"] = fwd, reuse

    if method in ("ar", "reuse", "fastcoder"):
        res = edit_code(engine, code, instruction, method=method, max_new_tokens=max_new_tokens, on_step=on_step)
        g = res.generation
        return Run(method, g.tokens, res.text, g.stats, steps, g.margins)
    # the reuse drafter's variants, through the same decode loop the engine uses
    from fastcoder.decode import generate
    from fastcoder.session import Session

    tok = engine.tokenizer
    p = edit_prompt_text(tok, code, instruction)
    prompt_ids = tok(p.head, add_special_tokens=False)["input_ids"] + tok(p.opening, add_special_tokens=False)["input_ids"]
    reference = edit_reference(tok, code)
    if max_new_tokens is None:
        max_new_tokens = edit_token_cap(tok, code)
    cfg = edit_config("reuse", max_new_tokens=max_new_tokens)
    drafter = ReuseDrafter(reference, Sources(), engine.pool, moved_code=True,
                           short_after_resync=24 if method == "reuse-fix-adapt" else None)
    g = generate(engine.verifier, tok, drafter, prompt_ids, cfg, session=Session(cfg), stop_fn=edit_stop_rule(p.fence, code), on_step=on_step)
    return Run(method, g.tokens, finish_edit(g.text, code), g.stats, steps, g.margins)


def untimed_ar_margins(engine, code: str, instruction: str, runs: dict[str, Run], max_new_tokens: int | None) -> None:
    """AR's top-2 logit margins for the report's ``ar_margin_at_diff``, outside the timed
    runs (which compute none, as the suite's do): only where some method's tokens differ
    from AR's, AR edits once more with margins, kept when it wrote the same tokens."""
    ar = runs["ar"]
    if all(r.tokens == ar.tokens for r in runs.values()):
        return
    with margins_recorded(engine.verifier):
        again = run_method(engine, code, instruction, "ar", max_new_tokens)
    if again.tokens == ar.tokens:
        ar.margins = list(again.margins)


def print_task(row: dict, index: int, total: int) -> None:
    print(f"\n## task {index + 1}/{total}: {row['task']} ({row['kind']}; lines {row['lines']}, {row['code_tokens']} code tokens -> "
          f"{row['new_tokens']} new; edited: {row['changed']}; load {row['load']:.1f})")
    widths = (16, 9, 9, 8, 8, 8, 7, 9, 10)
    print(fmt_row(("method", "ms/tok", "decode x", "c(k) x", "e2e x", "forwards", "acc len", "reuse %", "identical"), widths))
    for m, e in row["methods"].items():
        margin = e["ar_margin_at_diff"]
        ident = "yes" if e["identical_to_ar"] else f"no@{e['first_diff']} (m={margin if margin is None else round(margin, 3)})"
        print(fmt_row((m, f"{e['ms_per_token']:.1f}", f"{e['speedup']:.2f}", f"{e['model_speedup']:.2f}", f"{e['e2e_speedup']:.2f}", e["forwards"],
                       f"{e['mean_accept_len']:.2f}", f"{100 * e['reuse_share']:.0f}", ident), widths))


def print_report(results: list[dict], methods: Sequence[str], curve, title: str = "overall") -> dict:
    """Overall table and the time analysis of the reuse methods; returns the summary."""
    if not results:
        return {}
    print(f"\n## {title} (decode x = total AR decode time / total method decode time; same tokens, so = ms/token ratio)")
    print("## c(k) x = the same forwards priced with the measured cost curve (independent of the machine's load)")
    widths = (16, 9, 9, 9, 9, 8, 8, 9, 10)
    print(fmt_row(("method", "decode x", "geomean x", "c(k) x", "e2e x", "acc len", "reuse %", "identical", "min x"), widths))
    summary: dict = {}
    for m in methods:
        es = [r["methods"][m] for r in results]
        ar_dec = sum(r["methods"]["ar"]["decode_s"] for r in results)
        ar_tot = sum(r["methods"]["ar"]["total_s"] for r in results)
        dec = sum(e["decode_s"] for e in es)
        tot = sum(e["total_s"] for e in es)
        toks = sum(e["new_tokens"] for e in es)
        fwd = sum(e["forwards"] for e in es)
        geo = math.exp(statistics.fmean(math.log(max(e["speedup"], 1e-9)) for e in es))
        reuse = sum(e["accepted_by_source"].get("reuse", 0) for e in es) / max(toks, 1)
        ident = sum(e["identical_to_ar"] for e in es)
        model_x = sum(r["methods"]["ar"]["model_s"] for r in results) / max(sum(e["model_s"] for e in es), 1e-9)
        summary[m] = dict(decode_x=ar_dec / max(dec, 1e-9), geomean_x=geo, model_x=model_x, e2e_x=ar_tot / max(tot, 1e-9),
                          accept_len=(toks - len(es)) / max(fwd, 1), reuse_share=reuse, identical=ident)
        print(fmt_row((m, f"{ar_dec / max(dec, 1e-9):.2f}", f"{geo:.2f}", f"{model_x:.2f}", f"{ar_tot / max(tot, 1e-9):.2f}", f"{summary[m]['accept_len']:.2f}",
                       f"{100 * reuse:.0f}", f"{ident}/{len(es)}", f"{min(e['speedup'] for e in es):.2f}"), widths))

    # ------------------------------------------------------------------ where the time goes
    ar_fwd_ms = 1000 * sum(r["methods"]["ar"]["forward_s"] for r in results) / max(sum(r["methods"]["ar"]["forwards"] for r in results), 1)
    print(f"\n## where the time goes (AR: {ar_fwd_ms:.1f} ms per forward)")
    for m in methods:
        if m == "ar":
            continue
        es = [r["methods"][m] for r in results]
        dec = sum(e["decode_s"] for e in es)
        parts = {k: sum(e[k] for e in es) for k in ("forward_s", "retrieval_s", "tree_s", "accept_s")}
        other = dec - sum(parts.values())
        split = ", ".join(f"{k[:-2]} {100 * v / max(dec, 1e-9):.1f}%" for k, v in parts.items()) + f", other {100 * other / max(dec, 1e-9):.1f}%"
        steps = [s for e in es for s in e["steps"]]
        # a step verified a reuse chain when its draft is longer than the fallback tree
        # or it accepted reference tokens (a short chain at the reference's end)
        chains = [s for s in steps if m.startswith("reuse") and (s["draft"] > EDIT_FALLBACK_TREE or s["reuse"] > 0)]
        rest = [s for s in steps if s not in chains]
        print(f"- {m}: decode split: {split}")
        if chains:
            acc = [s["accepted"] for s in chains]
            full = sum(1 for s in chains if s["accepted"] == s["draft"])
            zero = sum(1 for s in chains if s["accepted"] == 0)
            print(f"    reuse chains: {len(chains)} steps, draft {statistics.fmean(s['draft'] for s in chains):.0f} tokens on average, "
                  f"accepted mean {statistics.fmean(acc):.1f} / median {statistics.median(acc):.0f}; fully accepted {full}, rejected at once {zero}; "
                  f"{statistics.fmean(s['forward_ms'] for s in chains):.1f} ms per forward "
                  f"({statistics.fmean(s['forward_ms'] for s in chains) / max(ar_fwd_ms, 1e-9):.2f}x AR); "
                  f"{sum(acc) + len(chains)} tokens in {sum(s['forward_ms'] for s in chains) / 1000:.1f} s")
        if rest:
            print(f"    other steps (fallback retrieval / edit content): {len(rest)} steps, accepted mean {statistics.fmean(s['accepted'] for s in rest):.2f}, "
                  f"{statistics.fmean(s['forward_ms'] for s in rest):.1f} ms per forward; {sum(s['accepted'] + 1 for s in rest)} tokens in "
                  f"{sum(s['forward_ms'] for s in rest) / 1000:.1f} s")
        if chains:
            # the best any chain-length policy could do: each chain cut exactly where it
            # is rejected (verify cost c(accepted) instead of c(draft))
            ar_model = sum(r["methods"]["ar"]["model_s"] for r in results)
            now = sum(e["model_s"] for e in es)
            oracle = now - sum(curve.cost(x["draft"]) - curve.cost(x["accepted"]) for x in chains)
            free = now - sum(curve.cost(x["draft"]) - curve.cost(0) for x in chains)
            print(f"    c(k) model: {ar_model / max(now, 1e-9):.2f}x now; {ar_model / max(oracle, 1e-9):.2f}x with oracle chain lengths; "
                  f"{ar_model / max(free, 1e-9):.2f}x if verifying a chain cost no more than one AR step")
        toks = sum(e["new_tokens"] for e in es)
        fwd = sum(e["forwards"] for e in es)
        if fwd:
            print(f"    forwards: {fwd} for {toks} tokens -> a forward-count bound of {(toks - len(es)) / fwd:.2f}x at AR's per-forward cost; "
                  f"measured {1000 * parts['forward_s'] / fwd:.1f} ms per forward ({1000 * parts['forward_s'] / fwd / max(ar_fwd_ms, 1e-9):.2f}x AR)")
    return summary


def load_avg() -> str:
    try:
        return "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "load average unknown"


def fmt_row(cols: Sequence, widths: Sequence[int]) -> str:
    return "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cols, widths)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fastcoder bench edit", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", default="bfloat16", choices=["auto", "float32", "bfloat16"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tasks", type=int, default=len(TASKS), help="run the first N tasks")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, from {','.join(METHODS)} (ar is always run)")
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--show", action="store_true", help="print each edited text")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    ap.add_argument("--report", type=Path, default=None, help="print the tables of a saved --json run and exit")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR", help="write DIR/report.json and DIR/report.md")
    args = ap.parse_args(argv)
    with recording(args.out, "edit", args, argv) as rec:
        rec.results = _run(args, ap)
    return 0


def _run(args: argparse.Namespace, ap: argparse.ArgumentParser) -> dict:
    """The benchmark; prints its tables and returns the figures (``--json``'s payload)."""
    if args.report is not None:
        from fastcoder.budget import CostCurve

        data = json.loads(args.report.read_text())
        results, methods = data["results"], data["methods"]
        curve = CostCurve.from_json(data["curve"])
        for i, row in enumerate(results):
            print_task(row, i, len(results))
        print_report(results, methods, curve)
        edited = [r for r in results if r["changed"]]
        if 0 < len(edited) < len(results):
            print_report(edited, methods, curve, title=f"only the {len(edited)} tasks the model really edited")
        return data
    methods = ["ar"] + [m for m in args.methods.split(",") if m and m != "ar"]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        ap.error(f"unknown method(s): {', '.join(bad)}")

    import torch

    from fastcoder.engine import Engine
    from fastcoder.models import load_model

    print(f"# edit benchmark  model={args.model} dtype={args.dtype} torch threads={torch.get_num_threads()} cpus={os.cpu_count()}")
    print(f"# python {sys.version.split()[0]} stdlib at {stdlib_dir()}")
    print(f"# start: {load_avg()}", flush=True)
    loaded = load_model(args.model, dtype=args.dtype, device=args.device)
    engine = Engine.from_loaded(loaded)  # margins: only in an untimed AR re-run where an output differs (untimed_ar_margins)
    curve = engine.cost_curve()
    c1 = curve.cost(1)
    print("# verify cost c(k)/c(1): " + "  ".join(f"k={k}: {curve.cost(k) / c1:.2f}" for k in (0, 16, 32, 64, 96)) + f"   (c(1) = {1000 * c1:.0f} ms)")
    edit_code(engine, "x = 1\n", "make it 2", max_new_tokens=4)  # warm-up

    tasks = TASKS[: args.tasks]
    results: list[dict] = []
    for ti, task in enumerate(tasks):
        code, first, last = load_task_code(task)
        runs: dict[str, Run] = {}
        # alternate the order from task to task, so a drift in the machine's load
        # does not always favour the same method
        for m in methods if ti % 2 == 0 else methods[::-1]:
            runs[m] = run_method(engine, code, task.instruction, m, args.max_new_tokens)
        ar = runs["ar"]
        untimed_ar_margins(engine, code, task.instruction, runs, args.max_new_tokens)
        row: dict = {
            "task": f"{task.file}:{task.function}",
            "kind": task.kind,
            "lines": f"{first}-{last}",
            "code_tokens": len(engine.encode(code.rstrip("\n"))),
            "new_tokens": len(ar.tokens),
            "changed": ar.text != code,
            "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "methods": {},
        }
        for m, r in runs.items():
            s = r.stats
            d = first_diff(r.tokens, ar.tokens)
            entry = {
                "ms_per_token": s.ms_per_token,
                "decode_s": s.decode_s,
                "total_s": s.total_s,
                "prefill_s": s.prefill_s,
                "forward_s": s.forward_s,
                "retrieval_s": s.retrieval_s,
                "tree_s": s.tree_s,
                "accept_s": s.accept_s,
                "forwards": s.forward_steps,
                "new_tokens": s.new_tokens,
                "speedup": ar.stats.ms_per_token / max(s.ms_per_token, 1e-9),
                # load-independent: each forward priced at the measured c(k) of its draft size
                "model_s": sum(curve.cost(x.draft) for x in r.steps),
                "e2e_speedup": ar.stats.total_s / max(s.total_s, 1e-9),
                "mean_accept_len": s.mean_accept_len,
                "reuse_share": s.accepted_by_source.get("reuse", 0) / max(s.new_tokens, 1),
                "accepted_by_source": dict(s.accepted_by_source),
                "identical_to_ar": r.tokens == ar.tokens,
                "first_diff": d,
                "ar_margin_at_diff": (ar.margins[d] if d is not None and d < len(ar.margins) else None),
                "steps": [vars(x) for x in r.steps],
            }
            row["methods"][m] = entry
        for e in row["methods"].values():
            e["model_speedup"] = row["methods"]["ar"]["model_s"] / max(e["model_s"], 1e-9)
        results.append(row)
        print_task(row, ti, len(tasks))
        if args.show:
            print("--- edited (AR):")
            print(ar.text)
        sys.stdout.flush()

    print(f"\n# end: {load_avg()}")
    summary = print_report(results, methods, curve)
    edited = [r for r in results if r["changed"]]
    if 0 < len(edited) < len(results):
        summary_edited = print_report(edited, methods, curve, title=f"only the {len(edited)} tasks the model really edited")
    else:
        summary_edited = summary
    payload = {"results": results, "summary": summary, "summary_edited": summary_edited, "methods": methods,
               "curve": curve.to_json(), "model": args.model, "dtype": args.dtype}
    if args.json is not None:
        args.json.write_text(json.dumps(payload, indent=1, default=str))
    engine.close()
    return payload


if __name__ == "__main__":
    sys.exit(main())
