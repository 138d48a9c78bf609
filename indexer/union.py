"""Retrieval over several token datastores as if they were one.

D_r is a base store (with tombstoned documents) plus a small delta store. Merging two
separate top-k answers would give approximate counts (a path can be in one store's
top-k and just below the other's), so instead the search runs *jointly*:

* the match length is the longest over all parts (a suffix occurs in the union iff it
  occurs in one of them), and the occurrences are those of every part that reaches it;
* the continuation trie is expanded best-first exactly like
  :meth:`fastcoder.datastore.TokenDatastore.continuations`, with a node's count summed
  over the parts' run lengths and children pushed in ascending token order.

The result is therefore *identical* to ``TokenDatastore.retrieve`` on a fresh build of
the live documents of all parts (same match length, total, paths, counts and order),
which the tests check against such a brute-force build.
"""

from __future__ import annotations

import heapq
from typing import Sequence

import numpy as np

from fastcoder.datastore import SEP, Retrieval, TokenDatastore

Part = tuple[TokenDatastore, "np.ndarray | None"]
"""A store and its dead document ids (sorted int64, or None)."""


def _runs(store: TokenDatastore, pos: np.ndarray, depth: int) -> list[tuple[int, int, int]]:
    """(token, start, end) runs of the column ``depth`` tokens after each position."""
    tokens = store.tokens
    idx = pos + depth
    col = np.full(pos.size, SEP, dtype=np.int32)
    ok = idx < tokens.size
    col[ok] = tokens[idx[ok]]
    bounds = np.flatnonzero(col[1:] != col[:-1]) + 1
    starts = np.concatenate(([0], bounds)).tolist()
    ends = np.concatenate((bounds, [col.size])).tolist()
    sep = int(SEP)
    out = []
    for s, e in zip(starts, ends):
        tok = int(col[s])
        if tok != sep:
            out.append((tok, s, e))
    return out


def union_continuations(
    parts: Sequence[tuple[TokenDatastore, np.ndarray]],
    *,
    max_nodes: int = 64,
    max_depth: int = 16,
) -> list[tuple[tuple[int, ...], int]]:
    """Heaviest continuation prefixes over several stores at once, exact counts.

    Parameters:
        parts: (store, start positions) pairs; each position array sorted in that
            store's suffix-array order (as from a suffix-array range, filtered or not).
        max_nodes: how many nodes to return.
        max_depth: longest path.
    """
    out: list[tuple[tuple[int, ...], int]] = []
    parts = [(s, p) for s, p in parts if p.size]
    if not parts or max_nodes <= 0 or max_depth <= 0:
        return out
    heap: list[tuple[int, int, tuple[int, ...], list[np.ndarray | None]]] = []
    counter = 0

    def push_children(path: tuple[int, ...], positions: list[np.ndarray | None]) -> None:
        nonlocal counter
        if len(path) >= max_depth:
            return
        children: dict[int, list] = {}
        for k, (store, _) in enumerate(parts):
            pos = positions[k]
            if pos is None or pos.size == 0:
                continue
            for tok, s, e in _runs(store, pos, len(path)):
                slot = children.get(tok)
                if slot is None:
                    slot = children[tok] = [0, [None] * len(parts)]
                slot[0] += e - s
                slot[1][k] = pos[s:e]
        for tok in sorted(children):
            count, pos_by_part = children[tok]
            counter += 1
            heapq.heappush(heap, (-count, counter, path + (tok,), pos_by_part))

    push_children((), [p for _, p in parts])
    while heap and len(out) < max_nodes:
        neg, _, path, positions = heapq.heappop(heap)
        out.append((path, -neg))
        push_children(path, positions)
    return out


def union_retrieve(
    parts: Sequence[Part],
    context: Sequence[int],
    *,
    n_max: int = 16,
    n_min: int = 2,
    max_nodes: int = 64,
    max_depth: int = 16,
) -> Retrieval:
    """Longest-suffix match of ``context`` over the live documents of all ``parts`` and
    its heaviest continuations, as one :class:`~fastcoder.datastore.Retrieval`.

    Parameters:
        parts: (store, dead document ids or None) pairs.
        context: token ids; only the last ``n_max`` are used.
        n_max, n_min: longest and shortest suffix tried.
        max_nodes, max_depth: size of the continuation trie returned.
    """
    ctx = list(context)[-n_max:]
    found: list[tuple[TokenDatastore, int, np.ndarray]] = []
    best = 0
    for store, dead in parts:
        if store is None or store.sa.size == 0:
            continue
        m, pos = store.longest_match(ctx, n_max, n_min, dead)
        if m:
            found.append((store, m, pos))
            best = max(best, m)
    if best == 0:
        return Retrieval()
    hits = [(store, pos + best) for store, m, pos in found if m == best]
    nodes = union_continuations(hits, max_nodes=max_nodes, max_depth=max_depth)
    return Retrieval(match_len=best, nodes=nodes, total=int(sum(p.size for _, p in hits)))
