"""Thirty-fifth session (issue 21; docs/BENCHMARKS.md), run from the repository root with .venv/bin/python: 1-row vs 16-row steps at cached lengths just below and just past a 512-column boundary."""
import time, statistics, torch
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
v = Verifier(loaded.model)
g = torch.Generator().manual_seed(0)
prompt = torch.randint(200, 20000, (2100,), generator=g).tolist()
ROWS = (1, 4, 16)
trees = {r: DraftTree.chain(list(range(300, 300 + r - 1)), "probe") for r in ROWS}
for ctx in (496, 512, 1008, 1024, 2032, 2048):
    kv = KVState(); first, _, _ = v.prefill(kv, prompt[:ctx], reserve=64)
    def step(r):
        v.step(kv, first, trees[r]); kv.truncate(ctx); kv.cache.length = ctx
    res = {r: [] for r in ROWS}
    with torch.inference_mode():
        for r in ROWS: step(r)
        for _ in range(10):
            for r in ROWS:
                a = time.perf_counter(); step(r); res[r].append(time.perf_counter() - a)
    m = {r: statistics.median(res[r]) * 1e3 for r in ROWS}
    print(f"cached {ctx} (16-row width {-(-(ctx+16)//512)*512}): " + " ".join(f"{r} rows {m[r]:.1f} ms ({m[r]/m[1]:.2f}x)" for r in ROWS), flush=True)
