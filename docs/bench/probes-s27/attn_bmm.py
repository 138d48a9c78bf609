"""Attention for batch-invariant steps, batched over the KV heads: scores by one `baddbmm` over
the 2 KV heads (7 query heads folded into rows each), softmax (bf16 in and out, or float32
out), one `bmm` with V; against PyTorch's CPU SDPA kernel, one layer of Qwen2.5-Coder-0.5B's
shapes, bf16, 1-16 tree rows at 512 / 1,024 / 2,048 attended columns. "inv": a row's bits are
the same computed alone or among the others (twenty-seventh session)::

    python docs/bench/probes-s27/attn_bmm.py
"""
import torch, statistics, os
import torch.nn.functional as F
import sys; sys.path.insert(0, os.getcwd())
from fastcoder_bench.probes.timing import interleaved_ms
torch.manual_seed(0)
cap = 3072; d = 64; H = 2; G = 7
buf = (torch.randn(2, 1, H, cap, d)).to(torch.bfloat16)
scale = d ** -0.5
NEG = torch.finfo(torch.bfloat16).min
def sdpa(q, k, v, m): return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=scale)
def bmm_bf16(q, k, v, m):
    s = torch.baddbmm(m[0], q[0], k[0].transpose(1, 2), alpha=scale)
    p = torch.softmax(s, -1)
    return torch.bmm(p, v[0]).unsqueeze(0)
def bmm_f32soft(q, k, v, m):
    s = torch.baddbmm(m[0], q[0], k[0].transpose(1, 2), alpha=scale)
    p = torch.softmax(s, -1, dtype=torch.float32).to(torch.bfloat16)
    return torch.bmm(p, v[0]).unsqueeze(0)
print("threads", torch.get_num_threads(), "load", os.getloadavg()[0])
with torch.inference_mode():
  for W in (512, 1024, 2048):
    k = buf[0][:, :, :W]; v = buf[1][:, :, :W]
    q16 = torch.randn(1, H, G * 16, d).to(torch.bfloat16)
    m16 = torch.zeros(1, 1, G * 16, W, dtype=torch.bfloat16); m16[..., W - 100 :] = NEG
    for rows in (1, 2, 4, 8, 16):
        n = G * rows
        q = q16[:, :, :n].contiguous(); m = m16[:, :, :n].expand(1, H, n, W)
        fns = {"sdpa": lambda: sdpa(q, k, v, m), "bmm": lambda: bmm_bf16(q, k, v, m), "bmmf": lambda: bmm_f32soft(q, k, v, m)}
        ref = sdpa(q.float(), k.float(), v.float(), m.float())
        errs = {kk: (f().float() - ref).abs().max().item() for kk, f in fns.items()}
        # invariance: row 0..n among n vs first 7 rows alone / among 112
        inv = {}
        for kk, f in fns.items():
            full = f()
            alone = fns[kk]  # recompute with first row-set only
            q1 = q16[:, :, :G].contiguous(); m1 = m16[:, :, :G].expand(1, H, G, W)
            one = {"sdpa": sdpa, "bmm": bmm_bf16, "bmmf": bmm_f32soft}[kk](q1, k, v, m1)
            inv[kk] = torch.equal(one, full[:, :, :G])
        t = interleaved_ms({kk: (lambda f=f: [f() for _ in range(24)]) for kk, f in fns.items()}, rounds=10, warmup=2)
        med = {kk: statistics.median(x) / 24 * 1000 for kk, x in t.items()}
        print(W, rows, " ".join(f"{kk}:{med[kk]:.0f}us({med[kk]/med['sdpa']:.2f}x,err {errs[kk]:.4f},inv {inv[kk]})" for kk in fns), flush=True)
