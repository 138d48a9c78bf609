"""One attention layer of Qwen2.5-Coder-0.5B's shapes (2 KV heads, 7 query heads folded
into each, head dim 64), bf16: PyTorch's CPU SDPA kernel against the explicit attention
(``fastcoder.attention.explicit_attention``), ms per call at 1 / 4 / 16 tree rows and
512..3,072 columns; and the rate the same CPU reaches in plain matrix products (a
linear layer of the MLP's shape, the scores' product alone), to compare with what SDPA
reaches (thirty-third session)::

    python docs/bench/explicit-s33/attention_layer.py
"""
import os, sys, time
sys.path.insert(0, os.getcwd())
import torch
from fastcoder.attention import explicit_attention

F = torch.nn.functional


def ms(fn, n=300):
    for _ in range(10):
        fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e3


print("threads", torch.get_num_threads(), "load", os.getloadavg())
torch.manual_seed(0)
with torch.inference_mode():
    for dt in (torch.bfloat16, torch.float32):
        for m in (1, 16, 112):
            a = torch.randn(m, 896, dtype=dt); w = torch.randn(4864, 896, dtype=dt)
            t = ms(lambda: F.linear(a, w), 100)
            print(f"linear {str(dt)[6:]:8s} {m:3d} x 896 -> 4864: {t:.3f} ms, {2 * m * 896 * 4864 / t / 1e6:.0f} GFLOP/s")
        q = torch.randn(2, 112, 64, dtype=dt); k = torch.randn(2, 2048, 64, dtype=dt)
        t = ms(lambda: torch.matmul(q, k.transpose(-1, -2)))
        print(f"scores {str(dt)[6:]:8s} (2 x 112 x 64) @ (64 x 2048): {t:.3f} ms, {2 * 2 * 112 * 64 * 2048 / t / 1e6:.0f} GFLOP/s")
    for width in (512, 1024, 2048, 3072):
        for rows in (1, 4, 16):
            r = 7 * rows
            q = torch.randn(1, 2, r, 64, dtype=torch.bfloat16)
            k = torch.randn(1, 2, width, 64, dtype=torch.bfloat16); v = torch.randn(1, 2, width, 64, dtype=torch.bfloat16)
            mask = torch.zeros(1, 1, r, width, dtype=torch.bfloat16)
            a = ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
            b = ms(lambda: explicit_attention(q, k, v, mask, None))
            flops = 2 * 2 * 2 * r * 64 * width
            print(f"width {width:5d} rows {rows:2d}: SDPA {a:.3f} ms ({flops / a / 1e6:.0f} GFLOP/s), explicit {b:.3f} ms ({b / a:.2f}x)")
print("load", os.getloadavg())
