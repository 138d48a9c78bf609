"""Drafters: each proposes a draft tree for the next step; one verify loop runs them all.

- ``ar``: no draft (plain greedy decoding through the same loop).
- ``pld``: prompt lookup as in transformers' ``generate(prompt_lookup_num_tokens=10)``:
  the earliest earlier occurrence of the last 2 (then 1) tokens, next 10 tokens.
- ``rest``: D_c only, longest suffix match, heaviest continuations as a tree.
- ``fastcoder``: CACHE first (once it holds ``l`` sequences), else D_r, D_c (and D_d)
  searched in parallel, with skip tokens and a missing table; plus the live context
  (prompt + output so far), a reference text (the code after the cursor) and the other
  open documents as more sources in the same weighted trie, whose source weights may
  be learned online from what gets accepted.
- ``reuse``: a reference text (the code being edited, the text after the cursor) as a
  long linear draft, re-synced to the nearest following occurrence after an edit;
  FastCoder retrieval where the reference has nothing to say.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from fastcoder.config import DecodeConfig
from fastcoder.search import Retrieval
from fastcoder.session import DraftState  # noqa: F401 (re-exported)
from fastcoder.source_weights import matched_depth
from fastcoder.sources import DraftSource, RetrievalSource, Sources, SourceSetup, registered, timed_search, weight_of  # noqa: F401 (re-exported)
from fastcoder.stats import GenStats
from fastcoder.tokens import TokenInfo
from fastcoder.trie import DraftTree, WeightedTrie


class Drafter:
    """Base drafter: no draft. Subclasses override :meth:`draft` and maybe :meth:`update`.

    What a drafter needs from the loop it declares here; the loop (``decode.py``) reads
    these attributes and never a drafter's name."""

    name = "ar"
    adaptive_budget = True
    """May the loop trim the tree with the cost curve (and so needs the curve)?"""
    drafts = False
    """Does it ever draft? (AR does not: no cost curve, no budget.)"""
    needs_token_info = False
    """Does it read ``DraftState.token_info`` (line positions for skip tokens)?"""
    drafts_at_zero_budget = False
    """Is :meth:`draft` called even when ``max_draft_tokens`` is 0 (a reference chain)?"""
    topk_rows = 0
    """How many top next tokens of every verified row :meth:`update` reads
    (``DraftState.step_topk``); 0: none, and the verifier computes none. Set by
    :meth:`start` at the latest."""

    def start(self, st: DraftState) -> None:
        pass

    def draft(self, st: DraftState, max_nodes: int) -> DraftTree:
        return DraftTree()

    def update(self, st: DraftState, tree: DraftTree, accepted: list[int], new_tokens: list[int]) -> None:
        """Called after a step with the accepted node indices and the committed tokens."""

    def close(self) -> None:
        pass


class PromptLookupDrafter(Drafter):
    """transformers' PromptLookupCandidateGenerator: earliest match, n-gram 2 then 1."""

    name = "pld"
    adaptive_budget = False
    drafts = True

    def __init__(self, max_ngram: int = 2, num_tokens: int = 10) -> None:
        self.max_ngram = max_ngram
        self.num_tokens = num_tokens

    def draft(self, st: DraftState, max_nodes: int) -> DraftTree:
        ids = np.asarray(st.tokens, dtype=np.int64)
        n = ids.size
        for size in range(min(self.max_ngram, n - 1), 0, -1):
            window = ids[n - size :]
            # all windows of length `size` equal to the last one
            hits = np.ones(n - size + 1, dtype=bool)
            for j in range(size):
                hits &= ids[j : n - size + 1 + j] == window[j]
            for idx in np.flatnonzero(hits).tolist():
                start = idx + size
                end = min(start + min(self.num_tokens, max_nodes), n)
                if start < end:
                    return DraftTree.chain(ids[start:end].tolist(), "prompt")
        return DraftTree()


class RestDrafter(Drafter):
    """REST: retrieval from D_c only; no CACHE, skip tokens or missing table."""

    name = "rest"
    drafts = True
    needs_token_info = True

    def __init__(self, sources: Sources) -> None:
        self.dc = sources.get("D_c")

    def draft(self, st: DraftState, max_nodes: int) -> DraftTree:
        if self.dc is None:
            return DraftTree()
        cfg = st.config
        t0 = time.perf_counter()
        store = getattr(self.dc, "store", None)
        if store is not None:
            r = store.retrieve(st.tokens, n_max=cfg.n_max, n_min=cfg.n_min, max_nodes=max_nodes, max_depth=cfg.max_draft_depth)
        else:
            r = self.dc.propose(st, max_nodes) or Retrieval()
        dt = time.perf_counter() - t0
        st.stats.search_serial_s += dt
        st.stats.search_wall_s += dt
        st.stats.searches += 1
        if st.token_info is not None:
            st.stats.note_line_pos(st.token_info.line_position(st.tokens), bool(r))
        trie = WeightedTrie(cfg.weighting)
        trie.add(r.nodes, "D_c", 1.0, r.total)
        return trie.select(max_nodes, cfg.max_draft_depth)


