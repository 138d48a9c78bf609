"""A step of 2 or 3 real rows run as those rows vs as 4 rows (the padding rows skip the
attention), batch-invariant bf16 (twenty-sixth session)::

    python docs/bench/rowpad-s26/steps.py

One process, one verifier whose ``step_rows`` runs a chain of 2 or 3 rows as 4 when asked
(how the dropped ``row_pad`` of commit fac8add ran them); chains of 2, 3 and 4 rows at 512
and 1,900 cached rows, interleaved (fastcoder_bench/probes/timing.py), median of 20 rounds;
the logits of each padded step are compared bit for bit with the unpadded one's.
"""

from __future__ import annotations

import os
import statistics

import torch

from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
from fastcoder_bench.probes.timing import interleaved_ms


def main() -> None:
    loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
    flags = sorted({f for l in open("/proc/cpuinfo") if l.startswith("flags") for f in l.split()} & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    v = Verifier(loaded.model)
    v.row_pad = {}  # (fac8add's measured map, where present: each step's rows decided below)
    own = v.step_rows
    pad_to = {"rows": None}
    v.step_rows = lambda rows: 4 if rows == pad_to["rows"] else own(rows)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU flags {' '.join(flags)}, load {os.getloadavg()[0]:.2f}")
    print("| cached rows | 2 rows | 2 as 4 | ratio | 3 rows | 3 as 4 | ratio | 4 rows | logits identical |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for ctx in (512, 1900):
        g = torch.Generator().manual_seed(0)
        prompt = torch.randint(200, 20000, (ctx,), generator=g).tolist()
        kv = KVState()
        first, _, _ = v.prefill(kv, prompt, reserve=256)
        fns, logits = {}, {}
        for rows in (2, 3, 4):
            tree = DraftTree.chain(list(range(300, 300 + rows - 1)), "probe")
            for pad in (False, True) if rows < 4 else (False,):

                def step(tree=tree, pad=pad, rows=rows):
                    pad_to["rows"] = rows if pad else None
                    v.step(kv, first, tree)
                    logits[(rows, pad)] = v.last_logits.clone()
                    kv.truncate(ctx)
                    kv.cache.length = ctx

                fns[(rows, pad)] = step
        t = interleaved_ms(fns, 20, warmup=2)
        med = {k: statistics.median(x) for k, x in t.items()}
        same = all(torch.equal(logits[(r, False)], logits[(r, True)]) for r in (2, 3))
        print(f"| {ctx} | {med[(2, False)]:.1f} | {med[(2, True)]:.1f} | {med[(2, True)] / med[(2, False)]:.3f} "
              f"| {med[(3, False)]:.1f} | {med[(3, True)]:.1f} | {med[(3, True)] / med[(3, False)]:.3f} | {med[(4, False)]:.1f} | {same} |", flush=True)
    print(f"load at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
