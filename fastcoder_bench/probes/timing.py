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


def paired_ratios(make: Callable[[int, Hashable], Callable[[], object]], base: Hashable, other: Hashable,
                  starts: tuple[int, ...], rounds: int, log: bool = True) -> dict[int, list[float]]:  # fmt: skip
    """Per start, the time ratios ``other / base`` of ``make(start, key)()`` runs paired
    within each round (:func:`interleaved_ms`, two runs of each, a warm-up first): robust
    to a shared machine's slow drifts, unlike whole runs in turn. Prints each round's
    medians when ``log``."""
    import statistics

    ratios: dict[int, list[float]] = {s: [] for s in starts}
    for r in range(rounds):
        for s in starts:
            t = interleaved_ms({base: make(s, base), other: make(s, other)}, rounds=2, warmup=1)
            ratios[s] += [b / a for a, b in zip(t[base], t[other])]
        if log:
            print(f"round {r}: " + ", ".join(f"{s}: {statistics.median(ratios[s][-2:]):.3f}" for s in starts), flush=True)
    return ratios


def ratio_summary(ratios: dict[int, list[float]], label: str) -> str:
    """The median ratio per start and over all, with quartiles (:func:`paired_ratios`)."""
    import statistics

    every = [x for xs in ratios.values() for x in xs]
    q = statistics.quantiles(every, n=4)
    per = ", ".join(f"{s}: {statistics.median(xs):.3f}" for s, xs in ratios.items())
    return f"{label} median by start: {per}\noverall median {statistics.median(every):.3f} (quartiles {q[0]:.3f} / {q[2]:.3f}, n={len(every)})"
