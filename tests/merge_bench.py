"""Typing, token by token, at the engine: the merged first step (``merge_prompt_tail`` 8)
against prefilling first (0), for AR and FastCoder, interleaved in one process::

    nice -n 19 .venv/bin/python tests/merge_bench.py [--file PATH] [--keys 60] [--out FILE]

A document is typed one token at a time from a line inside it (the prompt is the file's
tokens up to the cursor; the session keeps its KV cache, so each prompt has one or two
new tokens); at each keystroke each of the four (method, merge) pairs, in an order that
rotates, asks its own session for a one-line completion (stop at the line end, at most
24 tokens). Reports the generate() time per keystroke (median, p90), forwards per
completion and whether the four agree with AR (in bf16 a tree step may break a logit tie
the other way). A controlled A/B for the mechanism; the product figure is the typing
replay (``fastcoder bench replay --layouts default,nomerge``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from fastcoder.config import DecodeConfig
    from fastcoder.engine import Engine
    from fastcoder.matmul import cpu_flags
    from fastcoder.models import load_model
    from fastcoder.session import Session
    from fastcoder.stops import block_end

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="qwen2.5-coder-0.5b")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--file", type=Path, default=Path(__file__).resolve().parents[1] / "fastcoder" / "decode.py")
    p.add_argument("--line", type=int, default=120, help="start typing at this line (1-based)")
    p.add_argument("--keys", type=int, default=60, help="tokens typed")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)

    loaded = load_model(args.model, dtype=args.dtype, device="auto", progress=False)
    engine = Engine(loaded.model, loaded.tokenizer, name=args.model)
    engine.cost_curve()  # measured (or read) before any timing
    text = args.file.read_text()
    lines = text.splitlines(keepends=True)
    start_chars = sum(len(x) for x in lines[: args.line - 1])
    ids = loaded.tokenizer.encode(text, add_special_tokens=False)
    head = len(loaded.tokenizer.encode(text[:start_chars], add_special_tokens=False))
    head = max(16, min(head, len(ids) - args.keys - 1))

    stop_at_line_end = block_end(0, single_line=True)  # the server's one-line rule

    pairs = [(m, tail) for m in ("ar", "fastcoder") for tail in (8, 0)]
    name = {pr: f"{pr[0]}/{'merged' if pr[1] else 'prefill'}" for pr in pairs}
    configs = {pr: DecodeConfig(method=pr[0], max_new_tokens=24, merge_prompt_tail=pr[1]) for pr in pairs}
    sessions = {pr: Session(configs[pr]) for pr in pairs}
    for pr in pairs:  # warm each session on the text before the cursor (not timed)
        engine.generate(ids[: head - 1], configs[pr], session=sessions[pr], stop_fn=stop_at_line_end)
    times = {pr: [] for pr in pairs}
    forwards = {pr: [] for pr in pairs}
    merged = {pr: 0 for pr in pairs}
    same = {pr: 0 for pr in pairs}
    for k in range(args.keys):
        prompt = ids[: head + k]
        order = pairs[k % len(pairs):] + pairs[: k % len(pairs)]
        out = {}
        for pr in order:
            g = engine.generate(prompt, configs[pr], session=sessions[pr], stop_fn=stop_at_line_end)
            out[pr] = g.tokens
            times[pr].append(g.stats.total_s * 1e3)
            forwards[pr].append(g.stats.forward_steps + (0 if g.stats.merged_tail else 1))
            merged[pr] += bool(g.stats.merged_tail)
        for pr in pairs:
            same[pr] += out[pr] == out[("ar", 0)]

    flags = sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")), "?")
    print(f"# {args.keys} keystrokes (one token each) in {args.file.name} from line {args.line}, one-line completions, "
          f"{args.model} {loaded.model.dtype}")
    print(f"# {cpu}, flags {' '.join(flags)}, load {os.getloadavg()[0]:.2f}")
    print("| method / first step | generate() ms p50 | p90 | mean | forwards per completion (incl. prefill) | merged | same tokens as AR/prefill |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    result = {"keys": args.keys, "file": str(args.file), "cpu": cpu, "flags": flags, "rows": {}}
    for pr in pairs:
        t = sorted(times[pr])
        row = {"p50_ms": statistics.median(t), "p90_ms": t[int(0.9 * (len(t) - 1))], "mean_ms": statistics.fmean(t),
               "forwards": statistics.fmean(forwards[pr]), "merged": merged[pr], "same_as_ar": same[pr] / args.keys}  # fmt: skip
        result["rows"][name[pr]] = row
        print(f"| {name[pr]} | {row['p50_ms']:.0f} | {row['p90_ms']:.0f} | {row['mean_ms']:.0f} | {row['forwards']:.2f} | "
              f"{merged[pr]}/{args.keys} | {row['same_as_ar']:.0%} |")
    for m in ("ar", "fastcoder"):
        a, b = result["rows"][f"{m}/merged"], result["rows"][f"{m}/prefill"]
        print(f"# {m}: merged / prefill p50 {a['p50_ms'] / b['p50_ms']:.2f}x, mean {a['mean_ms'] / b['mean_ms']:.2f}x")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
