"""Thirty-fifth session (issue 21; docs/BENCHMARKS.md), run from the repository root with .venv/bin/python: Real packed model's linear layers (model order), per row count, interleaved rounds; and whole steps."""
import sys, time, statistics, torch
from fastcoder.models import load_model
from fastcoder.matmul import PackedLinear
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
m = loaded.model
v = Verifier(m)
lins = [mod for _, mod in m.named_modules() if isinstance(mod, PackedLinear)]
print("linears", len(lins), "padded", sum(l.pad_one_row for l in lins))
ROWS = (1, 2, 3, 4, 6, 8, 16)
xs = {r: {l.in_features: torch.randn(1, r, l.in_features, dtype=torch.bfloat16) for l in lins} for r in ROWS}
def lin(r):
    for l in lins: l(xs[r][l.in_features])
ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 512
g = torch.Generator().manual_seed(0)
prompt = torch.randint(200, 20000, (ctx,), generator=g).tolist()
kv = KVState(); first, _, _ = v.prefill(kv, prompt, reserve=256)
trees = {r: DraftTree.chain(list(range(300, 300 + r - 1)), "probe") for r in ROWS}
def step(r):
    v.step(kv, first, trees[r]); kv.truncate(ctx); kv.cache.length = ctx
res = {("lin", r): [] for r in ROWS} | {("step", r): [] for r in ROWS}
with torch.inference_mode():
    for r in ROWS: lin(r); step(r)
    for rnd in range(12):
        for r in ROWS:
            a = time.perf_counter(); lin(r); res[("lin", r)].append(time.perf_counter() - a)
            a = time.perf_counter(); step(r); res[("step", r)].append(time.perf_counter() - a)
for kind in ("lin", "step"):
    base = statistics.median(res[(kind, 1)])
    print(kind, ctx, " ".join(f"{r}:{statistics.median(res[(kind, r)])*1e3:.1f}({statistics.median(res[(kind, r)])/base:.2f}x)" for r in ROWS))
