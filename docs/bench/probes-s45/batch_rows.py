"""Would two draft chains in two batch rows verify exactly? (forty-fifth session, an idea)

On the CPU in bf16 only the path of first children of a tree is verified exactly (a side
branch's own column is not where AR puts it). Two chains in two *batch rows* each sit at
AR's own columns. Here: one real prompt (CTX tokens) prefilled once (transformers'
DynamicCache, the model as the engine loads it: bf16, packed linear layers, the folded
attention), then chain A (N tokens) run below it alone (batch 1) and beside chain B (batch 2,
the prefix's keys/values repeated per row), each with a causal mask over prefix + chain:
are chain A's logits bit for bit the same? And chain B's against B alone?

    python docs/bench/probes-s45/batch_rows.py [CTX] [N]
"""
import copy
import sys

import torch

from fastcoder.engine import Engine
from fastcoder.models import load_model
from fastcoder_bench.probes.inputs import real_prompt

ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 700
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
engine = Engine.from_loaded(loaded)
model = loaded.model
ids = real_prompt(engine, ctx + 2 * n)
prompt, chain_a, chain_b = ids[:ctx], ids[ctx : ctx + n], ids[ctx + n : ctx + 2 * n]
print(f"dtype {next(model.parameters()).dtype}, attention {model.config._attn_implementation}, prompt {ctx}, chains of {n}")
with torch.inference_mode():
    out = model(input_ids=torch.tensor([prompt]), use_cache=True)
    past = out.past_key_values

    def mask(rows: int, batch: int) -> torch.Tensor:
        m = torch.full((rows, ctx + rows), torch.finfo(torch.bfloat16).min)
        m[:, :ctx] = 0
        m[:, ctx:] = torch.triu(m[:, ctx:], diagonal=1)
        return m.to(next(model.parameters()).dtype).view(1, 1, rows, ctx + rows).expand(batch, 1, rows, ctx + rows).contiguous()

    def run(chains):
        cache = copy.deepcopy(past)
        if len(chains) > 1:
            for layer in cache.layers:
                layer.keys = layer.keys.repeat(len(chains), 1, 1, 1)
                layer.values = layer.values.repeat(len(chains), 1, 1, 1)
        pos = torch.arange(ctx, ctx + n).unsqueeze(0).expand(len(chains), n)
        return model(input_ids=torch.tensor(chains), position_ids=pos, attention_mask=mask(n, len(chains)),
                     past_key_values=cache, use_cache=True).logits.float()

    alone_a, alone_b = run([chain_a])[0], run([chain_b])[0]
    both = run([chain_a, chain_b])
    for name, x, y in (("A", alone_a, both[0]), ("B", alone_b, both[1])):
        diff = (x - y).abs().max().item()
        print(f"chain {name}: batch-2 row == batch-1 bit for bit: {torch.equal(x, y)}; max |diff| {diff:.3g}; "
              f"argmax equal: {torch.equal(x.argmax(-1), y.argmax(-1))}")
