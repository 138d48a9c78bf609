"""Driving the real server over stdio for the quality benchmark, and its report.

One ``fastcoder serve`` process per project and model (the project folder is the
workspace root). A variant is a name of :data:`VARIANTS`, or ``NAME@MODEL`` for the same
settings on another model (``no-context@qwen2.5-coder-1.5b``: models side by side on the
same tasks, one server each, all kept up while the project's tasks run). For each task,
each variant in turn (the order rotates from task to task):
``workspace/didChangeConfiguration`` with the variant's settings, ``didOpen`` of the
editor tabs (variants ``open`` and ``context``), ``didOpen`` of the task document (the
real file's uri, the target removed), ``textDocument/inlineCompletion`` at the cursor
(Invoked), ``fastcoder.stats`` for the model run's figures, ``didClose`` of everything.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fastcoder_bench.lsp_client import StdioClient, server_command
from fastcoder_bench.output import recording
from fastcoder_bench.quality.metrics import aggregate, paired, ratios, score
from fastcoder_bench.quality.tasks import DEFAULT_KINDS, KINDS, Project, QualityTask, pick_tasks

VARIANTS: dict[str, dict[str, Any]] = {
    "no-context": {"crossFileContext": False},
    # the document's header (workspace name and path) always first, or never (fileHeader
    # true / false; the server's default, auto, puts it in nearly empty documents only)
    "header": {"crossFileContext": False, "fileHeader": True},
    "no-header": {"crossFileContext": False, "fileHeader": False},
    "context": {"crossFileContext": True},  # the server's default sources
    "definitions": {"crossFileContext": True, "contextSources": {"definitions": 384}},
    "open": {"crossFileContext": True, "contextSources": {"open": 384}},
    # the default sources on top of the document's no-context prompt (a 2048-token
    # document share plus up to 704 context tokens), instead of out of it
    "context-on-top": {"crossFileContext": True, "maxPromptTokens": 2048 + 704},
    # the default sources as commented fragments after the suffix, right before the FIM
    # middle token (Qwen2.5-Coder's CrossCodeEval harness)
    "context-middle": {"crossFileContext": True, "contextPlacement": "before-middle"},
    # half the prompt window (a first request prefills half as many tokens): what the
    # shorter window costs in quality, without and with the context in it
    "no-context-1024": {"crossFileContext": False, "maxPromptTokens": 1024},
    "context-1024": {"crossFileContext": True, "maxPromptTokens": 1024},
}
WITH_TABS = frozenset({"open", "context", "context-on-top", "context-middle", "context-1024"})
BASE = "no-context"
SERVER_OPTIONS = {"debounceMs": 0, "prefetch": False, "earlyAnswerMs": None, "timeBudgetMs": 30000,
                  "warmOnOpen": False, "maxNewTokens": 64,
                  "kvDiskMb": 0}  # every variant's server prefills its prompts itself  # fmt: skip
INVOKED = 1  # InlineCompletionTriggerKind.Invoked


def cpu_flags() -> dict[str, bool]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return {"avx2": "avx2" in flags, "avx512_bf16": "avx512_bf16" in flags,
                        "amx": bool(flags & {"amx_bf16", "amx_tile", "amx_int8"})}  # fmt: skip
    except OSError:
        pass
    return {}


def git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()  # fmt: skip
        return (out.stdout.strip() + ("-dirty" if dirty else "")) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


# ------------------------------------------------------------------------------ one server


class QualityServer:
    """One ``fastcoder serve`` with a project folder as workspace root."""

    def __init__(self, args: argparse.Namespace, root: Path, log_path: Path, model: str | None = None) -> None:
        self.args = args
        self.root = root
        model = model or args.model
        self.client = StdioClient(server_command(model, args.dtype, args.device), log_path)
        options = {"model": model, "dtype": args.dtype, "device": args.device, **SERVER_OPTIONS,
                   **args.server_options}  # fmt: skip
        t0 = time.monotonic()
        self.client.initialize(root, options, timeout=args.ready_timeout)
        self.client.wait_status("ready", timeout=args.ready_timeout)
        self.ready_s = time.monotonic() - t0
        first = self.stats()
        self.model = first.get("model", {})
        known = first.get("settings", {})
        # each variant is sent on top of the server's own values of the keys the variants
        # set, so that `context` gets the default sources again after `definitions`
        self.baseline = {k: known[k] for k in sorted({k for v in VARIANTS.values() for k in v}) if k in known}
        self.knows = {k: k in known for k in ("crossFileContext", "contextSources")}

    def stats(self) -> dict[str, Any]:
        answer = self.client.command("fastcoder.stats", timeout=60)
        return answer.get("result") or {}

    def _wait_for_symbols(self, timeout: float = 600.0) -> None:
        """Until the workspace's symbol table, read once the context is first on, is
        read: a task must not meet it half read."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            symbols = ((self.stats().get("index") or {}).get("D_r") or {}).get("symbols") or {}
            if symbols.get("state") != "reading":
                return
            time.sleep(0.1)

    def _open(self, uri: str, text: str) -> None:
        self.client.notify("textDocument/didOpen",
                           {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})  # fmt: skip

    def _close(self, uri: str) -> None:
        self.client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    def ask(self, task: QualityTask, variant: str) -> dict[str, Any]:
        """The suggestion of ``variant`` (a name of :data:`VARIANTS`) at ``task``'s cursor,
        with the model run's figures."""
        self.client.notify("workspace/didChangeConfiguration", {"settings": {"fastcoder": {**self.baseline, **VARIANTS[variant]}}})
        if VARIANTS[variant].get("crossFileContext"):
            self._wait_for_symbols()
        tabs = [(self.root / rel).as_uri() for rel in task.tabs] if variant in WITH_TABS else []
        for rel, uri in zip(task.tabs, tabs):
            self._open(uri, (self.root / rel).read_text(encoding="utf-8", errors="replace"))
        uri = (self.root / task.path).as_uri()
        self._open(uri, task.text)
        before = self.stats()
        t0 = time.monotonic()
        answer = self.client.call("textDocument/inlineCompletion",
                                  {"textDocument": {"uri": uri}, "position": task.position,
                                   "context": {"triggerKind": INVOKED}}, timeout=self.args.request_timeout)  # fmt: skip
        request_ms = 1000 * (time.monotonic() - t0)
        after = self.stats()
        for u in [uri, *tabs]:
            self._close(u)
        error = ""
        text = ""
        if "error" in answer:
            error = str(answer["error"].get("message", answer["error"]))
        else:
            result = answer.get("result") or {}
            items = result.get("items", []) if isinstance(result, dict) else result
            if items:
                insert = items[0].get("insertText", "")
                text = insert if isinstance(insert, str) else insert.get("value", "")
        ran = after.get("total", {}).get("generations", 0) > before.get("total", {}).get("generations", 0)
        last = after.get("last") or {}
        return {"suggestion": text, "error": error, "model": (after.get("model") or {}).get("name"), "request_ms": request_ms,
                "model_ms": last.get("totalMs") if ran else None,
                "prompt_tokens": last.get("promptTokens", 0) if ran else 0,
                "context_tokens": last.get("contextTokens", 0) if ran else 0,
                "new_tokens": last.get("newTokens", 0) if ran else 0, "stop_reason": last.get("stopReason") if ran else None}  # fmt: skip

    def close(self) -> None:
        try:
            self.client.shutdown(timeout=60)
        except AssertionError:
            self.client.close()


