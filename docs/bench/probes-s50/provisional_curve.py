"""How close a cost-curve measurement's first round (fiftieth session; the second run with
each length's context prefilled right before its first timed unit) (``CurveMeasurement.provisional``, what a
first-start server prices trees by until the measurement is done) comes to the finished
curve, and how much of the measurement's time it takes: the real model, the measurement a
server runs (``usable_lengths``, 5 rounds), ``REPEATS`` times in one process.

    python docs/bench/probes-s50/provisional_curve.py [REPEATS]
"""
import os
import sys
import time

from fastcoder.budget import CurveMeasurement, usable_lengths
from fastcoder.engine import Engine
from fastcoder.models import load_model

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="auto", progress=False)
engine = Engine.from_loaded(loaded)
print(f"# {loaded.name} {loaded.dtype} on {loaded.device}; load {os.getloadavg()[0]:.2f}")
for r in range(REPEATS):
    m = CurveMeasurement(engine.verifier, usable_lengths(engine.verifier))
    t0 = time.perf_counter()
    m.run(stop=lambda: m.provisional_ready)
    t_one, units_one = time.perf_counter() - t0, m.units_done
    m.run(stop=lambda: m._round >= 1)
    t_first, units_first = time.perf_counter() - t0, m.units_done
    first = m.provisional()
    m.run()
    t_all = time.perf_counter() - t0
    final = m.curve()
    print(f"repeat {r}: the first length's first round after {t_one:5.1f} s ({units_one} units), every length's after "
          f"{t_first:5.1f} s ({units_first} of {m.units_total} units), whole {t_all:5.1f} s; load {os.getloadavg()[0]:.2f}")
    for n in m.lengths:
        a = first.seconds if n == first.context_len else first.by_length[n]
        b = final.seconds if n == final.context_len else final.by_length[n]
        print(f"  {n:5d} rows  k={m.ks}")
        print(f"    first round ms  {[round(1e3 * x, 1) for x in a]}  c(15)/c(0) {a[m.ks.index(15)] / a[0]:.2f}")
        print(f"    whole      ms  {[round(1e3 * x, 1) for x in b]}  c(15)/c(0) {b[m.ks.index(15)] / b[0]:.2f}")
        print(f"    first / whole   {[round(x / y, 2) for x, y in zip(a, b)]}")
