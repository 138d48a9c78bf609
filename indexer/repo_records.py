"""What D_r records and hands out: :class:`FileRecord` (what is indexed for one file),
:class:`Change` (the outcome of one update), :class:`Snapshot` (the immutable view a
search reads), :class:`SavedState` (what is persisted) and :func:`normalize_key` (the
key of a file). Shared by :mod:`indexer.repo_store` (which keeps them),
:mod:`indexer.persist` (which saves and loads them) and :mod:`indexer.workspace`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from fastcoder.datastore import TokenDatastore


@dataclass(frozen=True)
class FileRecord:
    """What is indexed for one file.

    ``sha256``, ``size``: of the indexed content (UTF-8 bytes); ``mtime_ns``: the file's
    modification time when read (-1 when the content came from an editor buffer);
    ``tokens``: token count; ``buffer``: the content is an open editor buffer.
    """

    sha256: str
    size: int
    mtime_ns: int
    tokens: int
    buffer: bool = False


@dataclass(frozen=True)
class Snapshot:
    """An immutable view of the index, searched without locks.

    ``dead``: sorted ids of tombstoned base documents; ``delta`` may be None.
    """

    base: TokenDatastore
    dead: np.ndarray
    delta: TokenDatastore | None
    version: int


@dataclass(frozen=True)
class Change:
    """The outcome of one update: ``kind`` is ``"indexed"`` (new or changed content is
    now searchable), ``"unchanged"`` (same content as indexed), ``"removed"`` (it was
    indexed and is not any more) or ``"skipped"`` (not indexed, nothing to remove);
    ``tokens``: tokens indexed for it (0 unless indexed)."""

    key: str
    kind: str
    tokens: int = 0


@dataclass
class SavedState:
    """Everything needed to persist or restore a :class:`RepoIndex`.

    ``base_docs`` / ``delta_docs``: key -> document id in ``base`` / ``delta``
    (base documents not listed are tombstones); ``records``: key -> :class:`FileRecord`.
    """

    base: TokenDatastore
    delta: TokenDatastore | None
    base_docs: dict[str, int]
    delta_docs: dict[str, int]
    records: dict[str, FileRecord]
    version: int
    base_serial: int = 0


def normalize_key(path: str | os.PathLike[str]) -> str:
    """The key of a file: its absolute, normalised path (symlinks not resolved)."""
    return os.path.abspath(os.fspath(path))
