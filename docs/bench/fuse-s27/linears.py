"""The 24 layers of Qwen2.5-Coder-0.5B-shaped linears (random bf16 weights, oneDNN-packed):
7 calls per layer (q, k, v, o, gate, up, down) against 4 (q/k/v fused, o, gate/up fused,
down), 1-16 rows, interleaved, median of 15 (twenty-seventh session)::

    python docs/bench/fuse-s27/linears.py
"""
import torch, os, statistics, sys
sys.path.insert(0, os.getcwd())
from fastcoder_bench.probes.timing import interleaved_ms
torch.manual_seed(0)
L=24; H=896; I=4864
def P(n,k,bias=False):
    w=(torch.randn(n,k)*0.03).bfloat16(); b=(torch.randn(n)*0.01).bfloat16() if bias else None
    return w,b,torch.ops.mkldnn._reorder_linear_weight(w,None)
lin=lambda x,p: torch.ops.mkldnn._linear_pointwise(x,p[2],p[1],"none",[],"")
layers=[]
for _ in range(L):
    q=P(H,H,True);k=P(128,H,True);v=P(128,H,True);o=P(H,H);g=P(I,H);u=P(I,H);d=P(H,I)
    wqkv=torch.cat([q[0],k[0],v[0]]); bqkv=torch.cat([q[1],k[1],v[1]])
    qkv=(wqkv,bqkv,torch.ops.mkldnn._reorder_linear_weight(wqkv,None))
    wgu=torch.cat([g[0],u[0]]); gu=(wgu,None,torch.ops.mkldnn._reorder_linear_weight(wgu,None))
    layers.append(dict(q=q,k=k,v=v,o=o,g=g,u=u,d=d,qkv=qkv,gu=gu))
def sep(x,xi):
    for l in layers:
        lin(x,l['q']);lin(x,l['k']);lin(x,l['v']);lin(x,l['o']);lin(x,l['g']);lin(x,l['u']);lin(xi,l['d'])
def fus(x,xi):
    for l in layers:
        y=lin(x,l['qkv']); y[...,:H];y[...,H:H+128];y[...,H+128:]
        lin(x,l['o']); z=lin(x,l['gu']); z[...,:I]; z[...,I:]; lin(xi,l['d'])
print("load",os.getloadavg()[0])
with torch.inference_mode():
  for M in (1,2,4,8,16):
    x=torch.randn(1,M,H).bfloat16(); xi=torch.randn(1,M,I).bfloat16()
    l=layers[0]
    a=torch.cat([lin(x,l['q']),lin(x,l['k']),lin(x,l['v'])],-1); b=lin(x,l['qkv'])
    a2=torch.cat([lin(x,l['g']),lin(x,l['u'])],-1); b2=lin(x,l['gu'])
    t=interleaved_ms({"sep":lambda:sep(x,xi),"fused":lambda:fus(x,xi)},rounds=15,warmup=2)
    m={k:statistics.median(v) for k,v in t.items()}
    print(M, {k:round(v,2) for k,v in m.items()}, f"ratio {m['fused']/m['sep']:.3f}", "qkv bits equal", torch.equal(a,b), "gu equal", torch.equal(a2,b2), flush=True)
