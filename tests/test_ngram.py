"""The in-memory n-gram index (CACHE and live context) against brute force; bounds."""

from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from fastcoder.ngram import NgramIndex


def brute(seqs, ctx, n_max, k, depth):
    best, conts = 0, []
    for s in seqs:
        for end in range(k, len(s)):
            m = 0
            while m < min(n_max, len(ctx)) and end - m - 1 >= 0 and s[end - m - 1] == ctx[len(ctx) - m - 1]:
                m += 1
            if m < k:
                continue
            if m > best:
                best, conts = m, [s[end : end + depth]]
            elif m == best:
                conts.append(s[end : end + depth])
    counts = Counter()
    for c in conts:
        for d in range(1, len(c) + 1):
            counts[tuple(c[:d])] += 1
    return best, counts


@settings(max_examples=200, deadline=None)
@given(
    seqs=st.lists(st.lists(st.integers(0, 6), max_size=30), min_size=1, max_size=5),
    ctx=st.lists(st.integers(0, 6), min_size=1, max_size=12),
    key_len=st.sampled_from([1, 2, 3]),
)
def test_retrieve_matches_brute_force(seqs, ctx, key_len):
    """The longest suffix of at least ``key_len`` tokens (two-token keys looked up
    first, one-token keys where those find nothing) and its continuations' counts."""
    idx = NgramIndex(key_len=key_len, max_sequences=100, max_candidates=10_000)
    for s in seqs[:-1]:
        idx.add(s)
    sid = idx.add(seqs[-1][:3])
    idx.extend(sid, seqs[-1][3:])  # a growing sequence (the live context) indexes the same
    r = idx.retrieve(ctx, n_max=16, max_nodes=10_000, max_depth=3)
    best, counts = brute(seqs, ctx, 16, key_len, 3)
    assert r.match_len == (best if counts else 0)
    assert dict(r.nodes) == dict(counts)


@pytest.mark.parametrize("key_len", [1, 2])
def test_bounded_with_fifo_eviction(key_len):
    idx = NgramIndex(key_len=key_len, max_sequences=3)
    for i in range(10):
        idx.add([100 + i, 7, 8, 9])
    assert len(idx) == 3
    # only the 3 newest sequences remain searchable
    assert idx.retrieve([106, 7]).match_len == (0 if key_len == 2 else 1)  # (7,) still occurs
    assert idx.retrieve([5, 106]).match_len == 0
    assert idx.retrieve([5, 108]).match_len == (0 if key_len == 2 else 1)
    assert dict(idx.retrieve([109, 7], max_depth=1).nodes) == {(8,): 1}
    assert dict(idx.retrieve([7, 8], max_depth=1).nodes) == {(9,): 3}


@settings(max_examples=100, deadline=None)
@given(
    seqs=st.lists(st.lists(st.integers(0, 3), max_size=25), min_size=1, max_size=4),
    ctx=st.lists(st.integers(0, 3), min_size=2, max_size=8),
    recency=st.sampled_from([0.5, 0.1]),
)
def test_recency_weights_the_most_recent_occurrence_first(seqs, ctx, recency):
    idx = NgramIndex(key_len=2, max_sequences=100, max_candidates=10_000)
    for s in seqs:
        idx.add(s)
    r = idx.retrieve(ctx, n_max=16, max_nodes=10_000, max_depth=3, recency=recency)
    best, _ = brute(seqs, ctx, 16, 2, 3)
    # brute force: occurrences of the longest match, most recent (last added, furthest) first
    occ = []
    for s in seqs:
        for end in range(2, len(s)):
            m = 0
            while m < min(16, len(ctx)) and end - m - 1 >= 0 and s[end - m - 1] == ctx[len(ctx) - m - 1]:
                m += 1
            if m == best and best >= 2:
                occ.append(s[end : end + 3])
    occ.reverse()
    weights = Counter()
    for rank, c in enumerate(occ):
        for d in range(1, len(c) + 1):
            weights[tuple(c[:d])] += recency**rank
    got = dict(r.nodes)
    assert set(got) == set(weights)
    for p, w in weights.items():
        assert abs(got[p] - w) < 1e-9
    if occ:
        assert abs(r.total - sum(recency**i for i in range(len(occ)))) < 1e-9
        # the heaviest first-level node is the most recent occurrence's next token
        # whenever recency leaves it ahead of all older ones together
        if recency <= 0.5 and len(occ[0]) > 0:
            top = max((p for p in got if len(p) == 1), key=lambda p: got[p])
            assert got[top] >= got[(occ[0][0],)] - 1e-9


def _state(index):
    """Everything a lookup reads: the sequences and each key's occurrences (in order)."""
    return {sid: list(index.sequence(sid)) for sid in [index.last_id]}, {k: list(v) for k, v in index._index.items()}


@settings(max_examples=150, deadline=None)
@given(
    first=st.lists(st.integers(0, 3), max_size=120),
    keep=st.integers(0, 130),
    more=st.lists(st.integers(0, 3), max_size=40),
    key_len=st.sampled_from([1, 2, 3]),
    ctx=st.lists(st.integers(0, 3), min_size=1, max_size=8),
)
def test_a_truncated_and_extended_index_equals_a_fresh_one(first, keep, more, key_len, ctx):
    """The live context kept across generations: cut back to the shared prefix and
    extended, it is the index of the new sequence, occurrences beyond ``max_candidates``
    included (4 symbols over 120 tokens: most keys occur more often than the 5 walked)."""
    kept = NgramIndex(key_len=key_len, max_sequences=1, max_candidates=5, truncatable=True)
    sid = kept.add(first)
    kept.truncate(sid, keep)
    kept.extend(sid, more)
    fresh = NgramIndex(key_len=key_len, max_sequences=1, max_candidates=5, truncatable=True)
    fresh.add(first[:keep] + more)
    assert _state(kept)[0][sid] == _state(fresh)[0][fresh.last_id]
    assert {k: [e for _, e in v] for k, v in _state(kept)[1].items()} == {k: [e for _, e in v] for k, v in _state(fresh)[1].items()}
    a, b = kept.retrieve(ctx, n_max=6, max_nodes=20, max_depth=4), fresh.retrieve(ctx, n_max=6, max_nodes=20, max_depth=4)
    assert (a.match_len, a.nodes, a.total) == (b.match_len, b.nodes, b.total)
    # and a lookup walks the same candidates as a bounded (deque) index does
    bounded = NgramIndex(key_len=key_len, max_sequences=1, max_candidates=5)
    bounded.add(first[:keep] + more)
    c = bounded.retrieve(ctx, n_max=6, max_nodes=20, max_depth=4)
    assert (a.match_len, a.nodes, a.total) == (c.match_len, c.nodes, c.total)


def test_truncate_refuses_a_bounded_index_and_an_older_sequence():
    bounded = NgramIndex(max_sequences=1)
    with pytest.raises(ValueError, match="truncatable"):
        bounded.truncate(bounded.add([1, 2, 3]), 1)
    idx = NgramIndex(max_sequences=3, truncatable=True)
    old = idx.add([1, 2, 3])
    idx.add([4, 5])
    with pytest.raises(ValueError, match="last stored"):
        idx.truncate(old, 1)
