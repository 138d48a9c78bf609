"""Twenty-ninth session: the bandwidth the 1-row packed bf16 linears of Qwen2.5-Coder-0.5B reach, per
layer shape and in model order, against plain `F.linear` and `torch.mv`; 2 and 1 threads::

    python docs/bench/probes-s29/bandwidth.py
"""
import os, sys, statistics, time, torch
from fastcoder.models import load_model
from fastcoder.matmul import PackedLinear, FusedPackedLinear
m = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False).model
lins = [(n, x) for n, x in m.named_modules() if isinstance(x, PackedLinear)]
kinds = {}
for n, l in lins:
    kinds.setdefault((l.in_features, l.out_features), []).append(l)
def t(f, reps=15):
    f(); ts = []
    for _ in range(reps):
        a = time.perf_counter(); f(); ts.append(time.perf_counter() - a)
    return statistics.median(ts) * 1e3
with torch.inference_mode():
    tot = 0; totb = 0
    for (i, o), ls in kinds.items():
        x = torch.randn(1, 1, i).bfloat16()
        ms = t(lambda: [l(x) for l in ls])
        nbytes = i * o * 2 * len(ls)
        tot += ms; totb += nbytes
        # plain dense weights, F.linear
        ws = [l.weight.contiguous() for l in ls]
        bs = [l.bias for l in ls]
        ms2 = t(lambda: [torch.nn.functional.linear(x, w, b) for w, b in zip(ws, bs)])
        # fp32-accum mv via matmul on transposed? use torch.mv in bf16
        ms3 = t(lambda: [torch.mv(w, x[0, 0]) for w in ws])
        print(f"{i}x{o} x{len(ls)}: packed {ms:.2f} ms ({nbytes/ms/1e6:.0f} GB/s); F.linear {ms2:.2f} ({nbytes/ms2/1e6:.0f}); mv {ms3:.2f} ({nbytes/ms3/1e6:.0f})")
    print(f"all: {tot:.2f} ms, {totb/tot/1e6:.0f} GB/s")
    def all_layers():
        for (i, o), ls in kinds.items():
            pass
    xs = {896: torch.randn(1, 1, 896).bfloat16(), 4864: torch.randn(1, 1, 4864).bfloat16()}
    seq = [l for _, l in lins]
    ms = t(lambda: [l(xs[l.in_features]) for l in seq])
    print(f"in model order: {ms:.2f} ms, {totb/ms/1e6:.0f} GB/s")
    torch.set_num_threads(1)
    ms = t(lambda: [l(xs[l.in_features]) for l in seq])
    print(f"in model order, 1 thread: {ms:.2f} ms, {totb/ms/1e6:.0f} GB/s")
    torch.set_num_threads(2)
    big = torch.ones(512 * 1024 * 1024, dtype=torch.bfloat16)  # 1 GiB: a plain streaming read
    for nt in (2, 1):
        torch.set_num_threads(nt)
        ms = t(lambda: big.sum(), reps=5)
        print(f"reading 1 GiB (sum), {nt} thread(s): {ms:.1f} ms, {big.numel() * 2 / ms / 1e6:.0f} GB/s")
