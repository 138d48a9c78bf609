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