# ------------------------------------------------------------------------------ the run


def split_variant(variant: str, default_model: str) -> tuple[str, str]:
    """``NAME@MODEL`` -> (NAME, MODEL); ``NAME`` -> (NAME, the run's ``--model``)."""
    name, _, model = variant.partition("@")
    return name, model or default_model


def _projects(args: argparse.Namespace) -> list[Project]:
    if args.root:
        return [Project(Path(r).resolve()) for r in args.root]
    from fastcoder_bench.suite.projects import fetch_project, load_projects

    pinned, _ = load_projects(None)
    return [Project(Path(fetch_project(p)), p.name) for p in pinned[: args.projects]]


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(variants: dict[str, dict[str, Any]], title: str = "", base: str = BASE) -> str:
    """A table of the variants with ratios vs ``base``; returns it as markdown."""
    rel = ratios(variants, base)
    head = ["variant", "n", "exact match", "x", "edit sim", "x", "ident match", "x", "empty", "prompt tok", "ctx tok",
            "model p50 ms", "x"]  # fmt: skip
    rows = []
    for name, v in variants.items():
        r = rel.get(name, {})
        rows.append([name, str(v["n"]), _fmt(v["exact_match"]), _fmt(r.get("exact_match"), ".2f"),
                     _fmt(v["edit_similarity"]), _fmt(r.get("edit_similarity"), ".2f"),
                     _fmt(v["identifier_match"]), _fmt(r.get("identifier_match"), ".2f"), _fmt(v["empty_share"], ".2f"),
                     _fmt(v["prompt_tokens_mean"], ".0f"), _fmt(v["context_tokens_mean"], ".0f"),
                     _fmt(v["latency_ms_p50"], ".0f"), _fmt(r.get("latency_ms_p50"), ".2f")])  # fmt: skip
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)] if rows else [len(h) for h in head]
    if title:
        print(title)
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    md = ([f"**{title}**", ""] if title else []) + ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(md)


