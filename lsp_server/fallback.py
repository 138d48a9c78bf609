"""Plain AR for a document while its drafter is measured slower than AR.

Speculative decoding pays only when the tokens a step accepts outweigh what drafting and
the wider step cost. On a 2-vCPU CPU it does by far (the typing replay: FastCoder 31 ms
per token, AR 50), but on an H200 the editor's short generations made FastCoder slower
than AR (model-run p50 45 against 27 ms, 2026-11-26): a GPU step costs ~4 ms whatever its
rows, and the host's drafting and bookkeeping come on top of each one. The output is the
same either way (both are greedy AR's), so the server may run whichever is faster.

:class:`ArPace` (one per server) measures what an AR step costs on this machine now: the
decode seconds per step of real AR generations, the ones the fallback runs and a *probe*
(an AR generation in place of a drafter one) after the first :attr:`ArPace.FIRST_PROBE`
drafter generations and then every :attr:`ArPace.PROBE_EVERY`, so about 3% of generations
(a generation superseded after some steps counts for them; a probe without a decode step
comes again sooner).
(Pricing AR from the cost curve instead, c(0) / c(rows) times the drafter's own steps,
missed a drafter 1.33x slower than AR in a replay: the curve, measured once under other
load, had the 1-row step at 8.8 ms where AR's steps took 2.9.)

An AR step attending more rows costs more (on the H200, 4 ms below 1,024 cached rows and 5
at 2,048; 31 and 34 ms on the CPU): where the engine's cost curve is loaded, a measured step
is kept relative to the curve's 1-row step at that generation's length, c(0, length), and
priced for another generation at its own length the same way; only the curve's shape over
lengths is used, not its level.

:class:`ArFallback` (one per document) sets each drafter generation's decode time
(drafting, steps, bookkeeping; the prefill is the same for both) against what AR would
have spent on the same tokens: one AR step per token its steps produced. A block answered
early is judged up to that answer, what the user waited for: the lines it generates after
it are mostly never shown, and counted whole they hid a drafter that was slower to the
answer (an H100's typing replay, 2026-11-27: FastCoder 3 ms a token against AR's 4 over
whole generations, yet 37 against 31 ms to an early answer, and one hold in 84). Both are
decayed sums over the document's recent generations (:attr:`ArFallback.DECAY`), leaving
out its first :attr:`ArFallback.WARMUP` drafter generations: they run with the document's
acceptance model at its prior and nothing of the model's own output to draft from yet
(a CPU replay's markdown/util.py, 2026-11-27: its first three generations 1.05-1.07 of
AR's price, the next fourteen 0.40-0.84 but two; a hold from such first ones, in 2 of 5
default replays, cost that file a fifth of its speed: docs/bench/fallback-s25). Once at
least :attr:`ArFallback.MIN_GENERATIONS` were seen and the drafter's sum exceeds AR's by
more than :attr:`ArFallback.MARGIN`, the document's next generations run plain AR (8, then
16, 32, 64 while the drafter keeps losing; back to 8 once it wins); then the drafter runs
again and is judged on fresh generations.
"""

from __future__ import annotations

import threading
from typing import Any

from fastcoder.stats import GenStats


