"""D_r: base + delta + tombstones searched jointly equals a fresh build of the live files."""

from __future__ import annotations

import random
import sysconfig
import threading
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastcoder.datastore import TokenDatastore
from indexer.repo_store import RepoIndex
from fastcoder.search import search

# ---------------------------------------------------------------------------- union search

docs_st = st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=25), min_size=0, max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    base_docs=docs_st,
    delta_docs=docs_st,
    dead_mask=st.lists(st.booleans(), min_size=8, max_size=8),
    context=st.lists(st.integers(0, 3), min_size=0, max_size=10),
    max_nodes=st.integers(1, 12),
    max_depth=st.integers(1, 6),
    n_min=st.integers(1, 3),
)
def test_union_equals_fresh_build(base_docs, delta_docs, dead_mask, context, max_nodes, max_depth, n_min):
    base = TokenDatastore.build(base_docs)
    delta = TokenDatastore.build(delta_docs)
    dead = np.array([i for i in range(len(base_docs)) if dead_mask[i]], dtype=np.int64)
    live = [d for i, d in enumerate(base_docs) if not dead_mask[i]] + delta_docs
    random.Random(0).shuffle(live)  # document order must not matter
    ref = TokenDatastore.build(live)
    kw = dict(n_max=6, n_min=n_min, max_nodes=max_nodes, max_depth=max_depth)
    got = search([(base, dead if dead.size else None), (delta, None)], context, **kw)
    want = ref.retrieve(context, **kw)
    assert got == want


# ---------------------------------------------------------------------------- RepoIndex


def _corpus() -> list[str]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for name in ("textwrap.py", "shlex.py", "fnmatch.py", "bisect.py", "heapq.py", "glob.py", "colorsys.py", "keyword.py"):
        p = lib / name
        if p.exists():
            texts.append(p.read_text(encoding="utf-8"))
    return texts


