"""Explicit per-head attention (scores by ``addmm``, softmax, ``mm``) against PyTorch's CPU
SDPA kernel, for one layer of Qwen2.5-Coder-0.5B's shapes (2 KV heads, 7 query heads folded
into each, head dim 64), bf16, at 1-16 tree rows and 512 / 2,048 attended columns (twenty-
sixth session)::

    python docs/bench/ar1-s26/attention_probe.py

``bf16``: scores in bf16 (transformers' eager attention's numerics); ``f32``: Q and K
converted to float32 for the scores. Median of 10 interleaved rounds of 24 calls each; err
is the largest absolute difference from float32 SDPA. Not shipped: no path wins at every row
count, and batch-invariant steps need the one path for AR's 1-row steps and the trees.
"""
import torch, statistics, os
import torch.nn.functional as F
from fastcoder_bench.probes.timing import interleaved_ms
torch.manual_seed(0)
cap = 3072; d = 64; H = 2
buf = (torch.randn(2, 1, H, cap, d)).to(torch.bfloat16)
scale = d ** -0.5
NEG = torch.finfo(torch.bfloat16).min
def sdpa(q, k, v, m): return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=scale)
def explicit_bf16(q, k, v, m):
    out = torch.empty_like(q)
    for h in range(H):
        s = torch.addmm(m[0, 0], q[0, h], k[0, h].t(), alpha=scale)
        torch.mm(torch.softmax(s, -1), v[0, h], out=out[0, h])
    return out
def explicit_f32(q, k, v, m):
    out = torch.empty_like(q)
    for h in range(H):
        s = torch.addmm(m[0, 0].float(), q[0, h].float(), k[0, h].float().t(), alpha=scale)
        p = torch.softmax(s, -1).to(torch.bfloat16)
        torch.mm(p, v[0, h], out=out[0, h])
    return out
print("threads", torch.get_num_threads(), "load", os.getloadavg()[0])
with torch.inference_mode():
  for W in (512, 2048):
    k = buf[0][:, :, :W]; v = buf[1][:, :, :W]
    for rows in (1, 2, 4, 8, 16):
        n = 7 * rows
        q = torch.randn(1, H, n, d).to(torch.bfloat16)
        m = torch.zeros(1, 1, n, W, dtype=torch.bfloat16); m[..., W - 100 :] = NEG
        fns = {"sdpa": lambda: sdpa(q, k, v, m), "bf16": lambda: explicit_bf16(q, k, v, m), "f32": lambda: explicit_f32(q, k, v, m)}
        ref = sdpa(q.float(), k.float(), v.float(), m.float())
        errs = {kk: (f().float() - ref).abs().max().item() for kk, f in fns.items()}
        t = interleaved_ms({kk: (lambda f=f: [f() for _ in range(24)]) for kk, f in fns.items()}, rounds=10, warmup=2)
        med = {kk: statistics.median(x) / 24 * 1000 for kk, x in t.items()}
        print(W, rows, " ".join(f"{kk}:{med[kk]:.0f}us({med[kk]/med['sdpa']:.2f}x, err {errs[kk]:.4f})" for kk in fns))
