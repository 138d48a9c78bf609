"""128- against 256-row prefill chunks (or SMALL against LARGE), timed piece by piece
(forty-eighth session).

Qwen2.5-Coder-0.5B as the server loads it (dtype/pack auto), a real 2,048-token prompt
prefilled once; then ROUNDS rounds of: for each start in STARTS, the LARGE tokens after it
re-prefilled (cache rolled back) as one LARGE-row chunk and as SMALL-row chunks, the
order alternating (``interleaved_ms``). Paired per round and start: robust to the VM's
slow drifts, unlike whole prefills in turn. Prints the LARGE/SMALL time ratio per start.

    python docs/bench/probes-s48/chunk_rows_paired.py [ROUNDS] [SMALL] [LARGE]
"""
import statistics
import sys

import torch

from fastcoder.verifier import KVState
from fastcoder_bench.probes.inputs import prefilled_step, real_prompt
from fastcoder_bench.probes.timing import interleaved_ms

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


def run(start, chunk):
    def f():
        kv.truncate(start)
        v.prefill(kv, prompt[: start + large], reserve=128, chunk=chunk)
    return f


ratios = {s: [] for s in STARTS}
ms = {s: {small: [], large: []} for s in STARTS}
for r in range(rounds):
    for s in STARTS:
        t = interleaved_ms({small: run(s, small), large: run(s, large)}, rounds=2, warmup=1)
        ratios[s] += [b / a for a, b in zip(t[small], t[large])]
        for c in (small, large):
            ms[s][c] += t[c]
    print(f"round {r}: " + ", ".join(f"{s}: {statistics.median(ratios[s][-2:]):.3f}" for s in STARTS), flush=True)
for s in STARTS:
    print(f"start {s}: {large} tokens in {small}-row chunks {statistics.median(ms[s][small]):.0f} ms, as 1 x {large} {statistics.median(ms[s][large]):.0f} ms; ratio median {statistics.median(ratios[s]):.3f}")
allr = [x for s in STARTS for x in ratios[s]]
q = statistics.quantiles(allr, n=4)
print(f"overall {large}/{small} median {statistics.median(allr):.3f} (quartiles {q[0]:.3f} / {q[2]:.3f}, n={len(allr)})")
