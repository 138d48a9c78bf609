"""Is the prefill chunk the cost curve chooses steady? (forty-eighth session)

Qwen2.5-Coder-0.5B as the server loads it (dtype/pack auto); the engine's own cost-curve
measurement (``CurveMeasurement`` at the server's lengths) run TIMES times in one process:
per run the seconds it took, the prefill ms a token by chunk rows, their ratio, the chunk
chosen and the 1-row step at the longest length.

    python docs/bench/probes-s48/curve_prefill_choice.py [TIMES]
"""
import sys
import time

import torch

from fastcoder.budget import CurveMeasurement, usable_lengths
from fastcoder.engine import Engine
from fastcoder.models import load_model
from fastcoder.verifier import PREFILL_CHUNK_CPU

times = int(sys.argv[1]) if len(sys.argv) > 1 else 3
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
engine = Engine.from_loaded(loaded)
v = engine.verifier
print("threads", torch.get_num_threads(), "lengths", usable_lengths(v), flush=True)
for i in range(times):
    t = time.perf_counter()
    m = CurveMeasurement(v, usable_lengths(v))
    curve = m.finish()
    secs = time.perf_counter() - t
    p = {n: round(1e3 * x, 3) for n, x in sorted(curve.prefill.items())}
    step = max([curve.seconds[0]] + [s[0] for s in curve.by_length.values()])
    ratio = curve.prefill[256] / curve.prefill[128] if len(curve.prefill) == 2 else float("nan")
    print(f"run {i}: {secs:.1f} s ({m.units_total} units); prefill ms/token {p} (256/128 {ratio:.3f}); "
          f"1-row step {1e3 * step:.0f} ms; chosen {curve.prefill_chunk(PREFILL_CHUNK_CPU)}", flush=True)
