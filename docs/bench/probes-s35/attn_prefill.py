"""Thirty-fifth session, issue 21: run from the repository root with .venv/bin/python; see docs/BENCHMARKS.md."""
import torch, time, statistics, torch.nn.functional as F
torch.manual_seed(0)
def t(f, reps=10):
    for _ in range(2): f()
    ts=[]
    for _ in range(reps):
        a=time.perf_counter(); f(); ts.append(time.perf_counter()-a)
    return statistics.median(ts)*1e3
G,H,D=7,2,64
with torch.inference_mode():
  for P,C in ((896,128),(1920,128)):
    W=P+C
    q=torch.randn(1,H,G*C,D,dtype=torch.bfloat16); k=torch.randn(1,H,W,D,dtype=torch.bfloat16); v=torch.randn_like(k)
    allowed=torch.ones(C,W,dtype=torch.bool); allowed[:,P:]=torch.tril(torch.ones(C,C,dtype=torch.bool))
    mb=allowed.repeat(G,1)[None,None]
    mf=torch.zeros(G*C,W).masked_fill(~mb[0,0],float('-inf'))[None,None]
    mh=mf.to(torch.bfloat16)
    fl=4*G*C*W*D*H
    for name,m in (("bool",mb),("fp32",mf),("bf16",mh),("none",None)):
        s=t(lambda: F.scaled_dot_product_attention(q,k,v,attn_mask=m))
        print(f"W={W} rows={G*C}: mask {name}: {s:.2f} ms/layer -> {fl/s/1e6:.0f} GFLOP/s, x24 = {24*s:.0f} ms",flush=True)
    # unfolded (14 heads, 128 rows each), the way transformers would without fold but with enable_gqa
    qu=torch.randn(1,H*G,C,D,dtype=torch.bfloat16); mu=allowed[None,None]
    s=t(lambda: F.scaled_dot_product_attention(qu,k,v,attn_mask=mu,enable_gqa=True)); print(f"  unfolded 14 heads gqa bool mask: {s:.2f} ms",flush=True)
    ku=k.repeat_interleave(G,1); vu=v.repeat_interleave(G,1)
    s=t(lambda: F.scaled_dot_product_attention(qu,ku,vu,attn_mask=mu)); print(f"  unfolded 14 heads expanded bool mask: {s:.2f} ms",flush=True)
