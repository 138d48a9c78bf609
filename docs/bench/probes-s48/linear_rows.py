"""Linear layers of Qwen2.5-Coder-0.5B's shapes at prefill row counts on this CPU
(forty-eighth session): bf16 plain F.linear against the oneDNN-packed call, ms per call
(median of REPS) and the GFLOP/s it reaches.

    python docs/bench/probes-s48/linear_rows.py [REPS]
"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
shapes = {"qkv": (896, 1152), "o": (896, 896), "gate_up": (896, 9728), "down": (4864, 896)}
print("threads", torch.get_num_threads(), "mkldnn bf16 supported", torch.backends.mkldnn.is_available())


def t(fn):
    fn(); fn()
    s = []
    for _ in range(reps):
        a = time.perf_counter(); fn(); s.append(time.perf_counter() - a)
    return statistics.median(s) * 1e3


for rows in (1, 16, 128, 256, 512):
    tot = {"plain": 0.0, "packed": 0.0}
    for name, (k, n) in shapes.items():
        w = torch.randn(n, k, dtype=torch.bfloat16) * 0.02
        x = torch.randn(1, rows, k, dtype=torch.bfloat16)
        p = torch.ops.mkldnn._reorder_linear_weight(w, None)
        with torch.inference_mode():
            a = t(lambda: F.linear(x, w))
            b = t(lambda: torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], ""))
        tot["plain"] += a * 24
        tot["packed"] += b * 24
        fl = 2 * rows * k * n / 1e9
        print(f"rows {rows:4d} {name:8s} plain {a:7.3f} ms ({fl / a * 1e3:6.0f} GFLOP/s)  packed {b:7.3f} ms ({fl / b * 1e3:6.0f} GFLOP/s)")
    print(f"rows {rows:4d} 24 layers: plain {tot['plain']:.1f} ms, packed {tot['packed']:.1f} ms; per token packed {tot['packed'] / rows:.2f} ms")
