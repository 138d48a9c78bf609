"""Twenty-ninth session: how far the drafts of a recorded suite run can take FastCoder on this
run's cost curve. The offline simulator (``fastcoder bench --simulate``'s replay of the real decode
loop over the recorded AR outputs) with the adaptive budget and fixed 16 / 64-node budgets; its
*oracle* column prices each step at the path it accepted (what a perfect choice of what to verify
would cost)::

    python docs/bench/probes-s29/draft_ceiling.py docs/bench/agree-s28
"""
import gzip, shutil, sys, tempfile
from pathlib import Path
import fastcoder_bench.suite.variants as V
from fastcoder_bench.suite.simulate import simulate_dir

src = Path(sys.argv[1])
tmp = Path(tempfile.mkdtemp())
for f in ("run.json", "report.json"):
    shutil.copy(src / f, tmp / f)
with gzip.open(src / "tasks.jsonl.gz", "rb") as a, open(tmp / "tasks.jsonl", "wb") as b:
    shutil.copyfileobj(a, b)
orig = V.make_variants
V.make_variants = lambda methods, ablate, max_new_tokens, seed=0: [
    v for v in orig(["fastcoder"], ablate=False, max_new_tokens=max_new_tokens) if v.name == "fastcoder"]
for r in simulate_dir(tmp, budgets=(None, 16, 64), ablate=False):
    print(f"budget {r['budget']:>8}: accepted length {r['mean_accept_len']:.3f}, draft nodes/step {r['draft_nodes_per_step']:.1f}, "
          f"est. {r['est_speedup_vs_ar']:.3f}x AR, oracle {r['oracle_speedup_vs_ar']:.3f}x")
shutil.rmtree(tmp)
