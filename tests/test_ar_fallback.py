"""lsp_server/fallback.py: a document runs plain AR while its drafter is measured slower
than AR, and goes back to the drafter to be judged again; AR's step cost comes from real
AR generations (the fallback's own and periodic probes)."""

from __future__ import annotations

import pytest

from fastcoder.stats import GenStats
from lsp_server.fallback import ArFallback, ArPace, ar_steps

AR_STEP = 0.004


def gen(decode_s: float, accepted: list[int], new_tokens: int) -> GenStats:
    s = GenStats(method="fastcoder", prompt_tokens=400, new_tokens=new_tokens, forward_steps=len(accepted), merged_tail=3)
    s.prefill_s, s.total_s = 0.01, 0.01 + decode_s
    s.accept_lengths = accepted
    return s


def test_ar_steps_count_the_tokens_the_steps_produced_as_far_as_kept():
    assert ar_steps(gen(0.03, [2, 1, 0], 6)) == 6  # 3 steps, 3 accepted: 6 tokens
    assert ar_steps(gen(0.03, [2, 1, 3], 4)) == 5  # a stop inside the last step's nodes (and the stop token)


def slow() -> GenStats:  # 6 tokens in 4 steps, but 60 ms of decoding: AR would take 6 x 4 ms
    return gen(0.060, [1, 0, 1, 0], 6)


def fast() -> GenStats:  # 12 tokens for 20 ms: AR would take 48
    return gen(0.020, [2, 2, 2, 2], 12)


def run(fb: ArFallback, stats: GenStats, n: int) -> list[bool]:
    """n generations: which ran AR; the drafter's ones are observed."""
    used = []
    for _ in range(n):
        ar = fb.use_ar()
        used.append(ar)
        if not ar:
            fb.observe(stats, AR_STEP)
    return used


def test_a_slower_drafter_is_set_aside_for_longer_each_time_and_judged_afresh():
    fb = ArFallback()
    # the document's warm-up, three drafter generations to judge, then 8 AR ones
    assert run(fb, slow(), 3 + 3 + 8) == [False] * 6 + [True] * 8
    assert fb.fallbacks == 1
    # back to the drafter (no second warm-up): judged on three fresh generations, then 16 AR ones
    assert run(fb, slow(), 3 + 16) == [False] * 3 + [True] * 16
    assert fb.fallbacks == 2 and fb.state()["ar_generations_left"] == 0
    # now the drafter pays: it stays, and the next setback is short again
    assert run(fb, fast(), 20) == [False] * 20
    assert fb.fallbacks == 2 and fb.level == 0
    used = run(fb, slow(), 16)
    first_ar = used.index(True)  # the decayed sums follow the change within a few generations
    assert 1 <= first_ar <= 6 and used[first_ar : first_ar + 9] == [True] * 8 + [False]  # a hold of 8 again


def test_a_faster_drafter_is_never_set_aside_and_nothing_is_judged_before_ar_is_priced():
    fb = ArFallback()
    assert run(fb, fast(), 50) == [False] * 50
    assert fb.fallbacks == 0 and fb.state()["drafter_vs_ar"] < 1
    unpriced = ArFallback()
    for _ in range(10):
        unpriced.observe(slow(), None)
    assert not unpriced.use_ar() and unpriced.seen == 0


def test_a_block_answered_early_is_judged_up_to_its_answer():
    # fast over the whole generation (12 tokens for 20 ms: AR 48), but its early answer
    # came after 14 ms for 2 tokens, which AR gives in 8: what the user waited for counts
    fb = ArFallback()
    for _ in range(ArFallback.WARMUP + 3):
        assert not fb.use_ar()
        fb.observe(fast(), AR_STEP, answered=(0.014, 2))
    assert fb.fallbacks == 1 and fb.use_ar()
    # the same generations answered after 6 ms for 2 tokens: the drafter stays
    fb = ArFallback()
    for _ in range(20):
        assert not fb.use_ar()
        fb.observe(fast(), AR_STEP, answered=(0.006, 2))
    assert fb.fallbacks == 0


