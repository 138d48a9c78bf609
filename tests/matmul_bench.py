"""Whole ``Verifier.step`` time per bucket and a prefill, for each CPU matmul path
(fastcoder/matmul.py): float32 and bfloat16, plain ``F.linear`` and oneDNN-packed
weights, side by side in one process on one real model::

    nice -n 19 .venv/bin/python tests/matmul_bench.py [--context 512] [--rounds 5] [--out FILE]

The model is loaded once in float32 (plain); the other three paths are copies of it
(packed, cast to bfloat16, both). Each path prefills the same prompt once (timed) into
its own cache; then, round by round, every bucket runs a chain tree of bucket - 1 nodes
on every path (the order of the paths rotates each round; the cache is rolled back
after each step, so its length stays put); minimum over rounds. Also checks that the
packed path gives the plain path's greedy tokens in each dtype.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    import torch

    from fastcoder.matmul import can_pack, cpu_flags, pack_linears
    from fastcoder.models import load_model
    from fastcoder.trie import DraftTree
    from fastcoder.verifier import KVState, Verifier

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="qwen2.5-coder-0.5b")
    p.add_argument("--context", type=int, default=512, help="cached tokens before the steps")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--buckets", default="1,4,8,16,32")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    buckets = [int(b) for b in args.buckets.split(",")]

    loaded = load_model(args.model, dtype="float32", device="cpu", pack="off", progress=False)
    paths = {"float32/plain": loaded.model}
    if can_pack(torch.float32):
        paths["float32/packed"] = copy.deepcopy(loaded.model)
        pack_linears(paths["float32/packed"])
    paths["bfloat16/plain"] = copy.deepcopy(loaded.model).to(torch.bfloat16)
    if can_pack(torch.bfloat16):
        paths["bfloat16/packed"] = copy.deepcopy(paths["bfloat16/plain"])
        pack_linears(paths["bfloat16/packed"])

    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(200, 20000, (args.context,), generator=g).tolist()
    verifiers, caches, firsts, prefill_ms = {}, {}, {}, {}
    for name, model in paths.items():
        v = verifiers[name] = Verifier(model)
        kv = caches[name] = KVState()
        v.prefill(KVState(), prompt[:64], reserve=16)  # warm-up
        t0 = time.perf_counter()
        firsts[name], _, _ = v.prefill(kv, prompt, reserve=256)
        prefill_ms[name] = (time.perf_counter() - t0) * 1e3

    times: dict[str, dict[int, list[float]]] = {n: {b: [] for b in buckets} for n in paths}
    greedy: dict[str, dict[int, list[int]]] = {n: {} for n in paths}
    names = list(paths)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for b in buckets:
            for name in order:
                v, kv = verifiers[name], caches[name]
                tree = DraftTree.chain([300 + i for i in range(b - 1)], "bench")
                t0 = time.perf_counter()
                v.step(kv, firsts[name], tree)
                times[name][b].append((time.perf_counter() - t0) * 1e3)
                greedy[name][b] = v.last_logits.argmax(-1).tolist()
                kv.truncate(args.context)  # roll back: the same cache length every step
                kv.cache.length = args.context

    flags = sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")), "?")
    print(f"# Verifier.step, ms (min over {args.rounds} rounds), {args.context} cached tokens, {args.model}")
    print(f"# {cpu}, flags {' '.join(flags)}, {torch.get_num_threads()} torch threads, load {os.getloadavg()[0]:.2f}")
    print("| path | prefill ms | " + " | ".join(f"{b} rows" for b in buckets) + " | 16 rows / 1 row |")
    print("|---|---:|" + "---:|" * len(buckets) + "---:|")
    result = {"model": args.model, "context": args.context, "cpu": cpu, "flags": flags, "paths": {}}
    for name in names:
        best = {b: min(times[name][b]) for b in buckets}
        ratio = best[16] / best[1] if 16 in best and 1 in best else float("nan")
        print(f"| {name} | {prefill_ms[name]:.0f} | " + " | ".join(f"{best[b]:.1f}" for b in buckets) + f" | {ratio:.2f} |")
        result["paths"][name] = {"prefill_ms": prefill_ms[name], "step_ms": best, "ratio_16_1": ratio}
    for dt in ("float32", "bfloat16"):
        if f"{dt}/packed" in greedy:
            same = all(greedy[f"{dt}/packed"][b] == greedy[f"{dt}/plain"][b] for b in buckets)
            print(f"# {dt}: packed greedy tokens {'equal' if same else 'DIFFER from'} plain ones")
            result[f"{dt}_same_greedy"] = same
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
