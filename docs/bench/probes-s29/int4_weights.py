"""Twenty-ninth session: every linear layer of Qwen2.5-Coder-0.5B as torch's CPU int4 weight-only kernel
(`_weight_int4pack_mm_for_cpu`, groups of 32, asymmetric) against the bf16 packed model: whole verify
steps at 1,900 cached rows (interleaved, median of 12) and teacher-forced top-1 agreement with bf16 on
real code (requests)::

    python docs/bench/probes-s29/int4_weights.py
"""
import sys, time, types, glob, statistics
import torch
from fastcoder.models import load_model
from fastcoder.matmul import PackedLinear
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier

GS = int(sys.argv[1]) if len(sys.argv) > 1 else 32

def quant(w, gs):
    N, K = w.shape
    wf = w.float().reshape(N, K // gs, gs)
    mn = wf.amin(-1, keepdim=True); mx = wf.amax(-1, keepdim=True)
    scale = ((mx - mn) / 15).clamp(min=1e-10)
    q = ((wf - mn) / scale).round().clamp(0, 15).to(torch.int32).reshape(N, K)
    zero = mn + 8 * scale
    sz = torch.stack([scale.squeeze(-1).t(), zero.squeeze(-1).t()], -1).to(torch.bfloat16).contiguous()
    return torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1), sz

def to_int4(model, head):
    n = 0
    for name, m in model.named_modules():
        if isinstance(m, PackedLinear) and (head or "lm_head" not in name):
            p, sz = quant(m.weight, GS)
            m.i4, m.sz = p, sz
            def fwd(self, x):
                shp = x.shape
                y = torch.ops.aten._weight_int4pack_mm_for_cpu(x.reshape(-1, shp[-1]), self.i4, GS, self.sz).reshape(*shp[:-1], -1)
                return y + self.bias if self.bias is not None else y
            m.forward = types.MethodType(fwd, m); m.pad_one_row = False
            n += 1
    return n

base = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
q4 = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
print("int4 layers", to_int4(q4.model, head=False))
q4h = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
print("int4 layers incl head", to_int4(q4h.model, head=True))
tok = base.tokenizer
files = sorted(glob.glob("/root/.cache/fastcoder/bench/src/requests-2.32.3/src/requests/*.py"))[:6]
agree = {"q4": [0, 0], "q4h": [0, 0]}
with torch.inference_mode():
    for f in files:
        ids = tok(open(f).read(), return_tensors="pt").input_ids[:, :1024]
        ref = base.model(ids).logits[0].argmax(-1)
        for k, m in (("q4", q4.model), ("q4h", q4h.model)):
            got = m(ids).logits[0].argmax(-1)
            agree[k][0] += int((got == ref).sum()); agree[k][1] += len(ref)
        # is the bf16 argmax = next token (how often the model is right) for scale
for k, (a, n) in agree.items():
    print(f"top-1 agreement with bf16 {k}: {a}/{n} = {a/n:.4f}")

ctx = 1900
g = torch.Generator().manual_seed(0)
prompt = torch.randint(200, 20000, (ctx,), generator=g).tolist()
vs = {}
for k, lm in (("bf16", base), ("q4", q4), ("q4h", q4h)):
    v = Verifier(lm.model); kv = KVState(); first, _, _ = v.prefill(kv, prompt, reserve=256)
    vs[k] = (v, kv, first)
times = {(k, r): [] for k in vs for r in (1, 2, 4, 8, 16)}
for rep in range(12):
    for rows in (1, 2, 4, 8, 16):
        tree = DraftTree.chain(list(range(300, 300 + rows - 1)), "probe")
        for k, (v, kv, first) in vs.items():
            v.step(kv, first, tree); kv.truncate(ctx); kv.cache.length = ctx
            t = time.perf_counter(); v.step(kv, first, tree); times[(k, rows)].append(time.perf_counter() - t)
            kv.truncate(ctx); kv.cache.length = ctx
for k in vs:
    med = [statistics.median(times[(k, r)]) * 1e3 for r in (1, 2, 4, 8, 16)]
    print(k, " ".join(f"{x:.1f}" for x in med), "ms at 1/2/4/8/16 rows;", f"16/1 = {med[-1]/med[0]:.2f}x")
