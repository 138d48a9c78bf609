"""The cost curve's prefill timing against whole prefills, one process (forty-fourth session):
2,048 random tokens prefilled whole in 128- and 256-row chunks, then in 256-token pieces
alternating the chunk as budget.CurveMeasurement does (the second length's order), twice.

    python docs/bench/probes-s44/prefill_pieces.py
"""
import time

import torch

from fastcoder.models import load_model
from fastcoder.verifier import KVState, Verifier

loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
v = Verifier(loaded.model)
g = torch.Generator().manual_seed(0)
ids = torch.randint(10, 150000, (2048 + 40,), generator=g).tolist()
for rep in range(2):
    for chunk in (128, 256):
        kv = KVState()
        t0 = time.perf_counter()
        v.prefill(kv, ids[:2048], reserve=64, chunk=chunk)
        print(f"whole 2048 chunk {chunk}: {time.perf_counter() - t0:.2f} s", flush=True)
    kv = KVState()
    per = []
    for p in range(8):
        c = (128, 256)[(p + 1) % 2]
        t0 = time.perf_counter()
        v.prefill(kv, ids[: 256 * (p + 1)], reserve=2048 - 256 * (p + 1) + 40, chunk=c)
        per.append((c, round(time.perf_counter() - t0, 3)))
    print("pieces", per, "sum", round(sum(x for _, x in per), 2))
