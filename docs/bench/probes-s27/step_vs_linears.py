"""A whole batch-invariant Verifier.step (chains of 1 / 4 / 16 rows at 500 cached rows,
Qwen2.5-Coder-0.5B bf16 packed) against its 169 packed linear layers called alone on random
inputs of the same shapes, interleaved: "rest" is what a step spends outside the linear
layers (attention, norms, rotary, masks, Python); the output is from before the q/k/v and
gate/up fusion, 169 layers (twenty-seventh session)::

    python docs/bench/probes-s27/step_vs_linears.py [CTX]
"""
import os, time, statistics, torch, sys
sys.path.insert(0, os.getcwd())
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
from fastcoder_bench.probes.timing import interleaved_ms
loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
m = loaded.model
v = Verifier(m)
print("min_rows", v.min_rows, "load", os.getloadavg()[0])
ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 500
g = torch.Generator().manual_seed(0)
prompt = torch.randint(200, 20000, (ctx,), generator=g).tolist()
kv = KVState(); first, _, _ = v.prefill(kv, prompt, reserve=256)
from fastcoder.matmul import PackedLinear
lins = [mod for mod in m.modules() if isinstance(mod, PackedLinear)]  # fused ones included (121 since the fusion)
print("packed linears", len(lins))
def step(rows):
    tree = DraftTree.chain(list(range(300, 300 + rows - 1)), "probe")
    v.step(kv, first, tree); kv.truncate(ctx); kv.cache.length = ctx
def lin_only(rows):
    x = torch.randn(1, rows, 896).bfloat16(); xi = torch.randn(1, rows, 4864).bfloat16()
    for l in lins:
        l(xi if l.in_features == 4864 else x)
with torch.inference_mode():
    for rows in (1, 4, 16):
        t = interleaved_ms({"step": lambda: step(rows), "linears": lambda: lin_only(rows)}, rounds=20, warmup=3)
        med = {k: statistics.median(x) for k, x in t.items()}
        print(rows, {k: round(x, 2) for k, x in med.items()}, "rest", round(med["step"] - med["linears"], 2), flush=True)
