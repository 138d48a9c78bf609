"""What does path attention cost a step? (forty-sixth session)

Two verifiers over one model (Qwen2.5-Coder-0.5B as the suite loads it): path attention
(every row attends its own path as AR lays it out: ``Verifier.paths``) and without it
(the chain-only verifier of before). Steps of 1 row (AR) and of chains of 4, 8, 16 rows at
a real prompt's context, timed as the cost curve times them, the two verifiers alternating
round by round. Prints ms (min / median) per verifier and the ratio of medians.

    python docs/bench/probes-s46/path_cost.py [CTX] [ROUNDS]
"""
import statistics as st
import sys

import torch

from fastcoder.engine import Engine
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
from fastcoder_bench.probes.inputs import real_prompt
from fastcoder_bench.probes.timing import curve_way_s

ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
engine = Engine.from_loaded(loaded)
prompt = real_prompt(engine, ctx)
vs = {"paths": Verifier(loaded.model), "chain": Verifier(loaded.model, path_attention=False)}
assert vs["paths"].paths and not vs["chain"].paths
print("cpu threads", torch.get_num_threads(), "ctx", ctx, "buckets", vs["paths"].buckets)
kvs = {}
for name, v in vs.items():
    kvs[name] = KVState()
    v.prefill(kvs[name], prompt, reserve=128)
times = {(name, n): [] for name in vs for n in (1, 4, 8, 16)}
for r in range(rounds):
    for n in (1, 4, 8, 16):
        tree = DraftTree.chain(prompt[100 : 100 + n - 1], "probe")
        for name in (list(vs) if r % 2 == 0 else list(vs)[::-1]):
            times[(name, n)] += curve_way_s(vs[name], kvs[name], prompt[99], tree, 1)
for n in (1, 4, 8, 16):
    p, c = times[("paths", n)], times[("chain", n)]
    print(f"{n:3d} rows  paths {1e3 * min(p):6.1f} / {1e3 * st.median(p):6.1f}   chain {1e3 * min(c):6.1f} / {1e3 * st.median(c):6.1f}   "
          f"paths/chain median {st.median(p) / st.median(c):.3f} min {min(p) / min(c):.3f}")
