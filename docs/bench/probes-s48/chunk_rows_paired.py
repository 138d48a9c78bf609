"""128- against 256-row prefill chunks, timed piece by piece (forty-eighth session).

Qwen2.5-Coder-0.5B as the server loads it (dtype/pack auto), a real 2,048-token prompt
prefilled once; then ROUNDS rounds of: for each start in STARTS, the 256 tokens after it
re-prefilled (cache rolled back) as one 256-row chunk and as two 128-row chunks, the
order alternating (``interleaved_ms``). Paired per round and start: robust to the VM's
slow drifts, unlike whole prefills in turn. Prints the 256/128 time ratio per start.

    python docs/bench/probes-s48/chunk_rows_paired.py [ROUNDS]
"""
import statistics
import sys

import torch

from fastcoder.verifier import KVState
from fastcoder_bench.probes.inputs import prefilled_step, real_prompt
from fastcoder_bench.probes.timing import interleaved_ms

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
STARTS = (256, 1024, 1792)
at = prefilled_step(64)
v = at.verifier
prompt = real_prompt(at.engine, 2048)
print("threads", torch.get_num_threads(), "rounds", rounds, "invariant", v.invariant, flush=True)
kv = KVState()
v.prefill(kv, prompt, reserve=128)


def run(start, chunk):
    def f():
        kv.truncate(start)
        v.prefill(kv, prompt[: start + 256], reserve=128, chunk=chunk)
    return f


ratios = {s: [] for s in STARTS}
ms = {s: {128: [], 256: []} for s in STARTS}
for r in range(rounds):
    for s in STARTS:
        t = interleaved_ms({128: run(s, 128), 256: run(s, 256)}, rounds=2, warmup=1)
        ratios[s] += [b / a for a, b in zip(t[128], t[256])]
        for c in (128, 256):
            ms[s][c] += t[c]
    print(f"round {r}: " + ", ".join(f"{s}: {statistics.median(ratios[s][-2:]):.3f}" for s in STARTS), flush=True)
for s in STARTS:
    print(f"start {s}: 256 tokens as 2 x 128 rows {statistics.median(ms[s][128]):.0f} ms, as 1 x 256 {statistics.median(ms[s][256]):.0f} ms; ratio median {statistics.median(ratios[s]):.3f}")
allr = [x for s in STARTS for x in ratios[s]]
q = statistics.quantiles(allr, n=4)
print(f"overall 256/128 median {statistics.median(allr):.3f} (quartiles {q[0]:.3f} / {q[2]:.3f}, n={len(allr)})")
