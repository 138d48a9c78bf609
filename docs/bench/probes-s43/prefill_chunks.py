"""A 2,048-token prefill of Qwen2.5-Coder-0.5B bf16 (packed, batch-invariant: the server's
CPU path) in chunks of 128 (the CPU default), 256 and 512 tokens, alternating, each from an
empty cache; and whether the last position's logits and the cache's keys are bit-identical
across chunk sizes (forty-third session)::

    python docs/bench/probes-s43/prefill_chunks.py [ROUNDS]
"""
import os
import sys
import time

import torch

from fastcoder.models import load_model
from fastcoder.verifier import KVState, Verifier

loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
v = Verifier(loaded.model)
g = torch.Generator().manual_seed(0)
prompt = torch.randint(200, 20000, (2048,), generator=g).tolist()
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
times: dict[int, list[float]] = {}
ref = None
for r in range(rounds):
    for chunk in ((128, 256, 512) if r % 2 == 0 else (512, 256, 128)):
        v.prefill_chunk = chunk
        kv = KVState()
        t = time.perf_counter()
        first, n, _ = v.prefill(kv, prompt, reserve=64)
        times.setdefault(chunk, []).append(time.perf_counter() - t)
        keys = kv.cache.buf[:, :, :, :, :2048].clone()
        logits = v.last_logits.clone()
        if ref is None:
            ref = (logits, keys)
        same = torch.equal(ref[0], logits) and torch.equal(ref[1], keys)
        print(f"chunk {chunk}: {times[chunk][-1]:.2f} s, first token {first}, identical to the first prefill: {same}", flush=True)
print("median s:", {c: round(sorted(t)[len(t) // 2], 2) for c, t in times.items()}, "load", os.getloadavg())
