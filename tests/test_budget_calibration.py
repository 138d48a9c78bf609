"""The draft budget's calibration: learned from what is accepted, carried by the session."""

from __future__ import annotations

from fastcoder.budget import CostCurve, StepBudget
from fastcoder.session import Session
from fastcoder.trie import DraftTree

# a CPU-like curve: any tree costs at least twice an AR step
CURVE = CostCurve(ks=[0, 3, 7, 15, 31], seconds=[0.10, 0.21, 0.22, 0.29, 0.37])


def _chain(n: int) -> DraftTree:
    return DraftTree.chain(range(100, 100 + n), "context", prob=1.0)


def test_over_optimistic_trees_are_trimmed_after_rejections() -> None:
    budget = StepBudget(CURVE)
    tree = _chain(31)
    assert len(budget.trim(tree)) > 0  # fresh: trusts the trie enough to draft
    for _ in range(20):
        budget.observe(tree, 0)  # nothing ever accepted
    assert budget.calibration < 0.01
    assert len(budget.trim(_chain(31))) == 0  # no tree pays any more: draft nothing


def test_session_carries_the_calibration_and_reset_forgets_it() -> None:
    session = Session()
    assert session.calibration is None
    assert StepBudget(CURVE, calibration=session.calibration).calibration == StepBudget.INITIAL_CALIBRATION
    session.calibration = 0.05
    assert StepBudget(CURVE, calibration=session.calibration).calibration == 0.05
    session.reset()
    assert session.calibration is None


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
    assert c.best_size(probs, 1.0) == 15 and c.at(3584).best_size(probs, 1.0) == 3


def test_a_curve_measured_under_load_is_measured_again_when_quieter(tmp_path, monkeypatch) -> None:
    import json

    import fastcoder.budget as budget

    monkeypatch.setattr(budget, "_cache_file", lambda key: tmp_path / "c.json")
    runs = iter([{"load_per_cpu": 3.0, "cpu_share": 0.4}, {"load_per_cpu": 0.2, "cpu_share": 0.97}])
    measured = []

    def fake_measure(v):
        measured.append(1)
        return budget.CostCurve([0, 3], [0.1, 0.2]), next(runs)

    monkeypatch.setattr(budget, "_measure_recorded", fake_measure)
    loads = iter([2.9, 0.3, 0.1])  # the load average when each later load looks at the cache
    monkeypatch.setattr(budget, "_loadavg_per_cpu", lambda: next(loads))
    budget.load_or_measure(None, "k")  # measured while others took 60% of the CPU
    assert len(measured) == 1 and json.loads((tmp_path / "c.json").read_text())["cpu_share"] == 0.4
    budget.load_or_measure(None, "k")  # still as busy: the cached curve
    assert len(measured) == 1
    budget.load_or_measure(None, "k")  # quieter now: measured again, and recorded as uncontended
    assert len(measured) == 2 and json.loads((tmp_path / "c.json").read_text())["cpu_share"] == 0.97
    budget.load_or_measure(None, "k")  # an uncontended curve is kept whatever the load
    assert len(measured) == 2


def test_measuring_records_how_contended_the_cpu_was(tiny_model) -> None:
    import fastcoder.budget as budget
    from fastcoder.verifier import Verifier

    v = Verifier(tiny_model, buckets=(1, 4))
    curve, conditions = budget._measure_recorded(v)
    assert 0.0 < conditions["cpu_share"] <= 1.0 and conditions["load_per_cpu"] >= 0.0
    assert curve.ks == [0, 3] and 2048 in curve.by_length
