"""Are eager steps that run their own rows (no bucket padding) still AR's bits in bf16?
(twenty-fifth session)::

    python docs/bench/rows-s25/chains.py [--model NAME] [--no-tail-rule] [LENGTH ...]

The batch-invariant verifier as it ships (packed bf16; ``--model`` default
qwen2.5-coder-0.5b, 7 query heads per KV head; smollm2-135m has 3): greedy AR for
40 tokens after prompts of 300, 777 and 1,500 tokens of ``fastcoder/decode.py``, then the
same tokens verified as chains of each LENGTH rows from the same cache (the chain's keys
and values kept for the next chain, as a generation keeps them): how many rows' logits
differ from the AR step's, bit for bit. ``--no-tail-rule``: the rows as they are, without
:func:`fastcoder.verifier.attention_rows`' padding (5 rows = 35 folded query rows leave
SDPA's CPU kernel a last block of 3).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

import fastcoder.verifier as verifier_module
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import Verifier
from fastcoder_bench.probes.ar_reference import ar_logits


def main() -> None:
    args = sys.argv[1:]
    model = "qwen2.5-coder-0.5b"
    if "--model" in args:
        i = args.index("--model")
        model = args[i + 1]
        del args[i : i + 2]
    if "--no-tail-rule" in args:
        args.remove("--no-tail-rule")
        verifier_module.attention_rows = lambda rows, groups=1: max(1, int(rows))
        print("without the tail rule: every chain runs exactly its rows")
    lengths = [int(a) for a in args] or list(range(2, 17)) + [23, 28, 37]
    loaded = load_model(model, dtype="bfloat16", device="cpu", pack="on", progress=False)
    flags = sorted({f for l in open("/proc/cpuinfo") if l.startswith("flags") for f in l.split()} & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    print(f"{model}; torch {torch.__version__}, {torch.get_num_threads()} threads, CPU flags {' '.join(flags)}, load {os.getloadavg()[0]:.2f}")
    src = Path(__file__).resolve().parents[3].joinpath("fastcoder", "decode.py").read_text()
    v = Verifier(loaded.model)
    assert v.invariant and not v.padded
    totals: dict[int, list[int]] = {}
    for ctx in (300, 777, 1500):
        ids = loaded.tokenizer(src)["input_ids"][:ctx]
        kv, toks, ref = ar_logits(v, ids, 40)
        for b in lengths:
            kv.ids = list(ids)
            kv.cache.length = ctx
            pos = 0
            while pos + b <= 40:
                v.step(kv, toks[pos], DraftTree.chain(toks[pos + 1 : pos + b], "probe"))
                t = totals.setdefault(b, [0, 0])
                for j in range(b):
                    t[0] += 1
                    t[1] += not torch.equal(v.last_logits[j], ref[pos + j])
                kv.ids = list(ids) + toks[: pos + b]  # the chain's rows hold these tokens' keys/values
                kv.cache.length = len(kv.ids)
                pos += b
    print("| chain rows | rows the step runs | rows | logits differ from AR's |\n|---:|---:|---:|---:|")
    for b, (n, bad) in sorted(totals.items()):
        print(f"| {b} | {v.step_rows(b)} | {n} | {bad} |")


if __name__ == "__main__":
    main()
