"""From how many query rows a packed bf16 linear layer's rows stop matching its 2-row
calls bit for bit (forty-third session: on an Intel Xeon with AMX, 129- and 2,048-row
calls differed, docs/bench/probes-s43/bf16-rows-amx-output.txt)::

    python docs/bench/probes-s43/amx_rows_threshold.py
"""
import os

import torch

from fastcoder.matmul import PackedLinear

torch.manual_seed(0)
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.2f}")
for out_f, in_f in [(1152, 896), (896, 896), (9728, 896), (896, 4864), (151936, 896)]:
    lin = torch.nn.Linear(in_f, out_f, bias=False).to(torch.bfloat16)
    packed = PackedLinear(lin, keep_weight=True)
    x = (torch.randn(512, in_f) * 4).to(torch.bfloat16)
    two = torch.cat([packed(x[r : r + 2]) for r in range(0, 512, 2)])
    bad = [m for m in range(2, 513) if not torch.equal(packed(x[:m]), two[:m])]
    print(f"{out_f}x{in_f}: calls of m rows that differ from 2-row calls, m in 2..512: "
          f"{len(bad)}; first {bad[:12]}", flush=True)
