"""Does running the fused gate/up projection as column parts speed a prefill? Timed chunk
by chunk (forty-eighth session).

Qwen2.5-Coder-0.5B as the server loads it (dtype/pack auto); the fused gate/up layer (896 ->
9,728) called whole or as PARTS packed column blocks (outputs joined by ``torch.cat``) for
calls of at least 64 rows. First checks that the split layer's outputs equal the whole
one's bit for bit at 1, 16, 64, 128, 256 rows. Then a real 2,048-token prompt prefilled
once, and ROUNDS rounds of: for each start in STARTS, the chunk of CHUNK rows at that start
re-run (the cache rolled back to it) whole and split, paired
(``fastcoder_bench.probes.timing.paired_ratios``). Prints the split/whole ratios.

    python docs/bench/probes-s48/split_gate_up_chunks.py [CHUNK] [PARTS] [ROUNDS]
"""
import sys

import torch

from fastcoder.matmul import FusedPackedLinear
from fastcoder.verifier import KVState
from fastcoder_bench.probes.inputs import prefilled_step, real_prompt
from fastcoder_bench.probes.timing import paired_ratios, ratio_summary

chunk = int(sys.argv[1]) if len(sys.argv) > 1 else 128
parts = int(sys.argv[2]) if len(sys.argv) > 2 else 4
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
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
with torch.inference_mode():
    m = next(m for m in at.loaded.model.modules() if isinstance(m, FusedPackedLinear) and m.out_features > 4000)
    for rows in (1, 16, 64, 128, 256):
        x = torch.randn(1, rows, m.in_features, dtype=torch.bfloat16) * 3
        SPLIT["on"] = False
        a = m(x)
        SPLIT["on"] = True
        print(f"rows {rows}: split equals whole bit for bit: {torch.equal(a, m(x))}")
kv = KVState()
v.prefill(kv, prompt, reserve=128, chunk=chunk)


def make(start, on):
    def f():
        SPLIT["on"] = on
        kv.truncate(start)
        v.prefill(kv, prompt[: start + chunk], reserve=128, chunk=chunk)
    return f


print(ratio_summary(paired_ratios(make, False, True, (256, 1024, 1792), rounds), "split/whole"))
