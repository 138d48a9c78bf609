"""Does the corrected curve change what the budget decides, and does that pay? Offline replay
of a suite run's records (FastCoder, adaptive budget, the real decode loop over the recorded AR
outputs), deciding once with the old-style warm-up curve and once with the new one (both from
curve_check-output.txt, run 1), both priced on the steady step costs measured in that run
(twenty-eighth session)::

    cp -r docs/bench/repo-s27-cold /tmp/sim28 && gunzip /tmp/sim28/tasks.jsonl.gz
    python docs/bench/curve-s28/decide.py /tmp/sim28
"""
import sys, os, collections
sys.path.insert(0, os.getcwd())
from pathlib import Path
import fastcoder.decode as D
import fastcoder_bench.suite.simulate as S
import fastcoder_bench.suite.variants as V
from fastcoder.budget import CostCurve
KS = [0, 3, 5, 7, 11, 15, 31, 63, 127]
def curve(a, b):
    return CostCurve(KS, [x / 1000 for x in a], 512, {2048: [x / 1000 for x in b]}, padded=False)
old = curve([26.6, 27.3, 31.2, 38.1, 41.1, 47.9, 76.2, 125.9, 235.8], [29.5, 33.1, 39.4, 46.4, 57.1, 68.9, 112.3, 198.9, 357.2])
new = curve([23.0, 27.4, 31.7, 35.4, 41.8, 49.7, 79.5, 138.0, 247.6], [25.6, 32.3, 39.7, 45.2, 56.5, 68.6, 111.6, 202.5, 361.5])
true = curve([23.2, 27.6, 31.5, 35.2, 42.0, 49.5, 79.8, 137.1, 250.0], [27.4, 33.8, 41.4, 46.2, 58.9, 70.5, 113.7, 200.7, 357.5])
orig = V.make_variants
V.make_variants = lambda methods, ablate, max_new_tokens, seed=0: [
    v for v in orig(["fastcoder"], ablate=False, max_new_tokens=max_new_tokens) if v.name == "fastcoder"]
real_replay, real_gen = S.replay, D.generate
for name, decide in (("old warm-up curve", old), ("new warm-up curve", new), ("steady costs", true)):
    captured = []
    S.replay = lambda records, vname, cfg, sources_for, tok, curve, **kw: real_replay(records, vname, cfg, sources_for, tok, decide, **kw)
    def gen(*a, **k):
        g = real_gen(*a, **k); captured.append((g.stats, a[3]))
        return g
    D.generate = gen
    S.simulate_dir(Path(sys.argv[1]), budgets=(None,), ablate=False)
    D.generate = real_gen
    steps = sum(st.forward_steps for st, _ in captured)
    toks = sum(len(st.accept_lengths) + sum(st.accept_lengths) for st, _ in captured)
    t = 0.0; ar = 0.0
    for st, prompt in captured:
        n = len(prompt)
        c = true.at(n)
        t += sum(c.cost(k) for k in st.draft_sizes) + st.retrieval_s + st.tree_s
        ar += (len(st.accept_lengths) + sum(st.accept_lengths)) * c.cost(0)
    sizes = collections.Counter(min(k, 8) for st, _ in captured for k in st.draft_sizes)
    print(f"{name:18s}: steps {steps}, tokens {toks}, draft sizes {dict(sorted(sizes.items()))}, "
          f"est time on steady costs {t:.2f} s, AR {ar:.2f} s, est speedup {ar / t:.3f}", flush=True)
