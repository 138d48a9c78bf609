"""The batch-invariance probes on the real model, timed (forty-ninth session): which layers' 1-row
calls are padded, and uniform_rows for the step sizes and for the prefill chunks.

    python docs/bench/probes-s49/probe_verdicts.py
"""
import time, torch, sys
from fastcoder.models import load_model
from fastcoder import matmul
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
m = loaded.model
t=time.perf_counter(); marked = matmul.mark_one_row_rounding(m); t1=time.perf_counter()-t
t=time.perf_counter(); u = matmul.uniform_rows(m, (4,8,16,32,128)); t2=time.perf_counter()-t
t=time.perf_counter(); u2 = matmul.uniform_rows(m, (128,256)); t3=time.perf_counter()-t
print(f"marked {marked} ({t1:.2f} s); uniform_rows(4..32,128) {u} ({t2:.2f} s); uniform_rows(128,256) {u2} ({t3:.2f} s)")
