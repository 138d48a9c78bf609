"""draft_cost with a cache sweep between steps (MB), with or without D_c."""
import sys
import numpy as np
mb = float(sys.argv.pop(1)); use_dc = sys.argv.pop(1) == "dc"
buf = np.ones(int(mb * 2**20 / 8)) if mb > 0 else None
from fastcoder import replay
step = replay.ReplayVerifier.step
def thrashed(self, *a, **k):
    out = step(self, *a, **k)
    if buf is not None:
        buf.sum()
    return out
replay.ReplayVerifier.step = thrashed
from fastcoder_bench.probes import draft_cost
if not use_dc:
    orig = draft_cost.Sources
    draft_cost.Sources = lambda dr=None, dc=None, **k: orig(dr=dr, **k)
draft_cost.main()
