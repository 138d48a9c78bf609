"""Documents' KV caches kept on disk between runs: a reopened file's first completion
prefills only what changed since.

Why: the first completion in a file prefills its whole prompt (~2,000 tokens: 3-4 s for
Qwen2.5-Coder-0.5B on a 2-vCPU CPU), and an editor that restarts reopens the files it had
open. Their keys and values are 12,288 bytes a token for that model in bf16 (~25 MB a
document), read back in tens of milliseconds.

What is stored, per document name (the server uses the document's URI): the token ids
the cache held and their rows, ``(layers, 2, 1, kv_heads, n, head_dim)`` as
:class:`fastcoder.verifier.StaticKV` lays them out. A reader takes the longest prefix its
prompt shares with the stored ids (:meth:`fastcoder.verifier.Verifier.import_rows` puts
them in an empty session cache; the prefill then runs only the rest), so a file edited
since, or a prompt that starts elsewhere, costs nothing but the rows it cannot use.

Parameters:

* ``identity``: what the rows' bits depend on (model files, tokenizer fingerprint, dtype,
  device kind, matmul path, torch version, CPU kernels: :func:`model_identity`). Each
  identity has a folder of its own (a hash of it), so rows of another model, dtype or
  kernel path are never read; the folder's ``identity.json`` says what it holds.
* ``max_bytes``: the store's size on disk for all identities together; least recently used
  entries (by modification time, refreshed on each read) go first.

Integrity: each entry carries a SHA-256 of its ids and rows; an entry that fails to load,
has another shape or dtype than the identity's, another name, or another digest is deleted
and reported as missing (the prefill then runs as without the store). Writes go to a
temporary file renamed into place, so a killed process leaves no torn entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

log = logging.getLogger(__name__)

FORMAT = 1
SUFFIX = ".kv"
STALE_TMP_S = 600.0
"""A temporary file older than this is a write that never finished (the process was
killed while writing): :meth:`KVDisk.trim` deletes it."""


def _hash(text: str, n: int = 24) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


def _digest(ids: Sequence[int], rows: torch.Tensor) -> str:
    h = hashlib.sha256(np.asarray(ids, dtype=np.int64).tobytes())
    h.update(str(tuple(rows.shape)).encode())
    h.update(rows.contiguous().view(torch.uint8).numpy().tobytes() if rows.numel() else b"")
    return h.hexdigest()


def model_identity(loaded: Any, verifier: Any) -> dict[str, Any]:
    """What a cache row's bits depend on, for :class:`KVDisk`: the model's files (path,
    sizes, modification times), its tokenizer's fingerprint, the dtype and device kind,
    the CPU matmul path, the KV layout, torch's version and the CPU's kernel flags."""
    from fastcoder import matmul
    from fastcoder.verifier import _kv_shape

    path = Path(loaded.path)
    files = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in path.glob("*") if p.is_file()) if path.is_dir() else []
    mm = loaded.matmul or {}
    return {
        "format": FORMAT,
        "model": str(path),
        "files": files,
        "fingerprint": loaded.fingerprint,
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "device": loaded.device.type,
        "matmul": {"dtype": mm.get("dtype"), "packed": bool(mm.get("packed"))},
        "kv_shape": list(_kv_shape(loaded.model.config)),
        "torch": torch.__version__,
        "cpu": matmul.cpu_key(),
        "invariant": bool(getattr(verifier, "invariant", False)),
    }


class KVDisk:
    """The on-disk store of documents' KV rows for one model identity (see the module)."""

    def __init__(self, root: Path, identity: dict[str, Any], max_bytes: int) -> None:
        self.root = Path(root)
        self.identity = identity
        self.max_bytes = int(max_bytes)
        self.dir = self.root / _hash(json.dumps(identity, sort_keys=True), 16)
        self.stats = {"saved": 0, "restored": 0, "restored_tokens": 0, "missing": 0, "rejected": 0, "evicted": 0}

    def _path(self, name: str) -> Path:
        return self.dir / f"{_hash(name)}{SUFFIX}"

    # ------------------------------------------------------------------ writing
    def save(self, name: str, ids: Sequence[int], rows: torch.Tensor) -> int:
        """Store ``rows`` (CPU, as :meth:`fastcoder.verifier.Verifier.export_rows` gives
        them) for the document ``name``; returns the bytes written (0: not stored)."""
        ids = [int(t) for t in ids]
        if not ids or rows.shape[4] != len(ids) or self.max_bytes <= 0:
            return 0
        rows = rows.contiguous()
        if rows.nbytes > self.max_bytes:
            return 0
        payload = {"format": FORMAT, "name": name, "ids": ids, "rows": rows, "digest": _digest(ids, rows),
                   "saved": time.time()}  # fmt: skip
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = self.dir / "identity.json"
        if not meta.exists():
            meta.write_text(json.dumps(self.identity, indent=1))
        fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                torch.save(payload, fh)
            os.replace(tmp, self._path(name))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.stats["saved"] += 1
        self.trim()
        return int(rows.nbytes)

    def trim(self) -> int:
        """Delete the least recently used entries (all identities) until the store fits
        ``max_bytes``; returns how many went."""
        now = time.time()
        for p in self.root.glob("*/*.tmp"):  # a write a killed process left behind
            try:
                if now - p.stat().st_mtime > STALE_TMP_S:
                    p.unlink(missing_ok=True)
            except OSError:
                pass
        entries = []
        for p in self.root.glob(f"*/*{SUFFIX}"):
            try:
                st = p.stat()
            except OSError:
                continue
            entries.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in entries)
        gone = 0
        for _, size, p in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            p.unlink(missing_ok=True)
            total -= size
            gone += 1
        self.stats["evicted"] += gone
        return gone

    # ------------------------------------------------------------------ reading
    def load(self, name: str) -> tuple[list[int], torch.Tensor] | None:
        """The ids and rows stored for ``name``, checked; None when there are none, or
        when the entry is unreadable or fails its checks (it is then deleted)."""
        path = self._path(name)
        if not path.exists():
            self.stats["missing"] += 1
            return None
        try:
            data = torch.load(path, map_location="cpu", weights_only=True)
            ids, rows = [int(t) for t in data["ids"]], data["rows"]
            layers, heads, dim = self.identity["kv_shape"]
            if data.get("format") != FORMAT or data.get("name") != name:
                raise ValueError("another format or document")
            if tuple(rows.shape) != (layers, 2, 1, heads, len(ids), dim) or str(rows.dtype).removeprefix("torch.") != self.identity["dtype"]:
                raise ValueError(f"rows {tuple(rows.shape)} {rows.dtype} do not fit this model")
            if data.get("digest") != _digest(ids, rows):
                raise ValueError("digest mismatch")
        except Exception as exc:  # corrupt, truncated, foreign: never worth failing a request
            log.warning("dropping the stored KV cache %s: %s", path.name, exc)
            self.stats["rejected"] += 1
            path.unlink(missing_ok=True)
            return None
        try:
            os.utime(path)  # recently used
        except OSError:
            pass
        return ids, rows

    def forget(self, name: str) -> None:
        self._path(name).unlink(missing_ok=True)

    def size_bytes(self) -> int:
        total = 0
        for p in self.root.glob(f"*/*{SUFFIX}"):
            try:
                total += p.stat().st_size
            except OSError:  # deleted meanwhile (another writer's trim)
                pass
        return total
