"""What do two chains in two batch rows cost? (forty-fifth session, the idea of batch_rows.py)

One process, the engine's model (bf16, packed, folded attention), transformers' DynamicCache
over a real prompt of CTX tokens; timed forwards (the cache prepared untimed before each),
alternating, ROUNDS rounds: 1 row (AR), a chain of N (batch 1), two chains of N (batch 2, the
prefix's keys/values repeated per row), a chain of 2N (batch 1). Minimum and median ms.

    python docs/bench/probes-s45/batch_rows_cost.py [CTX] [N] [ROUNDS]
"""
import copy
import statistics as st
import sys
import time

import torch

from fastcoder.engine import Engine
from fastcoder.models import load_model
from fastcoder_bench.probes.inputs import real_prompt

ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
engine = Engine.from_loaded(loaded)
model = loaded.model
dtype = next(model.parameters()).dtype
ids = real_prompt(engine, ctx + 4 * n)
prompt = ids[:ctx]
with torch.inference_mode():
    past = model(input_ids=torch.tensor([prompt]), use_cache=True).past_key_values

    def case(rows: int, batch: int):
        toks = [ids[ctx + b * rows : ctx + (b + 1) * rows] for b in range(batch)]
        m = torch.full((rows, ctx + rows), torch.finfo(torch.bfloat16).min)
        m[:, :ctx] = 0
        m[:, ctx:] = torch.triu(m[:, ctx:], diagonal=1)
        mask = m.to(dtype).view(1, 1, rows, ctx + rows).expand(batch, 1, rows, ctx + rows).contiguous()
        pos = torch.arange(ctx, ctx + rows).unsqueeze(0).expand(batch, rows)

        def run() -> float:
            cache = copy.deepcopy(past)
            if batch > 1:
                for layer in cache.layers:
                    layer.keys = layer.keys.repeat(batch, 1, 1, 1)
                    layer.values = layer.values.repeat(batch, 1, 1, 1)
            t0 = time.perf_counter()
            model(input_ids=torch.tensor(toks), position_ids=pos, attention_mask=mask, past_key_values=cache, use_cache=True)
            return time.perf_counter() - t0

        return run

    cases = {"1 row": case(1, 1), f"chain of {n}": case(n, 1), f"2 chains of {n} (batch 2)": case(n, 2), f"chain of {2 * n}": case(2 * n, 1)}
    for f in cases.values():
        f()
    res = {k: [] for k in cases}
    items = list(cases.items())
    for r in range(rounds):
        for k, f in items if r % 2 == 0 else items[::-1]:
            res[k].append(1e3 * f())
    print(f"dtype {dtype}, prompt {ctx}, {rounds} rounds, ms: min / median")
    for k, xs in res.items():
        print(f"  {k:24s} {min(xs):7.1f} / {st.median(xs):7.1f}")
