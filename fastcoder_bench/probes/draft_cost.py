"""Host cost of FastCoder's drafting, per step, with no model: the real decode loop over
recorded AR outputs (fastcoder.replay.ReplayVerifier), the suite's sources (D_r, D_c), the
cost curve of a GPU run (so the budget asks for what it asked for there). What is timed is
what the GPU run's "draft/retrieval" + "budget trim" columns time: host Python alone.

    python -m fastcoder_bench.probes.draft_cost RECORDED_SUITE_DIR CURVE_RUN_JSON [repeats] [--profile]

Prints drafting ms per step (draft, trim), steps, mean accepted length, and with --profile
the top functions by cumulative time inside drafting."""

from __future__ import annotations

import cProfile
import json
import pstats
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


from fastcoder.budget import CostCurve
from fastcoder.config import DecodeConfig
from fastcoder.drafters import Sources
from fastcoder.session import Session
from fastcoder_bench.suite.repo import RepoCorpus
from fastcoder_bench.suite.runner import read_results
from fastcoder_bench.suite.simulate import replay_task
from fastcoder_bench.suite.tasks import make_repo_task
from fastcoder_bench.suite.variants import make_variants
from indexer.common import ensure_common
from indexer.tokenizing import load_tokenizer
from fastcoder.models import tokenizer_fingerprint


def main() -> None:
    out, curve_json = Path(sys.argv[1]), Path(sys.argv[2])
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else 3
    profile = "--profile" in sys.argv
    info = json.loads((out / "run.json").read_text())
    records = sorted(read_results(out), key=lambda r: r.get("index", 0))
    tok = load_tokenizer(info["spec"]["model"], progress=False)
    fp = tokenizer_fingerprint(tok)
    dc = ensure_common(tok, progress=False, fingerprint=fp)
    curve = CostCurve.from_json(json.loads(curve_json.read_text())["machine"]["cost_curve"])
    corpora, drs = {}, {}
    for rec in records:
        t = rec["task"]
        c = corpora.setdefault(t["repo"], RepoCorpus(t["repo"], name=t.get("group")))
        text = (Path(t["repo"]) / t["path"]).read_text(encoding="utf-8")
        task = make_repo_task(rec["id"], Path(t["repo"]), t["path"], text, *t["body_lines"], group=t.get("group"))
        drs[rec["id"]] = c.dr_for(task, tok, fp)
    (variant,) = [v for v in make_variants(["fastcoder"], ablate=False, max_new_tokens=info["spec"]["max_new_tokens"]) if v.name == "fastcoder"]
    cfg = variant.config
    prof = cProfile.Profile() if profile else None
    pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="fastcoder-search")  # as the engine's
    for rep in range(repeats):
      for pooled in (False, True):  # interleaved: serial search, then the engine's pool
          sessions: dict = {}
          draft = trim = wall = 0.0
          steps = tokens = nodes = 0
          t_all = time.perf_counter()
          for rec in records:
              ar = rec["results"]["ar"]
              if len(ar["tokens"]) < 2:
                  continue
              ses = sessions.setdefault(rec["task"].get("group"), Session(cfg))
              if prof is not None and rep == repeats - 1:
                  prof.enable()
              t0 = time.perf_counter()
              gen = replay_task(rec, cfg, Sources(dr=drs[rec["id"]], dc=dc), tok, curve, ses, pool=pool if pooled else None)
              wall += time.perf_counter() - t0
              if prof is not None:
                  prof.disable()
              st = gen.stats
              draft += st.retrieval_s
              trim += st.tree_s
              steps += st.forward_steps
              tokens += len(ar["tokens"]) - 1
              nodes += sum(st.draft_sizes)
          print(f"repeat {rep} {'pool  ' if pooled else 'serial'}: {steps} steps, accepted length {tokens / steps:.2f}, draft nodes/step {nodes / steps:.1f}; "
                f"per step: draft {1000 * draft / steps:.2f} ms, trim {1000 * trim / steps:.2f} ms, "
                f"whole loop (no model) {1000 * wall / steps:.2f} ms; {time.perf_counter() - t_all:.1f} s")
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    main()
