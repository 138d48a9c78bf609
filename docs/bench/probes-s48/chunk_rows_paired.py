"""128- against 256-row prefill chunks (or SMALL against LARGE), timed piece by piece
(forty-eighth session).

Qwen2.5-Coder-0.5B as the server loads it (dtype/pack auto), a real 2,048-token prompt
prefilled once; then ROUNDS rounds of: for each start in STARTS, the LARGE tokens after it
re-prefilled (cache rolled back) as one LARGE-row chunk and as SMALL-row chunks, paired
(``fastcoder_bench.probes.timing.paired_ratios``): robust to the VM's slow drifts, unlike
whole prefills in turn. Prints the LARGE/SMALL time ratios.

    python docs/bench/probes-s48/chunk_rows_paired.py [ROUNDS] [SMALL] [LARGE]
"""
import sys

import torch

from fastcoder.verifier import KVState
from fastcoder_bench.probes.inputs import prefilled_step, real_prompt
from fastcoder_bench.probes.timing import paired_ratios, ratio_summary

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
small = int(sys.argv[2]) if len(sys.argv) > 2 else 128
large = int(sys.argv[3]) if len(sys.argv) > 3 else 256
STARTS = tuple(s for s in (256, 1024, 1792) if s + large <= 2048) or (2048 - large,)
at = prefilled_step(64)
v = at.verifier
prompt = real_prompt(at.engine, 2048)
print("threads", torch.get_num_threads(), "rounds", rounds, "invariant", v.invariant, flush=True)
kv = KVState()
v.prefill(kv, prompt, reserve=128)


def make(start, chunk):
    def f():
        kv.truncate(start)
        v.prefill(kv, prompt[: start + large], reserve=128, chunk=chunk)
    return f


print(ratio_summary(paired_ratios(make, small, large, STARTS, rounds), f"{large}/{small}"))
