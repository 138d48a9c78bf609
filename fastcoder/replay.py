"""A verifier that replays a recorded greedy output: the real decode loop without a model.

:class:`ReplayVerifier` stands in for :class:`fastcoder.verifier.Verifier` when the
greedy output is known (a recorded run): the prefill yields the recorded first token,
and a step accepts the longest tree path that follows the recorded tokens (exactly what
greedy tree verification accepts when the model's choices are the recorded ones), the
next recorded token being the bonus. :func:`fastcoder.decode.generate` runs unchanged
over it (drafters, sessions, CACHE updates, budget trimming, stop rules), so an offline
replay is the loop itself and cannot drift from it: the benchmark's simulator
(``fastcoder bench --simulate``) and ``fastcoder bench sources --replay`` use it.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Sequence

from fastcoder.trie import DraftTree
from fastcoder.verifier import PATH_BLOCK, StepResult


class ReplayVerifier:
    """Replays ``tokens`` (the recorded output, without its end). ``eos``: the
    end-of-sequence id; with ``ended_by_eos`` the recorded run ended by generating it, so
    it follows the tokens (a draft may hold it, as in the real run). ``max_nodes``: the
    real verifier's largest tree (its largest bucket less the root). ``exact_paths``: walk
    as the real verifier does with batch-invariant steps (:attr:`Verifier.exact_paths`:
    along the depth-first path of first children only). ``paths``: walk as the real
    verifier does with path attention (:attr:`Verifier.paths`: any path, but not into a
    node whose path crosses a :data:`~fastcoder.verifier.PATH_BLOCK` boundary after
    leaving the first children: that node's choice is the bonus)."""

    record_margins = False
    last_split = None

    def __init__(self, tokens: Sequence[int], eos: int, *, ended_by_eos: bool = False, max_nodes: int = 127,
                 exact_paths: bool = False, paths: bool = False) -> None:
        self.stream = [int(t) for t in tokens] + ([int(eos)] if ended_by_eos else [])
        self.exact_paths = exact_paths
        self.paths = paths
        self.eos = int(eos)
        self.max_nodes = max_nodes
        self.pos = 0
        self.prompt_len = 0
        # what decode reads of a model: its end-of-sequence ids
        self.model = SimpleNamespace(config=SimpleNamespace(eos_token_id=self.eos), generation_config=None)

    def _at(self, p: int) -> int:
        return self.stream[p] if p < len(self.stream) else self.eos

    def begin(self, kv: Any, prompt_ids: Sequence[int], reserve: int | None = None) -> int:
        """Nothing is cached (a recorded run is replayed from its prompt alone)."""
        self.pos = 0
        self.prompt_len = len(prompt_ids)
        return len(prompt_ids)

    def prefill(self, kv: Any, prompt_ids: Sequence[int], reserve: int | None = None, **_: Any):
        self.pos = 1
        self.prompt_len = len(prompt_ids)
        return self._at(0), len(prompt_ids), None

    def step(self, kv: Any, root: int, tree: DraftTree, *, forced: Sequence[int] = (), allowed: Any = None,
             stop: Any = None, topk: int = 0) -> StepResult:
        """``forced`` (prompt tokens) and ``allowed`` (token healing) are already in the
        recorded output's making: the walk follows the recorded tokens from ``pos``. No
        model, no rows' top tokens (``topk``): token recycling drafts nothing here."""
        children = tree.children()
        first_path = {node: j for j, node in enumerate(tree.depth_first())} if self.exact_paths or self.paths else {}
        base = self.prompt_len + self.pos - 1  # the root's position (the last token known)
        on_first = 0  # leading nodes of the walk that lie on the path of first children
        row, p, accepted = 0, self.pos, []
        while p < len(self.stream) and row < len(children):
            nxt = children[row].get(self.stream[p])
            if nxt is None or (self.exact_paths and first_path[nxt] != len(accepted)):
                break
            if self.paths:
                on_first += on_first == len(accepted) and first_path[nxt] == len(accepted)
                # the node's bulk (Verifier._path_plan) ends at its position rounded down to
                # the block: the path's nodes before that must be first children's
                depth = len(accepted) + 1
                if PATH_BLOCK * ((base + depth) // PATH_BLOCK) - base - 1 > on_first:
                    break
            accepted.append(nxt)
            row, p = nxt + 1, p + 1
        bonus = self._at(p)
        self.pos = p + 1
        return StepResult(accepted, bonus)
