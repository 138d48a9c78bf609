"""Where does a tree step's time go on this CPU? (forty-seventh session)

Qwen2.5-Coder-0.5B as the server loads it (dtype/pack auto), a real prompt of CTX tokens
prefilled, then steps of 1 and 16 rows (chains, as the cost curve times them) under
torch.profiler, alternating, ROUNDS each. Prints per row count the ms per step by op
(self CPU time, summed over the profiled steps / steps) for the ops above 0.3 ms.

    python docs/bench/probes-s47/step_ops.py [CTX] [ROUNDS]
"""
import collections
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from fastcoder.trie import DraftTree
from fastcoder_bench.probes.inputs import prefilled_step
from fastcoder_bench.probes.timing import curve_way_s

ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
at = prefilled_step(ctx)
prompt, v, kv = at.prompt, at.verifier, at.kv
print("threads", torch.get_num_threads(), "ctx", ctx, "paths", v.paths, "buckets", v.buckets)
sizes = (1, 16)
for n in sizes:  # warm
    curve_way_s(v, kv, prompt[99], DraftTree.chain(prompt[100 : 100 + n - 1], "probe"), 2)
by = {n: collections.Counter() for n in sizes}
wall = {n: [] for n in sizes}
for r in range(rounds):
    for n in sizes:
        tree = DraftTree.chain(prompt[100 : 100 + n - 1], "probe")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            wall[n] += curve_way_s(v, kv, prompt[99], tree, 1)
        for e in prof.key_averages():
            by[n][e.key] += e.self_cpu_time_total / 1e3
for n in sizes:
    tot = sum(by[n].values()) / rounds
    print(f"== {n} rows: wall median {1e3 * sorted(wall[n])[len(wall[n]) // 2]:.1f} ms (profiled), self-CPU sum {tot:.1f} ms/step")
    for k, t in by[n].most_common(25):
        if t / rounds >= 0.3:
            print(f"   {t / rounds:7.2f}  {k}")
keys = set(by[1]) | set(by[16])
print("== 16-row minus 1-row, per step (ms)")
diff = sorted(((by[16][k] - by[1][k]) / rounds, k) for k in keys)
for d, k in diff[::-1][:15]:
    print(f"   {d:+7.2f}  {k}")
