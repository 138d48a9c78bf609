"""Side-by-side timing for the probes: callables timed in alternating order, one process."""

from __future__ import annotations

import time
from typing import Callable, Hashable, Mapping


def interleaved_ms(fns: Mapping[Hashable, Callable[[], object]], rounds: int, warmup: int = 1) -> dict[Hashable, list[float]]:
    """Run every callable ``warmup`` times, then ``rounds`` rounds of each once, the order
    reversed every other round (so none always runs right after another); the wall
    milliseconds of each run, per key."""
    for f in fns.values():
        for _ in range(warmup):
            f()
    times: dict[Hashable, list[float]] = {k: [] for k in fns}
    items = list(fns.items())
    for r in range(rounds):
        for k, f in items if r % 2 == 0 else items[::-1]:
            t0 = time.perf_counter()
            f()
            times[k].append((time.perf_counter() - t0) * 1e3)
    return times


def curve_way_s(verifier, kv, root: int, tree, reps: int) -> list[float]:
    """Seconds of ``reps`` verify steps of ``tree`` below ``root`` timed as the cost curve
    times them (``fastcoder.budget.CurveMeasurement``): each after an untimed step of the
    same shape, ``kv`` rolled back after both."""
    base = len(kv.ids)
    out = []
    for _ in range(reps):
        verifier.step(kv, root, tree)
        kv.truncate(base)
        t0 = time.perf_counter()
        verifier.step(kv, root, tree)
        out.append(time.perf_counter() - t0)
        kv.truncate(base)
    return out
