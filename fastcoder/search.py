"""The one exact retrieval search: longest suffix match + top-k continuations, over
one token store or several searched as one.

Every datastore the engine drafts from goes through :func:`search`: a single
:class:`~fastcoder.datastore.TokenDatastore` (D_c, a test store), D_r's base + delta
with tombstoned documents (``indexer.repo_store``) and a folder of shards (D_d, a
sharded D_c: ``indexer.shards.ShardedStore``). A part is a store and its dead document
ids (or None).

1. **Match length**: the longest suffix of the context, ``n_max`` down to ``n_min``
   tokens, that occurs in the live documents of any part. Occurrence is monotone in the
   length, so each part binary-searches it; parts are searched largest first and a
   later part is only asked whether it reaches the best length so far (one range
   look-up when it does not). Ranges only: no positions are copied until the end.
2. **Continuations**: the occurrences of that suffix in every part that reaches it are
   sorted by continuation (suffix-array order), so a prefix's count is a run length.
   The trie is expanded best-first (count, then ascending token) with exact counts
   summed over the parts; a node pushes only its ``max_nodes - found`` heaviest
   children (lower siblings can never be popped within the budget), which keeps a
   common suffix with thousands of distinct next tokens cheap. One store's range of up
   to ``MATRIX_ROWS`` occurrences (nearly every search) is instead counted in one pass
   over its continuation matrix and the same best-first order replayed on the counts
   (:func:`_matrix_continuations`): on 851 searches recorded from the repository
   suite, 2-4x faster for 17-256 occurrences, 2x for up to 16 and for 257-2,048,
   same answer; larger ranges stay node by node (a 16-column matrix of them cost 7x).

The answer is identical to one store built over the live documents of all parts (same
match length, total, paths, counts and order); the tests check it against brute force.
``max_positions`` (off by default) counts on an evenly strided sample of a huge range
and scales the counts: then the counts are estimates (``total`` stays exact).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import deque
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

TokenDatastore = Any  # fastcoder.datastore.TokenDatastore (it imports this module)

SEP = np.int32(2**31 - 1)
"""The document separator of a token store: an id no tokenizer produces."""

Path_ = tuple[int, ...]


@dataclass
class Retrieval:
    """What one source drafts for one context.

    ``match_len``: length of the longest context suffix found (0 = nothing).
    ``nodes``: (token path from the match, exact count) for the heaviest prefixes,
    every path's own prefixes included, heaviest first.
    ``total``: number of occurrences of the matched suffix (the root count).
    """

    match_len: int = 0
    nodes: list[tuple[Path_, int]] = field(default_factory=list)
    total: int = 0

    def __bool__(self) -> bool:
        return bool(self.nodes)


Part = tuple[TokenDatastore, "np.ndarray | None"]
"""A store and its dead document ids (sorted int64, or None)."""

_SEP = int(SEP)


def _live(store: TokenDatastore, lo: int, hi: int, dead: np.ndarray | None) -> np.ndarray:
    """Start positions of suffix-array range [lo, hi) outside the dead documents (sorted
    by continuation, as the range)."""
    pos = np.asarray(store._sa[lo:hi], dtype=np.int64)
    if dead is not None and dead.size and pos.size:
        pos = pos[~np.isin(store.doc_of(pos), dead)]
    return pos


def _occurs(store: TokenDatastore, ctx: list[int], n: int, dead: np.ndarray | None) -> tuple[int, int] | None:
    """The range of the last ``n`` tokens of ``ctx`` when they occur in a live document."""
    lo, hi = store.find_range(ctx[-n:])
    if hi <= lo:
        return None
    if dead is not None and dead.size and _live(store, lo, hi, dead).size == 0:
        return None
    return lo, hi


def reach(store: TokenDatastore, ctx: list[int], at_least: int, n_min: int, dead: np.ndarray | None = None) -> tuple[int, int, int]:
    """(length, lo, hi): the longest suffix length >= max(``at_least``, ``n_min``) of
    ``ctx`` that occurs in a live document of ``store``, and its suffix-array range;
    (0, 0, 0) when none does."""
    lo_n = max(at_least, n_min)
    hi_n = len(ctx)
    if lo_n > hi_n or store.sa.size == 0:
        return 0, 0, 0
    r = _occurs(store, ctx, lo_n, dead)
    if r is None:
        return 0, 0, 0
    best = (lo_n, r[0], r[1])
    lo_n += 1
    while lo_n <= hi_n:
        n = (lo_n + hi_n) // 2
        r = _occurs(store, ctx, n, dead)
        if r is not None:
            best = (n, r[0], r[1])
            lo_n = n + 1
        else:
            hi_n = n - 1
    return best


def _children(tokens: np.ndarray, pos: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens, run starts, run ends) of the column ``depth`` tokens after each
    position; separators (and the array's end) are left out. ``pos`` is sorted by
    continuation, so equal tokens are adjacent runs."""
    n = tokens.size
    if pos.size <= 16:  # a deep, rare path: plain Python beats a dozen numpy calls
        toks_l: list[int] = []
        starts_l: list[int] = []
        ends_l: list[int] = []
        prev = None
        for i, p in enumerate(pos.tolist()):
            j = p + depth
            t = int(tokens[j]) if j < n else _SEP
            if t != prev:
                if prev is not None and prev != _SEP:
                    ends_l.append(i)
                if t != _SEP:
                    toks_l.append(t)
                    starts_l.append(i)
                prev = t
        if prev is not None and prev != _SEP:
            ends_l.append(pos.size)
        return (np.asarray(toks_l, dtype=np.int64), np.asarray(starts_l, dtype=np.int64),
                np.asarray(ends_l, dtype=np.int64))
    idx = pos + depth
    if int(idx.max()) < n:
        col = np.asarray(tokens[idx])
    else:
        col = np.full(pos.size, SEP, dtype=np.int32)
        ok = idx < n
        col[ok] = tokens[idx[ok]]
    bounds = np.flatnonzero(col[1:] != col[:-1]) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [col.size]))
    toks = col[starts].astype(np.int64)
    keep = toks != _SEP
    return toks[keep], starts[keep], ends[keep]


