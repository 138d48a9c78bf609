"""Persistence of a workspace's D_r between runs.

One directory per workspace and tokenizer::

    cache_root()/index/<sha256(abs workspace roots)[:16]>-<tokenizer fingerprint>/
        manifest.json          what is indexed: per file mtime, size, sha256, tokens,
                               store ("base" | "delta") and document id
        base-<id>.fcds         the base TokenDatastore (versioned header + CRC32)
        delta-<id>.fcds        the delta TokenDatastore, if any
        lock                   advisory lock held while saving

Every file is written to a temporary name and renamed into place; the manifest is
written last and names the store files it belongs to, so a crash at any point leaves
either the old or the new consistent state. Store files the manifest no longer names
are deleted after it is written (a process that still maps them keeps its mapping).
Base documents that no manifest entry names are tombstones.

:meth:`IndexStore.load` raises :class:`~fastcoder.errors.DatastoreError` for anything
foreign or corrupt (bad JSON, another format version or tokenizer, a checksum
mismatch, entries that do not fit the stores); the caller rebuilds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from fastcoder.datastore import TokenDatastore
from fastcoder.errors import DatastoreError
from indexer.repo_records import FileRecord, SavedState

log = logging.getLogger(__name__)

MANIFEST_FORMAT = 1
"""Version of the manifest layout; another version is treated as foreign."""

MANIFEST = "manifest.json"


def workspace_key(roots: Sequence[str | os.PathLike[str]]) -> str:
    """16 hex digits identifying a set of workspace roots (absolute, resolved)."""
    norm = sorted(os.path.realpath(os.fspath(r)) for r in roots)
    return hashlib.sha256("\n".join(norm).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def store_dir(roots: Sequence[str | os.PathLike[str]], fingerprint: str, cache: Path | None = None) -> Path:
    """Where the index of ``roots`` for a tokenizer lives.

    Parameters:
        roots: the workspace roots.
        fingerprint: :func:`fastcoder.models.tokenizer_fingerprint` of the tokenizer.
        cache: the cache root (default :func:`fastcoder.models.cache_root`).
    """
    if cache is None:
        from fastcoder.models import cache_root

        cache = cache_root()
    return Path(cache) / "index" / f"{workspace_key(roots)}-{fingerprint or 'nofp'}"


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON to ``path`` through a temporary file and a rename (fsynced)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, separators=(",", ":"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def dir_lock(directory: Path) -> Iterator[None]:
    """An advisory exclusive lock on ``directory/lock`` (a no-op where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


_STORE_NAME = re.compile(r"[0-9a-f]{16}-")
"""The start of a store directory's name (:func:`store_dir`)."""
STALE_DAYS = 60
"""A store not saved for this long is deleted by :func:`prune_stores`."""
PRUNE_EVERY_S = 24 * 3600
""":func:`prune_stores` looks at the stores at most this often (a marker file's mtime)."""


def prune_stores(index_dir: Path, keep: Path | None = None, *, now: float | None = None,
                 stale_days: float = STALE_DAYS, every_s: float = PRUNE_EVERY_S) -> list[Path]:  # fmt: skip
    """Delete the stores under ``index_dir`` (one per workspace and tokenizer) that will
    not be opened again: one of whose workspace roots is gone (a deleted project, a
    temporary folder), or not saved for ``stale_days``; a directory without a manifest
    once it is a day old (a first build that never finished). ``keep`` is never touched,
    nor a store another process is saving (its lock is held). Runs at most every
    ``every_s`` (the ``.pruned`` marker's mtime); returns what it deleted. Without it the
    cache only grew: 541 stores, 754 MB, on a machine that ran the probes and tests."""
    now = time.time() if now is None else now
    marker = index_dir / ".pruned"
    try:
        if now - marker.stat().st_mtime < every_s:
            return []
    except OSError:
        pass
    try:
        index_dir.mkdir(parents=True, exist_ok=True)
        marker.touch()
        os.utime(marker, (now, now))
        entries = list(index_dir.iterdir())
    except OSError:
        return []
    gone: list[Path] = []
    for d in entries:
        if not d.is_dir() or not _STORE_NAME.match(d.name) or (keep is not None and d.resolve() == Path(keep).resolve()):
            continue  # only store directories (store_dir's names), never the one in use
        try:
            manifest = json.loads((d / MANIFEST).read_text(encoding="utf-8"))
            roots, saved = manifest.get("roots") or [], float(manifest.get("saved_at") or 0)
            stale = now - saved > stale_days * 86400 or any(not os.path.isdir(r) for r in roots)
        except FileNotFoundError:
            stale = now - d.stat().st_mtime > 86400
        except (OSError, ValueError, TypeError, AttributeError):
            continue  # unreadable: leave it (the owner's load rebuilds it)
        if stale and _remove_store(d):
            gone.append(d)
    if gone:
        log.info("deleted %d stale workspace index stores under %s", len(gone), index_dir)
    return gone


def _remove_store(directory: Path) -> bool:
    """Delete a store directory unless another process holds its lock."""
    try:
        import fcntl
    except ImportError:  # Windows: leave it
        return False
    try:
        with open(directory / "lock", "a+b") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # being saved
            for p in directory.iterdir():
                if p.name != "lock":
                    p.unlink()
        (directory / "lock").unlink()
        directory.rmdir()
        return True
    except OSError:
        return False


class IndexStore:
    """The on-disk copy of one workspace index.

    Parameters:
        directory: the store directory (see :func:`store_dir`).
        fingerprint: the tokenizer fingerprint the stores must carry.
        roots: the workspace roots, recorded in the manifest for humans.
    """

    def __init__(self, directory: str | os.PathLike[str], fingerprint: str, roots: Sequence[str] = ()) -> None:
        self.directory = Path(directory)
        self.fingerprint = fingerprint
        self.roots = [os.fspath(r) for r in roots]
        self._base_obj: TokenDatastore | None = None
        self._base_name: str | None = None
        self.saved_version: int | None = None

    @property
    def manifest_path(self) -> Path:
        return self.directory / MANIFEST

    def exists(self) -> bool:
        """Whether a manifest is there (it may still be corrupt)."""
        return self.manifest_path.is_file()

    def clear(self) -> None:
        """Delete the stored index (the directory's files)."""
        self._base_obj = self._base_name = None
        self.saved_version = None
        if not self.directory.is_dir():
            return
        for p in self.directory.iterdir():
            if p.name != "lock":
                with contextlib.suppress(OSError):
                    p.unlink()

    # ------------------------------------------------------------------ loading
    def load(self) -> SavedState | None:
        """The saved state, or None when nothing is stored.

        Raises :class:`DatastoreError` when the store is corrupt or foreign.
        """
        path = self.manifest_path
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise DatastoreError(f"{path}: cannot read the index manifest: {exc}") from exc
        try:
            man = json.loads(raw)
            if not isinstance(man, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            raise DatastoreError(f"{path}: corrupt index manifest ({exc})") from exc
        if man.get("format") != MANIFEST_FORMAT:
            raise DatastoreError(f"{path}: index manifest format {man.get('format')!r}, expected {MANIFEST_FORMAT}")
        if man.get("fingerprint") != self.fingerprint:
            raise DatastoreError(f"{path}: index built for tokenizer {man.get('fingerprint')!r}, not {self.fingerprint!r}")
        try:
            base_name = str(man["base"])
            delta_name = man.get("delta")
            files = man["files"]
            version = int(man.get("version", 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise DatastoreError(f"{path}: corrupt index manifest ({exc})") from exc
        base = TokenDatastore.load(self._member(base_name), expected_fingerprint=self.fingerprint)
        base.check()
        delta = None
        if delta_name:
            delta = TokenDatastore.load(self._member(str(delta_name)), expected_fingerprint=self.fingerprint)
            delta.check()
        base_docs: dict[str, int] = {}
        delta_docs: dict[str, int] = {}
        records: dict[str, FileRecord] = {}
        used: dict[str, set[int]] = {"base": set(), "delta": set()}
        try:
            for key, e in files.items():
                where, doc = e["store"], int(e["doc"])
                store = base if where == "base" else delta if where == "delta" else None
                if store is None or not 0 <= doc < store.n_docs or doc in used[where]:
                    raise ValueError(f"bad document reference for {key}")
                rec = FileRecord(str(e["sha256"]), int(e["size"]), int(e["mtime_ns"]), int(e["tokens"]), bool(e.get("buffer", False)))
                if int(store.doc_tokens(doc).size) != rec.tokens:
                    raise ValueError(f"token count of {key} does not match its document")
                used[where].add(doc)
                (base_docs if where == "base" else delta_docs)[key] = doc
                records[key] = rec
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DatastoreError(f"{path}: index manifest does not fit its stores ({exc})") from exc
        self._base_obj, self._base_name = base, base_name
        self.saved_version = version
        return SavedState(base, delta, base_docs, delta_docs, records, version)

    def _member(self, name: str) -> Path:
        if "/" in name or "\\" in name or name.startswith("."):
            raise DatastoreError(f"{self.manifest_path}: bad store file name {name!r}")
        return self.directory / name

    # ------------------------------------------------------------------ saving
    def is_saved(self, state: SavedState) -> bool:
        """Whether ``state`` is what was last saved (or loaded)."""
        return self.saved_version == state.version and state.base is self._base_obj

    def save(self, state: SavedState) -> TokenDatastore | None:
        """Write ``state`` atomically. The base file is rewritten only when the base
        changed since the last save or load. Returns the memory-mapped copy of a base
        that was just written (to swap in for the in-memory one), else None."""
        written: TokenDatastore | None = None
        with dir_lock(self.directory):
            base_name = self._base_name
            if state.base is not self._base_obj or base_name is None or not (self.directory / base_name).is_file():
                base_name = f"base-{secrets.token_hex(6)}.fcds"
                state.base.save(self.directory / base_name)
                written = TokenDatastore.load(self.directory / base_name, expected_fingerprint=self.fingerprint, verify=False)
            delta_name = None
            if state.delta is not None and state.delta_docs:
                delta_name = f"delta-{secrets.token_hex(6)}.fcds"
                state.delta.save(self.directory / delta_name)
            files: dict[str, dict[str, Any]] = {}
            for key, rec in state.records.items():
                if key in state.base_docs:
                    where, doc = "base", state.base_docs[key]
                elif key in state.delta_docs:
                    where, doc = "delta", state.delta_docs[key]
                else:
                    continue
                files[key] = {
                    "mtime_ns": rec.mtime_ns,
                    "size": rec.size,
                    "sha256": rec.sha256,
                    "tokens": rec.tokens,
                    "buffer": rec.buffer,
                    "store": where,
                    "doc": doc,
                }
            write_json_atomic(
                self.manifest_path,
                {
                    "format": MANIFEST_FORMAT,
                    "fingerprint": self.fingerprint,
                    "roots": self.roots,
                    "saved_at": time.time(),
                    "version": state.version,
                    "base": base_name,
                    "delta": delta_name,
                    "files": files,
                },
            )
            self._base_obj = written if written is not None else state.base
            self._base_name = base_name
            self.saved_version = state.version
            keep = {MANIFEST, "lock", base_name, delta_name}
            for p in self.directory.iterdir():
                if p.name not in keep and (p.suffix in (".fcds", ".tmp") or p.name.endswith(".tmp")):
                    with contextlib.suppress(OSError):
                        p.unlink()
        return written
