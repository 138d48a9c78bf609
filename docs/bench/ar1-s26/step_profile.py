"""Where a 16-row step goes beyond a 1-row one: torch.profiler over 10 steps each of
chains of 1 and 16 rows at 1,900 cached rows, Qwen2.5-Coder-0.5B bf16 packed, batch-invariant
(twenty-sixth session)::

    python docs/bench/ar1-s26/step_profile.py [ROWS ...]   # default 1 16
"""
import os
import sys
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
for rows in [int(a) for a in sys.argv[1:]] or (1, 16):
    tree = DraftTree.chain(list(range(300, 300 + rows - 1)), "probe")
    def step():
        v.step(kv, first, tree); kv.truncate(ctx); kv.cache.length = ctx
    for _ in range(3): step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(10): step()
    print(f"=== rows {rows}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))
