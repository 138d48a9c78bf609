"""The draft budget's acceptance model: learned from what is accepted, carried by the session."""

from __future__ import annotations

import random

import pytest

from fastcoder.budget import AcceptanceModel, CostCurve, StepBudget
from fastcoder.config import DecodeConfig
from fastcoder.session import Session
from fastcoder.trie import DraftTree, WeightedTrie

# a CPU-like curve: any tree costs at least twice an AR step
CURVE = CostCurve(ks=[0, 3, 7, 15, 31], seconds=[0.10, 0.21, 0.22, 0.29, 0.37])
# a flat one: 4 rows cost what 1 row does (bf16 with packed weights on an AVX512-BF16 CPU)
FLAT = CostCurve(ks=[0, 3, 7, 15, 31], seconds=[0.052, 0.052, 0.060, 0.088, 0.135])


def _chain(n: int, agree: int = 1) -> DraftTree:
    tree = DraftTree.chain(range(100, 100 + n), "context", prob=1.0)
    tree.agree = [agree] * n  # drafted by this many sources
    return tree


def test_rejected_trees_are_trimmed_to_nothing() -> None:
    budget = StepBudget(CURVE)
    assert len(budget.trim(_chain(31, agree=3))) > 0  # fresh: trusts a chain three sources drafted enough to draft
    assert len(budget.trim(_chain(31, agree=1))) == 0  # not one that one source drafted, where a tree costs 2 steps
    for _ in range(60):
        tree = budget.trim(_chain(31, agree=3))
        if not len(tree):
            break
        budget.observe(tree, [])  # its first node never accepted
    assert len(budget.trim(_chain(31, agree=3))) == 0  # no tree pays any more: draft nothing
    assert budget.acceptance.q(1, 1.0, 3) < AcceptanceModel.PRIOR_SCALES[2]  # learned down from the prior


def test_accepted_chains_earn_deeper_trees() -> None:
    budget = StepBudget(FLAT)
    assert len(budget.trim(_chain(31))) == 3  # one source: 0.4, 0.16, 0.06 expected tokens: free in bucket 4, not worth 8
    fresh = len(budget.trim(_chain(31, agree=2)))
    assert fresh == 7  # two sources: 0.7, 0.49, 0.34, ...: bucket 8, not 16
    for _ in range(30):
        tree = budget.trim(_chain(31, agree=2))
        budget.observe(tree, list(range(len(tree))))  # always all accepted
    assert len(budget.trim(_chain(31, agree=2))) > fresh
    assert budget.acceptance.q(2, 1.0, 2) > 0.9


def test_nodes_several_sources_drafted_are_trusted_more_and_learned_apart() -> None:
    m = AcceptanceModel()
    assert m.q(1, 0.9, 1) < m.q(1, 0.9, 2) < m.q(1, 0.9, 3) == m.q(1, 0.9, 7)  # 3 or more: one cell
    # root -> a (share 0.55, one source) | b (share 0.45, two sources): b first
    tree = DraftTree([10, 20], [-1, -1], [1, 1], ["D_r", "context"], [0.55, 0.45], [1, 2])
    out, shares = m.rescore(tree)
    assert out.tokens == [20, 10] and out.agree == [2, 1] and shares == [0.45, 0.55]
    m.observe(out.depths, out.parents, shares, [0], out.agree)  # b accepted, a rejected (root children: both tested)
    assert m.cells[m._cell(1, 0.45, 2)] == [1, 1] and m.cells[m._cell(1, 0.55, 1)] == [1, 0]
    old = AcceptanceModel(agreement=False)  # the model before: one cell whatever the agreement, prior 0.6
    assert old.q(1, 1.0, 1) == old.q(1, 1.0, 3) == 0.6
    assert old.rescore(tree)[0].tokens == [10, 20]
    assert Session(DecodeConfig(source_agreement=False)).acceptance.agreement is False
    session = Session()
    assert session.acceptance.agreement is True
    session.acceptance.agreement = False
    session.reset()
    assert session.acceptance.agreement is False  # a reset keeps the session's kind of model


