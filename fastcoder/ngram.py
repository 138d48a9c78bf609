"""Small in-memory suffix-match index over a few token sequences.

Used for the sources that change every step and are small: the FastCoder CACHE
(many short verified sequences, bounded, oldest evicted first) and the live context
(prompt + output so far, one growing sequence). Lookup is by a hash of the last
two tokens (then, with ``key_len`` 1, of the last token when no two-token suffix
occurs), then each candidate is extended backwards to find the longest matching
suffix (up to ``n_max``), as in the datastore; continuations of the occurrences of
that longest suffix are counted into a small trie.

Why two key lengths: a one-token key alone would make every lookup walk the last
``max_candidates`` occurrences of a common token (a space, a newline) in Python and
forget older, longer matches past them; the two-token index finds those, and the
one-token index only answers where it has nothing.

Cost: O(candidates · match length), with at most ``max_candidates`` (the most recent
occurrences) per key — far below one forward pass.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from itertools import islice
from typing import Sequence

from fastcoder.datastore import Retrieval

Path_ = tuple[int, ...]


class NgramIndex:
    """Sequences of tokens with a hash index on ``key_len``-grams.

    Parameters
    ----------
    key_len: the shortest match returned (n_min); keys of ``max(key_len, 2)`` tokens
        are looked up first, then (key_len 1) one-token keys.
    max_sequences: bound on stored sequences; the oldest are evicted (FIFO).
    max_candidates: occurrences a lookup walks per key (the most recent).
    truncatable: keep every occurrence (a lookup still walks ``max_candidates``), so that
        :meth:`truncate` leaves exactly the index of the shorter sequence; otherwise
        only ``max_candidates`` occurrences per key are kept.
    """

    def __init__(self, key_len: int = 2, max_sequences: int = 2000, max_candidates: int = 64,
                 truncatable: bool = False) -> None:  # fmt: skip
        if key_len < 1:
            raise ValueError("key_len must be >= 1")
        self.key_len = key_len
        self._key_lens = tuple(sorted({key_len, max(key_len, 2)}, reverse=True))
        self.max_sequences = max_sequences
        self.max_candidates = max_candidates
        self.truncatable = truncatable
        self._seqs: OrderedDict[int, list[int]] = OrderedDict()
        self._index: dict[Path_, deque[tuple[int, int]] | list[tuple[int, int]]] = {}
        self._next_id = 0

    def _bucket(self, items=()) -> deque[tuple[int, int]] | list[tuple[int, int]]:
        return list(items) if self.truncatable else deque(items, maxlen=self.max_candidates)

    def __len__(self) -> int:
        return len(self._seqs)

    @property
    def n_tokens(self) -> int:
        return sum(len(s) for s in self._seqs.values())

    def clear(self) -> None:
        self._seqs.clear()
        self._index.clear()

    # -------------------------------------------------------------- updates
    def add(self, tokens: Sequence[int]) -> int:
        """Store a new sequence; returns its id. Evicts the oldest beyond the bound."""
        sid = self._next_id
        self._next_id += 1
        self._seqs[sid] = []
        self.extend(sid, tokens)
        while len(self._seqs) > self.max_sequences:
            self._evict_oldest()
        return sid

    def extend(self, sid: int, tokens: Sequence[int]) -> None:
        """Append tokens to stored sequence ``sid`` (the live context grows this way)."""
        seq = self._seqs[sid]
        start = len(seq)
        seq.extend(int(t) for t in tokens)
        index, new = self._index, self._bucket
        for k in self._key_lens:  # keys of different lengths never collide in one dict
            first = max(start, k)
            # key = seq[end-k:end], continuation starts at ``end`` (keys built by zip: a
            # keystroke's generation indexes hundreds of tokens in the model thread)
            keys = zip(*(seq[first - k + j : len(seq) - k + j] for j in range(k)))
            for end, key in enumerate(keys, first):
                bucket = index.get(key)
                if bucket is None:
                    index[key] = new(((sid, end),))
                else:
                    bucket.append((sid, end))

    @property
    def last_id(self) -> int | None:
        """The id of the last stored sequence (None when empty)."""
        return next(reversed(self._seqs), None)

    def sequence(self, sid: int) -> list[int]:
        """The stored tokens of sequence ``sid`` (not a copy: do not modify)."""
        return self._seqs[sid]

    def truncate(self, sid: int, length: int) -> None:
        """Keep the first ``length`` tokens of sequence ``sid``, the last one stored
        (the live context, cut back to the prompt a new generation shares with the
        last). Needs ``truncatable``: the index is then exactly that of the shorter
        sequence, as if it had been added so."""
        if not self.truncatable:
            raise ValueError("truncate needs an index made with truncatable=True")
        if sid != self.last_id:
            raise ValueError("only the last stored sequence can be truncated")
        seq = self._seqs[sid]
        if length >= len(seq):
            return
        index, n = self._index, len(seq)
        for k in self._key_lens:
            first = max(length, k)
            keys = list(zip(*(seq[first - k + j : n - k + j] for j in range(k))))
            # the occurrences to drop are the last ones of their keys (appended in order)
            for end in range(n - 1, first - 1, -1):
                key = keys[end - first]
                bucket = index[key]
                if bucket[-1] != (sid, end):
                    raise ValueError(f"sequence {sid} was not the last one extended")
                bucket.pop()
                if not bucket:
                    del index[key]
        del seq[length:]

    def _evict_oldest(self) -> None:
        sid, seq = self._seqs.popitem(last=False)
        for k in self._key_lens:
            for end in range(k, len(seq)):
                key = tuple(seq[end - k : end])
                bucket = self._index.get(key)
                if bucket is None:
                    continue
                kept = self._bucket(c for c in bucket if c[0] != sid)
                if kept:
                    self._index[key] = kept
                else:
                    del self._index[key]

    # -------------------------------------------------------------- lookup
    def retrieve(
        self,
        context: Sequence[int],
        *,
        n_max: int = 16,
        max_nodes: int = 64,
        max_depth: int = 16,
        most_recent_only: bool = False,
        recency: float = 1.0,
    ) -> Retrieval:
        """Longest suffix (>= key_len, <= n_max) of ``context`` found in the stored
        sequences, and the heaviest continuation prefixes of its occurrences.

        An occurrence at the very end of a sequence (the live context's own tail) has
        no continuation and is skipped.
        ``most_recent_only``: keep only the most recent occurrence (one chain).
        ``recency``: the i-th most recent occurrence counts ``recency ** i`` (1.0 = plain
        counts; below 1 the most recent occurrence's continuation ranks first, as in
        prompt lookup that takes the latest match). ``total`` is then the summed weight.
        """
        ctx = [int(t) for t in context[-n_max:]]
        n_ctx = len(ctx)
        best = 0
        hits: list[tuple[list[int], int]] = []
        for k in self._key_lens:  # longest key first; a shorter one only where it found nothing
            if n_ctx < k:
                continue
            for sid, end in islice(reversed(self._index.get(tuple(ctx[-k:]), ())), self.max_candidates):  # most recent first
                seq = self._seqs[sid]
                if end >= len(seq):
                    continue
                m = k
                while m < n_ctx and end - m - 1 >= 0 and seq[end - m - 1] == ctx[n_ctx - m - 1]:
                    m += 1
                if m > best:
                    best, hits = m, [(seq, end)]
                elif m == best:
                    hits.append((seq, end))
            if hits:
                break
        if not hits:
            return Retrieval()
        if most_recent_only:
            hits = hits[:1]
        # count continuation prefixes in a trie (hits are most recent first): node =
        # [weight, children by token, first seen], never a tuple per prefix of every hit
        root: dict[int, list] = {}
        seen, weight, total = 0, 1.0, 0.0
        for seq, end in hits:
            level = root
            for t in seq[end : end + max_depth]:
                node = level.get(t)
                if node is None:
                    node = level[t] = [0.0, {}, seen]
                    seen += 1
                node[0] += weight
                level = node[1]
            total += weight
            weight *= recency
        whole = recency == 1.0  # plain counts (ints)
        if whole:
            total = len(hits)
        # best first by (weight, length, first seen): a node never outweighs its parent and
        # is longer, so this pops exactly the order of sorting every prefix by that key
        # (the ``max_nodes`` first of them, a prefix-closed set)
        heap = [(-node[0], 1, node[2], (t,), node) for t, node in root.items()]
        heapq.heapify(heap)
        nodes: list[tuple[Path_, float]] = []
        while heap and len(nodes) < max_nodes:
            neg, depth, _, path, node = heapq.heappop(heap)
            nodes.append((path, int(-neg) if whole else -neg))
            for t, child in node[1].items():
                heapq.heappush(heap, (-child[0], depth + 1, child[2], path + (t,), child))
        return Retrieval(match_len=best, nodes=nodes, total=total)