class ArPace:
    """What a plain AR decode step costs on this machine, measured from AR generations,
    and when the next probe is due (see the module). Thread-safe."""

    DECAY = 0.7
    """Weight of the past per new AR generation in the per-step estimate."""
    FIRST_PROBE = 2
    """Drafter generations before the first probe (nothing is judged before it)."""
    PROBE_EVERY = 32
    """Drafter generations between probes afterwards."""

    def __init__(self) -> None:
        self.step_s: float | None = None  # the last estimate, as measured (for fastcoder.stats)
        self._relative: float | None = None  # AR's step over the curve's c(0) at its length, or in seconds
        self._per_curve = False  # whether _relative is relative to a curve (else seconds)
        self.probes = 0
        self._until_probe = self.FIRST_PROBE
        self._lock = threading.Lock()

    def probe_due(self) -> bool:
        """Called for each generation the drafter would run: True when this one should
        run AR instead, as a probe (counted; the countdown starts again)."""
        with self._lock:
            if self._until_probe > 0:
                self._until_probe -= 1
                return False
            self._until_probe = self.PROBE_EVERY
            self.probes += 1
            return True

    def observe(self, stats: GenStats | None, curve: Any = None) -> None:
        """A finished AR generation (or one superseded after some steps: they count): its
        decode seconds per step (relative to ``curve``'s 1-row step at its length, a
        :class:`fastcoder.budget.CostCurve`, if given). A probe that priced nothing
        (``stats`` None, or no decode step: cancelled in its prefill, or the prefill's
        token was the whole answer) is tried again after :attr:`FIRST_PROBE` drafter
        generations, not after :attr:`PROBE_EVERY`."""
        if stats is None or stats.forward_steps <= 0:
            with self._lock:
                self._until_probe = min(self._until_probe, self.FIRST_PROBE)
            return
        x = stats.decode_s / stats.forward_steps
        rel = x / _one_row(curve, stats)
        with self._lock:
            self.step_s = x if self.step_s is None else self.DECAY * self.step_s + (1 - self.DECAY) * x
            if self._relative is None or self._per_curve != (curve is not None):  # (a curve loaded since)
                self._relative, self._per_curve = rel, curve is not None
            else:
                self._relative = self.DECAY * self._relative + (1 - self.DECAY) * rel

    def step_for(self, stats: GenStats, curve: Any = None) -> float | None:
        """An AR step's seconds at the length of the generation ``stats`` (None: not
        measured yet)."""
        with self._lock:
            rel, per_curve, raw = self._relative, self._per_curve, self.step_s
        if rel is None:
            return None
        if not per_curve:
            return rel
        return rel * _one_row(curve, stats) if curve is not None else raw


def _one_row(curve: Any, stats: GenStats) -> float:
    """The curve's 1-row step at the length a generation attended (1.0 without a curve)."""
    if curve is None:
        return 1.0
    c0 = curve.at(stats.prompt_tokens + stats.new_tokens).cost(0)
    return c0 if c0 > 0 else 1.0


class ArFallback:
    """One document's choice between its drafter and plain AR (see the module)."""

    DECAY = 0.8
    """Weight of the past per new generation in both sums."""
    WARMUP = 3
    """A document's first drafter generations (with a decode step) left out of the sums."""
    MIN_GENERATIONS = 3
    """Drafter generations (with at least one decode step) seen before any judgement."""
    MARGIN = 1.1
    """The drafter must cost more than this times AR's estimate to be set aside."""
    HOLDS = (8, 16, 32, 64)
    """Generations run as AR after each successive judgement against the drafter."""

    def __init__(self) -> None:
        self.drafter_s = 0.0  # decayed sum of the drafter's decode seconds
        self.ar_s = 0.0  # decayed sum of AR's estimated seconds for the same tokens
        self.seen = 0  # drafter generations since the last judgement
        self.hold = 0  # AR generations still to run
        self.level = 0  # index into HOLDS of the next hold
        self.fallbacks = 0  # times the drafter was set aside
        self.judged = 0  # drafter generations weighed
        self.at_answer = 0  # of them, weighed up to their early answer
        self.warmed = 0  # drafter generations of the document's warm-up seen (WARMUP)

    def use_ar(self) -> bool:
        """Whether the next generation runs plain AR (counts it against the hold)."""
        if self.hold > 0:
            self.hold -= 1
            return True
        return False

    def observe(self, stats: GenStats, ar_step_s: float | None, answered: tuple[float, int] | None = None) -> None:
        """A finished drafter generation, ``ar_step_s`` an AR step's cost
        (:attr:`ArPace.step_s`; None: not measured yet, nothing judged). ``answered``:
        (decode seconds, tokens the steps had produced) when it answered early; it is
        judged on those (see the module). The document's first :attr:`WARMUP` ones (priced
        or not) are not weighed."""
        if stats.forward_steps <= 0:
            return
        if self.warmed < self.WARMUP:
            self.warmed += 1
            return
        if ar_step_s is None:
            return
        seconds, tokens = answered if answered is not None else (stats.decode_s, ar_steps(stats))
        self.judged += 1
        self.at_answer += answered is not None
        d = self.DECAY
        self.drafter_s = d * self.drafter_s + seconds
        self.ar_s = d * self.ar_s + tokens * ar_step_s
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


def ar_steps(stats: GenStats) -> int:
    """AR steps for the tokens a drafter generation's steps produced (each step: its
    accepted nodes and a bonus), as far as they were kept: AR runs one per token."""
    produced = sum(stats.accept_lengths) + stats.forward_steps
    return min(produced, stats.decoded_tokens + 1)