def test_a_chain_only_budget_keeps_the_likeliest_path_alone() -> None:
    """Where the verifier accepts along the path of first children only (``exact_paths``)
    the budget cuts the rescored tree to that path, adaptive or fixed; elsewhere the
    siblings stay (a flat curve keeps every node it can)."""
    # root -> a(0) -> b(1) -> c(2); root -> x(3) (a decoy beside a); a -> y(4)
    tree = DraftTree([10, 11, 12, 20, 21], [-1, 0, 1, -1, 0], [1, 2, 3, 1, 2], ["s"] * 5, [0.9, 0.9, 0.9, 0.1, 0.05])
    flat = CostCurve(ks=[0, 7, 15], seconds=[0.05, 0.05, 0.05])
    assert len(StepBudget(flat).trim(tree)) == 5
    chain = StepBudget(flat, chain_only=True).trim(tree)
    assert chain.tokens == [10, 11, 12] and chain.parents == [-1, 0, 1]
    assert StepBudget(None, chain_only=True).trim(tree).tokens == [10, 11, 12]  # no curve: cut too
    assert StepBudget(None).trim(tree) is tree
    budget = StepBudget(flat, chain_only=True)
    budget.observe(budget.trim(tree), [0, 1])  # learns from the chain's nodes only
    assert sum(seen for seen, _ in budget.acceptance.cells.values()) == 3


def test_only_tested_nodes_are_counted() -> None:
    m = AcceptanceModel()
    # root -> a (0) -> b (1); root -> c (2): a rejected, so b was never tested
    m.observe([1, 2, 1], [-1, 0, -1], [1.0, 1.0, 0.5], [])
    assert m.cells[m._cell(1, 1.0)] == [1, 0] and m.cells[m._cell(1, 0.5)] == [1, 0]
    assert m._cell(2, 1.0) not in m.cells
    m.observe([1, 2, 1], [-1, 0, -1], [1.0, 1.0, 0.5], [0, 1])
    assert m.cells[m._cell(1, 1.0)] == [2, 1] and m.cells[m._cell(2, 1.0)] == [1, 1]


def test_rescore_keeps_the_tree_and_orders_it_best_first() -> None:
    rng = random.Random(0)
    m = AcceptanceModel()
    m.observe([1, 2, 3], [-1, 0, 1], [1.0, 1.0, 1.0], [0, 1, 2])  # some learned cells too
    for _ in range(50):
        trie = WeightedTrie()
        for _ in range(rng.randint(1, 6)):
            path = tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 6)))
            trie.add([(path[:d], 1) for d in range(1, len(path) + 1)], "D_r", weight=rng.random() + 0.1)
        tree = trie.select(64)
        out, shares = m.rescore(tree)

        def paths(t):
            res = []
            for i in range(len(t)):
                p, seq = i, []
                while p >= 0:
                    seq.append(t.tokens[p])
                    p = t.parents[p]
                res.append(tuple(reversed(seq)))
            return res

        assert sorted(paths(out)) == sorted(paths(tree))  # the same nodes, the same tree
        assert all(p < i for i, p in enumerate(out.parents))  # parents before children
        assert all(a >= b for a, b in zip(out.probs, out.probs[1:]))  # best-first
        assert len(shares) == len(out) and all(0.0 <= s <= 1.0 for s in shares)
        for i, p in enumerate(out.parents):  # a path's chance is its parent's times the node's
            assert abs(out.probs[i] - m.q(out.depths[i], shares[i], out.agree[i]) * (out.probs[p] if p >= 0 else 1.0)) < 1e-12


def test_session_carries_the_model_and_reset_forgets_it() -> None:
    session = Session()
    budget = StepBudget(CURVE, acceptance=session.acceptance)
    tree = budget.trim(_chain(31, agree=3))
    budget.observe(tree, [])
    assert session.acceptance.cells  # learned into the session's model
    assert StepBudget(CURVE, acceptance=session.acceptance).acceptance is session.acceptance
    session.reset()
    assert not session.acceptance.cells


