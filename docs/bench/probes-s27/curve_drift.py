"""Would a budget that priced steps with the costs a run measured decide better than with the
cost curve measured at its warm-up? Offline replay of a suite run's records (FastCoder, the
adaptive budget), once deciding with the warm-up curve and once with the run's measured whole
steps per bucket (docs/bench/repo-s27-cold: AR 1-row 29.2 ms; FastCoder 2-4 / 5-8 / 9-16 rows
37.8 / 42.8 / 58.8), both evaluated on the measured costs (twenty-seventh session)::

    cp -r docs/bench/repo-s27-cold /tmp/sim-cold && gunzip /tmp/sim-cold/tasks.jsonl.gz
    python docs/bench/probes-s27/curve_drift.py /tmp/sim-cold
"""
import sys, os, json
sys.path.insert(0, os.getcwd())
from pathlib import Path
import fastcoder_bench.suite.simulate as S
import fastcoder_bench.suite.variants as V
from fastcoder.budget import CostCurve
out = Path(sys.argv[1])
info = json.loads((out / "run.json").read_text())
warm = CostCurve.from_json(info["machine"]["cost_curve"])
# the run's measured whole steps (report: AR 1-row 29.2; FastCoder buckets 4/8/16: 37.8/42.8/58.8 ms)
true = CostCurve(ks=[0, 3, 7, 15], seconds=[0.0292, 0.0378, 0.0428, 0.0588], context_len=2048, padded=False)
# scaled copy of the warm-up curve whose ratios match the measured ones, at both lengths
orig = V.make_variants
def mk(methods, ablate, max_new_tokens, seed=0):
    return [v for v in orig(["fastcoder"], ablate=False, max_new_tokens=max_new_tokens) if v.name == "fastcoder"]
V.make_variants = mk
real_replay = S.replay
res = {}
for name, decide in (("warm-up curve", warm), ("measured steps", true)):
    def rp(records, vname, cfg, sources_for, tok, curve, **kw):
        r = real_replay(records, vname, cfg, sources_for, tok, decide, **kw)
        return r
    captured = []
    import fastcoder.decode as D
    real_gen = D.generate
    def gen(*a, **k):
        g = real_gen(*a, **k)
        captured.append(g.stats)
        return g
    S.replay = rp
    import fastcoder_bench.suite.simulate as S2
    D.generate = gen
    S.simulate_dir(out, budgets=(None,), ablate=False)
    D.generate = real_gen
    steps = sum(st.forward_steps for st in captured); toks = sum(len(st.accept_lengths) + sum(st.accept_lengths) for st in captured)
    t = sum(true.cost(k) for st in captured for k in st.draft_sizes) + sum(st.retrieval_s + st.tree_s for st in captured)
    sizes = [k for st in captured for k in st.draft_sizes]
    print(f"{name:16s}: steps {steps}, mean draft {sum(sizes)/len(sizes):.2f}, steps of 5+ rows {sum(k >= 4 for k in sizes)}, est time on measured costs {t:.2f} s", flush=True)
