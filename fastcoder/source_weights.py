"""Draft-source weights learned online from what the model accepts.

FastCoder's trie sums its sources with fixed weights (α·t_r + β·t_c in the paper).
Which source is worth trusting changes with the document and the moment: while the
user types a new function the live context and the document's recent outputs lead;
in boilerplate D_r does. :class:`SourceWeights` keeps, per source, an exponentially
decayed mean of the tokens that source would have had accepted at each step it
offered a draft, and scales the source's trie weight by it. One lives in each
:class:`fastcoder.session.Session` (one per open document in the server), so the
weights follow the document across completions.

Only drafts change: every draft is verified, so the output stays greedy AR's.
"""

from __future__ import annotations

from typing import Iterable, Sequence


def matched_depth(paths: set[tuple[int, ...]], committed: Sequence[int]) -> int:
    """How many leading tokens of ``committed`` one of the source's paths holds."""
    d = 0
    while d < len(committed) and tuple(committed[: d + 1]) in paths:
        d += 1
    return d


class SourceWeights:
    """Decayed mean of accepted tokens per source; its trie weight factor.

    Parameters
    ----------
    decay: weight of the past per new observation of a source (0.9 ≈ the last ten
        steps where the source offered a draft).
    prior: the factor of a source never seen (a pseudo-observation of this many tokens).
    """

    def __init__(self, decay: float = 0.9, prior: float = 1.0) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError("decay must be in [0, 1)")
        self.decay = decay
        self.prior = prior
        self._hits: dict[str, float] = {}
        self._n: dict[str, float] = {}

    def factor(self, source: str) -> float:
        """Expected tokens accepted from ``source`` per step (smoothed by the prior)."""
        return (self._hits.get(source, 0.0) + self.prior) / (self._n.get(source, 0.0) + 1.0)

    def observe(self, matched: dict[str, int]) -> None:
        """One step: ``matched[source]`` = tokens of the committed output that the
        source's draft held (0 when it was wrong from the first token)."""
        for name, m in matched.items():
            self._hits[name] = self.decay * self._hits.get(name, 0.0) + m
            self._n[name] = self.decay * self._n.get(name, 0.0) + 1.0

    def sources(self) -> Iterable[str]:
        return self._n.keys()

    def snapshot(self) -> dict[str, float]:
        return {name: round(self.factor(name), 3) for name in sorted(self._n)}

    def clear(self) -> None:
        self._hits.clear()
        self._n.clear()


