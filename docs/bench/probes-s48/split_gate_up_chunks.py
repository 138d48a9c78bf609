"""The gate/up column split timed chunk by chunk (forty-eighth session).

As split_gate_up.py, but the unit is one prefill chunk: a real 2,048-token prompt
prefilled once, then ROUNDS rounds of: for each start in STARTS, the chunk of CHUNK rows at
that start re-run (the cache rolled back to it) whole and split, the order alternating
(``fastcoder_bench.probes.timing.interleaved_ms``). Paired per round and start, robust to
the VM's slow drifts. Prints the median split/whole ratio per start and overall.

    python docs/bench/probes-s48/split_gate_up_chunks.py [CHUNK] [PARTS] [ROUNDS]
"""
import statistics
import sys

import torch

from fastcoder.matmul import FusedPackedLinear
from fastcoder.verifier import KVState
from fastcoder_bench.probes.inputs import prefilled_step, real_prompt
from fastcoder_bench.probes.timing import interleaved_ms

chunk = int(sys.argv[1]) if len(sys.argv) > 1 else 128
parts = int(sys.argv[2]) if len(sys.argv) > 2 else 4
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
STARTS = (256, 1024, 1792)
at = prefilled_step(64)
v = at.verifier
prompt = real_prompt(at.engine, 2048)
print("threads", torch.get_num_threads(), "chunk", chunk, "parts", parts, "rounds", rounds, flush=True)
SPLIT = {"on": False}
orig = FusedPackedLinear.forward


def forward(self, x):
    if SPLIT["on"] and x.shape[-2] >= 64 and self.out_features > 4000:
        ps = self.__dict__.get("_parts")
        if ps is None:
            w = self.packed.to_dense()
            ps = self.__dict__["_parts"] = [torch.ops.mkldnn._reorder_linear_weight(c.contiguous(), None) for c in w.chunk(parts, 0)]
        return torch.cat([torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "") for p in ps], -1)
    return orig(self, x)


FusedPackedLinear.forward = forward
kv = KVState()
v.prefill(kv, prompt, reserve=128, chunk=chunk)


def run(start, on):
    def f():
        SPLIT["on"] = on
        kv.truncate(start)
        v.prefill(kv, prompt[: start + chunk], reserve=128, chunk=chunk)
    return f


ratios = {s: [] for s in STARTS}
for r in range(rounds):
    for s in STARTS:
        t = interleaved_ms({"whole": run(s, False), "split": run(s, True)}, rounds=2, warmup=1)
        ratios[s] += [b / a for a, b in zip(t["whole"], t["split"])]
    print(f"round {r}: " + ", ".join(f"{s}: {statistics.median(ratios[s][-2:]):.3f}" for s in STARTS), flush=True)
allr = [x for s in STARTS for x in ratios[s]]
q = statistics.quantiles(allr, n=4)
print("split/whole median by start: " + ", ".join(f"{s}: {statistics.median(ratios[s]):.3f}" for s in STARTS))
print(f"overall median {statistics.median(allr):.3f} (quartiles {q[0]:.3f} / {q[2]:.3f}, n={len(allr)})")