def _mark(got: dict[str, Any]) -> str:
    """EM (exact), -- (empty) or the edit similarity."""
    return "EM" if got["exact_match"] else ("--" if got["empty"] else f"{got['edit_similarity']:.2f}")


def summarize(variants: list[str], rows: dict[str, list[dict[str, Any]]],
              kinds: dict[str, dict[str, list[dict[str, Any]]]], base: str) -> tuple[dict, dict, dict, list[str]]:
    """Per variant figures (all tasks and per kind), each variant against ``base`` task by
    task; printed as tables, returned with their markdown."""
    results_v = {v: aggregate(rows[v]) for v in variants}
    pairs = {v: paired(rows[base], rows[v]) for v in variants if v != base}
    by_kind = {k: {v: aggregate(kinds[k][v]) for v in variants} for k in KINDS if any(kinds[k].values())}
    print()
    md = [print_table(results_v, "all tasks", base)]
    for k, per_kind in by_kind.items():
        print()
        md.append(print_table(per_kind, f"{k} tasks", base))
    if pairs:
        lines = [f"task by task against {base}:"]
        for v, p in pairs.items():
            se = "-" if p["edit_diff_se"] is None else f"{p['edit_diff_se']:.3f}"
            lines.append(f"  {v}: exact match +{p['exact_gained']} / -{p['exact_lost']} tasks; edit similarity better in "
                         f"{p['edit_better']}, worse in {p['edit_worse']}, equal in {p['edit_equal']}; mean difference "
                         f"{_fmt(p['edit_diff_mean'], '+.3f')} (standard error {se})")  # fmt: skip
        print()
        print("\n".join(lines))
        md.append("\n".join(["**" + lines[0] + "**", ""] + ["- " + ln.strip() for ln in lines[1:]]))
    return results_v, by_kind, pairs, md


