"""The packed linear layers of Qwen2.5-Coder-0.5B bf16 (97 since q/k/v and gate/up are fused:
4 per layer + the head) called alone on random inputs at 1-8 rows, interleaved, median of 20:
what the rows of a small tree cost in the matmuls (twenty-seventh session)::

    python docs/bench/fuse-s27/rows_linears.py
"""
import os, sys, statistics, torch
sys.path.insert(0, os.getcwd())
from fastcoder.models import load_model
from fastcoder.matmul import PackedLinear
from fastcoder_bench.probes.timing import interleaved_ms
m = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False).model
lins = [x for x in m.modules() if isinstance(x, PackedLinear)]
print(len(lins), "packed layers; load", os.getloadavg()[0])
xs = {r: (torch.randn(1, r, 896).bfloat16(), torch.randn(1, r, 4864).bfloat16()) for r in range(1, 9)}
def run(r):
    x, xi = xs[r]
    for l in lins:
        l(xi if l.in_features == 4864 else x)
with torch.inference_mode():
    t = interleaved_ms({r: (lambda r=r: run(r)) for r in xs}, rounds=20, warmup=3)
print({r: round(statistics.median(v), 2) for r, v in t.items()})
