"""Thirty-fifth session, issue 21: run from the repository root with .venv/bin/python; see docs/BENCHMARKS.md."""
import time, torch, sys
from fastcoder.models import load_model
from fastcoder.verifier import KVState, Verifier
loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
v = Verifier(loaded.model)
g = torch.Generator().manual_seed(0)
prompt = torch.randint(200, 20000, (2048,), generator=g).tolist()
for rnd in range(2):
    for chunk in (64, 128, 256, 512):
        v.prefill_chunk = chunk
        kv = KVState(); a = time.perf_counter(); v.prefill(kv, prompt, reserve=64); s = time.perf_counter() - a
        print(f"chunk {chunk}: 2048 tokens {s:.2f} s, {2048/s:.0f} tok/s, {0.99*2048/s:.0f} GFLOP/s (linear only)", flush=True)
