"""Invariant against plain prefill chunks, timed piece by piece (forty-eighth session).

Where a verifier's prefill chunks are not batch-invariant anyway (AMX: linear calls of
more than 32 rows round otherwise), do the invariant chunk's own mask and 512-column width
cost anything? Qwen2.5-Coder-0.5B as the server loads it, a real 2,048-token prompt
prefilled once; ROUNDS rounds of: for each start in STARTS, the CHUNK tokens after it
re-prefilled (cache rolled back) the invariant way and the plain way (transformers' mask,
exact width), paired (``fastcoder_bench.probes.timing.paired_ratios``). Prints the
plain/invariant ratios.

    python docs/bench/probes-s48/plain_prefill_paired.py [CHUNK] [ROUNDS]
"""
import sys

import torch

from fastcoder.verifier import KVState
from fastcoder_bench.probes.inputs import prefilled_step, real_prompt
from fastcoder_bench.probes.timing import paired_ratios, ratio_summary

chunk = int(sys.argv[1]) if len(sys.argv) > 1 else 256
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
at = prefilled_step(64)
v = at.verifier
prompt = real_prompt(at.engine, 2048)
print("threads", torch.get_num_threads(), "chunk", chunk, "rounds", rounds, "invariant", v.invariant, flush=True)
kv = KVState()
v.prefill(kv, prompt, reserve=128, chunk=chunk)


def make(start, invariant):
    def f():
        v.invariant = invariant
        try:
            kv.truncate(start)
            v.prefill(kv, prompt[: start + chunk], reserve=128, chunk=chunk)
        finally:
            v.invariant = True
    return f


print(ratio_summary(paired_ratios(make, True, False, (256, 1024, 1792), rounds), "plain/invariant"))
