"""Whole verify steps with PyTorch's SDPA attention and with the explicit attention
(``fastcoder.attention.explicit_attention``: float32 scores, two matrix products), two
verifiers over one Qwen2.5-Coder-0.5B (bf16, packed, batch-invariant) in one process,
interleaved: chains of 0 / 3 / 7 / 15 draft nodes at 700 / 1,100 / 1,600 / 2,400 cached
rows (the explicit attention runs from row 1,024 where the probe allows it), median of
16 steps per cell (thirty-third session)::

    python docs/bench/explicit-s33/step_ab.py
"""
import os, statistics, sys, time
sys.path.insert(0, os.getcwd())
import torch
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier

m = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False).model
vx = Verifier(m, explicit_attention=None)  # auto: probed invariant and faster
vs = Verifier(m)  # the default: SDPA
print("load", os.getloadavg(), "threads", torch.get_num_threads())
print("explicit:", vx.graph_status())
ks = [0, 3, 7, 15]
for ctx in (700, 1100, 1600, 2400):
    ids = torch.randint(10, 150000, (ctx + 1 + 128,), generator=torch.Generator().manual_seed(1)).tolist()
    kvs = {}
    for name, v in (("sdpa", vs), ("explicit", vx)):
        kv = KVState(); v.prefill(kv, ids[:ctx], reserve=129); kvs[name] = (v, kv, len(kv.ids))
    res = {n: {k: [] for k in ks} for n in kvs}
    for rnd in range(8):
        for name, (v, kv, base) in kvs.items():
            for k in ks:
                tree = DraftTree.chain(ids[ctx + 1: ctx + 1 + k], "probe")
                for i in range(3):  # the first of each size untimed (each size after its own)
                    t0 = time.perf_counter(); v.step(kv, ids[ctx], tree); dt = time.perf_counter() - t0
                    kv.truncate(base)
                    if i:
                        res[name][k].append(dt)
    for name in kvs:
        med = [statistics.median(res[name][k]) * 1e3 for k in ks]
        print(ctx, f"{name:8s}", " ".join(f"{k}:{x:6.1f}" for k, x in zip(ks, med)), " ratios",
              " ".join(f"{x / med[0]:.2f}" for x in med), flush=True)
print("load", os.getloadavg())
