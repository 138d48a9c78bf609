"""Suffix-array datastore against a brute-force reference."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fastcoder.datastore import TokenDatastore
from fastcoder.errors import DatastoreError


def brute(docs, context, n_max, n_min, max_depth, dead=()):
    """Longest suffix length, its occurrence count and all continuation prefix counts."""
    live = [d for i, d in enumerate(docs) if i not in dead]
    ctx = list(context)
    for n in range(min(n_max, len(ctx)), n_min - 1, -1):
        pat = ctx[-n:]
        counts: Counter = Counter()
        total = 0
        for d in live:
            for s in range(len(d) - n + 1):
                if list(d[s : s + n]) == pat:
                    total += 1
                    cont = list(d[s + n : s + n + max_depth])
                    for k in range(1, len(cont) + 1):
                        counts[tuple(cont[:k])] += 1
        if total:
            return n, total, counts
    return 0, 0, Counter()


docs_strategy = st.lists(st.lists(st.integers(0, 5), min_size=0, max_size=40), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(docs=docs_strategy, ctx=st.lists(st.integers(0, 5), min_size=0, max_size=20), data=st.data())
def test_retrieve_matches_brute_force(docs, ctx, data):
    dead = set(data.draw(st.sets(st.integers(0, len(docs) - 1), max_size=2)))
    ds = TokenDatastore.build(docs)
    n, total, counts = brute(docs, ctx, 16, 2, 4, dead)
    r = ds.retrieve(ctx, n_max=16, n_min=2, max_nodes=10_000, max_depth=4, dead_docs=np.array(sorted(dead), dtype=np.int64))
    assert r.match_len == n
    assert r.total == total
    assert dict(r.nodes) == dict(counts)


def test_top_nodes_are_heaviest_and_prefix_closed():
    rng = np.random.default_rng(1)
    docs = [rng.integers(0, 4, size=300).tolist() for _ in range(5)]
    ds = TokenDatastore.build(docs)
    ctx = [0, 1, 2]
    _, _, counts = brute(docs, ctx, 16, 2, 6)
    r = ds.retrieve(ctx, max_nodes=20, max_depth=6)
    got = dict(r.nodes)
    assert len(got) == 20
    for path, c in got.items():
        assert counts[path] == c  # exact counts
        assert all(path[:i] in got for i in range(1, len(path)))  # prefix-closed
    # nothing left out is heavier than the lightest kept node
    assert max((c for p, c in counts.items() if p not in got), default=0) <= min(got.values())


def test_large_token_ids_and_no_cross_document_match():
    big = 151_000
    ds = TokenDatastore.build([[big, big + 1, big + 2], [big + 3, big + 4]])
    r = ds.retrieve([big, big + 1], max_depth=4)
    assert r.match_len == 2 and dict(r.nodes) == {(big + 2,): 1}
    # the end of doc 0 followed by the start of doc 1 must not match across the separator
    assert ds.retrieve([big + 2, big + 3]).match_len == 0
    assert ds.retrieve([big + 1, big + 2], max_depth=4).nodes == []  # doc end: no continuation


def test_save_load_roundtrip_is_memory_mapped(tmp_path):
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 200_000, size=100).tolist() for _ in range(4)]
    ds = TokenDatastore.build(docs, fingerprint="fp1", meta={"src": "x"})
    path = tmp_path / "d.fcds"
    ds.save(path)
    back = TokenDatastore.load(path, expected_fingerprint="fp1")
    assert isinstance(back.tokens, np.memmap) and isinstance(back.sa, np.memmap)
    assert back.meta == {"src": "x"} and back.n_docs == 4 and back.n_tokens == 400
    back.check()
    ctx = docs[2][10:20]
    assert back.retrieve(ctx).nodes == ds.retrieve(ctx).nodes
    assert not list(tmp_path.glob("*.tmp"))


def test_foreign_and_corrupt_files_are_rejected(tmp_path):
    ds = TokenDatastore.build([[1, 2, 3, 4]], fingerprint="fp1")
    path = tmp_path / "d.fcds"
    ds.save(path)
    with pytest.raises(DatastoreError, match="tokenizer"):
        TokenDatastore.load(path, expected_fingerprint="other")
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DatastoreError, match="checksum"):
        TokenDatastore.load(path)
    path.write_bytes(bytes(raw[:-5]))
    with pytest.raises(DatastoreError, match="truncated"):
        TokenDatastore.load(path)
    (tmp_path / "x").write_bytes(b"hello world, not a store")
    with pytest.raises(DatastoreError, match="magic"):
        TokenDatastore.load(tmp_path / "x")


def test_check_detects_a_broken_suffix_array():
    ds = TokenDatastore.build([[3, 1, 2, 3, 1, 0, 5, 4]])
    ds.check()
    sa = np.array(ds.sa)
    sa[[0, 5]] = sa[[5, 0]]
    with pytest.raises(DatastoreError):
        TokenDatastore(ds.tokens, sa, ds.doc_starts).check(samples=100)


def test_a_stores_answers_are_kept_for_a_repeated_range_and_equal_fresh_ones():
    """Typing asks a store for the same short matches again and again: the continuations
    of a suffix-array range are kept (per store, LRU, apart for each set of dead
    documents) and equal a fresh computation."""
    from fastcoder.search import search

    rng = np.random.default_rng(5)
    docs = [rng.integers(0, 5, size=int(rng.integers(5, 60))) for _ in range(40)]
    store, fresh = TokenDatastore.build(docs), TokenDatastore.build(docs)
    for _ in range(30):
        ctx = rng.integers(0, 5, size=2).tolist()
        a = store.retrieve(ctx, n_max=2, n_min=1, max_nodes=16, max_depth=6)
        fresh.memo = type(fresh.memo)()  # nothing kept: computed afresh
        b = fresh.retrieve(ctx, n_max=2, n_min=1, max_nodes=16, max_depth=6)
        assert (a.match_len, a.nodes, a.total) == (b.match_len, b.nodes, b.total)
    assert store.memo.hits > 0  # 30 two-token contexts over a 5-token vocabulary repeat
    for dead in (np.array([0, 1]), np.array([0, 1, 2, 3, 4, 5])):  # tombstoned documents
        ctx = [1, 2]
        fresh.memo = type(fresh.memo)()
        a, b = search([(store, dead)], ctx, n_min=1), search([(fresh, dead)], ctx, n_min=1)
        assert (a.match_len, a.nodes, a.total) == (b.match_len, b.nodes, b.total)
        again = search([(store, dead)], ctx, n_min=1)
        assert (again.match_len, again.nodes, again.total) == (a.match_len, a.nodes, a.total)


def test_clear_memos_empties_every_memo_a_store_holds():
    """A benchmark starts each method's run as cold as the others' (``clear_memos``): the
    continuation memo of a store, of each shard of a sharded store, None skipped."""
    from types import SimpleNamespace

    from fastcoder.datastore import clear_memos

    a = TokenDatastore.build([[1, 2, 3, 4, 1, 2, 3, 5]])
    b = TokenDatastore.build([[7, 8, 9, 7, 8, 6]])
    for store, ctx in ((a, [1, 2]), (b, [7, 8])):
        store.retrieve(ctx, n_min=1)
        store.retrieve(ctx, n_min=1)
        assert store.memo.hits >= 1 and len(store.memo._items) > 0
    clear_memos(a, None, SimpleNamespace(shards=[b]))
    assert not a.memo._items and not b.memo._items
    hits = a.memo.hits
    a.retrieve([1, 2], n_min=1)
    assert a.memo.hits == hits  # searched again, not remembered


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc (Linux)")
def test_a_suffix_sort_starts_no_openmp_threads_of_its_own() -> None:
    """pydivsufsort's OpenMP sort binds to torch's OpenMP runtime: a thread that sorted
    would own a team of that runtime's threads for as long as it lives, and with more OpenMP
    threads than CPUs every model step waits on wake-ups (``fastcoder.datastore._one_omp_thread``).
    A build in an index thread starts no native thread (fails without the fix: 2 more)."""
    import threading

    import torch  # noqa: F401  (loaded first, as in the server: its runtime's symbols win)

    from fastcoder.datastore import TokenDatastore

    docs = [np.random.default_rng(0).integers(0, 1000, 200_000).tolist()]
    before = set(os.listdir("/proc/self/task"))
    built, release = threading.Event(), threading.Event()

    def build() -> None:
        TokenDatastore.build(docs)
        built.set()
        release.wait(30)

    thread = threading.Thread(target=build)
    thread.start()
    try:
        assert built.wait(120)
        python_threads = {str(t.native_id) for t in threading.enumerate()}
        started = set(os.listdir("/proc/self/task")) - before
        assert started - python_threads == set()  # no native (OpenMP) thread beside the builder
    finally:
        release.set()
        thread.join()
