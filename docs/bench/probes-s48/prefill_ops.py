"""Where does a prompt's prefill time go on this CPU? (forty-eighth session)

Qwen2.5-Coder-0.5B as the server loads it (dtype/pack auto), a real prompt of CTX tokens
prefilled from scratch in CHUNK-row chunks (a fresh cache each time), ROUNDS times under
torch.profiler, alternating with an unprofiled prefill for the wall time. Prints the ms
per prefill by op (self CPU time summed / rounds) for the ops above 5 ms.

    python docs/bench/probes-s48/prefill_ops.py [CTX] [CHUNK] [ROUNDS]
"""
import collections
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from fastcoder.verifier import KVState
from fastcoder_bench.probes.inputs import prefilled_step

ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
chunk = int(sys.argv[2]) if len(sys.argv) > 2 else 128
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
at = prefilled_step(64)
v = at.verifier
from fastcoder_bench.probes.inputs import real_prompt

prompt = real_prompt(at.engine, ctx)
print("threads", torch.get_num_threads(), "ctx", len(prompt), "chunk", chunk, "invariant", v.invariant, "paths", v.paths)
by = collections.Counter()
wall = []
for r in range(rounds):
    t = time.perf_counter()
    v.prefill(KVState(), prompt, reserve=128, chunk=chunk)
    wall.append(time.perf_counter() - t)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        v.prefill(KVState(), prompt, reserve=128, chunk=chunk)
    for e in prof.key_averages():
        by[e.key] += e.self_cpu_time_total / 1e3
print(f"wall (unprofiled) {[round(w, 2) for w in wall]} s; self-CPU sum {sum(by.values()) / rounds:.0f} ms/prefill")
for k, t in by.most_common(30):
    if t / rounds >= 5:
        print(f"   {t / rounds:8.1f}  {k}")
