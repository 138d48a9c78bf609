"""Does a cheap probe of the linear layers predict what a larger prefill chunk saves?
(forty-fourth session)

One process, Qwen2.5-Coder-0.5B as the server loads it (dtype auto, packing auto):
1. every distinct linear shape but the LM head (which a prefill runs on one row) called on
   128 and 256 rows, best of REPS, interleaved; summed with each shape's count in the model;
2. the prefill of 2,048 random tokens in 128- and 256-row chunks (Verifier.prefill,
   the chunk set on the verifier), alternating, ROUNDS each.

    python docs/bench/probes-s44/prefill_gemm.py [ROUNDS] [REPS]
"""
import os
import sys
import time
from collections import Counter

import torch

from fastcoder.matmul import PackedLinear
from fastcoder.models import load_model
from fastcoder.verifier import KVState, Verifier

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
model = loaded.model
v = Verifier(model)
print("status", v.graph_status())
shapes, count = {}, Counter()
for name, m in model.named_modules():
    if name.endswith("lm_head"):
        continue
    if isinstance(m, PackedLinear):
        key = (m.in_features, m.out_features, m.packed.dtype)
    elif isinstance(m, torch.nn.Linear):
        key = (m.in_features, m.out_features, m.weight.dtype)
    else:
        continue
    shapes.setdefault(key, m)
    count[key] += 1
best = {(k, r): float("inf") for k in shapes for r in (128, 256)}
g = torch.Generator().manual_seed(0)
with torch.inference_mode():
    xs = {(k, r): torch.randn(1, r, k[0], generator=g).to(k[2]) for k in shapes for r in (128, 256)}
    for i in range(reps):
        for r in ((128, 256) if i % 2 == 0 else (256, 128)):
            for k, m in shapes.items():
                t0 = time.perf_counter()
                m(xs[(k, r)])
                best[(k, r)] = min(best[(k, r)], time.perf_counter() - t0)
t128 = sum(best[(k, 128)] * count[k] for k in shapes)
t256 = sum(best[(k, 256)] * count[k] for k in shapes)
for k in shapes:
    print(f"shape {k[0]}x{k[1]} {k[2]} x{count[k]}: 128 rows {best[(k,128)]*1e3:.2f} ms, 256 rows {best[(k,256)]*1e3:.2f} ms ({best[(k,256)]/best[(k,128)]:.2f}x)")
print(f"linear layers of one prefill chunk: 128 rows {t128*1e3:.1f} ms, 256 rows {t256*1e3:.1f} ms: 256 rows = {t256/t128:.2f}x 128 rows "
      f"(per token {t256/t128/2:.2f}x)")
ids = torch.randint(100, 150000, (2048,), generator=g).tolist()
res = {128: [], 256: []}
for i in range(rounds):
    for c in ((128, 256) if i % 2 == 0 else (256, 128)):
        v.prefill_chunk = c
        kv = KVState()
        t0 = time.perf_counter()
        v.prefill(kv, ids, reserve=64)
        res[c].append(time.perf_counter() - t0)
        kv.release()
        print(f"prefill 2,048 tokens in {c}-row chunks: {res[c][-1]:.2f} s; load {os.getloadavg()[0]:.2f}", flush=True)
print({c: round(min(x), 2) for c, x in res.items()}, "min s;", {c: round(sorted(x)[len(x)//2], 2) for c, x in res.items()}, "median s")
