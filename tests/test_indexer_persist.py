"""Persistence: restart applies only the changes; corrupt or foreign stores are rebuilt."""

from __future__ import annotations

import json
import os

import pytest

from fastcoder.datastore import TokenDatastore
from fastcoder.errors import DatastoreError
from indexer.persist import IndexStore, store_dir
from indexer.workspace import WorkspaceIndex
from test_indexer_support import has_phrase, isolated_cache, phrase, wait_until, write  # noqa: F401 - fixture

FP = "fp-test"


def make(root, tok, **kw) -> WorkspaceIndex:
    return WorkspaceIndex([root], tok, fingerprint=FP, **kw)


@pytest.fixture
def repo_dir(tmp_path):
    root = tmp_path / "ws"
    for tag in ("alpha", "bravo", "charlie", "delta"):
        write(root / f"{tag}.py", f"# {tag}\n{phrase(tag)}\n")
    write(root / "pkg" / "echo.py", f"{phrase('echo')}\n")
    return root


def test_store_location_depends_on_root_and_tokenizer(tmp_path, isolated_cache):
    a = store_dir([tmp_path / "a"], "fp1")
    assert a.parent == isolated_cache / "index"
    assert a != store_dir([tmp_path / "b"], "fp1") and a != store_dir([tmp_path / "a"], "fp2")
    assert a.name.endswith("-fp1")


def test_restart_applies_only_changes(repo_dir, tiny_tokenizer, isolated_cache):
    tok = tiny_tokenizer
    idx = make(repo_dir, tok)
    rep = idx.open()
    assert rep.mode == "built" and rep.files == 5
    idx.stop()
    assert (idx.store.directory / "manifest.json").is_file()

    # while "not running": delete one, change one, touch one without changing it, add one
    (repo_dir / "alpha.py").unlink()
    write(repo_dir / "bravo.py", f"{phrase('foxtrot')}\n")
    charlie = repo_dir / "charlie.py"
    st = charlie.stat()
    os.utime(charlie, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    write(repo_dir / "new.py", f"{phrase('golf')}\n")

    idx2 = make(repo_dir, tok)
    rep2 = idx2.open()
    assert rep2.mode == "loaded"
    assert (rep2.changed, rep2.removed) == (2, 1)
    assert idx2.repo.files_tokenized == 2  # bravo and new; charlie hashed equal, others skipped by mtime+size
    src = idx2.source
    assert not has_phrase(src, tok, "alpha")
    assert not has_phrase(src, tok, "bravo")
    for tag in ("foxtrot", "charlie", "delta", "echo", "golf"):
        assert has_phrase(src, tok, tag), tag
    s = idx2.stats()
    assert s["files"] == 5 and s["base_dead"] == 2 and s["delta_files"] == 2
    idx2.stop()

    # a third run with nothing changed tokenizes nothing and still finds everything
    idx3 = make(repo_dir, tok)
    rep3 = idx3.open()
    assert (rep3.mode, rep3.changed, rep3.removed) == ("loaded", 0, 0)
    assert idx3.repo.files_tokenized == 0
    assert has_phrase(idx3.source, tok, "foxtrot") and not has_phrase(idx3.source, tok, "alpha")
    idx3.stop()


def _corrupt_base(store_directory):
    base = next(store_directory.glob("base-*.fcds"))
    data = bytearray(base.read_bytes())
    data[-5] ^= 0xFF
    base.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    [
        "flip_byte",
        "truncate",
        "bad_manifest_json",
        "manifest_wrong_doc",
        "foreign_fingerprint",
        "missing_base",
    ],
)
def test_corrupt_store_is_rebuilt(repo_dir, tiny_tokenizer, isolated_cache, damage):
    tok = tiny_tokenizer
    idx = make(repo_dir, tok)
    idx.open()
    idx.stop()
    d = idx.store.directory
    man = d / "manifest.json"
    if damage == "flip_byte":
        _corrupt_base(d)
    elif damage == "truncate":
        base = next(d.glob("base-*.fcds"))
        base.write_bytes(base.read_bytes()[:-16])
    elif damage == "bad_manifest_json":
        man.write_text("{not json")
    elif damage == "manifest_wrong_doc":
        m = json.loads(man.read_text())
        next(iter(m["files"].values()))["doc"] = 999
        man.write_text(json.dumps(m))
    elif damage == "foreign_fingerprint":
        m = json.loads(man.read_text())
        m["fingerprint"] = "someone-else"
        man.write_text(json.dumps(m))
    elif damage == "missing_base":
        next(d.glob("base-*.fcds")).unlink()
    with pytest.raises(DatastoreError):
        IndexStore(d, FP).load()
    idx2 = make(repo_dir, tok)
    rep = idx2.open()
    assert rep.mode == "built" and rep.reason
    assert rep.files == 5 and has_phrase(idx2.source, tok, "echo")
    idx2.stop()
    IndexStore(d, FP).load()  # the rebuilt store is sound


def test_save_is_atomic_and_cleans_old_files(repo_dir, tiny_tokenizer, isolated_cache):
    tok = tiny_tokenizer
    idx = make(repo_dir, tok, merge_files=2)
    idx.open()
    d = idx.store.directory
    first = {p.name for p in d.glob("*.fcds")}
    for tag in ("hotel", "india", "juliet"):
        write(repo_dir / f"{tag}.py", f"{phrase(tag)}\n")
        idx.repo.update_file(repo_dir / f"{tag}.py")
    assert idx.repo.wait_merged(30)
    idx.save()
    names = {p.name for p in d.iterdir()}
    assert not any(n.endswith(".tmp") for n in names)
    m = json.loads((d / "manifest.json").read_text())
    assert m["base"] in names and m["base"] not in first  # the merged base was written anew
    assert len(list(d.glob("base-*.fcds"))) == 1  # the old one was removed
    for entry in m["files"].values():
        assert {"mtime_ns", "size", "sha256", "store", "doc", "tokens"} <= set(entry)
    st = IndexStore(d, FP).load()
    assert len(st.records) == 8
    assert TokenDatastore.load(d / m["base"]).meta.get("kind") == "repo"
    idx.stop()


