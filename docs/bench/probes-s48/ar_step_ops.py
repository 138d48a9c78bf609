"""Our AR step against transformers' static-cache decode step, op by op (forty-eighth
session). The suite (AMX) had our AR's forward at 171.6 ms a step against hf-static's whole
step at 164.6.

One process, one model as the suite loads it (auto dtype, packed weights, the folded
attention, which hf's generate() runs too); a real prompt of CTX tokens; ROUNDS rounds of
our AR (no margins) and hf-static, N new tokens each, under torch.profiler (order
alternating). Prints per decode token the self-CPU ms by op for both and the difference
(the prefill is in both profiles: N large enough to see the steps; the prefill's ops are
the same kernels in both, at a fixed cost per round).

    python docs/bench/probes-s48/ar_step_ops.py [ROUNDS] [CTX] [N]
"""
import collections
import sys

from torch.profiler import ProfilerActivity, profile

from fastcoder.config import DecodeConfig
from fastcoder.engine import Engine
from fastcoder.models import load_model
from fastcoder_bench.probes.inputs import real_prompt
from fastcoder_bench.suite.hf_peer import hf_generate

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
ctx = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
n = int(sys.argv[3]) if len(sys.argv) > 3 else 48
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
engine = Engine.from_loaded(loaded)
ids = real_prompt(engine, ctx)


def ours():
    g = engine.generate(ids, DecodeConfig(method="ar", max_new_tokens=n))
    return 1e3 * g.stats.decode_s / max(1, g.stats.decoded_tokens)


def hf():
    r = hf_generate(loaded.model, loaded.tokenizer, ids, max_new_tokens=n, stop_fn=None, eos=set(), name="hf",
                    kwargs={"cache_implementation": "static"})  # fmt: skip
    return r["stats"]["ms_per_token"]


runs = {"ar": ours, "hf-static": hf}
pre = {}
for k, f in runs.items():  # warm, and each one's prefill alone (1 new token) to subtract
    f()
by = {k: collections.Counter() for k in runs}
ms = {k: [] for k in runs}
for r in range(rounds):
    for k in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            ms[k].append(runs[k]())
        for e in prof.key_averages():
            by[k][e.key] += e.self_cpu_time_total / 1e3 / (rounds * n)
for k in runs:
    print(f"== {k}: decode ms/token (profiled) {[round(x, 1) for x in ms[k]]}; self-CPU ms per new token (prefill included)")
    for op, t in by[k].most_common(14):
        print(f"   {t:8.2f}  {op}")
print("== ar minus hf-static, ms per new token")
keys = set(by["ar"]) | set(by["hf-static"])
for d, op in sorted(((by["ar"][o] - by["hf-static"][o], o) for o in keys), key=lambda x: -abs(x[0]))[:16]:
    print(f"   {d:+8.2f}  {op}")
