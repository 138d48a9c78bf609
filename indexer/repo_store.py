"""D_r: the incremental token datastore of a repository.

:class:`RepoIndex` holds

* a large **base** :class:`~fastcoder.datastore.TokenDatastore`,
* **tombstones**: ids of base documents that are stale (the file changed or is gone),
* a small **delta** store of the files changed since the base was built,

and searches them jointly (:func:`fastcoder.search.search`): the answer equals a fresh build of
the live files. A change re-tokenizes the file(s) and rebuilds only the delta (a few
milliseconds); when the delta grows past a threshold, a background thread rebuilds
the base from the live documents (no re-tokenizing) and swaps it in.

Concurrency: every search reads one immutable :class:`~indexer.repo_records.Snapshot`
reference and takes no lock, so a search never waits for an update or a rebuild.
Writers serialise on a lock, build new stores (the big ones off the lock) and publish
a new snapshot by swapping one reference. Each file version carries a generation
number, so a base built while edits kept coming is reconciled with them before it is
published: a document that changed meanwhile is tombstoned in the new base, its newer
version stays in the delta.

Keys are absolute file paths (strings). Open editor buffers can override the disk:
``update_file(path, text)`` indexes ``text`` and ignores the disk version until
``release_buffer(path)``. A buffer whose text differs from the file on disk (unsaved
edits, a new file never saved) stays in the delta (merges and full builds leave it there)
and out of what is persisted (:meth:`RepoIndex.export_state`): text the user never saved is
never written to the index store; the next start reads the file from disk. A buffer equal
to its file (opened, or saved since) is indexed and persisted as the file.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from fastcoder.datastore import Retrieval, TokenDatastore
from indexer.repo_records import Change, FileRecord, SavedState, Snapshot, normalize_key
from indexer.scan import MAX_FILE_BYTES, SourceText, read_source
from indexer.tokenizing import batched
from fastcoder.search import search
from fastcoder.tokens import encode_batch
from indexer.priority import lower_thread_priority

log = logging.getLogger(__name__)

MERGE_TOKENS = 200_000
"""Delta size (tokens) that triggers a background merge into the base."""

MERGE_FILES = 50
"""Delta size (files) that triggers a background merge into the base."""


def _empty_store(fingerprint: str) -> TokenDatastore:
    return TokenDatastore.build([], fingerprint=fingerprint)


@dataclass
class _State:
    """The writer-side state, guarded by ``RepoIndex._lock``."""

    base: TokenDatastore
    base_docs: dict[str, int] = field(default_factory=dict)
    dead: set[int] = field(default_factory=set)
    delta_docs: dict[str, np.ndarray] = field(default_factory=dict)
    records: dict[str, FileRecord] = field(default_factory=dict)
    gens: dict[str, int] = field(default_factory=dict)


class RepoIndex:
    """Incremental repository datastore (D_r); a ``RetrievalSource``.

    Parameters:
        tokenizer: a Hugging Face fast tokenizer (files are tokenized in batches
            by :func:`fastcoder.tokens.encode_batch`, special tokens parsed).
        fingerprint: the tokenizer fingerprint recorded in the stores.
        merge_tokens, merge_files: delta size that triggers a background merge.
        max_bytes: files larger than this are not indexed.
        on_merged: called (from the merge thread) after a new base is published;
            e.g. to persist it. Exceptions from it are logged.
        background_merge: merge on a background thread (False: merge inline, for tests).
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        fingerprint: str = "",
        merge_tokens: int = MERGE_TOKENS,
        merge_files: int = MERGE_FILES,
        max_bytes: int = MAX_FILE_BYTES,
        on_merged: Callable[["RepoIndex"], None] | None = None,
        background_merge: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.fingerprint = fingerprint
        self.merge_tokens = merge_tokens
        self.merge_files = merge_files
        self.max_bytes = max_bytes
        self.on_merged = on_merged
        self.background_merge = background_merge
        self._lock = threading.RLock()
        self._tok_lock = threading.Lock()
        self._state = _State(base=_empty_store(fingerprint))
        self._overrides: dict[str, str] = {}
        self._next_gen = 0
        self._version = 0
        self._base_serial = 0
        self._merge_thread: threading.Thread | None = None
        self._closed = False
        self.files_tokenized = 0
        """Files tokenized since construction (tests use it to prove reuse)."""
        self._snap = Snapshot(self._state.base, np.zeros(0, np.int64), None, 0)

    # ------------------------------------------------------------------ reading
    @property
    def version(self) -> int:
        """Increments on every change of the searchable content."""
        return self._snap.version

    @property
    def base_serial(self) -> int:
        """Increments each time a new base store is installed (persistence uses it)."""
        return self._base_serial

    def snapshot(self) -> Snapshot:
        """The current immutable view."""
        return self._snap

    def retrieve(
        self,
        context: Sequence[int],
        *,
        n_max: int = 16,
        n_min: int = 2,
        max_nodes: int = 64,
        max_depth: int = 16,
    ) -> Retrieval:
        """Longest suffix match of ``context`` over the live files, and its heaviest
        continuations with exact counts (see :mod:`fastcoder.search`). Lock-free.

        Parameters:
            context: token ids (the last ``n_max`` are used).
            n_max, n_min: longest and shortest context suffix tried.
            max_nodes: most continuation-trie nodes returned.
            max_depth: longest continuation.
        """
        snap = self._snap
        parts = [(snap.base, snap.dead if snap.dead.size else None)]
        if snap.delta is not None:
            parts.append((snap.delta, None))
        return search(parts, context, n_max=n_max, n_min=n_min, max_nodes=max_nodes, max_depth=max_depth)

    def keys(self) -> list[str]:
        """Keys (absolute paths) of the indexed files."""
        with self._lock:
            return list(self._state.records)

    def record(self, key: str) -> FileRecord | None:
        """What is indexed for ``key``, or None."""
        return self._state.records.get(normalize_key(key))

    def buffer_text(self, key: str) -> str | None:
        """The editor buffer that overrides the disk for ``key``, or None."""
        return self._overrides.get(normalize_key(key))

    def has_override(self, key: str) -> bool:
        """Whether an editor buffer overrides the disk for ``key``."""
        return normalize_key(key) in self._overrides

    def live_documents(self) -> dict[str, np.ndarray]:
        """key -> token ids of every live file (a copy; for tests and tools)."""
        with self._lock:
            st = self._state
            out = {k: np.array(st.base.doc_tokens(i)) for k, i in st.base_docs.items()}
            out.update({k: v.copy() for k, v in st.delta_docs.items()})
            return out

    def stats(self) -> dict[str, Any]:
        """Counts: files, tokens (live), base docs/tokens/dead docs, delta files/tokens,
        version, files tokenized, whether a merge is running."""
        with self._lock:
            st = self._state
            snap = self._snap
            return {
                "files": len(st.records),
                "tokens": sum(r.tokens for r in st.records.values()),
                "base_docs": st.base.n_docs,
                "base_tokens": st.base.n_tokens,
                "base_dead": len(st.dead),
                "delta_files": len(st.delta_docs),
                "delta_tokens": snap.delta.n_tokens if snap.delta is not None else 0,
                "buffers": len(self._overrides),
                "version": snap.version,
                "files_tokenized": self.files_tokenized,
                "merging": self.merging,
            }

    @property
    def merging(self) -> bool:
        """Whether a background merge is running."""
        t = self._merge_thread
        return t is not None and t.is_alive()

    # ------------------------------------------------------------------ tokenizing
    def _tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        with self._tok_lock:
            ids = encode_batch(self.tokenizer, texts, special="parse")
            self.files_tokenized += len(texts)
        return ids

    def _tokenize_many(
        self,
        items: Sequence[tuple[str, SourceText]],
        progress: Callable[[int, int], None] | None = None,
    ) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        total = len(items)
        for batch in batched(items, lambda it: len(it[1].text)):
            out.extend(self._tokenize([src.text for _, src in batch]))
            if progress is not None:
                progress(len(out), total)
        return out

    # ------------------------------------------------------------------ publishing
    def _publish(self, *, delta_changed: bool = True) -> None:
        """Rebuild the delta (if asked) and swap in a new snapshot. Holds the lock."""
        st = self._state
        snap = self._snap
        delta = snap.delta
        if delta_changed:
            delta = (
                TokenDatastore.build(list(st.delta_docs.values()), fingerprint=self.fingerprint)
                if st.delta_docs
                else None
            )
        self._version += 1
        dead = np.array(sorted(st.dead), dtype=np.int64)
        self._snap = Snapshot(st.base, dead, delta, self._version)

    def _new_gen(self) -> int:
        self._next_gen += 1
        return self._next_gen

    # ------------------------------------------------------------------ updates
    def _content(self, key: str, text: str | None) -> SourceText | None:
        if text is None:
            text = self._overrides.get(key)
        if text is None:
            return read_source(key, self.max_bytes)
        # an editor buffer is held to the disk's limit: over it, the file is not indexed
        # (a 1.5 MB buffer took the index ~5 s of tokenizing and suffix sorting, beside
        # the first completion's prefill on a 2-core CPU)
        src = SourceText.of_buffer(text) if len(text) <= self.max_bytes else None  # (characters <= bytes)
        if src is None or src.size > self.max_bytes:
            log.debug("not indexing the buffer of %s: over the %d byte limit", key, self.max_bytes)
            return None
        return src

    def update_file(self, path: str | os.PathLike[str], text: str | None = None) -> Change:
        """Index the current content of one file; searchable when this returns.

        Parameters:
            path: the file (made absolute).
            text: an open editor buffer's text: indexed instead of the disk, and
                remembered (the disk is ignored for this file) until
                :meth:`release_buffer`. None: read the file, unless a buffer overrides it.
                A file that cannot be read (gone, binary, too large, not UTF-8) is
                removed from the index.
        """
        key = normalize_key(path)
        if text is not None:
            with self._lock:
                self._overrides[key] = text
        return self.update_files([key])[0]

    def update_files(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[Change]:
        """Index several files in batched tokenizer calls and one delta rebuild.

        Parameters:
            paths: the files; each is read unless an editor buffer overrides it, and
                removed from the index when it cannot be read.
            progress: ``progress(done, total)`` over the files that need tokenizing.
        """
        keys = list(dict.fromkeys(normalize_key(p) for p in paths))
        contents: dict[str, SourceText | None] = {}
        for key in keys:
            contents[key] = self._content(key, None)
        return self._apply(contents, progress)

    def remove_file(self, path: str | os.PathLike[str]) -> Change:
        """Drop a file (and any buffer override of it) from the index."""
        key = normalize_key(path)
        with self._lock:
            self._overrides.pop(key, None)
        return self._apply({key: None})[0]

    def remove_files(self, paths: Iterable[str | os.PathLike[str]]) -> list[Change]:
        """Drop several files at once."""
        keys = list(dict.fromkeys(normalize_key(p) for p in paths))
        with self._lock:
            for key in keys:
                self._overrides.pop(key, None)
        return self._apply({k: None for k in keys})

    def release_buffer(self, path: str | os.PathLike[str]) -> Change:
        """Forget the editor buffer of ``path`` and index the disk version again
        (or remove the file if it is no longer on disk)."""
        key = normalize_key(path)
        with self._lock:
            self._overrides.pop(key, None)
        return self.update_files([key])[0]

    def set_buffer(self, path: str | os.PathLike[str], text: str) -> None:
        """Remember an editor buffer for ``path`` without indexing it yet (the next
        :meth:`update_files` of it indexes the buffer instead of the disk)."""
        with self._lock:
            self._overrides[normalize_key(path)] = text

    def touch(self, path: str | os.PathLike[str], mtime_ns: int, size: int) -> None:
        """Record a new mtime/size for a file whose content is unchanged (no re-index)."""
        key = normalize_key(path)
        with self._lock:
            rec = self._state.records.get(key)
            if rec is not None and not rec.buffer:
                self._state.records[key] = replace(rec, mtime_ns=mtime_ns, size=size)

    def _apply(
        self,
        contents: Mapping[str, SourceText | None],
        progress: Callable[[int, int], None] | None = None,
    ) -> list[Change]:
        """Apply new contents (None: remove). Tokenizes off the writer lock, then checks
        again under it that nothing newer arrived in between."""
        st = self._state
        todo = [(k, c) for k, c in contents.items() if c is not None]
        # skip tokenizing content that is already indexed
        todo = [(k, c) for k, c in todo if (r := st.records.get(k)) is None or r.sha256 != c.sha256]
        ids = self._tokenize_many(todo, progress) if todo else []
        tokens = {k: arr for (k, _), arr in zip(todo, ids)}
        changes: list[Change] = []
        dirty = False
        with self._lock:
            st = self._state
            for key, src in contents.items():
                rec = st.records.get(key)
                if src is None:
                    if rec is None:
                        changes.append(Change(key, "skipped"))
                        continue
                    self._drop(key)
                    changes.append(Change(key, "removed"))
                    dirty = True
                    continue
                if rec is not None and rec.sha256 == src.sha256:
                    if src.mtime_ns >= 0 and not rec.buffer:
                        st.records[key] = replace(rec, mtime_ns=src.mtime_ns, size=src.size)
                    elif rec.buffer != (src.mtime_ns < 0):
                        st.records[key] = replace(rec, buffer=src.mtime_ns < 0, mtime_ns=src.mtime_ns)
                    changes.append(Change(key, "unchanged"))
                    continue
                arr = tokens.get(key)
                if arr is None:  # indexed content changed while we tokenized: redo it
                    arr = self._tokenize([src.text])[0]
                self._drop(key, keep_override=True)
                st.delta_docs[key] = arr
                st.records[key] = FileRecord(src.sha256, src.size, src.mtime_ns, int(arr.size), src.mtime_ns < 0)
                st.gens[key] = self._new_gen()
                changes.append(Change(key, "indexed", int(arr.size)))
                dirty = True
            if dirty:
                self._publish()
        if dirty:
            self._schedule_merge()
        return changes

    def _drop(self, key: str, keep_override: bool = False) -> None:
        """Remove ``key`` from base (tombstone) and delta. Holds the lock."""
        st = self._state
        doc = st.base_docs.pop(key, None)
        if doc is not None:
            st.dead.add(doc)
        st.delta_docs.pop(key, None)
        st.records.pop(key, None)
        st.gens.pop(key, None)
        if not keep_override:
            self._overrides.pop(key, None)

    # ------------------------------------------------------------------ full build
    def build(
        self,
        contents: Iterable[tuple[str | os.PathLike[str], SourceText]],
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        """Replace the whole index with ``contents`` (key, text) as one new base.

        Tokenizes in batches and builds off the writer lock; searches keep using the
        old snapshot meanwhile. Files an editor buffer overrides use the buffer. Edits
        made while it runs are kept (they win over what this build read).

        Parameters:
            contents: (path, :class:`~indexer.scan.SourceText`) of every file to index.
            progress: called as ``progress(files_done, files_total)`` after each batch.
        """
        with self._lock:
            gens = dict(self._state.gens)
            overrides = dict(self._overrides)
        items = list(dict((normalize_key(path), src) for path, src in contents).items())
        # an unsaved buffer (its text not the file's) is indexed in the delta, below
        unsaved = {key for key, text in overrides.items() if SourceText.of_buffer(text).sha256 != self._disk_sha(key)}
        buffers = [key for key, _ in items if key in unsaved]
        items = [(key, src) for key, src in items if key not in unsaved]
        ids = self._tokenize_many(items, progress)
        docs = [
            (key, arr, FileRecord(src.sha256, src.size, src.mtime_ns, int(arr.size), src.mtime_ns < 0))
            for (key, src), arr in zip(items, ids)
        ]
        self._install_base(docs, gens, keep=unsaved)
        if buffers:
            self.update_files(buffers)

    def _install_base(self, docs: list[tuple[str, np.ndarray, FileRecord]], gens: dict[str, int],
                      keep: set[str] = frozenset(), moved: dict[str, np.ndarray] | None = None) -> None:  # fmt: skip
        """Build a base from ``docs`` (off the lock) and publish it, reconciled with the
        changes made since ``gens`` (the generations when the plan was taken). ``keep``:
        keys left out of the new base on purpose (editor buffers), whose records stay;
        ``moved``: the tokens of those that were in the old base, which go to the delta."""
        base = TokenDatastore.build([d for _, d, _ in docs], fingerprint=self.fingerprint, meta={"kind": "repo"})
        with self._lock:
            st = self._state
            new_docs: dict[str, int] = {}
            dead: set[int] = set()
            for i, (key, _, rec) in enumerate(docs):
                if st.gens.get(key) == gens.get(key):
                    new_docs[key] = i
                    st.records[key] = rec
                    if key not in st.gens:
                        st.gens[key] = self._new_gen()
                else:
                    dead.add(i)  # changed or removed meanwhile: the newer state wins
            for key, arr in (moved or {}).items():
                if key in st.base_docs and st.gens.get(key) == gens.get(key):
                    st.delta_docs[key] = arr  # a buffer the old base held: to the delta
            for key in list(st.records):
                if key not in new_docs and key not in keep and st.gens.get(key) == gens.get(key):
                    # untouched since the plan but not in the new base: gone
                    st.records.pop(key, None)
                    st.gens.pop(key, None)
                    st.delta_docs.pop(key, None)
            for key in new_docs:
                st.delta_docs.pop(key, None)
            st.base = base
            st.base_docs = new_docs
            st.dead = dead
            self._base_serial += 1
            self._publish()

    # ------------------------------------------------------------------ merging
    def _needs_merge(self) -> bool:
        st = self._state
        files = [a for k, a in st.delta_docs.items() if not self._is_buffer(k)]  # buffers stay in the delta
        delta_tokens = sum(int(a.size) for a in files)
        return (
            len(files) >= self.merge_files
            or delta_tokens >= self.merge_tokens
            or (len(st.dead) > max(64, st.base.n_docs // 4))
        )

    def _schedule_merge(self) -> None:
        """Start a merge if the delta (or the tombstones) grew past the thresholds:
        on a background thread, or inline when ``background_merge`` is False."""
        with self._lock:
            if self._closed or self.merging or not self._needs_merge():
                return
            if self.background_merge:
                t = threading.Thread(target=self._merge_worker, name="fastcoder-merge", daemon=True)
                self._merge_thread = t
                t.start()
                return
        self.merge()

    def _merge_worker(self) -> None:
        lower_thread_priority()
        try:
            while not self._closed:
                self.merge()
                with self._lock:
                    if not self._needs_merge():
                        return
        except Exception:  # a merge failing must not kill the index: the delta still serves
            log.exception("merging the repository index failed")

    def merge(self) -> None:
        """Fold the delta into a new base (and drop tombstones) now, on this thread.
        Re-uses the stored tokens: nothing is re-tokenized."""
        t0 = time.perf_counter()
        with self._lock:
            examined = {k: r.sha256 for k, r in self._state.records.items() if r.buffer}
        saved = {k for k, sha in examined.items() if sha == self._disk_sha(k)}  # buffers equal to their files
        with self._lock:
            st = self._state
            gens = dict(st.gens)
            base = st.base
            # unsaved buffers (and any that changed since they were compared) stay in the delta
            keep = {k for k, r in st.records.items() if r.buffer and not (k in saved and examined[k] == r.sha256)}
            plan: list[tuple[str, np.ndarray | int, FileRecord]] = [
                (k, i, st.records[k]) for k, i in st.base_docs.items() if k not in keep
            ] + [(k, a, st.records[k]) for k, a in st.delta_docs.items() if k not in keep]
            moved = {k: i for k, i in st.base_docs.items() if k in keep}
        docs = [
            (k, base.doc_tokens(x) if isinstance(x, int) else x, rec) for k, x, rec in plan
        ]
        self._install_base(docs, gens, keep, {k: np.array(base.doc_tokens(i), dtype=np.int32) for k, i in moved.items()})
        log.debug("merged %d files into a new base in %.2f s", len(docs), time.perf_counter() - t0)
        if self.on_merged is not None:
            try:
                self.on_merged(self)
            except Exception:
                log.exception("after-merge hook failed")

    def wait_merged(self, timeout: float | None = None) -> bool:
        """Wait for a running background merge; True when none is running any more."""
        t = self._merge_thread
        if t is not None:
            t.join(timeout)
            return not t.is_alive()
        return True

    def close(self) -> None:
        """Stop starting merges and wait for a running one."""
        self._closed = True
        self.wait_merged()

    # ------------------------------------------------------------------ persistence
    def _is_buffer(self, key: str) -> bool:
        """Whether ``key``'s indexed content is an editor buffer's (holds the lock)."""
        rec = self._state.records.get(key)
        return rec is not None and rec.buffer

    def _disk_sha(self, key: str) -> str | None:
        """The sha256 of the file ``key`` on disk as it would be indexed (None: unreadable,
        gone, too large). Reads the file: never under the writer lock."""
        src = read_source(key, self.max_bytes)
        return src.sha256 if src is not None else None

    def export_state(self) -> SavedState:
        """A consistent copy of what to persist (the stores are shared, not copied), without
        unsaved editor buffers: a buffer whose text is the file's on disk is saved as the
        file; the others are left out (the next start reads those files from disk) and,
        when the delta holds one, the delta saved is built again from the other files (a few
        small files; the base never holds an unsaved buffer). Reads the open buffers' files."""
        with self._lock:
            st = self._state
            snap = self._snap
            records = dict(st.records)
            base_docs = dict(st.base_docs)
            delta_keys = list(st.delta_docs) if snap.delta is not None else []
            delta_arrays = dict(st.delta_docs)
            version, serial, base, delta = snap.version, self._base_serial, st.base, snap.delta
        for key, rec in [(k, r) for k, r in records.items() if r.buffer]:  # off the lock
            src = read_source(key, self.max_bytes)
            if src is not None and src.sha256 == rec.sha256:
                records[key] = replace(rec, buffer=False, mtime_ns=src.mtime_ns, size=src.size)
            else:
                del records[key]
        kept = [k for k in delta_keys if k in records]
        if len(kept) < len(delta_keys):
            arrays = [delta_arrays[k] for k in kept]
            delta = TokenDatastore.build(arrays, fingerprint=self.fingerprint) if arrays else None
        return SavedState(
            base=base,
            delta=delta,
            base_docs={k: i for k, i in base_docs.items() if k in records},
            delta_docs={k: i for i, k in enumerate(kept)},
            records=records,
            version=version,
            base_serial=serial,
        )

    def replace_base_store(self, serial: int, store: TokenDatastore) -> None:
        """Swap the base for an identical store (e.g. its memory-mapped saved copy),
        if the base is still the one numbered ``serial``."""
        with self._lock:
            if serial != self._base_serial or store.n_docs != self._state.base.n_docs:
                return
            self._state.base = store
            snap = self._snap
            self._snap = Snapshot(store, snap.dead, snap.delta, snap.version)

    def restore(self, saved: SavedState) -> None:
        """Load a persisted state (replacing everything; buffers are kept as overrides
        but must be re-sent with :meth:`update_file` to be indexed)."""
        with self._lock:
            st = _State(base=saved.base)
            st.base_docs = dict(saved.base_docs)
            live = set(st.base_docs.values())
            st.dead = set(range(saved.base.n_docs)) - live
            if saved.delta is not None:
                for key, i in saved.delta_docs.items():
                    st.delta_docs[key] = np.array(saved.delta.doc_tokens(i), dtype=np.int32)
            # (a store written before buffers were kept out of it may name some: read from disk again)
            st.records = {k: r for k, r in saved.records.items() if (k in st.base_docs or k in st.delta_docs) and not r.buffer}
            for key in [k for k in st.base_docs if k not in st.records]:
                st.dead.add(st.base_docs.pop(key))
            for key in [k for k in st.delta_docs if k not in st.records]:
                del st.delta_docs[key]
            for key in st.records:
                st.gens[key] = self._new_gen()
            self._state = st
            self._base_serial += 1
            self._publish()
