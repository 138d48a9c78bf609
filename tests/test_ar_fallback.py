"""lsp_server/fallback.py: a document runs plain AR while its drafter is measured slower
than AR would have been, and goes back to the drafter to be judged again."""

from __future__ import annotations

import pytest

from fastcoder.budget import CostCurve
from fastcoder.stats import GenStats
from lsp_server.fallback import ArFallback, ar_estimate_s

# a GPU-like curve: every bucket costs about the same
FLAT = CostCurve([0, 3, 7, 15], [0.004, 0.004, 0.0042, 0.0045], 512, {2048: [0.005, 0.005, 0.0052, 0.0055]})
# a CPU-like one: 4 rows as 1, then dearer
CPU = CostCurve([0, 3, 7, 15], [0.031, 0.031, 0.037, 0.050], 512)


def gen(decode_s: float, steps: int, accepted: list[int], sizes: list[int], verify_s: float, new_tokens: int) -> GenStats:
    s = GenStats(method="fastcoder", prompt_tokens=400, new_tokens=new_tokens, forward_steps=steps, merged_tail=3)
    s.prefill_s, s.total_s = 0.01, 0.01 + decode_s
    s.forward_s = verify_s
    s.accept_lengths, s.draft_sizes = accepted, sizes
    return s


def test_the_estimate_prices_ar_steps_from_the_generations_own_steps():
    # 3 steps of 3-node trees accepting 2, 1, 0 nodes: 6 tokens produced, 6 kept
    s = gen(0.030, 3, [2, 1, 0], [3, 3, 3], verify_s=0.015, new_tokens=6)
    # a step cost 5 ms at 4 rows; on the CPU curve 4 rows cost what 1 row does
    assert ar_estimate_s(s, CPU) == pytest.approx(6 * 0.005)
    # on the flat curve at ~400 rows (below the shortest measured length: 512's row)
    assert ar_estimate_s(s, FLAT) == pytest.approx(6 * 0.005 * 0.004 / 0.004)
    # 8-node trees on the CPU curve: a 1-row step is 31/37 of the measured one
    s8 = gen(0.030, 3, [2, 1, 0], [7, 7, 7], verify_s=0.015, new_tokens=6)
    assert ar_estimate_s(s8, CPU) == pytest.approx(6 * 0.005 * 31 / 37)
    # a stop inside the accepted nodes: AR would have stopped there too
    cut = gen(0.030, 3, [2, 1, 3], [3, 3, 3], verify_s=0.015, new_tokens=4)
    assert ar_estimate_s(cut, CPU) == pytest.approx(5 * 0.005)
    assert ar_estimate_s(gen(0.0, 0, [], [], 0.0, 1), CPU) is None  # no decode step: nothing to judge
    assert ar_estimate_s(s, None) is None


def slow() -> GenStats:  # drafting and bookkeeping cost 3x the steps: AR would be faster
    return gen(0.060, 4, [1, 0, 1, 0], [3, 3, 3, 3], verify_s=0.016, new_tokens=6)


def fast() -> GenStats:  # 3 tokens a step for little host work: the drafter wins
    return gen(0.020, 4, [2, 2, 2, 2], [3, 3, 3, 3], verify_s=0.016, new_tokens=12)


def run(fb: ArFallback, stats: GenStats, n: int) -> list[bool]:
    """n generations: which ran AR; the drafter's ones are observed."""
    used = []
    for _ in range(n):
        ar = fb.use_ar()
        used.append(ar)
        if not ar:
            fb.observe(stats, FLAT)
    return used


def test_a_slower_drafter_is_set_aside_for_longer_each_time_and_judged_afresh():
    fb = ArFallback()
    # three drafter generations to judge, then 8 AR ones
    assert run(fb, slow(), 3 + 8) == [False] * 3 + [True] * 8
    assert fb.fallbacks == 1
    # back to the drafter: judged on three fresh generations, then 16 AR ones
    assert run(fb, slow(), 3 + 16) == [False] * 3 + [True] * 16
    assert fb.fallbacks == 2 and fb.state()["ar_generations_left"] == 0
    # now the drafter pays: it stays, and the next setback is short again
    assert run(fb, fast(), 20) == [False] * 20
    assert fb.fallbacks == 2 and fb.level == 0
    used = run(fb, slow(), 16)
    first_ar = used.index(True)  # the decayed sums follow the change within a few generations
    assert 1 <= first_ar <= 6 and used[first_ar : first_ar + 9] == [True] * 8 + [False]  # a hold of 8 again


def test_a_faster_drafter_is_never_set_aside():
    fb = ArFallback()
    assert run(fb, fast(), 50) == [False] * 50
    assert fb.fallbacks == 0 and fb.state()["drafter_vs_ar"] < 1


def test_the_cpu_replays_figures_keep_the_drafter():
    # the CPU typing replay: FastCoder steps of 4 rows at ~39 ms accepting 0.77 nodes a
    # step, plus ~2 ms of drafting: well under AR's ~39 ms a token
    fb = ArFallback()
    s = gen(4 * 0.041, 4, [1, 1, 1, 0], [3, 3, 3, 3], verify_s=4 * 0.039, new_tokens=7)
    for _ in range(20):
        assert not fb.use_ar()
        fb.observe(s, CPU)
    assert fb.fallbacks == 0
