"""The LM head (151,936 x 896, Qwen2.5-Coder-0.5B's shape, random bf16 weights) as a oneDNN-packed
bf16 matmul against int8 weights with per-row scales (`torch.ops.aten._weight_int8pack_mm`, the
weight-only int8 kernel), 1-16 rows: what an exact argmax screened by int8 logits could save
(twenty-seventh session; not built)::

    python docs/bench/probes-s27/lm_head.py
"""
import torch, time, os, statistics
import sys; sys.path.insert(0, os.getcwd())
from fastcoder_bench.probes.timing import interleaved_ms
torch.manual_seed(0)
N,K=151936,896
w = (torch.randn(N,K)*0.05).bfloat16()
packed = torch.ops.mkldnn._reorder_linear_weight(w, None)
scale = w.float().abs().amax(1)/127
q = torch.round(w.float()/scale[:,None]).clamp(-127,127).to(torch.int8)
print("load", os.getloadavg()[0])
with torch.inference_mode():
  for M in (1,2,4,8,16):
    x = torch.randn(1,M,K).bfloat16()
    x2=x[0]
    fns={"bf16packed": lambda: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], ""),
         "int8pack": lambda: torch.ops.aten._weight_int8pack_mm(x2, q, scale.bfloat16()),
         "int8pack_f32x": lambda: torch.ops.aten._weight_int8pack_mm(x2.float(), q, scale),
    }
    t=interleaved_ms(fns, rounds=15, warmup=2)
    print(M, {k: round(statistics.median(v),2) for k,v in t.items()}, flush=True)
