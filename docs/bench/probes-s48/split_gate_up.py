"""Does running the fused gate/up projection as column parts speed a prefill? (forty-eighth
session)

Qwen2.5-Coder-0.5B as the server loads it (dtype/pack auto); a real 2,048-token prompt
prefilled from scratch in CHUNK-row chunks, the fused gate/up layer (896 -> 9,728) called
whole or as PARTS packed column blocks (outputs joined by ``torch.cat``) for calls of at
least 64 rows, alternating whole / split, ROUNDS each. First checks that the split layer's
outputs equal the whole one's bit for bit at 1, 16, 64, 128, 256 rows.

    python docs/bench/probes-s48/split_gate_up.py [CHUNK] [PARTS] [ROUNDS]
"""
import statistics
import sys
import time

import torch

from fastcoder.matmul import FusedPackedLinear
from fastcoder.verifier import KVState
from fastcoder_bench.probes.inputs import prefilled_step, real_prompt

chunk = int(sys.argv[1]) if len(sys.argv) > 1 else 128
parts = int(sys.argv[2]) if len(sys.argv) > 2 else 4
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
at = prefilled_step(64)
v = at.verifier
prompt = real_prompt(at.engine, 2048)
fused = [m for m in at.loaded.model.modules() if isinstance(m, FusedPackedLinear) and m.out_features > 4000]
print("threads", torch.get_num_threads(), "fused gate/up layers", len(fused), "chunk", chunk, "parts", parts)
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
with torch.inference_mode():
    m = fused[0]
    for rows in (1, 16, 64, 128, 256):
        x = torch.randn(1, rows, 896, dtype=torch.bfloat16) * 3
        SPLIT["on"] = False
        a = m(x)
        SPLIT["on"] = True
        b = m(x)
        print(f"rows {rows}: split equals whole bit for bit: {torch.equal(a, b)}")
wall = {False: [], True: []}
for r in range(rounds):
    for on in ((False, True) if r % 2 == 0 else (True, False)):
        SPLIT["on"] = on
        t = time.perf_counter()
        v.prefill(KVState(), prompt, reserve=128, chunk=chunk)
        wall[on].append(time.perf_counter() - t)
        print(f"round {r} {'split' if on else 'whole'} {wall[on][-1]:.2f} s", flush=True)
w, s = statistics.median(wall[False]), statistics.median(wall[True])
print(f"median whole {w:.2f} s, split {s:.2f} s: split/whole {s / w:.3f}; pairs {[round(b / a, 3) for a, b in zip(wall[False], wall[True])]}")
