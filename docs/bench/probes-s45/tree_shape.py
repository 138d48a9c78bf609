"""Does a branching tree step cost more than a chain of the same rows? (forty-fifth session)

In real suite generations (step_twice.py) eager steps of 11-13 rows took 182-197 ms against
10 rows' 129 and the curve's 12-row chain 117 ms at 2,048 rows. One process, a real prompt
(CTX tokens), the curve's way (an untimed step, then the timed one, rolled back), alternating:
chains and branching trees (a root with SPLIT children, each a chain) of N rows.

    python docs/bench/probes-s45/tree_shape.py [ROUNDS] [CTX] [ROWS,...]
"""
import os
import statistics as st
import sys

from fastcoder.engine import Engine
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState
from fastcoder_bench.probes.inputs import real_prompt
from fastcoder_bench.probes.timing import curve_way_s

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
ctx = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
sizes = [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "8,10,11,12,16").split(",")]
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
engine = Engine.from_loaded(loaded)
v = engine.verifier
ids = real_prompt(engine, ctx)
kv = KVState()
first, _, _ = v.prefill(kv, ids, reserve=300)
print("status", v.graph_status())


def branching(n, split=3):
    toks, parents, depths = [], [], []
    per = max(1, (n - 1) // split)
    for j in range(n - 1):
        toks.append(ids[200 + j])
        parents.append(-1 if j % per == 0 else j - 1)
        depths.append(1 if parents[-1] < 0 else depths[parents[-1]] + 1)
    return DraftTree(toks, parents, depths, ["probe"] * len(toks), [1.0] * len(toks))


def chain(n):
    return DraftTree.chain(ids[100 : 100 + n - 1], "probe")


def timed(tree, reps=6):
    return curve_way_s(v, kv, first, tree, reps)


res = {}
for r in range(rounds):
    names = [(f"chain{n}", chain(n)) for n in sizes] + [(f"tree{n}", branching(n)) for n in sizes]
    if r % 2:
        names = names[::-1]
    for name, tree in names:
        xs = timed(tree)
        res.setdefault(name, []).extend(xs)
        print(f"round {r} {name:8s} rows {v.step_rows(len(tree) + 1):3d} min {1e3*min(xs):6.1f} median {1e3*st.median(xs):6.1f}"
              f" load {os.getloadavg()[0]:.2f}", flush=True)
print("--- all rounds")
for name in sorted(res, key=lambda s: (int(''.join(c for c in s if c.isdigit())), s)):
    xs = res[name]
    print(f"{name:8s} min {1e3*min(xs):6.1f} median {1e3*st.median(xs):6.1f} (n={len(xs)})")