def test_the_curve_follows_the_attended_length_and_round_trips() -> None:
    from fastcoder.budget import CostCurve

    c = CostCurve([0, 3, 15], [0.10, 0.11, 0.15], 512, {2048: [0.12, 0.15, 0.31]})
    assert c.at(100).seconds == [0.10, 0.11, 0.15]  # below the shortest: the shortest
    mid = c.at(1280).seconds  # halfway
    assert [round(x, 3) for x in mid] == [0.11, 0.13, 0.23]
    far = c.at(3584).seconds  # beyond: the last segment's slope
    assert [round(x, 3) for x in far] == [0.14, 0.19, 0.47]
    assert CostCurve.from_json(c.to_json()) == c
    assert CostCurve.from_json({"ks": [0, 3], "seconds": [0.1, 0.2]}).at(4096).seconds == [0.1, 0.2]  # old reports
    # the budget reads the curve at the step's length: 15 nodes pay at 512 rows (5.8
    # expected tokens in 0.15 s against 3.4 in 0.11 s) but not at 3,584 rows (0.47 s)
    probs = [0.9, 0.8, 0.7] + [0.2] * 12
    assert c.best_size(probs) == 15 and c.at(3584).best_size(probs) == 3


def test_a_curve_measured_under_load_is_measured_again_when_quieter(tmp_path, monkeypatch) -> None:
    import json

    import fastcoder.budget as budget

    monkeypatch.setattr(budget, "_cache_file", lambda key: tmp_path / "c.json")
    runs = iter([{"load_per_cpu": 3.0, "cpu_share": 0.4}, {"load_per_cpu": 0.2, "cpu_share": 0.97}])
    measured = []

    class FakeMeasurement:  # what was measured, and how busy the CPU was meanwhile
        def __init__(self, verifier, lengths, rounds=5):
            measured.append(1)

        def run(self, stop=lambda: False):
            return True

        def curve(self):
            return budget.CostCurve([0, 3], [0.1, 0.2])

        def conditions(self):
            return next(runs)

    def load_or_measure():  # what Engine.cost_curve does with the cache
        curve, due = budget.load_cached("k")
        if curve is None or due:
            budget.save_measured("k", FakeMeasurement(None, (512,)))

    loads = iter([2.9, 0.3, 0.1])  # the load average when each later load looks at the cache
    monkeypatch.setattr(budget, "_loadavg_per_cpu", lambda: next(loads))
    load_or_measure()  # measured while others took 60% of the CPU
    assert len(measured) == 1 and json.loads((tmp_path / "c.json").read_text())["cpu_share"] == 0.4
    load_or_measure()  # still as busy: the cached curve
    assert len(measured) == 1
    load_or_measure()  # quieter now: measured again, and recorded as uncontended
    assert len(measured) == 2 and json.loads((tmp_path / "c.json").read_text())["cpu_share"] == 0.97
    load_or_measure()  # an uncontended curve is kept whatever the load
    assert len(measured) == 2


def test_measuring_records_how_contended_the_cpu_was(tiny_model) -> None:
    import fastcoder.budget as budget
    from fastcoder.verifier import Verifier

    v = Verifier(tiny_model, buckets=(1, 4))
    measurement = budget.CurveMeasurement(v, budget.usable_lengths(v))
    curve = measurement.finish()
    conditions = measurement.conditions()
    assert 0.0 < conditions["cpu_share"] <= 1.0 and conditions["load_per_cpu"] >= 0.0
    assert curve.ks == [0, 3] and 2048 in curve.by_length


def test_a_measurement_stops_between_units_and_goes_on_later(tiny_model) -> None:
    """A server measures its first curve in the model thread's idle time: the measurement
    stops between any two units (a piece of its context's prefill, one size's steps of a
    round) and goes on where it stopped, whatever ran on the verifier meanwhile (another
    document's generation on its own cache)."""
    import fastcoder.budget as budget
    from fastcoder.verifier import KVState, Verifier

    v = Verifier(tiny_model, buckets=(1, 4, 8))
    m = budget.CurveMeasurement(v, (600, 1100), rounds=2)
    # prefill pieces of 256 tokens (3 + 5), each in both CPU prefill chunks, then 2 rounds
    # of the sizes per length (the buckets', and 6 rows where steps run the rows they have)
    assert m.ks == ([0, 3, 7] if v.padded else [0, 3, 5, 7])
    assert m.units_total == (3 + 5) * 2 + 2 * 2 * len(m.ks)
    other = KVState()
    calls = 0
    while not m.done:
        before = m.units_done
        stopped = m.run(stop=lambda: m.units_done > before)  # one unit, then stop
        assert m.units_done == before + 1 and stopped == m.done
        v.prefill(other, list(range(10, 10 + 5 + calls % 7)))  # someone else's forward in between
        calls += 1
    assert calls == m.units_total
    with pytest.raises(RuntimeError):
        budget.CurveMeasurement(v, (600,)).curve()  # not measured yet
    curve = m.curve()
    assert curve.ks == m.ks and curve.context_len == 600 and list(curve.by_length) == [1100]
    for seconds in (curve.seconds, curve.by_length[1100]):
        assert all(0 < a <= b for a, b in zip(seconds, seconds[1:]))  # measured, non-decreasing