def _contexts(tok, texts: list[str], n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ids = tok(rng.choice(texts), add_special_tokens=False)["input_ids"]
        end = rng.randrange(2, max(3, len(ids)))
        ctx = ids[max(0, end - 16) : end]
        if rng.random() < 0.2:  # perturb: shorter matches
            ctx[-rng.randrange(1, len(ctx) + 1)] = rng.randrange(len(tok))
        out.append(ctx)
    return out


def _check_against_reference(repo: RepoIndex, tok, live_texts: dict[str, str], contexts) -> None:
    # the reference tokenizes the live texts itself: no shared state with the index
    ref = TokenDatastore.build([tok(t, add_special_tokens=False)["input_ids"] for t in live_texts.values()])
    assert repo.stats()["files"] == len(live_texts)
    for ctx in contexts:
        for kw in (dict(max_nodes=64, max_depth=16), dict(max_nodes=5, max_depth=3)):
            assert repo.retrieve(ctx, n_max=16, n_min=2, **kw) == ref.retrieve(ctx, n_max=16, n_min=2, **kw)


def test_base_delta_tombstones_equal_brute_force(tmp_path, tiny_tokenizer):
    tok = tiny_tokenizer
    texts = _corpus()
    files = {}
    for i, t in enumerate(texts):
        p = tmp_path / f"m{i}.py"
        p.write_text(t, encoding="utf-8")
        files[str(p)] = t
    repo = RepoIndex(tok, merge_files=10_000, merge_tokens=10**9, background_merge=False)
    from indexer.scan import read_source

    repo.build([(p, read_source(p)) for p in files])
    contexts = _contexts(tok, texts, 60, seed=1)
    _check_against_reference(repo, tok, files, contexts)

    keys = list(files)
    # change two files (tombstone + delta), delete one (tombstone), add one (delta)
    for k in keys[:2]:
        new = files[k].replace("def ", "def changed_", 3) + "\nzeta_marker = 1\n"
        Path(k).write_text(new, encoding="utf-8")
        files[k] = new
    assert [c.kind for c in repo.update_files(keys[:2])] == ["indexed", "indexed"]
    Path(keys[2]).unlink()
    assert repo.update_file(keys[2]).kind == "removed"
    del files[keys[2]]
    extra = tmp_path / "extra.py"
    extra.write_text(texts[0][:3000], encoding="utf-8")  # a duplicate region: counts add up across stores
    repo.update_file(extra)
    files[str(extra)] = texts[0][:3000]
    s = repo.stats()
    assert s["base_dead"] == 3 and s["delta_files"] == 3
    contexts += _contexts(tok, list(files.values()), 60, seed=2)
    _check_against_reference(repo, tok, files, contexts)

    # a buffer overrides the disk until released
    buf = "zeta_buffer_only = compute(1, 2)\n" * 3
    repo.update_file(keys[3], text=buf)
    _check_against_reference(repo, tok, {**files, keys[3]: buf}, contexts)
    repo.update_file(keys[3])  # the disk version is ignored while the buffer is open
    _check_against_reference(repo, tok, {**files, keys[3]: buf}, contexts)
    repo.release_buffer(keys[3])
    _check_against_reference(repo, tok, files, contexts)

    # merging folds everything into one base without re-tokenizing
    before = repo.files_tokenized
    v = repo.version
    repo.merge()
    assert repo.files_tokenized == before and repo.version > v
    s = repo.stats()
    assert s["base_dead"] == 0 and s["delta_files"] == 0 and s["base_docs"] == len(files)
    _check_against_reference(repo, tok, files, contexts)

    # an open buffer stays in the delta through a merge (it is never persisted), and
    # searches still equal a fresh build; released, the next merge takes the file in
    repo.update_file(keys[3], text=buf)
    repo.merge()
    s = repo.stats()
    assert s["delta_files"] == 1 and s["base_docs"] == len(files) - 1
    _check_against_reference(repo, tok, {**files, keys[3]: buf}, contexts)
    repo.release_buffer(keys[3])
    repo.merge()
    assert repo.stats()["delta_files"] == 0
    _check_against_reference(repo, tok, files, contexts)


def test_open_buffers_do_not_count_toward_a_merge(tmp_path, tiny_tokenizer):
    """Buffers stay in the delta, so they must not make the delta look due for a merge:
    more open buffers than ``merge_files`` would merge again and again for nothing."""
    repo = RepoIndex(tiny_tokenizer, merge_files=2)
    for i in range(5):
        repo.update_file(tmp_path / f"open{i}.py", text=f"value_{i} = compute({i})\n")
    assert repo.wait_merged(10) and not repo.merging
    s = repo.stats()
    assert s["delta_files"] == 5 and s["base_docs"] == 0 and s["buffers"] == 5


def test_unchanged_content_is_not_retokenized(tmp_path, tiny_tokenizer):
    p = tmp_path / "a.py"
    p.write_text("x = 1\n")
    repo = RepoIndex(tiny_tokenizer)
    assert repo.update_file(p).kind == "indexed"
    n, v = repo.files_tokenized, repo.version
    p.write_text("x = 1\n")  # touched, same content
    assert repo.update_file(p).kind == "unchanged"
    assert repo.files_tokenized == n and repo.version == v
    assert repo.remove_file(tmp_path / "nope.py").kind == "skipped"


def test_unreadable_update_removes(tmp_path, tiny_tokenizer):
    p = tmp_path / "a.py"
    p.write_text("x = 1\n")
    repo = RepoIndex(tiny_tokenizer)
    repo.update_file(p)
    p.write_bytes(b"\xff\xfe not utf-8")
    assert repo.update_file(p).kind == "removed"
    assert repo.stats()["files"] == 0


def test_a_buffer_over_the_file_limit_is_not_indexed(tmp_path, tiny_tokenizer):
    """An editor buffer is held to the disk's size limit (bytes of UTF-8): a file that grows
    over it in the editor leaves the index, and comes back when it shrinks."""
    p = tmp_path / "a.py"
    p.write_text("x = 1\n")
    repo = RepoIndex(tiny_tokenizer, max_bytes=100)
    assert repo.update_file(p).kind == "indexed"
    assert repo.update_file(p, text="y = 'é'\n" * 12).kind == "removed"  # 96 characters, 108 bytes
    assert repo.stats()["files"] == 0
    assert repo.update_file(p, text="y = 2\n").kind == "indexed"
    assert repo.stats()["files"] == 1


def test_background_merge_threshold_and_concurrent_searches(tmp_path, tiny_tokenizer):
    tok = tiny_tokenizer
    texts = _corpus()
    repo = RepoIndex(tok, merge_files=3, merge_tokens=10**9)
    contexts = _contexts(tok, texts, 30, seed=3)
    errors: list[BaseException] = []
    stop = threading.Event()

    def searcher() -> None:
        try:
            while not stop.is_set():
                for ctx in contexts:
                    r = repo.retrieve(ctx)
                    paths = {p for p, _ in r.nodes}
                    assert all(p[:-1] in paths or len(p) == 1 for p in paths)  # prefix-closed
                    assert sum(c for p, c in r.nodes if len(p) == 1) <= r.total
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=searcher) for _ in range(2)]
    for t in threads:
        t.start()
    files = {}
    try:
        for round_ in range(3):
            for i, t in enumerate(texts):
                p = tmp_path / f"m{i}.py"
                text = t + f"\nround_marker_{round_} = {i}\n"
                p.write_text(text, encoding="utf-8")
                files[str(p)] = text
                repo.update_file(p)
        assert repo.wait_merged(30)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    repo.merge()  # whatever arrived after the last background merge
    s = repo.stats()
    assert s["delta_files"] == 0 and s["base_docs"] == len(files)
    _check_against_reference(repo, tok, files, contexts)


def test_edits_during_a_merge_win(tmp_path, tiny_tokenizer, monkeypatch):
    """A file changed or removed while a new base is being built stays correct."""
    tok = tiny_tokenizer
    a, b, c = (tmp_path / n for n in ("a.py", "b.py", "c.py"))
    a.write_text("alpha_one = 1\n")
    b.write_text("bravo_two = 2\n")
    c.write_text("charlie_three = 3\n")
    repo = RepoIndex(tok, background_merge=False, merge_files=10**6)
    for p in (a, b, c):
        repo.update_file(p)
    real_build = TokenDatastore.build.__func__

    def build_and_edit(cls, docs, **kw):
        store = real_build(cls, docs, **kw)
        if kw.get("meta", {}).get("kind") == "repo":  # the new base, built off the lock
            a.write_text("alpha_changed = 10\n")
            repo.update_file(a)
            repo.remove_file(b)
        return store

    monkeypatch.setattr(TokenDatastore, "build", classmethod(build_and_edit))
    repo.merge()
    monkeypatch.undo()
    live = {str(a): "alpha_changed = 10\n", str(c): "charlie_three = 3\n"}
    assert set(repo.keys()) == set(live)
    ref = TokenDatastore.build([tok(t, add_special_tokens=False)["input_ids"] for t in live.values()])
    for text in ("alpha_one", "alpha_changed", "bravo_two", "charlie_three"):
        ctx = tok(text + " =", add_special_tokens=False)["input_ids"]
        assert repo.retrieve(ctx) == ref.retrieve(ctx)
    assert {k: np.asarray(v).tolist() for k, v in repo.live_documents().items()} == {
        k: tok(t, add_special_tokens=False)["input_ids"] for k, t in live.items()
    }