def test_a_documents_first_generations_are_not_weighed():
    """Its warm-up (the acceptance model at its prior, nothing of the model's own output to
    draft from) is left out: three slow first generations, priced or not, then fast ones:
    the drafter stays; three slow ones after the warm-up set it aside as before."""
    fb = ArFallback()
    fb.observe(slow(), None)  # before AR is priced: counts for the warm-up
    for _ in range(ArFallback.WARMUP - 1):
        fb.observe(slow(), AR_STEP)
    assert fb.judged == 0 and fb.drafter_s == 0.0
    assert run(fb, fast(), 10) == [False] * 10 and fb.fallbacks == 0 and fb.judged == 10
    late = ArFallback()
    assert run(late, fast(), ArFallback.WARMUP) + run(late, slow(), 3 + 8) == [False] * 6 + [True] * 8


def test_the_cpu_replays_figures_keep_the_drafter():
    # the CPU typing replay: FastCoder 32 ms a token, AR 51 (steps of ~41 ms accepting 0.8
    # nodes a step on average)
    fb = ArFallback()
    s = gen(4 * 0.041, [1, 1, 1, 0], 7)
    for _ in range(20):
        assert not fb.use_ar()
        fb.observe(s, 0.039)
    assert fb.fallbacks == 0


def test_ar_pace_probes_after_the_first_generations_then_rarely_and_prices_a_step():
    pace = ArPace()
    due = [pace.probe_due() for _ in range(2 + 1 + ArPace.PROBE_EVERY + 1)]
    assert due == [False] * 2 + [True] + [False] * ArPace.PROBE_EVERY + [True]
    assert pace.probes == 2 and pace.step_s is None
    ar = GenStats(method="ar", new_tokens=10, forward_steps=10)
    ar.total_s = 0.05
    pace.observe(ar)
    assert pace.step_s == pytest.approx(0.005)
    ar.total_s = 0.15
    pace.observe(ar)
    assert pace.step_s == pytest.approx(0.7 * 0.005 + 0.3 * 0.015)
    pace.observe(GenStats(method="ar"))  # no decode step (the prefill's token only): nothing
    assert pace.step_s == pytest.approx(0.008)


def test_a_probe_that_priced_nothing_is_tried_again_soon():
    pace = ArPace()
    assert [pace.probe_due() for _ in range(3)] == [False, False, True]
    pace.observe(None)  # cancelled: tried again after FIRST_PROBE drafter generations
    assert [pace.probe_due() for _ in range(3)] == [False, False, True]
    pace.observe(GenStats(method="ar", new_tokens=1))  # the prefill's token was the whole answer
    assert [pace.probe_due() for _ in range(3)] == [False, False, True] and pace.step_s is None
    ar = GenStats(method="ar", new_tokens=5, forward_steps=4)
    ar.total_s = 0.02
    pace.observe(ar)  # priced: the next probe after PROBE_EVERY
    assert not any(pace.probe_due() for _ in range(ArPace.PROBE_EVERY)) and pace.probe_due()
    assert pace.step_s == pytest.approx(0.005)


def test_an_ar_step_is_priced_at_each_generations_length_by_the_curves_shape():
    from fastcoder.budget import CostCurve

    # the H200's shape: 4 ms at 512 cached rows, 5 ms at 2,048; this machine runs 2x slower
    curve = CostCurve([0, 3], [0.004, 0.004], 512, {2048: [0.005, 0.005]})
    pace = ArPace()
    short = GenStats(method="ar", prompt_tokens=500, new_tokens=12, forward_steps=10)
    short.total_s = 10 * 0.008
    pace.observe(short, curve)  # 8 ms a step at ~512 rows: twice the curve's level
    long = GenStats(method="fastcoder", prompt_tokens=2000, new_tokens=48)
    assert pace.step_for(long, curve) == pytest.approx(0.010)  # 2 x 5 ms at 2,048 rows
    assert pace.step_for(short, curve) == pytest.approx(0.008)
    assert pace.step_s == pytest.approx(0.008)  # as measured, for fastcoder.stats
    plain = ArPace()  # no curve loaded: seconds as measured, whatever the length
    plain.observe(short)
    assert plain.step_for(long) == pytest.approx(0.008) and plain.step_for(long, curve) == pytest.approx(0.008)