def test_draft_cost_fits_a_fixed_part_and_a_cost_per_node() -> None:
    from fastcoder.budget import DraftCost

    cost = DraftCost()
    assert cost.coefficients() is None
    cost.observe(16, 0.0008)
    assert cost.coefficients() == pytest.approx((0.0, 0.00005))  # one size seen: proportional
    for m in (8, 64, 16, 32) * 5:
        cost.observe(m, 0.0003 + 0.00002 * m)
    a, b = cost.coefficients()
    assert a == pytest.approx(0.0003, rel=0.05) and b == pytest.approx(0.00002, rel=0.05)
    frozen = DraftCost(fixed=(0.001, 0.0))
    frozen.observe(8, 1.0)
    assert frozen.coefficients() == (0.001, 0.0)


def test_requests_shrink_where_drafting_costs_more_than_nodes_bring() -> None:
    from fastcoder.budget import DraftCost

    gpu = CostCurve(ks=[0, 3, 7, 15, 31, 63], seconds=[0.004] * 6)  # an H100's: any size costs the same

    def requests(per_node_s: float, prob: float) -> list[int]:
        budget = StepBudget(gpu, draft_cost=DraftCost(fixed=(0.0, per_node_s)))
        asked = []
        for _ in range(4):
            asked.append(budget.request(64))
            tree = DraftTree.chain(range(100, 100 + asked[-1]), "context", prob=prob)
            budget.trim(tree)
        return asked

    assert requests(0.0, 1.0)[0] == 64  # nothing learned yet: the most
    # drafting is free and every drafted node is worth verifying: the request stays the most
    assert requests(0.0, 1.0)[-1] == 64
    # each node costs 1 ms to draft (a quarter of a step): only the first few are worth it
    cheap, dear = requests(0.0, 1.0), requests(0.001, 1.0)
    assert dear[-1] < cheap[-1] and dear[-1] in StepBudget.REQUEST_SIZES


def test_step_calibration_learns_what_steps_cost_against_the_curve() -> None:
    from fastcoder.budget import StepCalibration

    cal = StepCalibration()
    assert cal.factors() == (1.0, 1.0)
    assert cal.adjust(FLAT) is FLAT  # nothing measured: the curve as it is
    for _ in range(300):  # 1-row steps at 1.5x c(0); a 7-node tree's extra rows at 2x the curve's
        cal.observe(FLAT, 0, 1.5 * FLAT.cost(0))
        cal.observe(FLAT, 7, 1.5 * FLAT.cost(0) + 2.0 * (FLAT.cost(7) - FLAT.cost(0)))
    f0, r = cal.factors()
    assert f0 == pytest.approx(1.5, rel=0.01)
    # the tree rows cost 2 / 1.5 of the curve's once scaled by f0; the ratio's prior (1, never
    # decayed) keeps it between: (n * 4/3 + W) / (n + W), n the decayed weight of the data
    n, w = 1 / (1 - StepCalibration.DECAY), StepCalibration.RATIO_PRIOR_STEPS
    assert 1.0 < r == pytest.approx((n * 4 / 3 + w) / (n + w), rel=0.01)
    adjusted = cal.adjust(FLAT)
    for s, a in zip(FLAT.seconds, adjusted.seconds):
        assert a == pytest.approx(f0 * (FLAT.seconds[0] + r * (s - FLAT.seconds[0])))
    for _ in range(300):  # a wild step cannot push a factor past its limits
        cal.observe(FLAT, 0, 100.0)
    assert cal.factors()[0] == StepCalibration.LIMITS[1]
    assert cal.to_json()["base"] == StepCalibration.LIMITS[1]


