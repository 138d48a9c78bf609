"""Fused q/k/v + gate/up (fastcoder.matmul.FusedPackedLinear) against separate packed
linears: whole batch-invariant ``Verifier.step`` chains of 1 / 4 / 8 / 16 rows of
Qwen2.5-Coder-0.5B bf16 at 500 and 1,900 cached rows, two copies of the model in one process,
steps interleaved (median of 20); "same step result": the same accepted path, bonus token
and logits, bit for bit (twenty-seventh session)::

    python docs/bench/fuse-s27/fuse_step.py [CTX ...]
    DTYPE=float32 python docs/bench/fuse-s27/fuse_step.py 500   # the float32 packed path
"""
import os, statistics, sys, torch
sys.path.insert(0, os.getcwd())
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
from fastcoder_bench.probes.timing import interleaved_ms
from fastcoder import matmul
DTYPE = os.environ.get("DTYPE", "bfloat16")
real_pack = matmul.pack_linears
matmul.pack_linears = lambda m, fuse=False: real_pack(m, fuse=False)
sep = load_model("qwen2.5-coder-0.5b", dtype=DTYPE, device="cpu", pack="on", progress=False).model
matmul.pack_linears = real_pack
fus = load_model("qwen2.5-coder-0.5b", dtype=DTYPE, device="cpu", pack="on", progress=False).model
print(DTYPE, "fused layers:", sum(isinstance(m, matmul.FusedPackedLinear) for m in fus.modules()), "separate:", sum(isinstance(m, matmul.FusedPackedLinear) for m in sep.modules()))
vs = {"separate": Verifier(sep), "fused": Verifier(fus)}
print({k: v.graph_status().get("one_row_as_two") for k, v in vs.items()}, "load", os.getloadavg())
g = torch.Generator().manual_seed(0)
for ctx in [int(a) for a in sys.argv[1:]] or [500, 1900]:
    prompt = torch.randint(200, 20000, (ctx,), generator=g).tolist()
    kvs = {}; firsts = {}
    for k, v in vs.items():
        kvs[k] = KVState(); firsts[k], _, _ = v.prefill(kvs[k], prompt, reserve=256)
    assert firsts["separate"] == firsts["fused"]
    for rows in (1, 4, 8, 16):
        tree = DraftTree.chain(list(range(300, 300 + rows - 1)), "probe")
        outs = {}
        def step(k):
            out = vs[k].step(kvs[k], firsts[k], tree); kvs[k].truncate(ctx); kvs[k].cache.length = ctx
            outs[k] = (out, vs[k].last_logits.clone())
        t = interleaved_ms({k: (lambda k=k: step(k)) for k in vs}, rounds=20, warmup=3)
        med = {k: statistics.median(x) for k, x in t.items()}
        (a, la), (b, lb) = outs["separate"], outs["fused"]
        same = (a.accepted, a.bonus) == (b.accepted, b.bonus) and torch.equal(la, lb)
        print(f"ctx {ctx} rows {rows}: separate {med['separate']:.2f} ms, fused {med['fused']:.2f} ms, fused/separate {med['fused']/med['separate']:.3f}, same step result {same}", flush=True)
print("load", os.getloadavg())
