"""Plain AR for a document while its drafter is measured slower than AR would be.

Speculative decoding pays only when the tokens a step accepts outweigh what drafting and
the wider step cost. On a 2-vCPU CPU it does by far (the typing replay: FastCoder 31 ms
per token, AR 50), but on an H200 the editor's short generations made FastCoder slower
than AR (model-run p50 45 against 27 ms, 2026-11-26): a GPU step costs ~4 ms whatever its
rows, and the host's drafting and bookkeeping come on top of each one. The output is the
same either way (both are greedy AR's), so the server may pick whichever is faster.

After each drafter generation of a document, :class:`ArFallback` compares what it cost
(its decode time: drafting, steps, bookkeeping; the prefill is the same for both) with
what AR would have spent on the same tokens: one step per token the steps produced, each
priced from the generation's own verify steps (forward, inputs, walk, compaction) scaled
by the cost curve to a 1-row step, c(0) / c(rows). So the estimate carries the machine's
load, the attended width and the device as they were, and the curve only gives the ratio.
Both are decayed sums over the document's recent generations (:attr:`DECAY`). Once at
least :attr:`MIN_GENERATIONS` were seen and the drafter's sum exceeds AR's by more than
:attr:`MARGIN`, the document's next :attr:`HOLDS` generations run plain AR (8, then 16, 32,
64 while the drafter keeps losing; back to 8 once it wins); then the drafter runs again
and is judged on fresh generations.
"""

from __future__ import annotations

from typing import Any

from fastcoder.stats import GenStats


class ArFallback:
    """One document's choice between its drafter and plain AR (see the module)."""

    DECAY = 0.8
    """Weight of the past per new generation in both sums."""
    MIN_GENERATIONS = 3
    """Drafter generations (with at least one decode step) seen before any judgement."""
    MARGIN = 1.1
    """The drafter must cost more than this times AR's estimate to be set aside (the
    estimate leaves out AR's own small host work per step)."""
    HOLDS = (8, 16, 32, 64)
    """Generations run as AR after each successive judgement against the drafter."""

    def __init__(self) -> None:
        self.drafter_s = 0.0  # decayed sum of the drafter's decode seconds
        self.ar_s = 0.0  # decayed sum of AR's estimated seconds for the same tokens
        self.seen = 0  # drafter generations since the last judgement
        self.hold = 0  # AR generations still to run
        self.level = 0  # index into HOLDS of the next hold
        self.fallbacks = 0  # times the drafter was set aside

    def use_ar(self) -> bool:
        """Whether the next generation runs plain AR (counts it against the hold)."""
        if self.hold > 0:
            self.hold -= 1
            return True
        return False

    def observe(self, stats: GenStats, curve: Any) -> None:
        """A finished drafter generation: ``stats`` as the engine gave it, ``curve`` the
        engine's :class:`fastcoder.budget.CostCurve` (None: nothing to judge by)."""
        ar = ar_estimate_s(stats, curve)
        if ar is None:
            return
        d = self.DECAY
        self.drafter_s = d * self.drafter_s + stats.decode_s
        self.ar_s = d * self.ar_s + ar
        self.seen += 1
        if self.seen < self.MIN_GENERATIONS:
            return
        if self.drafter_s > self.MARGIN * self.ar_s:
            self.hold = self.HOLDS[self.level]
            self.level = min(self.level + 1, len(self.HOLDS) - 1)
            self.fallbacks += 1
            self.drafter_s = self.ar_s = 0.0
            self.seen = 0
        elif self.drafter_s < self.ar_s:
            self.level = 0

    def state(self) -> dict:
        """For ``fastcoder.stats``."""
        ratio = self.drafter_s / self.ar_s if self.ar_s > 0 else None
        return {"ar_generations_left": self.hold, "fallbacks": self.fallbacks,
                "drafter_vs_ar": None if ratio is None else round(ratio, 3)}  # fmt: skip


def ar_estimate_s(stats: GenStats, curve: Any) -> float | None:
    """What plain AR would have spent decoding the tokens of a drafter generation
    (see the module), or None when the generation had no decode step or no curve."""
    steps = stats.forward_steps
    if curve is None or steps <= 0 or not stats.draft_sizes:
        return None
    curve = curve.at(stats.prompt_tokens + stats.new_tokens)
    # tokens the steps produced (each step: its accepted nodes and a bonus), as far as
    # they were kept: AR would have run one step for each
    produced = sum(stats.accept_lengths) + steps
    ar_steps = min(produced, stats.decoded_tokens + 1)
    verify_s = stats.forward_s + stats.prep_s + stats.walk_s + stats.compact_s
    rows_cost = sum(curve.cost(n) for n in stats.draft_sizes) / len(stats.draft_sizes)
    if rows_cost <= 0:
        return None
    return ar_steps * (verify_s / steps) * curve.cost(0) / rows_cost