def test_a_calibrated_budget_drafts_less_where_tree_rows_cost_more() -> None:
    from fastcoder.budget import StepCalibration

    mild = CostCurve(ks=[0, 3, 7, 15, 31], seconds=[0.050, 0.060, 0.070, 0.095, 0.140])  # 4 rows 1.2x one
    plain = StepBudget(mild)
    cal = StepCalibration()
    dear = StepBudget(mild, calibration=cal)
    fresh = len(plain.trim(_chain(31)))
    assert fresh >= 2 and len(dear.trim(_chain(31))) == fresh  # nothing measured yet: the same tree
    assert dear.step_s == pytest.approx(plain.step_s)
    for _ in range(200):  # measured: 1-row steps as the curve says, a tree's rows 6x dearer (counted as 4x: the limit)
        dear.trim(DraftTree())
        dear.observe_step(0, mild.cost(0))
        tree = dear.trim(_chain(3))
        dear.observe_step(len(tree), mild.cost(0) + 6 * (mild.cost(len(tree)) - mild.cost(0)))
    assert cal.factors()[0] == pytest.approx(1.0) and cal.factors()[1] > 2  # (once no tree pays, none is timed)
    tree = dear.trim(_chain(31))
    assert len(tree) < fresh  # the same chain, priced as measured
    assert dear.step_s == pytest.approx(cal.adjust(mild).cost(len(tree)))  # what the source gate weighs
    # a budget without a curve prices nothing and learns nothing
    bare = StepBudget(None, calibration=StepCalibration())
    bare.trim(_chain(3))
    bare.observe_step(3, 1.0)
    assert bare.calibration.to_json()["steps"] == [0.0, 0.0]


def test_the_decode_loop_feeds_the_engines_calibration(tiny_model, tiny_tokenizer) -> None:
    """Every verify step of a budgeted generation is timed into the engine's calibration
    (``step_calibration``); the output is AR's either way."""
    from fastcoder.engine import Engine

    engine = Engine(tiny_model, tiny_tokenizer, name="tiny-calibration")
    prompt = list(range(5, 40)) * 3
    ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=24)).tokens
    off = engine.generate(prompt, DecodeConfig(method="fastcoder", max_new_tokens=24))  # off by default
    assert engine.calibration.to_json()["steps"] == [0.0, 0.0]
    on = engine.generate(prompt, DecodeConfig(method="fastcoder", max_new_tokens=24, step_calibration=True))
    steps = engine.calibration.to_json()["steps"]
    assert sum(steps) > 0 and on.stats.forward_steps >= 1
    assert on.tokens == off.tokens == ar


def test_a_cost_curve_is_cached_per_machine_and_thread_count(tiny_model, tiny_tokenizer, monkeypatch) -> None:
    """The curve's cache key names the CPU and the torch threads (a curve cached on
    another machine, or with other threads, is measured again); a curve put in by hand
    restarts the step calibration."""
    import torch

    import fastcoder.engine as engine_mod
    from fastcoder.budget import StepCalibration
    from fastcoder.matmul import cpu_name

    keys: list[str] = []
    monkeypatch.setattr(engine_mod, "load_cached", lambda key: keys.append(key) or (FLAT, False))
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            engine_mod.Engine(tiny_model, tiny_tokenizer, name="tiny-key").cost_curve()
    finally:
        torch.set_num_threads(threads)
    assert len(keys) == 2 and keys[0] != keys[1]
    assert all(cpu_name() in k and f"torch{torch.__version__}" in k for k in keys)
    assert keys[0].endswith(f"|t1|torch{torch.__version__}")
    from fastcoder.matmul import KERNEL_FLAGS, cpu_flags

    assert ",".join(sorted(cpu_flags() & KERNEL_FLAGS)) in keys[0]  # the kernels' flags too
    engine = engine_mod.Engine(tiny_model, tiny_tokenizer, name="tiny-key")
    engine.calibration.observe(FLAT, 0, 1.0)
    engine.use_cost_curve(CURVE)
    assert engine.cost_curve() is CURVE and engine.calibration.to_json()["steps"] == [0.0, 0.0]
    assert isinstance(engine.calibration, StepCalibration)


