"""A decoding session: the state that outlives one generate call.

The server keeps one per open document. It owns the FastCoder CACHE (verified
retrieved sequences and chunks of the model's own output), the missing table, the
skip-token RNG and two KV caches: the one of the last prompt (for prefix reuse) and a
*spare*, which holds the prompt before a jump to another part of the document, or what a
caller filled ahead of time (the server can prefill a long document's next prompt window
there in idle time): a generation runs on whichever of the two shares the longer token
prefix with its prompt (:meth:`Session.take_longest`).
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from dataclasses import dataclass

from fastcoder.budget import AcceptanceModel, DraftCost
from fastcoder.config import DecodeConfig
from fastcoder.ngram import NgramIndex
from fastcoder.source_weights import SourceGate, SourceWeights
from fastcoder.stats import GenStats
from fastcoder.tokens import TokenInfo
from fastcoder.verifier import KVState


class MissingTable:
    """Bounded LRU set of context keys whose datastore search found nothing."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._keys: OrderedDict[tuple[int, ...], None] = OrderedDict()

    def __contains__(self, key: tuple[int, ...]) -> bool:
        if key in self._keys:
            self._keys.move_to_end(key)
            return True
        return False

    def add(self, key: tuple[int, ...]) -> None:
        self._keys[key] = None
        self._keys.move_to_end(key)
        while len(self._keys) > self.size:
            self._keys.popitem(last=False)

    def clear(self) -> None:
        self._keys.clear()

    def __len__(self) -> int:
        return len(self._keys)


class Session:
    """State shared by the generations of one document (or one benchmark task)."""

    def __init__(self, config: DecodeConfig | None = None, gate_parent: SourceGate | None = None) -> None:
        """``gate_parent``: the process's :class:`SourceGate` for sessions like this one
        (which datastores pay their search on this device); the session's own gate starts
        from it and feeds it."""
        cfg = config or DecodeConfig()
        self.cache = NgramIndex(key_len=cfg.n_min, max_sequences=cfg.cache_max_sequences)
        self.missing = MissingTable(cfg.missing_table_size)
        self.rng = random.Random(cfg.seed)
        self.weights = SourceWeights(cfg.weight_decay)  # learned trie weight per draft source
        self.gate = SourceGate(parent=gate_parent)  # which datastores pay for their search here
        self.kv = KVState()
        self.spare = KVState()  # filled ahead of time by a caller; swapped in by take_longest
        # how likely drafts are to be accepted, learned by the draft budget
        # (budget.AcceptanceModel), carried from one generation to the next
        self.acceptance = AcceptanceModel(cfg.source_agreement)
        self.draft_cost = DraftCost()  # drafting seconds per requested node (budget.DraftCost)
        # what a draft source keeps of this document between generations, by source name
        # (the live context's index, cut back to the next prompt's shared prefix)
        self.source_state: dict[str, object] = {}
        self.lock = threading.Lock()  # one generation at a time per session

    def reset(self) -> None:
        self.cache.clear()
        self.missing.clear()
        self.weights.clear()
        self.gate.clear()
        self.kv.reset()
        self.spare.reset()
        self.acceptance = AcceptanceModel(self.acceptance.agreement)
        self.draft_cost = DraftCost()
        self.source_state.clear()

    def take_longest(self, ids: list[int]) -> None:
        """Make :attr:`kv` the cache holding the longer common token prefix with ``ids``
        (the other becomes :attr:`spare`). When neither holds half of ``ids`` (a prompt
        from another part of the document: the editor's cursor jumped, or the prompt
        window moved), the prompt goes into :attr:`spare`'s buffer and the cache just used
        becomes the spare: back from the jump, its prompt is still cached. Otherwise a
        tie keeps :attr:`kv`."""
        held, other = self.kv.common(ids), self.spare.common(ids)
        if other > held or (self.kv.ids and 2 * held < len(ids)):
            self.kv, self.spare = self.spare, self.kv

    def kv_states(self) -> tuple[KVState, KVState]:
        """Both KV caches (memory accounting, eviction)."""
        return self.kv, self.spare


@dataclass
class DraftState:
    """What a drafter and its sources see during one generation: the committed tokens
    (prompt + output), the config and the session."""

    tokens: list[int]
    n_prompt: int
    config: DecodeConfig
    session: Session
    stats: GenStats
    token_info: TokenInfo | None = None
    step_s: float | None = None
    """What the draft budget expects the current step to cost (its cost curve at the step's
    rows and attended length); None without a curve."""
    chain_only: bool = False
    """The verifier accepts along the path of first children only (``Verifier.exact_paths``
    and no ``side_branches``): a node off that path is never accepted."""
    step_topk: list[tuple[int, list[int]]] | None = None
    """The last step's verified rows as (input token, the top ``Drafter.topk_rows`` next
    tokens the model gave there, best first), root first, then the tree's nodes; None when
    the drafter asked for none (or the verifier gives none)."""

    @property
    def output(self) -> list[int]:
        return self.tokens[self.n_prompt :]
