"""Does a real decode step cost what the cost curve says? (forty-fourth session)

On the AMX Xeon the forty-third session's suite had AR steps of 159 ms while the curve,
measured in the same process, said 92 ms for 1 row at 512 cached rows and 102 at 2,048.
One process, one model (Qwen2.5-Coder-0.5B, the dtype/packing the suite uses), a real
prompt (a bench project's file, CTX tokens), alternating in each round:

- ``curve``: the cost curve's way (budget.CurveMeasurement): an untimed step, then the
  timed one, of the same size at CTX cached rows, rolled back after each;
- ``decode``: AR steps that append (the cache grows as in a generation), each timed;
- ``engine``: ``Engine.generate`` with method ar (what the suite's ``ar`` row runs), ms/token
  of its decode phase.

    python docs/bench/probes-s44/curve_vs_decode.py [ROUNDS] [CTX]
"""
import os
import statistics as st
import sys
import time

import torch

from fastcoder.config import DecodeConfig
from fastcoder.engine import Engine
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState
from fastcoder_bench.probes.timing import curve_way_s

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
ctx = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
N = 24
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
engine = Engine.from_loaded(loaded)
v = engine.verifier
root = os.path.expanduser("~/.cache/fastcoder/bench")
src = None
for dirpath, _, files in os.walk(root):
    for f in sorted(files):
        if f.endswith(".py") and os.path.getsize(os.path.join(dirpath, f)) > 60000:
            src = os.path.join(dirpath, f)
            break
    if src:
        break
ids = engine.encode(open(src, encoding="utf-8").read())[:ctx]
print(f"model dtype {engine.dtype}, prompt {src} ({len(ids)} tokens), torch threads {torch.get_num_threads()}")
print("status", v.graph_status())
kv = KVState()
first, _, _ = v.prefill(kv, ids, reserve=N + 200)
base = len(kv.ids)
empty = DraftTree.chain([], "probe")
chain16 = DraftTree.chain(ids[100:115], "probe")


def curve(tree):
    return curve_way_s(v, kv, first, tree, N // 2)


def decode():
    out, tok = [], first
    for _ in range(N):
        t0 = time.perf_counter()
        r = v.step(kv, tok, empty)
        out.append(time.perf_counter() - t0)
        tok = r.bonus
    kv.truncate(base)
    return out


def eng():
    g = engine.generate(ids, DecodeConfig(method="ar", max_new_tokens=N))
    s = g.stats
    return [s.decode_s / max(1, s.forward_steps)] * 1, s


res = {"curve1": [], "curve16": [], "decode": [], "engine": []}
for r in range(rounds):
    for name in ("curve1", "decode", "engine", "curve16") if r % 2 == 0 else ("curve16", "engine", "decode", "curve1"):
        if name == "curve1":
            xs = curve(empty)
        elif name == "curve16":
            xs = curve(chain16)
        elif name == "decode":
            xs = decode()
        else:
            xs, s = eng()
        res[name] += xs
        print(f"round {r} {name:8s} min {min(xs)*1e3:6.1f} median {st.median(xs)*1e3:6.1f} max {max(xs)*1e3:6.1f} ms"
              f"  load {os.getloadavg()[0]:.2f}", flush=True)
print("--- all rounds")
for k, xs in res.items():
    print(f"{k:8s} min {min(xs)*1e3:6.1f} median {st.median(xs)*1e3:6.1f} ms (n={len(xs)})")
