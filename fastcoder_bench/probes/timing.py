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