class FastCoderDrafter(Drafter):
    """FastCoder (Algorithm 1) plus the sources an editor has, all in one weighted trie.

    It iterates one list of :class:`fastcoder.sources.DraftSource`: the registered ones
    (made for this generation: ``context``, ``reference``, ``cache``, and any other
    registered source) and the caller's :class:`Sources` (``buffers``, ``D_r`` /
    ``D_c`` / ``D_d``). In-memory sources propose first; unless one of them is
    ``exclusive`` and had a draft, the ``datastore`` sources are then searched together
    under skip tokens and the missing table. ``GenStats.accepted_by_source`` counts by
    the sources' names.

    Each source's weight is :func:`fastcoder.sources.weight_of` (0: the source is off),
    times (``learn_weights``) the session's learned factor for it
    (:mod:`fastcoder.source_weights`).
    """

    name = "fastcoder"
    drafts = True
    needs_token_info = True

    def __init__(
        self, sources: Sources | None = None, pool: ThreadPoolExecutor | None = None, reference: Sequence[int] | None = None
    ) -> None:
        self.sources = sources if sources is not None else Sources()
        self.pool = pool
        # text the output is likely to repeat (the code after the cursor, the rest of the file)
        self.reference = [int(t) for t in reference] if reference else []
        self.active: list[DraftSource] = []
        self._st: DraftState | None = None
        self._offered: dict[str, set] = {}  # source -> draft paths offered in the last draft
        self._seconds: dict[str, float] = {}  # source -> its search time in the last draft (the gate's)

    def start(self, st: DraftState) -> None:
        cfg = st.config
        setup = SourceSetup(cfg, self.reference)
        made = [cls.create(setup) for cls in registered()]
        every = [s for s in made if s is not None] + list(self.sources)
        self.active = sorted((s for s in every if weight_of(cfg, s.name) != 0), key=lambda s: s.order)
        for s in self.active:
            s.start(st)
        self.topk_rows = max((s.topk for s in self.active), default=0)
        self._st = st

    def draft(self, st: DraftState, max_nodes: int) -> DraftTree:
        if self._st is None:  # drafting without start(): the sources start on this state
            self.start(st)
        cfg = st.config
        ses = st.session
        trie = WeightedTrie(cfg.weighting)
        self._offered = {}
        gate = ses.gate if cfg.source_gate else None
        self._seconds = {}
        if gate is not None:
            gate.next_draft()

        def add(src: DraftSource, r: Retrieval | None) -> None:
            if not r:
                return
            weight = weight_of(cfg, src.name)
            if cfg.learn_weights:
                weight *= ses.weights.factor(src.name)
                self._offered[src.name] = {p for p, _ in r.nodes}
            trie.add(r.nodes, src.name, weight, r.total)

        def asks(src: DraftSource) -> bool:
            if gate is None or gate.asks(src.name):
                return True
            st.stats.gated[src.name] += 1
            return False

        exclusive_hit = False
        for src in self.active:
            if not src.datastore:
                r = src.propose(st, max_nodes)
                add(src, r)
                exclusive_hit = exclusive_hit or (src.exclusive and bool(r))
        stores = [s for s in self.active if s.datastore and asks(s)]
        if not exclusive_hit and cfg.use_datastores and stores:
            line_pos = st.token_info.line_position(st.tokens) if st.token_info is not None else 1
            key = tuple(st.tokens[-cfg.n_min :])
            if cfg.use_skip and line_pos == 0 and ses.rng.random() >= cfg.skip_probability:
                st.stats.skipped_retrievals += 1
            elif cfg.use_missing_table and key in ses.missing:
                st.stats.missing_hits += 1
            else:
                results = timed_search(stores, st, max_nodes, self.pool, self._seconds if gate is not None else None)
                hit = any(bool(r) for r in results)
                st.stats.note_line_pos(line_pos, hit)
                if not hit and cfg.use_missing_table:
                    ses.missing.add(key)
                for src, r in zip(stores, results):
                    add(src, r)
        return trie.select(max_nodes, cfg.max_draft_depth)

    def update(self, st: DraftState, tree: DraftTree, accepted: list[int], new_tokens: list[int]) -> None:
        if st.config.learn_weights and self._offered and new_tokens:
            st.session.weights.observe({name: matched_depth(paths, new_tokens) for name, paths in self._offered.items()})
        if self._seconds and new_tokens:  # the gate's: every datastore searched, and whose accepted nodes were its own
            own = Counter(tree.sources[i] for i in accepted if tree.agree and tree.agree[i] == 1)
            st.session.gate.observe(self._seconds, own, st.step_s, len(new_tokens))
        self._offered, self._seconds = {}, {}
        for s in self.active:
            s.update(st, tree, accepted, new_tokens)

    def close(self) -> None:
        st, self._st = self._st, None
        if st is not None:
            for s in self.active:
                s.close(st)


