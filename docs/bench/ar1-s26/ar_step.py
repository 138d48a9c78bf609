"""An AR step run as 1 row vs padded to 2 rows, batch-invariant bf16 (twenty-sixth session)::

    python docs/bench/ar1-s26/ar_step.py

Both are the shipped verifier: ``min_rows`` 2 is the whole forward padded to 2 rows (as
before this session), 1 is the row itself with the linear layers whose 1-row call rounds
otherwise run as 2 rows (``matmul.mark_one_row_rounding``). For scale, a plain verifier
on the same model (``invariant=False``: 1 row, no mask, the exact width, no layer padded),
what an AR step costs without batch invariance. One process, the three interleaved
(fastcoder_bench/probes/timing.py), median of 40 steps per context; the invariant ones'
logits are compared bit for bit on every timed step.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import torch

from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.matmul import PackedLinear
from fastcoder.verifier import KVState, Verifier
from fastcoder_bench.probes.timing import interleaved_ms


def main() -> None:
    loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
    flags = sorted({f for l in open("/proc/cpuinfo") if l.startswith("flags") for f in l.split()} & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    v = Verifier(loaded.model)
    plain = Verifier(loaded.model, invariant=False)
    marked = [m for m in loaded.model.modules() if isinstance(m, PackedLinear) and m.pad_one_row]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU flags {' '.join(flags)}, load {os.getloadavg()[0]:.2f}")
    print(f"min_rows {v.min_rows}; linear layers run 1 row as 2: {len(v.one_row_padded)} ({', '.join(sorted({n.rsplit('.', 1)[-1] for n in v.one_row_padded}))})")
    src = Path(__file__).resolve().parents[3].joinpath("fastcoder", "decode.py").read_text()
    ids_all = loaded.tokenizer(src * 3)["input_ids"]
    print("| cached rows | 2 rows ms | 1 row ms | 1 row / 2 rows | logits differ | plain ms | 1 row / plain |\n|---:|---:|---:|---:|---:|---:|---:|")
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

        pkv = KVState()
        proot, _, _ = plain.prefill(pkv, ids, reserve=64)

        def run_plain():
            for m in marked:
                m.pad_one_row = False
            try:
                pkv.ids = list(ids)
                pkv.cache.length = ctx
                plain.step(pkv, proot, DraftTree())
            finally:
                for m in marked:
                    m.pad_one_row = True

        t = interleaved_ms({2: run(2), 1: run(1), "plain": run_plain}, rounds=40, warmup=3)
        v.min_rows = 1
        med = {k: statistics.median(x) for k, x in t.items()}
        differ = sum(not torch.equal(a, b) for a, b in zip(seen[1], seen[2]))
        print(f"| {ctx} | {med[2]:.1f} | {med[1]:.1f} | {med[1] / med[2]:.3f} | {differ} of {len(seen[1])} | {med['plain']:.1f} | {med[1] / med['plain']:.3f} |", flush=True)
    print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
