"""Twenty-ninth session: a hand-written AVX512-BF16 GEMM (`gemv.cpp`: weights streamed once for up to 6
rows, `vdpbf16ps`, the same summation order for every row count) against oneDNN's packed kernel, per
layer shape of Qwen2.5-Coder-0.5B (24 copies, so the weights come from memory), 1-256 rows. Needs a C++
compiler and `pip install ninja` (not a project dependency)::

    python docs/bench/probes-s29/gemv_probe.py
"""
import torch, time, statistics, sys
from torch.utils.cpp_extension import load
t0 = time.time()
ext = load("fcgemv", ["docs/bench/probes-s29/gemv.cpp"], extra_cflags=["-O3", "-mavx512f", "-mavx512bf16", "-mavx512bw", "-mavx512vl", "-fopenmp"], verbose=False)
print(f"built in {time.time()-t0:.1f}s")
def t(f, reps=15):
    for _ in range(3): f()
    ts = []
    for _ in range(reps):
        a = time.perf_counter(); f(); ts.append(time.perf_counter() - a)
    return statistics.median(ts) * 1e3
torch.manual_seed(0)
for K, N, n in ((896, 9728, 24), (4864, 896, 24), (896, 1152, 24), (896, 151936, 1)):
    ws = [torch.randn(N, K, dtype=torch.bfloat16) * 0.05 for _ in range(n)]
    pk = [torch.ops.mkldnn._reorder_linear_weight(w, None) for w in ws]
    my = [ext.pack(w) for w in ws]
    nb = N * K * 2 * n
    for M in (1, 2, 4, 8, 16, 256):
        x = torch.randn(M, K, dtype=torch.bfloat16)
        with torch.inference_mode():
            a = torch.ops.mkldnn._linear_pointwise(x, pk[0], None, "none", [], "")
            b = ext.gemm(x, my[0], N)
            ref = (x.float() @ ws[0].float().t())
            ea = (a.float() - ref).abs().max().item(); eb = (b.float() - ref).abs().max().item()
            # invariance: row 0 alone == row 0 among M
            inv = torch.equal(ext.gemm(x[:1].contiguous(), my[0], N)[0], b[0]) and torch.equal(ext.gemm(x[-1:].contiguous(), my[0], N)[0], b[-1])
            reps = 5 if M >= 256 else 15
            ta = t(lambda: [torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "") for p in pk], reps)
            tb = t(lambda: [ext.gemm(x, p, N) for p in my], reps)
        print(f"{K}x{N} x{n} M={M}: onednn {ta:.2f} ms ({nb/ta/1e6:.0f} GB/s) mine {tb:.2f} ms ({nb/tb/1e6:.0f} GB/s) ratio {tb/ta:.2f}  err {ea:.3f}/{eb:.3f} invariant {inv}", flush=True)
