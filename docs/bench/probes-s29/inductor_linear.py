"""Twenty-ninth session: inductor (freezing, weight prepack, max-autotune CPP GEMM) against oneDNN's packed
kernel for one-row bf16 linears of Qwen2.5-Coder-0.5B's gate/up and down shapes (24 copies each)::

    python docs/bench/probes-s29/inductor_linear.py
"""
import torch, time, statistics, os
import torch._inductor.config as ic
ic.freezing = True
ic.cpp.weight_prepack = True
torch.manual_seed(0)
def t(f, reps=30):
    for _ in range(3): f()
    ts=[]
    for _ in range(reps):
        a=time.perf_counter(); f(); ts.append(time.perf_counter()-a)
    return statistics.median(ts)*1e3
class L(torch.nn.Module):
    def __init__(s, ws): super().__init__(); s.ws = torch.nn.ParameterList([torch.nn.Parameter(w, requires_grad=False) for w in ws])
    def forward(s, x):
        out = []
        for w in s.ws: out.append(torch.nn.functional.linear(x, w))
        return out
mode = os.environ.get("MODE", "max-autotune-no-cudagraphs")
for K, N, n in ((896, 9728, 24), (4864, 896, 24)):
    ws = [torch.randn(N, K, dtype=torch.bfloat16) * 0.02 for _ in range(n)]
    mod = L(ws).eval()
    x = torch.randn(1, K, dtype=torch.bfloat16)
    with torch.inference_mode():
        eager = t(lambda: mod(x))
        p = [torch.ops.mkldnn._reorder_linear_weight(w, None) for w in ws]
        packed = t(lambda: [torch.ops.mkldnn._linear_pointwise(x, q, None, "none", [], "") for q in p])
        a = time.time(); c = torch.compile(mod, mode=mode); c(x); ct = time.time() - a
        comp = t(lambda: c(x))
        ok = all(torch.allclose(u.float(), v.float(), atol=1e-2, rtol=1e-2) for u, v in zip(c(x), mod(x)))
    nb = K * N * 2 * n
    print(f"{K}x{N} x{n}: eager {eager:.2f} ms, packed {packed:.2f} ({nb/packed/1e6:.0f} GB/s), compiled[{mode}] {comp:.2f} ({nb/comp/1e6:.0f} GB/s) compile {ct:.0f}s close={ok}")
