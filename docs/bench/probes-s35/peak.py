"""Thirty-fifth session, issue 21: run from the repository root with .venv/bin/python; see docs/BENCHMARKS.md."""
import torch, time, statistics
torch.manual_seed(0)
def t(f, reps=10):
    for _ in range(2): f()
    ts=[]
    for _ in range(reps):
        a=time.perf_counter(); f(); ts.append(time.perf_counter()-a)
    return statistics.median(ts)
with torch.inference_mode():
    for n in (1024, 2048, 4096):
        a=torch.randn(n,n,dtype=torch.bfloat16); b=torch.randn(n,n,dtype=torch.bfloat16)
        s=t(lambda: a@b); print(f"bf16 {n}^3 matmul: {2*n**3/s/1e9:.0f} GFLOP/s")
    # packed linear, large M (compute bound), gate_up shape
    w=torch.randn(9728,896,dtype=torch.bfloat16); p=torch.ops.mkldnn._reorder_linear_weight(w,None)
    for M in (16,64,256,1024):
        x=torch.randn(M,896,dtype=torch.bfloat16)
        s=t(lambda: torch.ops.mkldnn._linear_pointwise(x,p,None,"none",[],""))
        print(f"packed 896->9728 M={M}: {2*M*896*9728/s/1e9:.0f} GFLOP/s")
