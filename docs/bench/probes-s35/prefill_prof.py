"""Thirty-fifth session, issue 21: run from the repository root with .venv/bin/python; see docs/BENCHMARKS.md."""
import time, torch, sys
from torch.profiler import profile, ProfilerActivity
from fastcoder.models import load_model
from fastcoder.verifier import KVState, Verifier
loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
v = Verifier(loaded.model)
g = torch.Generator().manual_seed(0)
prompt = torch.randint(200, 20000, (2048,), generator=g).tolist()
kv = KVState(); v.prefill(kv, prompt[:256], reserve=64)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    kv = KVState(); v.prefill(kv, prompt, reserve=64)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))
