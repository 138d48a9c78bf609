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
