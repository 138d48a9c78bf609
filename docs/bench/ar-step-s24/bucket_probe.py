"""The skip of padding rows' attention per bucket (twenty-fourth session; run before the
power-of-two rule, so its 4- and 8-node rows time a skip the verifier no longer takes: those
row counts are not bit-exact in bf16)::

    python docs/bench/ar-step-s24/bucket_probe.py CONTEXT ROUNDS

Two verifiers on one packed bf16 model: one as shipped, one that never passes the row count
(``folded_attention = False`` on the verifier only; the model keeps the folded attention);
chains of 0 / 2 / 4 / 8 nodes, interleaved, median of ROUNDS.
"""
import os, sys, time, statistics, torch
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
ctx = int(sys.argv[1]); rounds = int(sys.argv[2])
loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="auto", progress=False)
model = loaded.model
g = torch.Generator().manual_seed(0)
prompt = torch.randint(200, 20000, (ctx,), generator=g).tolist()
va = Verifier(model); kva = KVState(); fa,_,_ = va.prefill(kva, prompt, reserve=256)
vb = Verifier(model); vb.folded_attention = False; kvb = KVState(); fb,_,_ = vb.prefill(kvb, prompt, reserve=256)
def mk(v, kv, first, n):
    tree = DraftTree.chain([300 + i for i in range(n)], "x")
    def f():
        v.step(kv, first, tree); kv.truncate(ctx); kv.cache.length = ctx
    return f
cases = [(n, name, mk(v, kv, f, n)) for n in (0, 2, 4, 8) for name, v, kv, f in (("skip", va, kva, fa), ("all", vb, kvb, fb))]
t = {}
for _, _, f in cases: f()
for r in range(rounds):
    for n, name, f in (cases if r % 2 == 0 else cases[::-1]):
        t0 = time.perf_counter(); f(); t.setdefault((n, name), []).append((time.perf_counter() - t0) * 1e3)
print(f"ctx {ctx} load {os.getloadavg()[0]:.2f}")
for n in (0, 2, 4, 8):
    a, b = statistics.median(t[(n, 'skip')]), statistics.median(t[(n, 'all')])
    print(f"nodes {n} (bucket {va.bucket(n+1) if n else 2}): padding rows skipped {a:.1f} ms, all rows {b:.1f} ms, ratio {a/b:.3f}")