class SourceGate:
    """Which datastores (D_r, D_c, D_d: the suffix-array searches) pay for their search,
    learned online per session.

    A datastore costs host time at every step it is searched. Where a verify step costs
    25-70 ms (a CPU) every one pays; where it costs ~4 ms (a GPU) one that seldom adds a
    token the other sources do not costs more than it brings: on an H200 (2026-11-27) the
    repo suite's drafting was 1.74 ms of a 7.0 ms FastCoder step, D_c 0.7 ms of it for 11%
    of the accepted tokens, and the suite without D_c decoded 1.59x AR against 1.48x.

    Kept per source: decayed means (``decay`` per step) of its search seconds and of its
    *own* tokens d (the accepted nodes of the verified tree that no other source drafted,
    the in-memory sources included: what the step would have lost without it); per
    session: the decayed means of the step's cost C (what the budget's cost curve expects;
    no curve, no gate) and of the tokens T a step commits. The time per token is lower
    with the source when ``seconds < C * d / (T - d)``; ``loss`` is the difference.

    A source whose loss exceeds ``MIN_LOSS`` of a step is not searched: one at a time, the
    worst first, after ``MIN_OBS`` steps with the current set (so of two sources that
    draft the same tokens, each owning none while both are asked, only one goes, and the
    other then owns them). A dropped source is searched at every ``PROBE_EVERY``-th draft,
    which keeps its figures current, and comes back once its loss is under half the
    floor. On a CPU a search costs far less than 5% of a step, so only a cold start's
    slow searches can drop one, for a while.

    The in-memory sources (live context, CACHE, reference, buffers) are always asked: they
    are cheap, and gating them too (tried: 2026-11-27, the H200 suite's drafting replayed
    with its curve) dropped the live context as well and estimated less (1.41-1.47x AR
    against 1.44-1.50x with the datastores alone, 1.39-1.41x without a gate, all with
    the first rule for d: the matched depth beyond the best other source).

    ``parent``: the process's gate for this kind of session (the server's, one benchmark
    method's). Every step a session observes also feeds it, and a new session starts from
    its figures, weighted as ``MIN_OBS`` steps, and its dropped set: a document learns from
    the ones before it (where D_c does not pay, a new document does not search it for its
    first steps) and then from itself.

    Only which sources draft changes: every draft is verified, so the output stays AR's.
    """

    MIN_OBS = 8
    PROBE_EVERY = 8
    MIN_LOSS = 0.05

    def __init__(self, decay: float = 0.97, parent: "SourceGate | None" = None) -> None:
        self.decay = decay
        self.parent = parent
        self._enough = (1 - decay**self.MIN_OBS) / (1 - decay) - 1e-9  # the decayed count of MIN_OBS steps
        self._s: dict[str, list[float]] = {}  # name -> [n, seconds, own tokens]
        self._step = [0.0, 0.0, 0.0]  # n, step seconds, committed tokens
        self.dropped: set[str] = set()
        self._since_change = 0
        self._drafts = 0
        self.clear()

    def _seed(self) -> None:
        """The parent's figures, weighted as MIN_OBS steps, and its dropped set."""
        p = self.parent
        if p is None or p._step[0] <= 0:
            return
        scale = lambda row: [x * min(1.0, self._enough / row[0]) for x in row] if row[0] > 0 else list(row)  # noqa: E731
        self._s = {k: scale(row) for k, row in p._s.items()}
        self._step = scale(p._step)
        self.dropped = set(p.dropped)

    def asks(self, name: str) -> bool:
        """Ask ``name`` at this draft? (Call :meth:`next_draft` once per draft first.)"""
        return name not in self.dropped or self._drafts % self.PROBE_EVERY == 0

    def next_draft(self) -> None:
        self._drafts += 1

    def observe(self, seconds: dict[str, float], own: dict[str, int], step_s: float | None, tokens: int) -> None:
        """One step: the search ``seconds`` of the sources asked and their ``own`` accepted
        tokens (drafted by no other source; absent = 0), the cost the budget expected of
        the step (None: no curve) and the tokens committed."""
        if step_s is None or tokens <= 0:
            return
        if self.parent is not None:
            self.parent.observe(seconds, own, step_s, tokens)
        d = self.decay
        n, c, t = self._step
        self._step = [d * n + 1, d * c + step_s, d * t + tokens]
        probed = False
        for name, sec in seconds.items():
            row = self._s.setdefault(name, [0.0, 0.0, 0.0])
            row[0], row[1], row[2] = d * row[0] + 1, d * row[1] + sec, d * row[2] + own.get(name, 0)
            probed = probed or name in self.dropped
        self._since_change += 1
        if probed or self._since_change >= self.MIN_OBS:
            self._decide()

    def loss(self, name: str) -> float | None:
        """Seconds per step the source costs beyond what it saves (> 0: it does not pay);
        None before ``MIN_OBS`` observations."""
        row = self._s.get(name)
        if row is None or row[0] < self._enough:
            return None
        n, c, t = self._step
        if n <= 0:
            return None
        step_s, tokens = c / n, t / n
        sec, own = row[1] / row[0], row[2] / row[0]
        rest = tokens - own
        worth = step_s * own / rest if rest > 0 else float("inf")
        return sec - worth

    def _decide(self) -> None:
        floor = self.MIN_LOSS * self._step[1] / self._step[0]
        for name in list(self.dropped):  # back when well under the floor (seen on probe steps)
            loss = self.loss(name)
            if loss is not None and loss < floor / 2:
                self.dropped.discard(name)
                self._since_change = 0
        if self._since_change < self.MIN_OBS:
            return
        losses = {k: self.loss(k) for k in self._s if k not in self.dropped}
        worst = max(((v, k) for k, v in losses.items() if v is not None and v > floor), default=None)
        if worst is not None:
            self.dropped.add(worst[1])
            self._since_change = 0

    def snapshot(self) -> dict[str, object]:
        return {"dropped": sorted(self.dropped),
                "loss_ms": {k: round(1000 * v, 3) for k in sorted(self._s) if (v := self.loss(k)) is not None}}  # fmt: skip

    def clear(self) -> None:
        """Forget this session's figures (back to the parent's, when it has one)."""
        self._s = {}
        self._step = [0.0, 0.0, 0.0]
        self.dropped = set()
        self._since_change = 0
        self._drafts = 0
        self._seed()
