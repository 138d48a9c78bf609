"""Twenty-ninth session: what a 4-row step adds to a 1-row one, torch.profiler over 10 steps each at
1,900 cached rows, Qwen2.5-Coder-0.5B bf16 packed, batch-invariant (the twenty-sixth session's
step_profile.py at 1 and 4 rows)::

    python docs/bench/probes-s29/step_profile.py
"""
import os
import torch
from torch.profiler import profile, ProfilerActivity
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
v = Verifier(loaded.model)
ctx = 1900
g = torch.Generator().manual_seed(0)
prompt = torch.randint(200, 20000, (ctx,), generator=g).tolist()
kv = KVState(); first, _, _ = v.prefill(kv, prompt, reserve=256)
for rows in (1, 4):
    tree = DraftTree.chain(list(range(300, 300 + rows - 1)), "probe")
    def step():
        v.step(kv, first, tree); kv.truncate(ctx); kv.cache.length = ctx
    for _ in range(3): step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(10): step()
    print(f"=== rows {rows}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))
