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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from fastcoder.config import DecodeConfig
from fastcoder.datastore import Retrieval
from fastcoder.ngram import NgramIndex
from fastcoder.session import Session
from fastcoder.source_weights import matched_depth
from fastcoder.stats import GenStats
from fastcoder.tokens import TokenInfo
from fastcoder.trie import DraftTree, WeightedTrie


class RetrievalSource(Protocol):
    """A datastore: TokenDatastore, or the indexer's incremental D_r."""

    def retrieve(
        self, context: Sequence[int], *, n_max: int, n_min: int, max_nodes: int, max_depth: int
    ) -> Retrieval: ...


@dataclass
class Sources:
    """Datastores by role; any may be None."""

    dr: RetrievalSource | None = None  # the repository
    dc: RetrievalSource | None = None  # common code
    dd: RetrievalSource | None = None  # the workspace's dependencies
    buffers: NgramIndex | None = None  # the other open documents (the editor's buffers)

    def named(self, config: DecodeConfig) -> list[tuple[str, RetrievalSource, float]]:
        out = []
        for name, src, w in (("D_r", self.dr, config.alpha), ("D_c", self.dc, config.beta), ("D_d", self.dd, config.gamma)):
            if src is not None and w != 0:
                out.append((name, src, w))
        return out


@dataclass
class DraftState:
    """What a drafter sees: the committed tokens (prompt + output) and the session."""

    tokens: list[int]
    n_prompt: int
    config: DecodeConfig
    session: Session
    stats: GenStats
    token_info: TokenInfo | None = None
    extra: dict = field(default_factory=dict)

    @property
    def output(self) -> list[int]:
        return self.tokens[self.n_prompt :]