MATRIX_ROWS = 2048
"""Ranges of at most this many occurrences in all (one store's, or several stores' together:
a workspace's base and the delta of the files being edited) are counted in one pass over
their (occurrences x ``max_depth``) continuation matrix (:func:`_matrix_continuations`);
larger ones are expanded node by node, best first."""


def _continuation_matrix(tokens: np.ndarray, pos: np.ndarray, max_depth: int) -> np.ndarray:
    """Row i: the ``max_depth`` tokens after ``pos[i]``, ``SEP`` from the first separator
    (or the array's end) on."""
    n = tokens.size
    idx = pos[:, None] + np.arange(max_depth, dtype=np.int64)
    if int(idx[:, -1].max()) < n:
        mat = np.asarray(tokens[idx])
    else:
        mat = np.full(idx.shape, SEP, dtype=np.int32)
        ok = idx < n
        mat[ok] = tokens[idx[ok]]
    mat[~np.logical_and.accumulate(mat != SEP, axis=1)] = SEP
    return mat


def _matrix_continuations(parts: Sequence[tuple[np.ndarray, np.ndarray]], max_nodes: int, max_depth: int,
                          scale: int) -> list[tuple[tuple[int, ...], int]]:  # fmt: skip
    """:func:`continuations` from the whole continuation matrix at once.

    Row i holds the ``max_depth`` tokens after an occurrence (a separator, or the array's
    end, ends a row: later columns do not count). One store's rows are in suffix-array
    order; several stores' rows are sorted together (lexicographically): either way every
    trie node is a run of adjacent rows: a row starts a node at depth d when it
    differs from the row above in one of its first d + 1 tokens. Counts are run lengths,
    children come in ascending token order, and no child is heavier than its parent.

    The best-first order (count, then push order: a node's children are pushed in
    ascending token order when it is taken) is replayed exactly as the node-by-node
    expansion makes it. Let ``floor`` be the count of the ``max_nodes``-th heaviest node:
    every heavier node is taken first (fewer than ``max_nodes``; a heap), and the nodes
    weighing exactly ``floor`` then leave in the order they were pushed (a queue: the
    ``floor`` roots, then the ``floor`` children of the heavier nodes as those were taken,
    then, breadth first, their own ``floor`` children). Lighter nodes are never taken."""
    mats = [_continuation_matrix(tokens, pos, max_depth) for tokens, pos in parts]
    mat = mats[0] if len(mats) == 1 else np.concatenate(mats)
    if len(mats) > 1:
        mat = mat[np.lexsort(mat.T[::-1])]  # column 0 the primary key
    valid = mat != SEP
    start = np.ones(mat.shape, dtype=bool)
    np.logical_or.accumulate(mat[1:] != mat[:-1], axis=1, out=start[1:])
    start &= valid
    per_depth = start.sum(axis=0)
    if not per_depth[0]:
        return []
    # global node ids, depth by depth, top to bottom within a depth
    offsets = np.concatenate(([0], np.cumsum(per_depth)[:-1]))
    gid = np.cumsum(start, axis=0) - 1 + offsets  # (rows, depths): the node each row is in
    total = int(per_depth.sum())
    counts = np.bincount(gid[valid], minlength=total)
    d_of, r_of = np.nonzero(start.T)  # node g starts at row r_of[g], depth d_of[g]
    parent = np.where(d_of > 0, gid[r_of, np.maximum(d_of - 1, 0)], -1)
    k = min(max_nodes, total)
    heavy = counts[counts > 1]
    floor = int(np.partition(heavy, heavy.size - k)[heavy.size - k]) if heavy.size >= k else 1
    cnt = counts.tolist()
    par = parent.tolist()  # non-decreasing: a node's children are one run of ids
    roots = int(per_depth[0])

    def tok(g: int) -> int:
        return int(mat[r_of[g], d_of[g]])

    def kids(g: int) -> range:
        lo = bisect_left(par, g, roots)
        return range(lo, bisect_left(par, g + 1, lo))

    out: list[tuple[tuple[int, ...], int]] = []
    path_of: dict[int, tuple[int, ...]] = {}
    queue: deque[int] = deque()  # nodes weighing `floor`, in push order
    heap: list[tuple[int, int, int]] = []
    for g in range(roots):  # roots are pushed first, in ascending token order
        if cnt[g] >= floor:
            path_of[g] = (tok(g),)
            if cnt[g] > floor:
                heap.append((-cnt[g], g, g))
            else:
                queue.append(g)
    heapq.heapify(heap)
    order = roots
    while heap:  # the nodes heavier than `floor` (fewer than max_nodes)
        neg, _, g = heapq.heappop(heap)
        path = path_of.pop(g)
        out.append((path, -neg * scale))
        for c in kids(g):
            if cnt[c] > floor:
                path_of[c] = path + (tok(c),)
                heapq.heappush(heap, (-cnt[c], order, c))
                order += 1
            elif cnt[c] == floor and len(out) + len(queue) < max_nodes:
                path_of[c] = path + (tok(c),)
                queue.append(c)
    while queue and len(out) < max_nodes:  # then `floor` nodes, first pushed first
        g = queue.popleft()
        path = path_of.pop(g)
        out.append((path, floor * scale))
        for c in kids(g):
            if len(out) + len(queue) >= max_nodes:
                break
            if cnt[c] == floor:
                path_of[c] = path + (tok(c),)
                queue.append(c)
    return out


