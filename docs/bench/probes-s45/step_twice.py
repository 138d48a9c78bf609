"""Do real decode steps cost more than the same step run again at once? (forty-fifth session)

The suite's tree steps cost more against its AR steps than the cost curve says (AMX, s44:
4-row steps 163 ms against AR's 147, curve c(3)/c(0) 1.00-1.03). The curve times a step
right after an untimed one of the same shape ("hot"); a real step follows drafting,
acceptance and commit work. Here every step of real suite generations (ar and fastcoder,
interleaved task by task as in the suite) runs its forward twice: the real call (timed),
then the identical call again at once (same inputs, same K/V rows written with the same
values: the output does not change), timed too. Per bucket: first / second.

    python docs/bench/probes-s45/step_twice.py [TASKS] [MAX_NEW]
"""
import os
import statistics as st
import sys
import time
from collections import defaultdict

import torch

from fastcoder.verifier import Verifier
from fastcoder_bench.probes.inputs import suite_harness

n_tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 6
max_new = int(sys.argv[2]) if len(sys.argv) > 2 else 128
engine, h, tasks, curve = suite_harness(["ar", "fastcoder"], n_tasks, max_new)
variants = list(h.variants)
print("curve", {n: [round(1e3 * s, 1) for s in secs] for n, secs in {curve.context_len: curve.seconds, **curve.by_length}.items()}, curve.ks)
print("status", engine.verifier.graph_status())

rec = defaultdict(list)  # (method, bucket) -> [(first, second, gap)]
state = {"method": None, "last_end": None}
orig = Verifier._run_step


def twice(self, cache, b, past_len, real=None):
    t0 = time.perf_counter()
    gap = t0 - state["last_end"] if state["last_end"] else None
    out = orig(self, cache, b, past_len, real)
    out[1].tolist()
    t1 = time.perf_counter()
    out2 = orig(self, cache, b, past_len, real)
    out2[1].tolist()
    t2 = time.perf_counter()
    assert torch.equal(out[1], out2[1])
    rec[(state["method"], b)].append((t1 - t0, t2 - t1, gap, past_len))
    state["last_end"] = time.perf_counter()
    return out


Verifier._run_step = twice
for i, task in enumerate(tasks):
    ids = h.prompt_ids(task)
    dr = h.dr_for(task)
    order = variants if i % 2 == 0 else variants[::-1]
    for v in order:
        state["method"], state["last_end"] = v.name, None
        s = h.session_for(v, task)
        g = engine.generate(ids, v.config, session=s, sources=h.sources(v, dr), stop_fn=task.stop_fn())
        s.kv.reset()
        print(f"task {i} {v.name:9s} {g.stats.new_tokens:4d} tokens {g.stats.forward_steps:4d} steps load {os.getloadavg()[0]:.2f}", flush=True)

print("\nmethod    bucket  steps  first med  second med  first/second  min first  min second  gap med (ms)")
ar_first = None
for (m, b), xs in sorted(rec.items(), key=lambda kv: (kv[0][0], kv[0][1])):
    f = [x[0] for x in xs]
    s2 = [x[1] for x in xs]
    gaps = [x[2] for x in xs if x[2] is not None]
    ratio = st.median([a / b_ for a, b_, *_ in xs])
    print(f"{m:9s} {b:6d} {len(xs):6d} {1e3*st.median(f):10.1f} {1e3*st.median(s2):11.1f} {ratio:13.3f} {1e3*min(f):10.1f} {1e3*min(s2):11.1f}"
          f" {1e3*st.median(gaps) if gaps else float('nan'):8.2f}")
