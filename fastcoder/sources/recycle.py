"""``recycle``: the model's own recent predictions as drafts (token recycling).

Token Recycling (Luo et al., 2024, "Turning Trash into Treasure: Accelerating Inference
of Large Language Models with Token Recycling"): every verify step computes the model's
next-token distribution at each of its rows, and most rows are thrown away (rejected
draft nodes) after their argmax was read. Their top ``recycle_k`` tokens, kept per input
token (:class:`RecycleTable`: token -> the top-k at its latest row), say what the model
tends to write after that token in this document; a draft follows the table from the
last committed token: the root's top-k at depth 1, each depth-1 node's top 2 at depth 2,
then the top-1 chain (:data:`WIDTHS`). Nothing has to match a text, so it drafts where
every retrieval source is silent, and where it agrees with one, the acceptance model's
agreement cells (:class:`fastcoder.budget.AcceptanceModel`) rank that path first.

Measured before it was built (``docs/bench/probes-s45/recycling.py 20``: the repo suite's
20 tasks, qwen2.5-coder-0.5b bf16, each step's recycled drafts scored exactly against the
greedy output the generation then produced; 2-vCPU Intel Xeon with AMX): FastCoder's own
drafts 2.19 tokens a step (5.4 nodes); verified together with this source's tree (the
root's top 4, their top 2, then chains), a verifier that accepts any path of the tree
would take 2.50 tokens a step (15.0 nodes) with one table per project, 2.56 with one
table for the whole run; the table's top-1 chain alone 1.47.

Where the verifier accepts along the path of first children only (CPU bf16,
batch-invariant steps) those branches cannot be accepted, and the repo suite measured it
neutral there (20 tasks, 2-vCPU Intel Xeon with AMX, one run, interleaved: FastCoder 1.78x
AR with it, 1.73x without, accepted length 2.01 vs 2.00; ``docs/bench/probes-s45/``), so
``recycle_k`` None (auto) turns it on only where whole trees are verified (CUDA, fp32).

The table lives in the session (``Session.source_state``, one per document in the
server): a document's own predictions are the likeliest to come back. The decode loop
asks the verifier for the rows' top-k (``Drafter.topk_rows``, from this source's
:attr:`topk`) only while this source is on; the rows come back with the step's one
device-to-host copy.
"""

from __future__ import annotations

from fastcoder.search import Retrieval
from fastcoder.sources import DraftSource, SourceSetup, register

WIDTHS = (None, 2)
"""Children per node by depth below the root: depth 1 the whole top-k (None), depth 2
the top 2, deeper the top 1 (a chain), down to ``max_draft_depth``."""

RANK_WEIGHT = (1.0, 0.5, 0.33, 0.25)
"""A node's count relative to its parent's by its rank among the parent's top-k (rank 4
and below: the last); counts only shrink down a path, as a trie's prefix counts do."""

AUTO_K = 4
"""``recycle_k`` None: this many top tokens per row where whole trees are verified."""

MAX_TOKENS = 65536
"""Bound on the tokens a table holds (the oldest entries go first)."""


class RecycleTable:
    """Token -> the top-k next tokens the model gave at the latest row whose input was that
    token (an insertion-ordered dict: refreshed entries move to the end, the oldest go
    first past :data:`MAX_TOKENS`)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.next: dict[int, tuple[int, ...]] = {}

    def __len__(self) -> int:
        return len(self.next)

    def observe(self, rows) -> None:
        """``rows``: (input token, its row's top-k next tokens, best first) per verified
        row, in the step's row order (a later row of the same token wins)."""
        nxt = self.next
        for tok, top in rows:
            nxt.pop(tok, None)
            nxt[tok] = tuple(top[: self.k])
        while len(nxt) > MAX_TOKENS:
            del nxt[next(iter(nxt))]

    def draft(self, root: int, max_nodes: int, max_depth: int) -> Retrieval:
        """Paths from ``root`` (the last committed token) with their counts, best-first
        by level: (path, count) with every path's prefixes before it."""
        nodes: list[tuple[tuple[int, ...], float]] = []
        level = [((), 1.0, root)]
        for depth in range(max_depth):
            width = WIDTHS[depth] if depth < len(WIDTHS) else 1
            nxt = []
            for path, count, last in level:
                top = self.next.get(last)
                if not top:
                    continue
                for rank, tok in enumerate(top[:width] if width else top):
                    c = count * RANK_WEIGHT[min(rank, len(RANK_WEIGHT) - 1)]
                    nxt.append((path + (tok,), c, tok))
            if not nxt:
                break
            nxt = nxt[: max_nodes - len(nodes)]
            nodes.extend((p, c) for p, c, _ in nxt)
            if len(nodes) >= max_nodes:
                break
            level = nxt
        total = sum(c for p, c in nodes if len(p) == 1)
        return Retrieval(match_len=1 if nodes else 0, nodes=nodes, total=total)


@register
class Recycle(DraftSource):
    name = "recycle"
    order = 45

    def __init__(self, k: int | None) -> None:
        self.k = k  # None: auto (decided in start)
        self.table: RecycleTable | None = None

    @classmethod
    def create(cls, setup: SourceSetup) -> "Recycle | None":
        return cls(setup.config.recycle_k) if setup.config.recycle_k != 0 else None

    def start(self, st) -> None:
        k = self.k if self.k is not None else (0 if st.chain_only else AUTO_K)
        self.topk = k
        if k == 0:
            self.table = None
            return
        held = st.session.source_state.get(self.name)
        if isinstance(held, RecycleTable) and held.k == k:
            self.table = held
            return
        self.table = RecycleTable(k)
        st.session.source_state[self.name] = self.table

    def propose(self, st, max_nodes: int):
        if self.table is None or not st.tokens:
            return None
        return self.table.draft(int(st.tokens[-1]), max_nodes, st.config.max_draft_depth)

    def update(self, st, tree, accepted, new_tokens) -> None:
        if self.table is not None and st.step_topk:
            self.table.observe(st.step_topk)