def continuations(
    parts: Sequence[tuple[TokenDatastore, np.ndarray]],
    *,
    max_nodes: int = 64,
    max_depth: int = 16,
    scale: int = 1,
) -> list[tuple[tuple[int, ...], int]]:
    """The ``max_nodes`` heaviest continuation prefixes over several stores at once,
    exact counts (multiplied by ``scale`` for sampled positions), heaviest first, ties
    by ascending token.

    Parameters:
        parts: (store, start positions) pairs; each position array sorted in that
            store's suffix-array order (a suffix-array range, filtered or strided).
        max_nodes: how many nodes to return.
        max_depth: longest path.
    """
    out: list[tuple[tuple[int, ...], int]] = []
    parts = [(s._tok, p) for s, p in parts if p.size]
    if not parts or max_nodes <= 0 or max_depth <= 0:
        return out
    if sum(p.size for _, p in parts) <= MATRIX_ROWS:
        return _matrix_continuations([(t, np.asarray(p, dtype=np.int64)) for t, p in parts], max_nodes, max_depth, scale)
    heap: list[tuple[int, int, tuple[int, ...], list[np.ndarray | None]]] = []
    counter = 0
    single = len(parts) == 1

    def push_children(path: tuple[int, ...], positions: list[np.ndarray | None], budget: int) -> None:
        nonlocal counter
        if len(path) >= max_depth or budget <= 0:
            return
        runs = []
        for k, (tokens, _) in enumerate(parts):
            pos = positions[k]
            if pos is None or pos.size == 0:
                continue
            toks, starts, ends = _children(tokens, pos, len(path))
            if toks.size:
                runs.append((k, toks, starts, ends))
        if not runs:
            return
        if single:
            _, toks, starts, ends = runs[0]
            counts = ends - starts
            uniq = toks  # runs of one sorted part are distinct tokens
        else:
            all_toks = np.concatenate([r[1] for r in runs])
            all_counts = np.concatenate([r[3] - r[2] for r in runs])
            uniq, inv = np.unique(all_toks, return_inverse=True)
            counts = np.bincount(inv, weights=all_counts).astype(np.int64)
        idx = np.arange(uniq.size)
        if len(heap) >= budget:
            # the heap holds `budget` nodes (pruned below): a child no heavier than the
            # lightest of them ranks after all of them (it is pushed later) and can never
            # be taken within the budget; nor can its descendants
            idx = idx[counts > -max(heap)[0]]
        if idx.size > budget:
            # heaviest first, ties by ascending token (the order they would be pushed)
            idx = idx[np.lexsort((uniq[idx], -counts[idx]))[:budget]]
            idx = np.sort(idx) if single else idx[np.argsort(uniq[idx])]
        elif not single:
            idx = idx[np.argsort(uniq[idx])]
        chosen = idx
        if single:
            k, toks, starts, ends = runs[0]
            pos = positions[k]
            for i in chosen.tolist():
                counter += 1
                slot: list[np.ndarray | None] = [pos[int(starts[i]) : int(ends[i])]]
                heapq.heappush(heap, (-int(counts[i]), counter, path + (int(toks[i]),), slot))
            return
        want = {int(uniq[i]): int(counts[i]) for i in chosen.tolist()}
        slots: dict[int, list[np.ndarray | None]] = {t: [None] * len(parts) for t in want}
        for k, toks, starts, ends in runs:
            pos = positions[k]
            for t, a, b in zip(toks.tolist(), starts.tolist(), ends.tolist()):
                slot = slots.get(t)
                if slot is not None:
                    slot[k] = pos[a:b]
        for t in sorted(want):
            counter += 1
            heapq.heappush(heap, (-want[t], counter, path + (t,), slots[t]))

    push_children((), [p for _, p in parts], max_nodes)
    while heap and len(out) < max_nodes:
        neg, _, path, positions = heapq.heappop(heap)
        out.append((path, -neg * scale))
        left = max_nodes - len(out)
        push_children(path, positions, left)
        if len(heap) > left:  # only the `left` best can still be taken (ranks only worsen)
            heap = heapq.nsmallest(left, heap)  # sorted, hence a heap
    return out