def rescore(tasks_jsonl: Path, base: str) -> dict[str, Any]:
    """The tables and the task-by-task comparison of an earlier run, from its tasks.jsonl
    (any variant as the base); runs nothing."""
    try:
        records = [json.loads(line) for line in tasks_jsonl.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise SystemExit(f"--rescore {tasks_jsonl}: {exc}") from None
    if not records:
        raise SystemExit(f"{tasks_jsonl}: no tasks")
    variants = list(records[0]["variants"])
    if base not in variants:
        raise SystemExit(f"--base {base}: not a variant of {tasks_jsonl} ({', '.join(variants)})")
    rows: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    kinds: dict[str, dict[str, list[dict[str, Any]]]] = {k: {v: [] for v in variants} for k in KINDS}
    for rec in records:
        for v in variants:
            rows[v].append(rec["variants"][v])
            kinds[rec["task"]["kind"]][v].append(rec["variants"][v])
    print(f"{tasks_jsonl}: {len(records)} tasks, variants {', '.join(variants)}")
    results_v, by_kind, pairs, _ = summarize(variants, rows, kinds, base)
    return {"variants": results_v, "by_kind": by_kind, "base": base, "paired_vs_base": pairs}


def run(args: argparse.Namespace, rec: Any = None) -> dict[str, Any]:
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    load_before = _loadavg()
    t_pick = time.monotonic()
    projects = _projects(args)
    tasks = pick_tasks(projects, args.tasks, args.seed, tuple(k.strip() for k in args.kinds.split(",") if k.strip()))
    print(f"{len(tasks)} tasks ({', '.join(f'{k} {sum(t.kind == k for t in tasks)}' for k in KINDS)}) from "
          f"{len(projects)} projects in {time.monotonic() - t_pick:.1f} s; variants {', '.join(variants)}; "
          f"load average {load_before}")  # fmt: skip
    out = Path(args.out) if args.out else None
    logs = out if out else Path(tempfile.mkdtemp(prefix="fastcoder-quality-"))
    logs.mkdir(parents=True, exist_ok=True)
    jsonl = (out / "tasks.jsonl").open("w", encoding="utf-8") if out else None
    rows: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    kinds: dict[str, dict[str, list[dict[str, Any]]]] = {k: {v: [] for v in variants} for k in KINDS}
    servers: list[dict[str, Any]] = []
    seconds: dict[str, float] = {v: 0.0 for v in variants}
    split = {v: split_variant(v, args.model) for v in variants}
    models = list(dict.fromkeys(m for _, m in split.values()))  # --model's server first when it has variants
    model_info: dict[str, dict[str, Any]] = {}
    i = 0
    try:
        for project in projects:
            mine = [t for t in tasks if t.project == project.name and t.root == project.root]
            if not mine:
                continue
            up: dict[str, QualityServer] = {}
            try:
                for m in models:
                    log = logs / (f"server-{project.name}.log" if m == args.model else
                                  f"server-{project.name}-{Path(m).name}.log")  # fmt: skip
                    server = up[m] = QualityServer(args, project.root, log, m)
                    info = model_info.setdefault(m, server.model)
                    servers.append({"project": project.name, "model": m, "ready_s": server.ready_s, "knows": server.knows})
                    print(f"{project.name}: server ready in {server.ready_s:.1f} s ({info.get('name')} {info.get('dtype')} "
                          f"on {info.get('device')}); {len(mine)} tasks")  # fmt: skip
                    if not all(server.knows.values()):
                        print(f"  note: the server does not know {', '.join(k for k, v in server.knows.items() if not v)}; "
                              "the variants differ only where it does")  # fmt: skip
                for task in mine:
                    order = variants[i % len(variants):] + variants[: i % len(variants)]
                    per: dict[str, Any] = {}
                    for v in order:
                        name, m = split[v]
                        t0 = time.monotonic()
                        got = up[m].ask(task, name)
                        seconds[v] += time.monotonic() - t0
                        got.update(score(got["suggestion"], task.kind, task.target))
                        per[v] = got
                        rows[v].append(got)
                        kinds[task.kind][v].append(got)
                    i += 1
                    marks = " ".join(f"{v}:{_mark(per[v])}" for v in variants)
                    print(f"[{i}/{len(tasks)}] {task.project}/{task.path}:{task.line} {task.kind} {marks}")
                    if args.verbose:
                        print(f"    target {task.target!r}")
                        for v in variants:
                            print(f"    {v:<12} {per[v]['prediction']!r}")
                    if jsonl:
                        jsonl.write(json.dumps({"task": task.to_json(), "variants": {v: per[v] for v in variants}}) + "\n")
                        jsonl.flush()
            finally:
                for server in up.values():
                    server.close()
    finally:
        if jsonl:
            jsonl.close()
    base = args.base if args.base in variants else variants[0]
    results_v, by_kind, pairs, md = summarize(variants, rows, kinds, base)
    n = max(len(rows[variants[0]]), 1) if variants else 1
    for v in variants:
        results_v[v]["seconds_per_task"] = seconds[v] / n
    load_after = _loadavg()
    errors = [r["error"] for v in variants for r in rows[v] if r.get("error")]
    if errors:
        print(f"\n{len(errors)} requests answered with an error (scored as empty), e.g.: {errors[0]}")
    print(f"\nseconds per task: {', '.join(f'{v} {seconds[v] / n:.1f}' for v in variants)}; load average before "
          f"{load_before}, after {load_after}")  # fmt: skip
    if rec is not None:
        rec.markdown = "\n\n".join(md)
    main_model = model_info.get(args.model) or next(iter(model_info.values()), {})
    return {
        "variants": results_v,
        "by_kind": by_kind,
        "ratios_vs_no_context": ratios(results_v, BASE),
        "base": base,
        "ratios_vs_base": ratios(results_v, base),
        "paired_vs_base": pairs,  # task by task: exact matches gained / lost, edit similarity differences
        "variant_settings": {v: {**VARIANTS[split[v][0]], "model": split[v][1]} for v in variants},
        "server_options": {**SERVER_OPTIONS, **args.server_options},
        "servers": servers,
        "tasks": [t.to_json() for t in tasks],
        "model": main_model,
        "models": model_info,  # by the name the variants give (--model's or NAME@MODEL's)
        "dtype": main_model.get("dtype", args.dtype),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "git_commit": git_commit(),
        "machine": {"cpu_flags": cpu_flags(), "loadavg_before": load_before, "loadavg_after": load_after},
    }


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("not a JSON object")
    return value


def main(argv: list[str] | None = None) -> int:
    from fastcoder.models import DEFAULT_MODEL

    ap = argparse.ArgumentParser(prog="fastcoder bench quality",
                                 description="does a suggestion match what the developer wrote next? (cross-file tasks)")
    ap.add_argument("--projects", type=int, default=4, help="the first N pinned projects of the suite (default 4)")
    ap.add_argument("--root", action="append", default=[], metavar="DIR",
                    help="take tasks from this project folder instead (repeatable)")
    ap.add_argument("--tasks", type=int, default=40, help="tasks in all, spread evenly over the projects (default 40)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(DEFAULT_KINDS), metavar="K,K",
                    help="task kinds: line,block (default), midname (the cursor inside a cross-file name), or all three")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"comma-separated subset of {', '.join(VARIANTS)} (default: all); NAME@MODEL runs NAME's "
                         "settings on another model, side by side on the same tasks (e.g. no-context@qwen2.5-coder-1.5b)")
    ap.add_argument("--rescore", type=Path, metavar="TASKS_JSONL",
                    help="run nothing: the tables and the task-by-task comparison (against --base) of an earlier run")
    ap.add_argument("--base", default=BASE, metavar="VARIANT",
                    help="the variant the others are compared with, ratios and task by task (default no-context, "
                         "or the first variant when no-context is not run)")  # fmt: skip
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--server-options", type=_json_object, default={}, metavar="JSON",
                    help="more initializationOptions for the server, e.g. '{\"commonIndex\": false}'")
    ap.add_argument("--ready-timeout", type=float, default=900)
    ap.add_argument("--request-timeout", type=float, default=180)
    ap.add_argument("-v", "--verbose", action="store_true", help="print every target and prediction")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="write DIR/report.json, DIR/report.md and DIR/tasks.jsonl")
    args = ap.parse_args(argv)
    if args.rescore:
        rescore(args.rescore, args.base)
        return 0
    unknown = [v for v in args.variants.split(",") if v.strip() and split_variant(v.strip(), args.model)[0] not in VARIANTS]
    if unknown or not args.variants.strip():
        ap.error(f"--variants: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(VARIANTS)} "
                 "(NAME@MODEL: the same settings on another model)")
    if args.base != BASE and args.base not in [v.strip() for v in args.variants.split(",")]:
        ap.error(f"--base {args.base}: not among --variants")
    if args.tasks < 1 or args.projects < 1:
        ap.error("--tasks and --projects must be at least 1")
    with recording(args.out, "quality", argparse.Namespace(**vars(args)), argv) as rec:
        rec.results = run(args, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