def test_stale_stores_are_pruned_and_the_live_ones_kept(repo_dir, tmp_path, tiny_tokenizer, isolated_cache):
    """Stores of workspaces that are gone, or not saved for STALE_DAYS, and first builds
    that never wrote a manifest are deleted; the store being opened, a live workspace's,
    and one another process is saving stay. At most once a day (a marker's mtime)."""
    import fcntl
    import time

    from indexer.persist import STALE_DAYS, prune_stores

    gone_root, live_root = tmp_path / "deleted-project", tmp_path / "other-project"
    live_root.mkdir()
    index_dir = isolated_cache / "index"

    def store(name: str, roots: list, saved_at: float) -> os.PathLike:
        d = index_dir / name
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({"format": 1, "roots": [str(r) for r in roots], "saved_at": saved_at}))
        (d / "base-x.fcds").write_bytes(b"x")
        return d

    now = time.time()
    name = "{:016x}-fp".format
    gone = store(name(1), [gone_root], now)
    old = store(name(2), [live_root], now - (STALE_DAYS + 1) * 86400)
    live = store(name(3), [live_root], now)
    busy = store(name(4), [gone_root], now)
    unfinished = index_dir / name(5)
    unfinished.mkdir()
    os.utime(unfinished, (now - 2 * 86400, now - 2 * 86400))
    fresh_unfinished = index_dir / name(6)
    fresh_unfinished.mkdir()
    foreign = index_dir / "not-a-store"  # not a store's name: never touched
    foreign.mkdir()
    os.utime(foreign, (now - 90 * 86400, now - 90 * 86400))
    with open(busy / "lock", "a+b") as held:  # another process saving it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        deleted = prune_stores(index_dir, keep=None, now=now)
    assert sorted(p.name for p in deleted) == [name(1), name(2), name(5)]
    assert not gone.exists() and not old.exists() and not unfinished.exists()
    assert live.exists() and busy.exists() and fresh_unfinished.exists() and foreign.exists()
    assert prune_stores(index_dir, now=now + 60) == []  # not again within a day, even with busy free now
    assert sorted(p.name for p in prune_stores(index_dir, now=now + 86400 + 1)) == [name(4), name(6)]

    # the server's path: opening a workspace's index in the shared cache prunes the others
    store(name(7), [gone_root], now)
    os.utime(index_dir / ".pruned", (now - 2 * 86400, now - 2 * 86400))
    idx = make(repo_dir, tiny_tokenizer)
    idx.start()
    assert idx.wait_ready(60) and idx.flush()
    idx.stop()
    assert not (index_dir / name(7)).exists() and idx.store.directory.exists() and live.exists() and foreign.exists()


def test_unsaved_buffer_text_is_never_written_to_the_store(repo_dir, tiny_tokenizer, isolated_cache):
    """Text typed into an editor buffer and never saved is searchable while the buffer is
    open, but no store file holds it, through merges and saves (the base and the delta
    saved are decoded whole, tombstoned documents included); the next start reads the
    file from disk, and an unsaved new file is not there at all. A buffer equal to its
    file is saved as the file."""
    tok = tiny_tokenizer
    idx = make(repo_dir, tok, merge_files=3)
    idx.open()
    idx.start()
    try:
        idx.update_buffer(repo_dir / "alpha.py", f"# alpha\n{phrase('secret')}\n")  # an unsaved edit
        idx.update_buffer(repo_dir / "draft.py", f"{phrase('hotel')}\n")  # a new file, never saved
        idx.update_buffer(repo_dir / "bravo.py", (repo_dir / "bravo.py").read_text())  # opened, not changed
        assert idx.flush()
        assert has_phrase(idx.source, tok, "secret") and has_phrase(idx.source, tok, "hotel")
        for tag in ("india", "juliet", "kilo", "lima"):  # files changed on disk: merges run
            write(repo_dir / f"{tag}.py", f"{phrase(tag)}\n")
        wait_until(lambda: idx.flush() and has_phrase(idx.source, tok, "lima"), what="the new files")
        idx.repo.merge()  # and one more, with the buffers open
        assert idx.repo.wait_merged(10) and idx.save(force=True)
        assert has_phrase(idx.source, tok, "secret")  # still searchable in this session
        saved = IndexStore(idx.store.directory, FP).load()
        stores = [saved.base] + ([saved.delta] if saved.delta is not None else [])
        texts = [tok.decode(list(store.doc_tokens(i))) for store in stores for i in range(store.n_docs)]
        assert texts and not any("secretw" in t or "hotelw" in t for t in texts)
        names = {os.path.basename(k): r for k, r in saved.records.items()}
        assert "alpha.py" not in names and "draft.py" not in names
        # a buffer equal to its file is saved as the file (the next start does not read it again)
        assert not names["bravo.py"].buffer and names["bravo.py"].mtime_ns == (repo_dir / "bravo.py").stat().st_mtime_ns
    finally:
        idx.stop()
    idx2 = make(repo_dir, tok)
    assert idx2.open().mode == "loaded"
    assert has_phrase(idx2.source, tok, "alpha") and not has_phrase(idx2.source, tok, "secret")
    assert not has_phrase(idx2.source, tok, "hotel") and has_phrase(idx2.source, tok, "lima")
    idx2.stop()
