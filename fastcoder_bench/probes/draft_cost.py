"""Host cost of FastCoder's drafting, per step, with no model: the real decode loop over
recorded AR outputs (:class:`fastcoder.replay.ReplayVerifier`), the suite's sources (D_r,
D_c), the cost curve of a given run (a GPU's: the budget then asks for what it asked for
there). What is timed is what a run's "draft/retrieval" + "budget trim" columns time: host
Python alone.

    python -m fastcoder_bench.probes.draft_cost RECORDED_SUITE_DIR CURVE_RUN_JSON
        [--repeats 3] [--methods fastcoder,fastcoder-no-gate] [--pool] [--max-new N] [--host-factor F]
        [--step-wait-ms W [--spin]] [--profile]

- ``--max-new N``: each recorded output cut to its first N tokens (an editor suggestion is
  ~8-15 tokens; the suite's bodies ~47), the stop being ``max_new_tokens``.
- ``--methods``: the FastCoder variants of the suite to compare (``fastcoder`` and its
  ablations), interleaved in each repeat.
- ``--pool``: the engine's search pool is passed (it searches in threads only where
  ``parallel_search`` is on).
- ``--host-factor F``: drafting is charged F times what it measured here, in the budget's
  drafting-cost model, the source gate's and the estimate (the H200's host drafted ~2.3x
  slower than a 2-vCPU EPYC: 1.9 vs 0.8 ms a step, 2026-11-27).
- ``--step-wait-ms W``: each verify step is followed by a wait of W ms, as for a device's
  forward (the thread sleeps; with ``--spin`` it polls the clock and stays on its core): what
  a pause between drafts does to drafting. The GPU suite drafted ~3x slower than this probe
  on the same host (2.47 vs 0.6-0.9 ms a step, H100, 2026-11-27); on a 2-vCPU EPYC a 4 ms
  wait raised drafting 0.64 -> 0.78 ms (sleep) and 0.74 ms (spin).

Per repeat and method: steps, accepted length,
draft nodes per step, drafting and trim ms per step, and the estimated speedup over AR on
the curve: ``sum(AR steps) * c(0) / sum(c(step rows) + F * drafting)``, as ``fastcoder bench
--simulate`` estimates it (the model's own time varies; compare settings, then measure), and
the datastore searches the source gate skipped."""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fastcoder import drafters
from fastcoder.budget import CostCurve, StepBudget
from fastcoder.datastore import clear_memos
from fastcoder.drafters import Sources
from fastcoder.models import tokenizer_fingerprint
from fastcoder.session import Session
from fastcoder.source_weights import SourceGate
from fastcoder_bench.suite.repo import RepoCorpus
from fastcoder_bench.suite.runner import read_results
from fastcoder_bench.suite.simulate import replay_task
from fastcoder_bench.suite.tasks import make_repo_task
from fastcoder_bench.suite.variants import make_variants
from indexer.common import ensure_common
from indexer.tokenizing import load_tokenizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite_dir", type=Path)
    ap.add_argument("curve_run_json", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--methods", default="fastcoder")
    ap.add_argument("--pool", action="store_true")
    ap.add_argument("--max-new", type=int, default=0)
    ap.add_argument("--host-factor", type=float, default=1.0)
    ap.add_argument("--step-wait-ms", type=float, default=0.0)
    ap.add_argument("--spin", action="store_true")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    if args.step_wait_ms > 0:
        _wait_after_steps(args.step_wait_ms / 1000, args.spin)
    info = json.loads((args.suite_dir / "run.json").read_text())
    records = sorted(read_results(args.suite_dir), key=lambda r: r.get("index", 0))
    tok = load_tokenizer(info["spec"]["model"], progress=False)
    fp = tokenizer_fingerprint(tok)
    dc = ensure_common(tok, progress=False, fingerprint=fp)
    curve = CostCurve.from_json(json.loads(args.curve_run_json.read_text())["machine"]["cost_curve"])
    corpora, drs = {}, {}
    for rec in records:
        t = rec["task"]
        c = corpora.setdefault(t["repo"], RepoCorpus(t["repo"], name=t.get("group")))
        text = (Path(t["repo"]) / t["path"]).read_text(encoding="utf-8")
        task = make_repo_task(rec["id"], Path(t["repo"]), t["path"], text, *t["body_lines"], group=t.get("group"))
        drs[rec["id"]] = c.dr_for(task, tok, fp)
        if args.max_new:  # an editor-sized suggestion: the first max_new tokens, ended by the limit
            ar = rec["results"]["ar"]
            ar["tokens"] = ar["tokens"][: args.max_new]
            ar["stats"] = dict(ar["stats"], stop_reason="max_new_tokens")
            rec["task"] = dict(t, indent=None)
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    variants = make_variants(names, ablate=False, max_new_tokens=info["spec"]["max_new_tokens"])
    configs = {v.name: (v.config.replace(max_new_tokens=args.max_new) if args.max_new else v.config) for v in variants}
    uses = {v.name: (v.use_dr, v.use_dc) for v in variants}
    factor = args.host_factor
    observe = StepBudget.observe_drafting
    StepBudget.observe_drafting = lambda self, n, s: observe(self, n, s * factor)  # the slower host's drafting
    search = drafters.timed_search  # the source gate's seconds, charged where they are measured (once:
    # a session's gate hands them on to its parent)

    def slower_search(sources, st, max_nodes, pool=None, seconds=None):
        out = search(sources, st, max_nodes, pool, seconds)
        if seconds:
            for name in [s.name for s in sources if s.name in seconds]:
                seconds[name] *= factor
        return out

    drafters.timed_search = slower_search
    prof = cProfile.Profile() if args.profile else None
    pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="fastcoder-search")  # as the engine's
    for rep in range(args.repeats):
        for name in names[rep % len(names):] + names[: rep % len(names)]:  # interleaved, rotating
            cfg, (use_dr, use_dc) = configs[name], uses[name]
            sessions: dict = {}
            gate = SourceGate()  # the process's for this method, as the server and the suite keep one
            draft = trim = wall = est = ar_est = 0.0
            gated: Counter = Counter()
            steps = tokens = nodes = 0
            t_all = time.perf_counter()
            for rec in records:
                ar = rec["results"]["ar"]
                if len(ar["tokens"]) < 2:
                    continue
                ses = sessions.setdefault(rec["task"].get("group"), Session(cfg, gate))
                if prof is not None and rep == args.repeats - 1:
                    prof.enable()
                clear_memos(drs[rec["id"]], dc)  # every method drafts equally cold
                t0 = time.perf_counter()
                sources = Sources(dr=drs[rec["id"]] if use_dr else None, dc=dc if use_dc else None)
                gen = replay_task(rec, cfg, sources, tok, curve, ses, pool=pool if args.pool else None)
                wall += time.perf_counter() - t0
                if prof is not None:
                    prof.disable()
                st = gen.stats
                draft += st.retrieval_s
                trim += st.tree_s
                steps += st.forward_steps
                tokens += len(ar["tokens"]) - 1
                nodes += sum(st.draft_sizes)
                gated.update(st.gated)
                est += sum(curve.cost(k) for k in st.draft_sizes) + factor * (st.retrieval_s + st.tree_s)
                ar_est += (len(ar["tokens"]) - 1 + (st.stop_reason == "eos")) * curve.cost(0)
            print(f"repeat {rep} {name:<18}: {steps} steps, accepted length {tokens / steps:.2f}, "
                  f"draft nodes/step {nodes / steps:.1f}; per step: draft {1000 * draft / steps:.2f} ms, "
                  f"trim {1000 * trim / steps:.2f} ms, whole loop (no model) {1000 * wall / steps:.2f} ms; "
                  f"est. speedup vs AR {ar_est / est:.2f}x (host factor {factor:g}); {time.perf_counter() - t_all:.1f} s"
                  + (f"; searches gated: {', '.join(f'{k} {v}' for k, v in sorted(gated.items()))}" if gated else ""))
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)


def _wait_after_steps(seconds: float, spin: bool) -> None:
    """Every ReplayVerifier step then waits ``seconds`` (sleeping, or spinning on the clock)."""
    from fastcoder.replay import ReplayVerifier

    step = ReplayVerifier.step

    def waited(self, *a, **k):
        out = step(self, *a, **k)
        if spin:
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(seconds)
        return out

    ReplayVerifier.step = waited


if __name__ == "__main__":
    main()