def test_a_deferred_cost_curve_runs_generations_as_ar_until_measured(tiny_model, tiny_tokenizer) -> None:
    """With no curve cached, ``defer_cost_curve`` leaves the measurement to the caller's
    idle time (``measure_some``, stopping between units); until it is done a drafting
    generation runs as plain AR (the same tokens, ``curve_pending``); then the curve is
    cached for the next engine and generations draft again."""
    from fastcoder.config import DecodeConfig
    from fastcoder.engine import Engine

    engine = Engine(tiny_model, tiny_tokenizer, name=f"tiny-deferred-{type(tiny_model).__name__}")
    assert engine.cached_cost_curve() is None and engine.curve_state() == {"state": "none"}
    assert engine.defer_cost_curve()
    prompt = list(range(10, 60)) * 2
    ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=16)).tokens
    early = engine.generate(prompt, DecodeConfig(method="fastcoder", max_new_tokens=16))
    assert early.stats.curve_pending and early.tokens == ar and early.stats.draft_tokens == 0
    done = []
    assert not engine.measure_some(stop=lambda: len(done) >= 3 or done.append(1))  # three units
    state = engine.curve_state()
    assert state["state"] == "measuring" and state["units"][0] == 3 and state["units"][1] > 3
    assert engine.measure_some(stop=lambda: False) and engine.curve_state() == {"state": "measured"}
    later = engine.generate(prompt, DecodeConfig(method="fastcoder", max_new_tokens=16))
    assert not later.stats.curve_pending and later.tokens == ar
    again = Engine(tiny_model, tiny_tokenizer, name=engine.name)
    assert not again.defer_cost_curve() and again.curve_state() == {"state": "cache"}
    assert again.cost_curve().seconds == engine.cost_curve().seconds


def _priced_by(monkeypatch) -> list:
    """The cost curve each ``Engine.generate`` passes to the decode loop (None: unpriced)."""
    import fastcoder.engine as engine_mod

    curves: list = []
    loop = engine_mod.generate

    def spy(*args, **kw):
        curves.append(kw.get("cost_curve"))
        return loop(*args, **kw)

    monkeypatch.setattr(engine_mod, "generate", spy)
    return curves


def test_a_deferred_measurement_prices_trees_by_its_first_round(tiny_model, tiny_tokenizer, tmp_path, monkeypatch) -> None:
    """Once every size was timed at every length (the first round), generations are priced
    by that round's curve instead of running as plain AR until the whole measurement is
    done; the same tokens; the finished curve replaces it."""
    from fastcoder.engine import Engine

    monkeypatch.setenv("FASTCODER_CACHE", str(tmp_path))
    engine = Engine(tiny_model, tiny_tokenizer, name="tiny-provisional")
    assert engine.defer_cost_curve()
    m = engine._measuring
    prompt = list(range(10, 60)) * 2
    ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=16)).tokens
    priced = _priced_by(monkeypatch)
    assert engine.curve_state()["meanwhile"] == "none" and m.provisional() is None
    assert engine.generate(prompt, DecodeConfig(method="fastcoder", max_new_tokens=16)).stats.curve_pending
    assert len(m.lengths) > 1
    assert not engine.measure_some(stop=lambda: m.provisional_ready)
    # the first length's context and round only: the longer contexts are not prefilled yet
    assert set(m._kvs) == {m.lengths[0]} and m.units_done < m.units_total / 4
    state = engine.curve_state()
    assert state["state"] == "measuring" and state["meanwhile"] == "provisional" and state["units"][0] < state["units"][1]
    gen = engine.generate(prompt, DecodeConfig(method="fastcoder", max_new_tokens=16))
    assert not gen.stats.curve_pending and gen.tokens == ar
    first = priced[-1]
    assert first is not None and first.seconds == m.provisional().seconds and first.by_length == {}  # (at() then takes it for every length)
    assert not engine.measure_some(stop=lambda: m._round >= 1)  # the first round at every length
    assert set(m.provisional().by_length) == set(m.lengths[1:])
    assert engine.generate(prompt, DecodeConfig(method="fastcoder", max_new_tokens=16)).tokens == ar
    assert priced[-1].by_length.keys() == set(m.lengths[1:])
    assert engine.measured_curve() is None  # (not the machine's curve yet: nothing cached, no prefill chunk chosen)
    assert engine.measure_some(stop=lambda: False) and engine.curve_state() == {"state": "measured"}
    assert engine.generate(prompt, DecodeConfig(method="fastcoder", max_new_tokens=16)).tokens == ar
    assert priced[-1] is engine.measured_curve()