class ReuseDrafter(FastCoderDrafter):
    """EfficientEdit's lossless "reuse": the reference as a long linear draft.

    ``pos`` is where the output is aligned in the reference. After a step whose
    tokens all agree with the reference, it advances; otherwise the last few output
    tokens are searched in the reference at or after ``anchor`` and the nearest
    occurrence re-syncs it. Where the reference has no draft (mid-edit), FastCoder
    retrieval drafts instead.

    Variants (the edit benchmark's ``reuse-fix`` and ``reuse-fix-adapt``):

    - ``moved_code``: out of sync, the anchor moves past the tokens of the step that
      still agreed with the reference, and when nothing follows the anchor the whole
      reference is searched with twice as many tokens (code moved up);
    - ``short_after_resync``: the first chain after a re-sync is this many tokens long
      (a fully accepted chain restores the full ``reuse_max_tokens``).
    """

    name = "reuse"
    adaptive_budget = False
    drafts_at_zero_budget = True

    def __init__(self, reference: Sequence[int], sources: Sources | None = None, pool: ThreadPoolExecutor | None = None,
                 start: int = 0, *, moved_code: bool = False, short_after_resync: int | None = None) -> None:  # fmt: skip
        super().__init__(sources, pool)
        self.ref = [int(t) for t in reference]  # drafted as a chain, not via the live index
        self.pos: int | None = start
        self.anchor = start  # the last position known to be in sync
        self.moved_code = moved_code
        self.short_after_resync = short_after_resync
        self.confirmed = True  # the chain at pos follows a fully accepted one

    def draft(self, st: DraftState, max_nodes: int) -> DraftTree:
        limit = max(st.config.reuse_max_tokens, max_nodes)
        if self.short_after_resync is not None and not self.confirmed:
            limit = min(limit, self.short_after_resync)
        if self.pos is not None and self.pos < len(self.ref):
            return DraftTree.chain(self.ref[self.pos : self.pos + limit], "reuse")
        return super().draft(st, max_nodes)

    def update(self, st: DraftState, tree: DraftTree, accepted: list[int], new_tokens: list[int]) -> None:
        super().update(st, tree, accepted, new_tokens)
        new = list(new_tokens)
        if self.pos is not None and self.ref[self.pos : self.pos + len(new)] == new:
            self.pos += len(new)
            self.anchor = self.pos
            self.confirmed = True
            return
        n = st.config.reuse_resync_tokens
        if self.moved_code and self.pos is not None:
            agree = 0
            while agree < len(new) and self.pos + agree < len(self.ref) and self.ref[self.pos + agree] == new[agree]:
                agree += 1
            self.anchor = self.pos + agree
        # re-sync to the nearest occurrence after the last in-sync position, never back
        # to an earlier copy in repetitive code
        self.pos = resync(self.ref, st.output, self.anchor, n)
        if self.pos is None and self.moved_code:
            self.pos = resync(self.ref, st.output, 0, 2 * n)
        if self.pos is not None:
            self.anchor = self.pos
            self.confirmed = False


def resync(ref: Sequence[int], output: Sequence[int], after: int, n: int) -> int | None:
    """Position in ``ref`` right after the nearest occurrence, starting at or after
    ``after``, of the last ``n`` output tokens (fewer if the output is shorter).
    None when they do not occur there."""
    n = min(n, len(output))
    if n == 0:
        return None
    tail = list(output[-n:])
    for i in range(max(0, after), len(ref) - n + 1):
        if ref[i] == tail[0] and list(ref[i : i + n]) == tail:
            return i + n
    return None


def make_drafter(
    config: DecodeConfig,
    sources: Sources | None = None,
    *,
    reference: Sequence[int] | None = None,
    pool: ThreadPoolExecutor | None = None,
) -> Drafter:
    sources = sources if sources is not None else Sources()
    m = config.method
    if m == "ar":
        return Drafter()
    if m == "pld":
        return PromptLookupDrafter()
    if m == "rest":
        return RestDrafter(sources)
    if m == "fastcoder":
        return FastCoderDrafter(sources, pool, reference=reference)
    if m == "reuse":
        return ReuseDrafter(reference or [], sources, pool)
    raise ValueError(f"unknown method {m!r}")
