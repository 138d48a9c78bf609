"""The workspace index: what the server (and ``fastcoder index``) uses.

:class:`WorkspaceIndex` ties the pieces together for a set of workspace roots and a
tokenizer:

* opening: load the persisted index (:mod:`indexer.persist`) and apply only what
  changed since (mtime+size, then sha256), or build it from a full scan when there is
  none or it is corrupt/foreign;
* watching (:mod:`indexer.watch`): coalesced file events become updates, removals
  and rescans; editor buffers override the disk;
* persistence: saved after opening, after background merges, periodically while
  changes keep coming, and on :meth:`stop`.

All index mutations run on one worker thread (jobs + debounced file batches), so
the caller never blocks: :meth:`start`, :meth:`update_buffer`, :meth:`release_buffer`,
:meth:`rebuild` return at once. Searches go to :attr:`source` (a
:class:`~indexer.repo_store.RepoIndex`, a ``RetrievalSource``) and never wait.

Callbacks (each optional, called from the worker thread; exceptions are logged):

* ``on_progress(done, total)``: files tokenized so far during a build or reconcile;
* ``on_status(state, message)``: ``"indexing"``, ``"ready"`` or ``"error"``;
* ``on_indexed(relpath, tokens, latency_ms)``: a file's new content is searchable
  (latency from the first file event or buffer update; 0 for opening);
* ``on_removed(relpath)``: a file is no longer searchable.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from fastcoder.errors import DatastoreError, FastCoderError
from indexer.persist import IndexStore, prune_stores, store_dir
from indexer.repo_store import MERGE_FILES, MERGE_TOKENS, Change, RepoIndex, normalize_key
from indexer.scan import IGNORE_FILES, MAX_FILE_BYTES, ScannedFile, WorkspaceFilter, read_source
from indexer.symbols import PYTHON_SUFFIXES, SymbolTable
from indexer.watch import Debouncer, FileWatcher
from indexer.priority import lower_thread_priority

log = logging.getLogger(__name__)

ProgressCb = Callable[[int, int], None]
StatusCb = Callable[[str, str], None]
IndexedCb = Callable[[str, int, float], None]
RemovedCb = Callable[[str], None]


class Cancelled(Exception):
    """Raised inside a build when :meth:`WorkspaceIndex.stop` was called."""


@dataclass
class OpenReport:
    """How :meth:`WorkspaceIndex.open` went: ``mode`` is ``"built"`` (full build) or
    ``"loaded"`` (persisted index plus changes); counts of files changed and removed
    since the last run; ``seconds`` taken."""

    mode: str
    files: int
    tokens: int
    changed: int
    removed: int
    seconds: float
    reason: str = ""


class WorkspaceIndex:
    """D_r for a workspace: build/load, watch, persist; see the module doc.

    Parameters:
        roots: workspace root directories.
        tokenizer: the model's fast tokenizer.
        fingerprint: its fingerprint (default: :func:`fastcoder.models.tokenizer_fingerprint`).
        on_progress, on_status, on_indexed, on_removed: callbacks (module doc).
        persist: keep the index on disk between runs.
        cache_dir: store directory (default: :func:`indexer.persist.store_dir`).
        debounce_s: quiet time that ends a batch of file events.
        max_delay_s: longest a file event waits in a batch.
        autosave_s: while changes keep coming, save at most this often.
        merge_tokens, merge_files: delta size that triggers a background merge.
        max_bytes: largest file indexed.
        polling: watch by polling instead of OS notifications.
    """

    def __init__(
        self,
        roots: Sequence[str | os.PathLike[str]],
        tokenizer: Any,
        *,
        fingerprint: str | None = None,
        on_progress: ProgressCb | None = None,
        on_status: StatusCb | None = None,
        on_indexed: IndexedCb | None = None,
        on_removed: RemovedCb | None = None,
        persist: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
        debounce_s: float = 0.1,
        max_delay_s: float = 1.0,
        autosave_s: float = 30.0,
        merge_tokens: int = MERGE_TOKENS,
        merge_files: int = MERGE_FILES,
        max_bytes: int = MAX_FILE_BYTES,
        polling: bool = False,
    ) -> None:
        if not roots:
            raise FastCoderError("a workspace index needs at least one root directory")
        real = []
        for r in roots:
            p = os.path.realpath(os.fspath(r))
            if not os.path.isdir(p):
                raise FastCoderError(f"workspace root {r} is not a directory")
            real.append(p)
        self.roots: list[str] = sorted(dict.fromkeys(real), key=len, reverse=True)  # deepest first
        if fingerprint is None:
            from fastcoder.models import tokenizer_fingerprint

            fingerprint = tokenizer_fingerprint(tokenizer)
        self.fingerprint = fingerprint
        self.filters = {r: WorkspaceFilter(r, max_bytes=max_bytes) for r in self.roots}
        self.on_progress = on_progress
        self.on_status = on_status
        self.on_indexed = on_indexed
        self.on_removed = on_removed
        self.autosave_s = autosave_s
        self.store: IndexStore | None = None
        if persist:
            directory = Path(cache_dir) if cache_dir is not None else store_dir(self.roots, fingerprint)
            self.store = IndexStore(directory, fingerprint, self.roots)
        self._prune = persist and cache_dir is None  # the shared cache: stale stores go (prune_stores)
        self.repo = RepoIndex(
            tokenizer,
            fingerprint=fingerprint,
            merge_tokens=merge_tokens,
            merge_files=merge_files,
            max_bytes=max_bytes,
            on_merged=self._after_merge,
        )
        self.symbols = SymbolTable()
        """Top-level definitions of the indexed Python files (the same files, the same
        events: buffers override the disk; see :mod:`indexer.symbols`). Read only once
        something uses it (:meth:`use_symbols`)."""
        self._symbols_on = False
        self._symbols_state = "off"  # off | reading | ready
        self.debouncer = Debouncer(debounce_s, max_delay_s)
        self.watcher = FileWatcher(self.roots, self._on_fs_path, polling=polling)
        self.state = "idle"
        self.status_message = ""
        self._cond = threading.Condition()
        self._jobs: collections.deque[tuple[str, Any]] = collections.deque()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._ready = threading.Event()
        self._save_lock = threading.Lock()
        self._last_save = 0.0
        self.last_open: OpenReport | None = None

    # ------------------------------------------------------------------ helpers
    @property
    def source(self) -> RepoIndex:
        """The ``RetrievalSource`` for D_r (lock-free searches, always usable; empty
        until the first build or load is done)."""
        return self.repo

    def root_of(self, path: str) -> str | None:
        """The (deepest) root containing ``path``, or None."""
        for r in self.roots:
            if path == r or path.startswith(r + os.sep):
                return r
        return None

    def relpath(self, key: str) -> str:
        """``key`` relative to its root (posix); the absolute path when outside."""
        root = self.root_of(key)
        return Path(key).relative_to(root).as_posix() if root else key

    def _key(self, path: str | os.PathLike[str]) -> str:
        """Normalise a path from outside (an editor URI, a file event) into a key."""
        p = normalize_key(path)
        if self.root_of(p) is None:
            real = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
            if self.root_of(real) is not None:
                return real
        return p

    def admits(self, path: str | os.PathLike[str]) -> bool | None:
        """Whether the filter admits ``path`` (not ignored, not a secret, a source
        file); None when it is outside every root."""
        key = self._key(path)
        if self.root_of(key) is None:
            return None
        return self._allowed(key)

    def _allowed(self, key: str) -> bool:
        root = self.root_of(key)
        return root is not None and self.filters[root].file_allowed(key)

    def _call(self, cb: Callable | None, *args: Any) -> None:
        if cb is None:
            return
        try:
            cb(*args)
        except Exception:
            log.exception("index callback %s failed", getattr(cb, "__name__", cb))

    def _status(self, state: str, message: str) -> None:
        self.state, self.status_message = state, message
        log.debug("index status %s: %s", state, message)
        self._call(self.on_status, state, message)

    def _text(self, key: str) -> str | None:
        """What is indexed for ``key``: the editor buffer, else the file on disk."""
        text = self.repo.buffer_text(key)
        if text is None:
            src = read_source(key, self.repo.max_bytes)
            text = src.text if src is not None else None
        return text

    def use_symbols(self) -> SymbolTable:
        """The symbol table, switched on by the first call: every indexed Python file is
        then parsed once in the index thread (and kept fresh from there on). Not before:
        in a large workspace that pass holds the interpreter for a long while (21,000
        files of a virtualenv: ~90 s in which every completion took 2-4 s), and only the
        cross-file context, off by default, reads the table."""
        if not self._symbols_on:
            self._symbols_on = True
            self._symbols_state = "reading"
            self._submit("symbols")
        return self.symbols

    def _refresh_symbols(self, keys: Iterable[str], pause: bool = False) -> None:
        if not self._symbols_on:
            return
        for key in keys:
            if not key.endswith(PYTHON_SUFFIXES):
                continue  # only Python files have symbols: do not read the others again
            if pause:
                time.sleep(0)  # let a waiting thread (the model's) have the interpreter between files
            text = self._text(key)
            if text is None:
                self.symbols.remove(key)
                continue
            try:
                self.symbols.update(key, self.relpath(key), text)
            except Exception:  # one file's odd code must not fail the index (a blank docstring once did)
                log.exception("no symbols read from %s", key)
                self.symbols.remove(key)

    def _report(self, changes: Iterable[Change], first_seen: dict[str, float] | None = None) -> None:
        now = time.monotonic()
        changes = list(changes)
        self._refresh_symbols(ch.key for ch in changes if ch.kind == "indexed")
        for ch in changes:
            if ch.kind == "removed":
                self.symbols.remove(ch.key)
        for ch in changes:
            if ch.kind == "indexed":
                t0 = (first_seen or {}).get(ch.key)
                latency = (now - t0) * 1000.0 if t0 is not None else 0.0
                self._call(self.on_indexed, self.relpath(ch.key), ch.tokens, latency)
            elif ch.kind == "removed":
                self._call(self.on_removed, self.relpath(ch.key))

    def _progress(self, done: int, total: int) -> None:
        """Progress of a build or reconcile; aborts it when stopping."""
        if self._stopping:
            raise Cancelled()
        self._call(self.on_progress, done, total)

    def _scan(self) -> list[ScannedFile]:
        files: list[ScannedFile] = []
        for root in self.roots:
            flt = self.filters[root]
            for f in flt.walk():
                # a nested root owns its own files
                if self.root_of(str(f.path)) == root:
                    files.append(f)
        return files

    # ------------------------------------------------------------------ opening
    def open(self) -> OpenReport:
        """Load the persisted index and apply the changes since, or build it from a
        full scan; then save it. Runs on the calling thread (``start`` runs it on the
        worker). Never raises for a corrupt store (it is rebuilt)."""
        t0 = time.perf_counter()
        self._status("indexing", "Loading the repository index")
        saved = None
        reason = "no saved index"
        if self.store is not None:
            try:
                saved = self.store.load()
            except DatastoreError as exc:
                reason = str(exc)
                log.warning("the saved repository index is unusable, rebuilding it: %s", exc)
                self.store.clear()
        files = self._scan()
        if saved is not None:
            self.repo.restore(saved)
            changed, removed = self._reconcile(files)
            mode = "loaded"
            reason = ""
        else:
            self._status("indexing", f"Indexing {len(files)} files")
            self._full_build(files)
            changed, removed = len(files), 0
            mode = "built"
        if mode == "loaded" and changed + removed == 0 and self.store is not None:
            self.store.saved_version = self.repo.version  # nothing new to write
        else:
            self.save(force=True)
        st = self.repo.stats()
        rep = OpenReport(mode, st["files"], st["tokens"], changed, removed, time.perf_counter() - t0, reason)
        self.last_open = rep
        self._ready.set()
        self._status("ready", f"{rep.files} files, {rep.tokens} tokens")
        return rep

    def _full_build(self, files: list[ScannedFile]) -> None:
        contents = []
        for f in files:
            src = read_source(f.path, self.repo.max_bytes)
            if src is not None:
                contents.append((str(f.path), src))
        self._progress(0, len(contents))
        self.repo.build(contents, progress=self._progress)

    def _reconcile(self, files: list[ScannedFile], report: bool = False) -> tuple[int, int]:
        """Bring the index in line with a scan: re-read files whose mtime or size
        changed (re-tokenized only if their sha256 changed), remove vanished ones.
        Returns (files re-indexed, files removed)."""
        now_keys = {str(f.path) for f in files}
        stale = []
        for f in files:
            rec = self.repo.record(str(f.path))
            if rec is None or rec.buffer or rec.mtime_ns != f.mtime_ns or rec.size != f.size:
                stale.append(str(f.path))
        gone = [k for k in self.repo.keys() if k not in now_keys and not self.repo.has_override(k)]
        changes: list[Change] = []
        if stale:
            self._progress(0, len(stale))
            changes += self.repo.update_files(stale, progress=self._progress)
        if gone:
            changes += self.repo.remove_files(gone)
        if report:
            self._report(changes)
        return sum(c.kind == "indexed" for c in changes), sum(c.kind == "removed" for c in changes)

    # ------------------------------------------------------------------ saving
    def save(self, force: bool = False) -> bool:
        """Persist the index if it changed since the last save. Returns whether it wrote."""
        if self.store is None:
            return False
        with self._save_lock:
            state = self.repo.export_state()
            if not force and self.store.is_saved(state):
                return False
            try:
                mapped = self.store.save(state)
            except OSError as exc:
                log.warning("cannot save the repository index to %s: %s", self.store.directory, exc)
                return False
            if mapped is not None:
                self.repo.replace_base_store(state.base_serial, mapped)
            self._last_save = time.monotonic()
            return True

    def _after_merge(self, _repo: RepoIndex) -> None:
        if not self._stopping:
            self.save()

    # ------------------------------------------------------------------ the worker
    def start(self) -> None:
        """Open the index and watch the roots, on a background thread; returns at once.
        Status goes ``"indexing"`` → ``"ready"`` (or ``"error"``)."""
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="fastcoder-index", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the first open is done; True when ready."""
        return self._ready.wait(timeout)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def _submit(self, kind: str, arg: Any = None) -> None:
        with self._cond:
            self._jobs.append((kind, arg))
            self._cond.notify()

    def _on_fs_path(self, path: str, is_dir: bool) -> None:
        self.debouncer.add(path)
        with self._cond:
            self._cond.notify()

    def _run(self) -> None:
        lower_thread_priority()  # the model's requests come first (indexer/priority.py)
        try:
            try:
                self.watcher.start()
            except OSError as exc:
                self._status("error", f"file watching is off: {exc}")
            self.open()
            self._ready.set()
            if self._prune and self.store is not None:
                prune_stores(self.store.directory.parent, keep=self.store.directory)
        except Cancelled:
            return
        except Exception as exc:
            log.exception("opening the repository index failed")
            self._ready.set()
            self._status("error", f"indexing failed: {exc}")
        while True:
            with self._cond:
                while not self._stopping and not self._jobs:
                    wait = self._next_wait()
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._stopping:
                    break
                job = self._jobs.popleft() if self._jobs else None
            try:
                if job is not None:
                    self._do_job(*job)
                else:
                    due = self.debouncer.due_in()
                    if due is not None and due <= 0:
                        self._process(self.debouncer.take())
                if self._autosave_due():
                    self.save()
                if self.state == "error" and self.ready and self.watcher.running:
                    st = self.repo.stats()
                    self._status("ready", f"{st['files']} files, {st['tokens']} tokens")
            except Cancelled:
                return
            except Exception as exc:
                log.exception("index update failed")
                self._status("error", f"index update failed: {exc}")

    def _dirty(self) -> bool:
        return self.store is not None and self.store.saved_version != self.repo.version

    def _autosave_due(self) -> bool:
        return bool(self.autosave_s) and self._dirty() and time.monotonic() - self._last_save >= self.autosave_s

    def _next_wait(self) -> float | None:
        """Seconds until the worker has something to do (<= 0: now; None: nothing)."""
        waits = []
        due = self.debouncer.due_in()
        if due is not None:
            waits.append(due)
        if self.autosave_s and self._dirty():
            waits.append(self._last_save + self.autosave_s - time.monotonic())
        return min(waits) if waits else None

    def _do_job(self, kind: str, arg: Any) -> None:
        if kind == "rebuild":
            self._status("indexing", "Rebuilding the repository index")
            for flt in self.filters.values():
                flt.invalidate()
            files = self._scan()
            self._full_build(files)
            self.save(force=True)
            self.symbols = SymbolTable()
            self._refresh_symbols(self.repo.keys(), pause=True)
            st = self.repo.stats()
            self._status("ready", f"{st['files']} files, {st['tokens']} tokens")
        elif kind == "buffer":
            key, t0 = arg
            self._process({key: t0})
        elif kind == "symbols":  # not persisted: read once per opening, when first used
            self._refresh_symbols(self.repo.keys(), pause=True)
            self._symbols_state = "ready"
        elif kind == "call":
            arg()

    # ------------------------------------------------------------------ file batches
    def _process(self, batch: dict[str, float]) -> None:
        """Apply one coalesced batch of touched paths (see :mod:`indexer.watch`)."""
        if not batch:
            return
        if any(os.path.basename(p) in IGNORE_FILES for p in batch):
            for flt in self.filters.values():
                flt.invalidate()
            dirs = {os.path.dirname(p) for p in batch if os.path.basename(p) in IGNORE_FILES}
            for d in dirs:
                batch.setdefault(d, time.monotonic())
        keys = None
        update: dict[str, float] = {}
        remove: list[str] = []
        for raw, t0 in batch.items():
            path = self._key(raw)
            root = self.root_of(path)
            if root is None:
                continue
            flt = self.filters[root]
            if self.repo.has_override(path):
                if self._allowed(path):
                    update[path] = t0
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                keys = self.repo.keys() if keys is None else keys
                scanned = list(flt.walk(path)) if flt.dir_allowed(path) else []
                found = {str(f.path) for f in scanned}
                for f in scanned:
                    rec = self.repo.record(str(f.path))
                    if rec is None or rec.buffer or rec.mtime_ns != f.mtime_ns or rec.size != f.size:
                        update.setdefault(str(f.path), t0)
                prefix = path.rstrip(os.sep) + os.sep
                remove += [k for k in keys if k.startswith(prefix) and k not in found and not self.repo.has_override(k)]
            elif os.path.lexists(path):
                if flt.file_allowed(path) and not os.path.islink(path):
                    update[path] = t0
                else:
                    remove.append(path)
            else:
                keys = self.repo.keys() if keys is None else keys
                prefix = path.rstrip(os.sep) + os.sep
                remove += [k for k in keys if (k == path or k.startswith(prefix)) and not self.repo.has_override(k)]
        changes: list[Change] = []
        if update:
            changes += self.repo.update_files(list(update))
        if remove:
            changes += self.repo.remove_files(remove)
        self._report(changes, update)

    # ------------------------------------------------------------------ editor buffers
    def update_buffer(self, path: str | os.PathLike[str], text: str) -> None:
        """Index an open editor buffer instead of the file on disk (asynchronously,
        after the debounce window; latest text wins). Files outside the roots or
        filtered out (ignored, secrets, wrong type) are not indexed."""
        key = self._key(path)
        if not self._allowed(key):
            return
        self.repo.set_buffer(key, text)
        self._on_fs_path(key, False)

    def release_buffer(self, path: str | os.PathLike[str]) -> None:
        """The editor closed the buffer: index the disk version again (asynchronously)."""
        key = self._key(path)
        if not self.repo.has_override(key):
            return

        def job() -> None:
            self._report([self.repo.release_buffer(key)], {key: time.monotonic()})

        self._submit("call", job)

    def rebuild(self) -> None:
        """Rescan and rebuild the whole index from scratch, in the background (status
        ``"indexing"`` then ``"ready"``). Searches keep working meanwhile."""
        self._submit("rebuild")

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every event and job so far has been applied (for tests and the
        CLI). True when done within ``timeout``."""
        if self._thread is None:
            return True
        done = threading.Event()
        deadline = time.monotonic() + timeout
        while self.debouncer.due_in() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        self._submit("call", done.set)
        return done.wait(max(0.0, deadline - time.monotonic()))

    def stats(self) -> dict[str, Any]:
        """The repository index's counts plus ``state`` and ``store`` (directory)."""
        st = self.repo.stats()
        st["state"] = self.state
        st["store"] = str(self.store.directory) if self.store is not None else None
        st["symbols"] = {"state": self._symbols_state, "files": len(self.symbols)}
        return st

    def stop(self, save: bool = True, timeout: float = 30.0) -> None:
        """Stop watching and the worker; wait for a running merge; save (if asked)."""
        self.watcher.stop()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
        self.repo.close()
        if save and self.ready:
            self.save()

    def __enter__(self) -> "WorkspaceIndex":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
