"""What a step of n real rows costs padded to a bucket (as eager steps ran before the
twenty-fifth session: linear layers over the whole bucket, attention over the next power of
two of rows) and run as the rows it has (``Verifier.step_rows``)::

    python docs/bench/rows-s25/steps.py [CONTEXT ...]     # needs qwen2.5-coder-0.5b fetched

One process, one packed bf16 model, one batch-invariant verifier per way, each prefilled
with the same random prompt; each round runs one step of a chain of n - 1 nodes per (n,
way), rolled back after it, the order reversing every round; median of 10 rounds.
"""

from __future__ import annotations

import os
import statistics
import sys

import torch

import fastcoder.verifier as verifier_module
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
from fastcoder_bench.probes.timing import interleaved_ms

ROWS = (1, 2, 3, 4, 5, 6, 8, 9, 12, 16)
TAIL_RULE = verifier_module.attention_rows


def next_power_of_two(rows: int, groups: int = 1) -> int:  # the attended rows before
    return 1 << max(0, int(rows) - 1).bit_length()


def run(model, ctx: int, rounds: int = 10) -> None:
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(200, 20000, (ctx,), generator=g).tolist()
    bucketed, unpadded = Verifier(model), Verifier(model)
    bucketed.step_rows = lambda rows: max(2, bucketed.bucket(rows))  # the rows eager steps ran before
    fns = {}
    for way, v in (("bucket", bucketed), ("unpadded", unpadded)):
        kv = KVState()
        first, _, _ = v.prefill(kv, prompt, reserve=256)
        for rows in ROWS:
            tree = DraftTree.chain(list(range(300, 300 + rows - 1)), "probe")

            def step(v=v, kv=kv, tree=tree, way=way, first=first):
                verifier_module.attention_rows = next_power_of_two if way == "bucket" else TAIL_RULE
                try:
                    v.step(kv, first, tree)
                finally:
                    verifier_module.attention_rows = TAIL_RULE
                kv.truncate(ctx)
                kv.cache.length = ctx

            fns[(rows, way)] = step
    times = interleaved_ms(fns, rounds)
    print(f"\n{ctx} cached rows, load {os.getloadavg()[0]:.2f}; ms per step, median of {rounds}")
    print("| real rows | padded to a bucket | as they are | ratio |\n|---:|---:|---:|---:|")
    for rows in ROWS:
        a, b = statistics.median(times[(rows, "bucket")]), statistics.median(times[(rows, "unpadded")])
        print(f"| {rows} | {a:.1f} | {b:.1f} | {b / a:.3f} |")


def main() -> None:
    model = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False).model
    flags = sorted({f for l in open("/proc/cpuinfo") if l.startswith("flags") for f in l.split()} & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU flags {' '.join(flags)}")
    for ctx in [int(a) for a in sys.argv[1:]] or [512, 2048]:
        run(model, ctx)


if __name__ == "__main__":
    main()
