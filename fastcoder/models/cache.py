"""The model cache folder: its root, advisory locks, atomic entries, file hashing, progress bars.

Every cache entry is written under a ``.tmp-*`` name in its final directory and
renamed into place with :func:`os.replace`, so an entry either exists whole or not at
all, whatever interrupts the write (Ctrl-C, a full disk, a bad checksum).
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fastcoder.errors import ModelError

if TYPE_CHECKING:
    from rich.progress import Progress

_CHUNK = 8 << 20


def cache_root() -> Path:
    """``$FASTCODER_CACHE``, else ``$XDG_CACHE_HOME/fastcoder``, else ``~/.cache/fastcoder``."""
    if own := os.environ.get("FASTCODER_CACHE"):
        return Path(own).expanduser()
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "fastcoder"
    return Path.home() / ".cache" / "fastcoder"


def _remove(path: Path) -> None:
    """Remove a file or a folder tree; absent is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _disk_full(exc: BaseException, where: Path) -> ModelError | None:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ModelError(
            f"no space left on the device while writing {where}; nothing was cached. "
            "Free some space or point FASTCODER_CACHE at a larger disk."
        )
    return None


@contextmanager
def _atomic(final: Path, *, directory: bool) -> Iterator[Path]:
    """Yield a temporary path next to ``final``; move it onto ``final`` on success.

    On any exception (KeyboardInterrupt included) the temporary is removed and
    ``final`` is left as it was. Callers hold the lock of ``final``, so leftovers of
    killed processes (``.tmp-<name>-*``) are swept here.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(f".tmp-{final.name}-*"):
        _remove(stale)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        if directory:
            tmp.mkdir()
        yield tmp
        if directory and final.exists():  # an outdated folder, replaced under the lock
            _remove(final)
        os.replace(tmp, final)
    except BaseException as exc:
        _remove(tmp)
        if full := _disk_full(exc, final):
            raise full from exc
        raise


@contextmanager
def _locked(key: str, *, progress: bool) -> Iterator[None]:
    """Hold an exclusive advisory lock named ``key`` (no-op where flock is missing)."""
    path = cache_root() / "locks" / f"{key}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                print(f"fastcoder: waiting for another process working on {key} ...", file=sys.stderr)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _progress(enabled: bool, *, byte_counts: bool) -> Progress:
    """A rich progress display on stderr; ``disable``-d when not ``enabled``."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )

    counts = (DownloadColumn(), TransferSpeedColumn()) if byte_counts else (MofNCompleteColumn(),)
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        *counts,
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    )


def _sha256_file(path: Path, progress: bool) -> str:
    digest = hashlib.sha256()
    with _progress(progress, byte_counts=True) as bar, open(path, "rb") as fh:
        task = bar.add_task(f"sha256 {path.name}", total=path.stat().st_size)
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            bar.advance(task, len(chunk))
    return digest.hexdigest()
