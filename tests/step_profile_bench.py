"""Where a verify step's time goes on this CPU, per bucket, and how close its matrix
products run to what the machine can do::

    nice -n 19 .venv/bin/python tests/step_profile_bench.py [--context 512] [--dtype bfloat16]

1. The whole ``Verifier.step`` (chain trees of bucket - 1 nodes on a ``--context``-token
   cache, rolled back after each step; the buckets interleaved, median of ``--rounds``), then the same steps under
   ``torch.profiler`` split into: the transformer's linear layers, the LM head, attention
   (the SDPA kernel), the greedy pick, and everything else (norms, rotary, element-wise,
   cache writes, Python), in ms per step.
2. The linear layers' arithmetic rate in that step (2 x parameters x rows / their time),
   next to the rate of the same kernel on one layer's MLP weights (which stay in the
   cache) at 1..256 rows: what the kernel can do on this machine when it is not waiting
   for memory.
3. The attention kernel's rate at that bucket: the floating-point work of the step's
   attention over its time.

Run it on a quiet machine: it prints the load average with the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from fastcoder.matmul import cpu_flags, pack_linears
    from fastcoder.models import load_model
    from fastcoder.trie import DraftTree
    from fastcoder.verifier import KVState, Verifier

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="qwen2.5-coder-0.5b")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--pack", default="auto", choices=["auto", "on", "off"])
    p.add_argument("--context", type=int, default=512, help="cached tokens before the steps")
    p.add_argument("--buckets", default="1,4,8,16")
    p.add_argument("--rounds", type=int, default=8)
    args = p.parse_args(argv)
    buckets = [int(b) for b in args.buckets.split(",")]

    loaded = load_model(args.model, dtype=args.dtype, device="cpu", pack=args.pack, progress=False)
    model, cfg = loaded.model, loaded.model.config
    dtype = getattr(torch, args.dtype)
    v = Verifier(model)
    kv = KVState()
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(200, 20000, (args.context,), generator=g).tolist()
    first, _, _ = v.prefill(kv, prompt, reserve=256)

    def step(b: int) -> None:
        v.step(kv, first, DraftTree.chain([300 + i for i in range(b - 1)], "bench"))
        kv.truncate(args.context)  # roll back: the same cache length every step
        kv.cache.length = args.context

    head = model.get_output_embeddings()
    vocab, hidden = head.out_features, head.in_features
    n_linear = sum(m.in_features * m.out_features for n, m in model.named_modules() if n.endswith("proj"))
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or hidden // heads
    layers = cfg.num_hidden_layers

    flags = sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")), "?")
    print(f"# {args.model} {args.dtype} pack={args.pack}, {args.context} cached tokens; {cpu}, flags {' '.join(flags)}, "
          f"{torch.get_num_threads()} torch threads, load {os.getloadavg()[0]:.2f}")  # fmt: skip
    print("| rows | step ms (median) | linear layers | LM head | attention | greedy pick | other | linear GFLOP/s | attention GFLOP/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    times: dict[int, list[float]] = {b: [] for b in buckets}
    for b in buckets:
        for _ in range(3):
            step(b)
    for r in range(args.rounds):  # the buckets interleaved, the order alternating
        for b in buckets if r % 2 else buckets[::-1]:
            t0 = time.perf_counter()
            step(b)
            times[b].append((time.perf_counter() - t0) * 1e3)
    for b in buckets:
        n = 5
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(n):
                step(b)
        parts = {"linear": 0.0, "head": 0.0, "attention": 0.0, "pick": 0.0}
        total = 0.0
        for e in prof.key_averages(group_by_input_shape=True):
            ms = e.self_cpu_time_total / 1e3 / n
            total += ms
            shapes = e.input_shapes or []
            if "linear" in e.key or e.key in ("aten::addmm", "aten::mm", "aten::linear"):
                is_head = any(len(s) == 2 and s[0] == vocab for s in shapes if isinstance(s, list))
                parts["head" if is_head else "linear"] += ms
            elif "scaled_dot_product" in e.key:
                parts["attention"] += ms
            elif e.key in ("aten::max", "aten::argmax") and shapes and shapes[0] and shapes[0][-1] == vocab:
                parts["pick"] += ms
        other = total - sum(parts.values())
        width = args.context + b
        lin_rate = 2 * n_linear * b / (parts["linear"] / 1e3) / 1e9 if parts["linear"] else float("nan")
        attn_flop = 4 * heads * b * width * head_dim * layers  # QK^T and PV
        attn_rate = attn_flop / (parts["attention"] / 1e3) / 1e9 if parts["attention"] else float("nan")
        print(f"| {b} | {statistics.median(times[b]):.1f} | {parts['linear']:.1f} | {parts['head']:.1f} | {parts['attention']:.1f} | "
              f"{parts['pick']:.1f} | {other:.1f} | {lin_rate:.0f} | {attn_rate:.0f} |")  # fmt: skip

    # the kernel on weights that stay in the cache: one layer's MLP (gate + down)
    inter = cfg.intermediate_size
    mlp = torch.nn.Sequential(torch.nn.Linear(hidden, inter, bias=False), torch.nn.Linear(inter, hidden, bias=False)).to(dtype)
    if args.pack != "off":
        pack_linears(mlp)
    print(f"\n# the same linear kernel on one layer's MLP weights ({hidden}x{inter} and back, "
          f"{2 * hidden * inter * dtype.itemsize / 2**20:.0f} MiB: cache-resident), GFLOP/s by rows:")  # fmt: skip
    rates = []
    with torch.inference_mode():
        for m in (1, 4, 8, 16, 32, 64, 256):
            x = torch.randn(m, hidden, dtype=dtype)
            for _ in range(3):
                mlp(x)
            reps = max(5, 2000 // m)
            t0 = time.perf_counter()
            for _ in range(reps):
                mlp(x)
            s = (time.perf_counter() - t0) / reps
            rates.append(f"{m}: {2 * m * 2 * hidden * inter / s / 1e9:.0f}")
    print("# " + ", ".join(rates))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