def search(
    parts: Sequence[Part],
    context: Sequence[int],
    *,
    n_max: int = 16,
    n_min: int = 2,
    max_nodes: int = 64,
    max_depth: int = 16,
    max_positions: int = 0,
    pool: Executor | None = None,
) -> Retrieval:
    """Longest-suffix match of ``context`` over the live documents of all ``parts`` and
    its heaviest continuations, as one :class:`~fastcoder.datastore.Retrieval`.

    Parameters:
        parts: (store, dead document ids or None) pairs; None stores are skipped.
        context: token ids; only the last ``n_max`` are used.
        n_max, n_min: longest and shortest suffix tried.
        max_nodes, max_depth: size of the continuation trie returned.
        max_positions: count on an evenly strided sample of at most this many
            occurrences (scaled counts); 0 = exact.
        pool: look up every part's match length in parallel (no pruning) instead.
    """
    ctx = [int(t) for t in list(context)[-n_max:]]
    live = [(s, d) for s, d in parts if s is not None and s.sa.size]
    if not live or len(ctx) < n_min:
        return Retrieval()
    found: list[tuple[TokenDatastore, np.ndarray | None, int, int, int]] = []
    if pool is not None and len(live) > 1:
        futures = [pool.submit(reach, s, ctx, n_min, n_min, d) for s, d in live]
        for (s, d), f in zip(live, futures):
            m, lo, hi = f.result()
            if m:
                found.append((s, d, m, lo, hi))
    else:
        best = n_min
        for s, d in sorted(live, key=lambda p: -int(p[0].sa.size)):
            m, lo, hi = reach(s, ctx, best, n_min, d)
            if m:
                found.append((s, d, m, lo, hi))
                best = max(best, m)
    if not found:
        return Retrieval()
    best = max(f[2] for f in found)
    top = [f for f in found if f[2] == best]
    # one store: its answer for this suffix-array range (and these dead documents: a
    # workspace's base keeps the same tombstones while a file is typed in) is kept
    memo = getattr(top[0][0], "memo", None) if len(top) == 1 else None
    if memo is not None:
        _, dead, _, lo, hi = top[0]
        key = (lo, hi, best, max_positions, max_nodes, max_depth, None if dead is None else np.asarray(dead).tobytes())
        kept = memo.get(key)
        if kept is not None:
            nodes, total = kept
            return Retrieval(match_len=best, nodes=list(nodes), total=total)
    hits = [(s, _live(s, lo, hi, d)) for s, d, m, lo, hi in top]
    total = int(sum(p.size for _, p in hits))
    stride = -(-total // max_positions) if max_positions and total > max_positions else 1
    if stride > 1:
        hits = [(s, p[::stride]) for s, p in hits]
    nodes = continuations([(s, p + best) for s, p in hits], max_nodes=max_nodes, max_depth=max_depth, scale=stride)
    if memo is not None:
        memo.put(key, (tuple(nodes), total))
    return Retrieval(match_len=best, nodes=nodes, total=total)