def test_a_cached_curve_due_again_prices_trees_until_measured_again(tiny_model, tiny_tokenizer, tmp_path, monkeypatch) -> None:
    """A cached curve measured under load, with the machine quieter now, is measured again;
    deferred (a server), the old curve prices trees meanwhile instead of plain AR; not
    deferred (a benchmark, CUDA), it is measured at once."""
    import json

    import fastcoder.budget as budget
    from fastcoder.engine import Engine

    monkeypatch.setenv("FASTCODER_CACHE", str(tmp_path))
    monkeypatch.setattr(budget, "_loadavg_per_cpu", lambda: 0.2)
    engine = Engine(tiny_model, tiny_tokenizer, name="tiny-due-again")
    path = budget._cache_file(engine._curve_key())

    def contended() -> None:  # measured while others took 60% of the CPU, at a load of 3 a CPU
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**FLAT.to_json(), "version": budget.CURVE_VERSION, "load_per_cpu": 3.0, "cpu_share": 0.4}))

    contended()
    assert budget.load_cached(engine._curve_key())[1]  # due again
    assert engine.defer_cost_curve()
    assert engine.curve_state()["meanwhile"] == "cache"
    priced = _priced_by(monkeypatch)
    prompt = list(range(10, 60)) * 2
    gen = engine.generate(prompt, DecodeConfig(method="fastcoder", max_new_tokens=16))
    assert not gen.stats.curve_pending and priced[-1].seconds == FLAT.seconds  # the old curve meanwhile
    assert engine.measure_some(stop=lambda: False) and engine.curve_state() == {"state": "measured"}
    saved = json.loads(path.read_text())
    assert saved["seconds"] == engine.measured_curve().seconds != FLAT.seconds and saved["load_per_cpu"] == 0.2
    contended()
    now = Engine(tiny_model, tiny_tokenizer, name="tiny-due-again")
    assert now.cost_curve().seconds != FLAT.seconds and now.curve_state() == {"state": "measured"}


def test_a_measurement_interleaves_its_lengths_and_holds_short_ones_below_long_ones(tiny_model, monkeypatch) -> None:
    """Every round times every size at every length (a slow spell of a shared machine falls
    on all lengths alike), and a length's curve never exceeds a longer length's: a step
    attending fewer rows never costs more (forty-seventh session: measured one after the
    other, 512 rows fell in a slow spell, 1 row 146 ms there against 110 at 2,048, and
    trees looked free at short contexts)."""
    import fastcoder.budget as budget
    from fastcoder.verifier import Verifier

    v = Verifier(tiny_model, buckets=(1, 4, 8))
    m = budget.CurveMeasurement(v, (300, 700), rounds=2)
    order: list[tuple[int, int]] = []
    step = v.step

    def spy(kv, root, tree, **kw):
        order.append((len(kv.ids), len(tree)))
        return step(kv, root, tree, **kw)

    monkeypatch.setattr(v, "step", spy)
    m.finish()
    timed = order[1::2]  # each size's warm step, then its timed one
    sizes = len(m.ks)
    assert [n for n, _ in timed] == ([300] * sizes + [700] * sizes) * 2  # round 1: both lengths, round 2: both
    assert [k for _, k in timed[:sizes]] == m.ks
    # a slow spell on the short length's samples only: its curve is held at the long one's
    m.best[300] = [9.0] * sizes
    m.best[700] = [1.0 + 0.1 * j for j in range(sizes)]
    curve = m.curve()
    assert curve.seconds == curve.by_length[700] == m.best[700]
    m.best[300] = [0.5 + 0.2 * j for j in range(sizes)]  # below it: kept (non-decreasing, at most the long one's)
    curve = m.curve()
    assert curve.seconds == [min(0.5 + 0.2 * j, 1.0 + 0.1 * j) for j in range(sizes)]
