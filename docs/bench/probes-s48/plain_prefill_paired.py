"""Invariant against plain prefill chunks, timed piece by piece (forty-eighth session).

Where a verifier's prefill chunks are not batch-invariant anyway (AMX: linear calls of
more than 32 rows round otherwise), do the invariant chunk's own mask and 512-column width
cost anything? Qwen2.5-Coder-0.5B as the server loads it, a real 2,048-token prompt
prefilled once; ROUNDS rounds of: for each start in STARTS, the CHUNK tokens after it
re-prefilled (cache rolled back) the invariant way and the plain way (transformers' mask,
exact width), alternating. Prints the plain/invariant ratio per start.

    python docs/bench/probes-s48/plain_prefill_paired.py [CHUNK] [ROUNDS]
"""
import statistics
import sys

import torch

from fastcoder.verifier import KVState
from fastcoder_bench.probes.inputs import prefilled_step, real_prompt
from fastcoder_bench.probes.timing import interleaved_ms

chunk = int(sys.argv[1]) if len(sys.argv) > 1 else 256
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
STARTS = (256, 1024, 1792)
at = prefilled_step(64)
v = at.verifier
prompt = real_prompt(at.engine, 2048)
print("threads", torch.get_num_threads(), "chunk", chunk, "rounds", rounds, "invariant", v.invariant, "prefill_invariant",
      v.status().get("prefill_invariant") if hasattr(v, "status") else "?", flush=True)
kv = KVState()
v.prefill(kv, prompt, reserve=128, chunk=chunk)


def run(start, invariant):
    def f():
        v.invariant = invariant
        kv.truncate(start)
        v.prefill(kv, prompt[: start + chunk], reserve=128, chunk=chunk)
        v.invariant = True
    return f


ratios = {s: [] for s in STARTS}
ms = {s: {True: [], False: []} for s in STARTS}
for r in range(rounds):
    for s in STARTS:
        t = interleaved_ms({True: run(s, True), False: run(s, False)}, rounds=2, warmup=1)
        ratios[s] += [b / a for a, b in zip(t[True], t[False])]
        for c in (True, False):
            ms[s][c] += t[c]
    print(f"round {r}: " + ", ".join(f"{s}: {statistics.median(ratios[s][-2:]):.3f}" for s in STARTS), flush=True)
for s in STARTS:
    print(f"start {s}: invariant {statistics.median(ms[s][True]):.0f} ms, plain {statistics.median(ms[s][False]):.0f} ms; ratio median {statistics.median(ratios[s]):.3f}")
allr = [x for s in STARTS for x in ratios[s]]
q = statistics.quantiles(allr, n=4)
print(f"overall plain/invariant median {statistics.median(allr):.3f} (quartiles {q[0]:.3f} / {q[2]:.3f}, n={len(allr)})")
