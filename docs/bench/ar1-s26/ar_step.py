"""An AR step run as 1 row vs padded to 2 rows, batch-invariant bf16 (twenty-sixth session)::

    python docs/bench/ar1-s26/ar_step.py

Both are the shipped verifier: ``min_rows`` 2 is the whole forward padded to 2 rows (as
before this session), 1 is the row itself with the linear layers whose 1-row call rounds
otherwise run as 2 rows (``matmul.mark_one_row_rounding``). One process, the two
interleaved (fastcoder_bench/probes/timing.py), median of 40 steps per context; the
logits of the two are compared bit for bit on every timed step.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import torch

from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
from fastcoder_bench.probes.timing import interleaved_ms


def main() -> None:
    loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
    flags = sorted({f for l in open("/proc/cpuinfo") if l.startswith("flags") for f in l.split()} & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    v = Verifier(loaded.model)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU flags {' '.join(flags)}, load {os.getloadavg()[0]:.2f}")
    print(f"min_rows {v.min_rows}; linear layers run 1 row as 2: {len(v.one_row_padded)} ({', '.join(sorted({n.rsplit('.', 1)[-1] for n in v.one_row_padded}))})")
    src = Path(__file__).resolve().parents[3].joinpath("fastcoder", "decode.py").read_text()
    ids_all = loaded.tokenizer(src * 3)["input_ids"]
    print("| cached rows | 2 rows ms | 1 row ms | 1 row / 2 rows | logits differ |\n|---:|---:|---:|---:|---:|")
    for ctx in (512, 1024, 1900):
        ids = ids_all[:ctx]
        kv = KVState()
        root, _, _ = v.prefill(kv, ids, reserve=64)
        seen: dict[int, list[torch.Tensor]] = {1: [], 2: []}

        def run(rows: int):
            def f():
                v.min_rows = rows
                kv.ids = list(ids)
                kv.cache.length = ctx
                v.step(kv, root, DraftTree())
                seen[rows].append(v.last_logits[0].clone())
            return f

        t = interleaved_ms({2: run(2), 1: run(1)}, rounds=40, warmup=3)
        v.min_rows = 1
        med = {k: statistics.median(x) for k, x in t.items()}
        differ = sum(not torch.equal(a, b) for a, b in zip(seen[1], seen[2]))
        print(f"| {ctx} | {med[2]:.1f} | {med[1]:.1f} | {med[1] / med[2]:.3f} | {differ} of {len(seen[1])} |", flush=True)
    print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
