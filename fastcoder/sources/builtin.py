"""The sources the FastCoder drafter makes itself for every generation.

- ``context``: the live context, prompt + output so far (``use_context``);
- ``reference``: the reference text given to the drafter, in the server the code after
  the cursor (``use_context`` and a reference);
- ``cache``: the session's CACHE: verified drafts and the model's own output in this
  document, searched once it holds ``cache_min_sequences`` sequences; with
  ``cache_exclusive`` (the paper) a CACHE draft skips the datastores. It also keeps the
  CACHE filled (``use_cache``).
"""

from __future__ import annotations

from fastcoder.ngram import NgramIndex
from fastcoder.tokens import common_prefix
from fastcoder.sources import DraftSource, SourceSetup, recent, register


@register
class Context(DraftSource):
    name = "context"
    order = 10

    def __init__(self) -> None:
        self.live: NgramIndex | None = None
        self.live_id = -1

    @classmethod
    def create(cls, setup: SourceSetup) -> "Context | None":
        return cls() if setup.config.use_context else None

    def start(self, st) -> None:
        """The index of the last generation in this session (its prompt + output), cut
        back to the prefix this prompt shares with it and extended with the rest: a
        keystroke re-indexes the tokens after the cursor, not the whole prompt (the
        index equals a fresh one: ``truncatable``)."""
        held = st.session.source_state.get(self.name)
        if isinstance(held, NgramIndex) and held.key_len == st.config.n_min and len(held) == 1:
            self.live, self.live_id = held, held.last_id
            seq = held.sequence(self.live_id)
            n = common_prefix(seq, st.tokens)
            held.truncate(self.live_id, n)
            held.extend(self.live_id, st.tokens[n:])
            return
        self.live = NgramIndex(key_len=st.config.n_min, max_sequences=1, max_candidates=64, truncatable=True)
        self.live_id = self.live.add(st.tokens)
        st.session.source_state[self.name] = self.live

    def propose(self, st, max_nodes: int):
        return recent(self.live, st, max_nodes) if self.live is not None else None

    def update(self, st, tree, accepted, new_tokens) -> None:
        if self.live is not None:
            self.live.extend(self.live_id, new_tokens)


@register
class Reference(DraftSource):
    name = "reference"
    order = 20

    def __init__(self, reference) -> None:
        self.reference = [int(t) for t in reference]
        self.index: NgramIndex | None = None

    @classmethod
    def create(cls, setup: SourceSetup) -> "Reference | None":
        return cls(setup.reference) if setup.config.use_context and setup.reference else None

    def start(self, st) -> None:
        """The session's index of the last reference when it is the same text (the code
        after the cursor does not change while the user types before it)."""
        held = st.session.source_state.get(self.name)
        if (isinstance(held, NgramIndex) and held.key_len == st.config.n_min and len(held) == 1
                and held.sequence(held.last_id) == self.reference):  # fmt: skip
            self.index = held
            return
        self.index = NgramIndex(key_len=st.config.n_min, max_sequences=1, max_candidates=64)
        self.index.add(self.reference)
        st.session.source_state[self.name] = self.index

    def propose(self, st, max_nodes: int):
        return recent(self.index, st, max_nodes) if self.index is not None else None


@register
class Cache(DraftSource):
    name = "cache"
    order = 40

    def __init__(self) -> None:
        self._since_chunk = 0

    @classmethod
    def create(cls, setup: SourceSetup) -> "Cache | None":
        return cls() if setup.config.use_cache else None

    def start(self, st) -> None:
        self._since_chunk = 0
        self.exclusive = st.config.cache_exclusive

    def propose(self, st, max_nodes: int):
        cfg, cache = st.config, st.session.cache
        if len(cache) < max(cfg.cache_min_sequences, 1):
            return None
        r = recent(cache, st, max_nodes)
        if r:
            st.stats.cache_hits += 1
        return r

    def update(self, st, tree, accepted, new_tokens) -> None:
        cfg, cache = st.config, st.session.cache
        if accepted and any(tree.sources[i] != "cache" for i in accepted):
            # a verified retrieved sequence: the context before the step plus the accepted draft
            before = len(st.tokens) - len(new_tokens)
            cache.add(st.tokens[max(0, before - cfg.n_max) : before] + [tree.tokens[i] for i in accepted])
        self._since_chunk += len(new_tokens)
        if self._since_chunk >= cfg.cache_output_chunk:
            self._flush_output(st)

    def _flush_output(self, st) -> None:
        """The model's output since the last chunk (with ``n_max`` tokens of context
        before it) into the CACHE."""
        chunk = min(self._since_chunk, len(st.output))
        if chunk > 0:
            st.session.cache.add(st.tokens[-(chunk + st.config.n_max) :])
        self._since_chunk = 0

    def close(self, st) -> None:
        # the tail of the output (shorter than a chunk: most editor completions are) is
        # the document's most recent output: keep it for the next request
        if self._since_chunk > 0:
            self._flush_output(st)
