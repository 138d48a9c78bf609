"""AR's 1-row step with every linear layer's 1-row call run as 2 rows (what the verifier did
on an Intel Xeon with AMX before the forty-third session's fix: the 64-row probe marked every
layer) against 1-row calls (now: none marked there), alternating in one process, 512 and
2,048 cached rows; and that both give the same logits (on AMX 1-row calls equal 2-row ones)::

    python docs/bench/probes-s43/pad_one_row_ab.py [ROUNDS]
"""
import os
import statistics
import sys
import time

import torch

from fastcoder.matmul import PackedLinear
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier

loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
v = Verifier(loaded.model)
layers = [m for m in loaded.model.modules() if isinstance(m, PackedLinear)]
print("marked by the verifier:", sum(m.pad_one_row for m in layers), "of", len(layers), "; status", v.graph_status())
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
g = torch.Generator().manual_seed(0)
tree = DraftTree.chain([], "probe")
for ctx in (512, 2048):
    prompt = torch.randint(200, 20000, (ctx,), generator=g).tolist()
    kv = KVState()
    first, _, _ = v.prefill(kv, prompt, reserve=64)
    times = {True: [], False: []}
    logits = {}
    for r in range(rounds):
        for pad in ((True, False) if r % 2 == 0 else (False, True)):
            for m in layers:
                m.pad_one_row = pad
            for i in range(6):
                t = time.perf_counter()
                v.step(kv, first, tree)
                dt = time.perf_counter() - t
                kv.truncate(ctx); kv.cache.length = ctx
                if i >= 1:
                    times[pad].append(dt)
            logits[pad] = v.last_logits[0].clone()
    med = {k: statistics.median(t) * 1e3 for k, t in times.items()}
    print(f"{ctx} cached rows: 1-row step as 2 rows {med[True]:.1f} ms, as 1 row {med[False]:.1f} ms "
          f"({med[False] / med[True]:.2f}x); same logits: {torch.equal(logits[True], logits[False])}; load {os.getloadavg()}", flush=True)