class Drafter:
    """Base drafter: no draft. Subclasses override :meth:`draft` and maybe :meth:`update`."""

    name = "ar"
    adaptive_budget = True  # may the loop trim the tree with the cost curve?

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

    def __init__(self, sources: Sources) -> None:
        self.dc = sources.dc

    def draft(self, st: DraftState, max_nodes: int) -> DraftTree:
        if self.dc is None:
            return DraftTree()
        cfg = st.config
        t0 = time.perf_counter()
        r = self.dc.retrieve(st.tokens, n_max=cfg.n_max, n_min=cfg.n_min, max_nodes=max_nodes, max_depth=cfg.max_draft_depth)
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

    Sources, by name (``GenStats.accepted_by_source`` uses the same names):

    - ``context``: the live context, prompt + output so far (always fresh);
    - ``suffix``: the reference text, in the server the text after the cursor;
    - ``buffers``: the other open documents (``Sources.buffers``, server only);
    - ``cache``: the session's CACHE: verified drafts and the model's own output in this
      document, searched once it holds ``cache_min_sequences`` sequences; with
      ``cache_exclusive`` (the paper) a CACHE hit skips the datastores;
    - ``D_r`` / ``D_c`` / ``D_d``: the datastores, with skip tokens and the missing table.

    Each source's weight is its fixed config weight, times (``learn_weights``) the
    session's learned factor for it (:mod:`fastcoder.source_weights`).
    """

    name = "fastcoder"

    def __init__(
        self, sources: Sources, pool: ThreadPoolExecutor | None = None, reference: Sequence[int] | None = None
    ) -> None:
        self.sources = sources
        self.pool = pool
        # text the output is likely to repeat (the code after the cursor, the rest of the file)
        self.reference = [int(t) for t in reference] if reference else []
        self.live: NgramIndex | None = None
        self.live_id = -1
        self.ref_index: NgramIndex | None = None
        self._since_chunk = 0
        self._st: DraftState | None = None
        self._offered: dict[str, set] = {}  # source -> draft paths offered in the last draft

    def start(self, st: DraftState) -> None:
        cfg = st.config
        if cfg.use_context:
            self.live = NgramIndex(key_len=cfg.n_min, max_sequences=1, max_candidates=64)
            self.live_id = self.live.add(st.tokens)
            if self.reference and cfg.reference_weight:
                self.ref_index = NgramIndex(key_len=cfg.n_min, max_sequences=1, max_candidates=64)
                self.ref_index.add(self.reference)
        self._since_chunk = 0
        self._st = st

    def _search(self, st: DraftState, max_nodes: int) -> list[tuple[str, Retrieval, float]]:
        cfg = st.config
        named = self.sources.named(cfg)
        kw = dict(n_max=cfg.n_max, n_min=cfg.n_min, max_nodes=max_nodes, max_depth=cfg.max_draft_depth)
        ctx = st.tokens[-cfg.n_max :]

        def one(src):
            t = time.perf_counter()
            r = src.retrieve(ctx, **kw)
            return r, time.perf_counter() - t

        t0 = time.perf_counter()
        if self.pool is not None and cfg.parallel_search and len(named) > 1:
            futures = [self.pool.submit(one, src) for _, src, _ in named]
            results = [f.result() for f in futures]
        else:
            results = [one(src) for _, src, _ in named]
        st.stats.search_wall_s += time.perf_counter() - t0
        st.stats.search_serial_s += sum(dt for _, dt in results)
        st.stats.searches += 1
        return [(name, r, w) for (name, _, w), (r, _) in zip(named, results)]

    def draft(self, st: DraftState, max_nodes: int) -> DraftTree:
        cfg = st.config
        ses = st.session
        trie = WeightedTrie(cfg.weighting)
        self._offered = {}

        def add(name: str, r: Retrieval, weight: float) -> None:
            if not r:
                return
            if cfg.learn_weights:
                weight *= ses.weights.factor(name)
                self._offered[name] = {p for p, _ in r.nodes}
            trie.add(r.nodes, name, weight, r.total)

        small_kw = dict(n_max=cfg.n_max, max_nodes=max_nodes, max_depth=cfg.max_draft_depth, recency=cfg.context_recency)
        if self.live is not None:
            add("context", self.live.retrieve(st.tokens, **small_kw), cfg.context_weight)
        if self.ref_index is not None:
            add("suffix", self.ref_index.retrieve(st.tokens, **small_kw), cfg.reference_weight)
        if self.sources.buffers is not None and cfg.buffers_weight:
            add("buffers", self.sources.buffers.retrieve(st.tokens, **small_kw), cfg.buffers_weight)
        used_cache = False
        if cfg.use_cache and len(ses.cache) >= max(cfg.cache_min_sequences, 1):
            r = ses.cache.retrieve(st.tokens, **small_kw)
            if r:
                add("cache", r, cfg.cache_weight)
                st.stats.cache_hits += 1
                used_cache = cfg.cache_exclusive
        if not used_cache and cfg.use_datastores and self.sources.named(cfg):
            line_pos = st.token_info.line_position(st.tokens) if st.token_info is not None else 1
            key = tuple(st.tokens[-cfg.n_min :])
            if cfg.use_skip and line_pos == 0 and ses.rng.random() >= cfg.skip_probability:
                st.stats.skipped_retrievals += 1
            elif cfg.use_missing_table and key in ses.missing:
                st.stats.missing_hits += 1
            else:
                results = self._search(st, max_nodes)
                hit = any(bool(r) for _, r, _ in results)
                st.stats.note_line_pos(line_pos, hit)
                if not hit and cfg.use_missing_table:
                    ses.missing.add(key)
                for name, r, w in results:
                    add(name, r, w)
        return trie.select(max_nodes, cfg.max_draft_depth)

    def update(self, st: DraftState, tree: DraftTree, accepted: list[int], new_tokens: list[int]) -> None:
        cfg = st.config
        if self.live is not None:
            self.live.extend(self.live_id, new_tokens)
        if cfg.learn_weights and self._offered and new_tokens:
            st.session.weights.observe({name: matched_depth(paths, new_tokens) for name, paths in self._offered.items()})
        self._offered = {}
        if not cfg.use_cache:
            return
        cache = st.session.cache
        if accepted and any(tree.sources[i] != "cache" for i in accepted):
            # a verified retrieved sequence: the context before the step plus the accepted draft
            before = len(st.tokens) - len(new_tokens)
            cache.add(st.tokens[max(0, before - cfg.n_max) : before] + [tree.tokens[i] for i in accepted])
        self._since_chunk += len(new_tokens)
        if self._since_chunk >= cfg.cache_output_chunk:
            self._flush_output(st)

    def _flush_output(self, st: DraftState) -> None:
        """The model's output since the last chunk (with ``n_max`` tokens of context
        before it) into the CACHE."""
        chunk = min(self._since_chunk, len(st.output))
        if chunk > 0:
            st.session.cache.add(st.tokens[-(chunk + st.config.n_max) :])
        self._since_chunk = 0

    def close(self) -> None:
        # the tail of the output (shorter than a chunk: most editor completions are) is
        # the document's most recent output: keep it for the next request
        st, self._st = self._st, None
        if st is not None and st.config.use_cache and self._since_chunk > 0:
            self._flush_output(st)


class ReuseDrafter(FastCoderDrafter):
    """EfficientEdit's lossless "reuse": the reference as a long linear draft.

    ``pos`` is where the output is aligned in the reference. After a step whose
    tokens all agree with the reference, it advances; otherwise the last few output
    tokens are searched in the reference at or after ``pos`` and the nearest
    occurrence re-syncs it. Where the reference has no draft (mid-edit), FastCoder
    retrieval drafts instead.
    """

    name = "reuse"
    adaptive_budget = False

    def __init__(self, reference: Sequence[int], sources: Sources, pool: ThreadPoolExecutor | None = None, start: int = 0) -> None:
        super().__init__(sources, pool)
        self.ref = [int(t) for t in reference]  # drafted as a chain, not via the live index
        self.pos: int | None = start
        self.anchor = start  # the last position known to be in sync

    def draft(self, st: DraftState, max_nodes: int) -> DraftTree:
        limit = max(st.config.reuse_max_tokens, max_nodes)
        if self.pos is not None and self.pos < len(self.ref):
            return DraftTree.chain(self.ref[self.pos : self.pos + limit], "reuse")
        return super().draft(st, max_nodes)

    def update(self, st: DraftState, tree: DraftTree, accepted: list[int], new_tokens: list[int]) -> None:
        super().update(st, tree, accepted, new_tokens)
        if self.pos is not None and self.ref[self.pos : self.pos + len(new_tokens)] == list(new_tokens):
            self.pos += len(new_tokens)
            self.anchor = self.pos
            return
        # re-sync to the nearest occurrence after the last in-sync position, never back
        # to an earlier copy in repetitive code
        self.pos = resync(self.ref, st.output, self.anchor, st.config.reuse_resync_tokens)
        if self.pos is not None:
            self.anchor = self.pos


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
    sources = sources or Sources()
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
