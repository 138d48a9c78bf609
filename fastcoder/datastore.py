"""Token datastore: a suffix array over the int32 token ids of many documents.

Layout of the token array: ``doc_0 SEP doc_1 SEP ... doc_{D-1} SEP`` where ``SEP`` is
``2**31 - 1``, an id no tokenizer produces, so a match never crosses a document.

Query (:meth:`TokenDatastore.retrieve`, i.e. :func:`fastcoder.search.search` over this
one store): the longest suffix of the context, from ``n_max`` tokens down to ``n_min``,
that occurs in the store; then the most frequent continuations of it, with **exact**
counts for every prefix. All suffixes that start with the pattern are one contiguous,
sorted range of the suffix array, so the continuations inside it are sorted too and a
prefix's count is a run length.

On disk (``save``/``load``), one file::

    magic "FCDS" | u32 version | u32 header length | JSON header | pad to 64
    tokens int32[n] | suffix array int32/int64[n] | doc_starts int64[D]

The JSON header holds the tokenizer fingerprint, document count, token count, a
CRC32 of the arrays and free-form ``meta`` (e.g. provenance). Arrays are memory
mapped, never copied. A foreign or corrupt file raises :class:`DatastoreError`.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
import threading
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from fastcoder.errors import DatastoreError
from fastcoder.search import SEP, Retrieval, search  # noqa: F401  (SEP, Retrieval: re-exported)

_OMP_ONE = threading.local()


def _one_omp_thread() -> None:
    """Make OpenMP parallel regions started by the calling thread run on it alone, in every
    OpenMP runtime loaded (once per thread; Linux, elsewhere nothing).

    pydivsufsort's suffix sort is an OpenMP loop, and its ``GOMP_parallel`` binds to the
    runtime torch loaded first (``torch/lib/libgomp.so.1``, global symbols), not to the copy
    it ships. An index thread that sorts then owns a second team of that runtime's threads
    for as long as it lives; with more OpenMP threads than CPUs libgomp stops spinning between
    parallel regions, and every model step of the process pays the wake-ups (a server whose
    workspace index had sorted once: the model thread and its OpenMP worker on the CPU 83% of
    the time instead of 99%, one-row steps at 512 cached rows 36-42 ms instead of 26-34:
    Qwen2.5-Coder-0.5B bf16, 2-vCPU AMD EPYC, forty-first session). ``omp_set_num_threads``
    sets the calling thread's own setting, so the model thread's team is untouched."""
    if getattr(_OMP_ONE, "done", False):
        return
    _OMP_ONE.done = True
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            paths = {line.split()[-1] for line in fh if "libgomp" in line.rsplit("/", 1)[-1]}
    except OSError:  # not Linux
        return
    import ctypes

    for path in sorted(paths):
        try:
            ctypes.CDLL(path).omp_set_num_threads(1)
        except (OSError, AttributeError):
            pass


def suffix_array(tokens: np.ndarray) -> np.ndarray:
    """The suffix array of ``tokens`` (int32), as the datastores store it (int32 below 2**31
    tokens, else int64), sorted on the calling thread alone (:func:`_one_omp_thread`)."""
    from pydivsufsort import divsufsort

    _one_omp_thread()
    sa = divsufsort(tokens)
    return sa.astype(np.int32 if tokens.size < 2**31 else np.int64, copy=False)


MAGIC = b"FCDS"
FORMAT_VERSION = 1
_ALIGN = 64
FIRST_TABLE_MAX = 64_000_000
"""Stores up to this many tokens get a first-token range table (built on first search,
about 12 bytes per distinct token) that starts each binary search in the right range."""



def _crc(arrays: Iterable[np.ndarray]) -> int:
    crc = 0
    for arr in arrays:
        view = memoryview(np.ascontiguousarray(arr)).cast("B")
        step = 1 << 26
        for i in range(0, len(view), step):
            crc = zlib.crc32(view[i : i + step], crc)
    return crc


class ContinuationMemo:
    """A small LRU of a store's continuation tries by (range, match length, sizes):
    thread-safe (searches run in a pool)."""

    SIZE = 256

    def __init__(self) -> None:
        self._items: OrderedDict[tuple, tuple] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: tuple) -> tuple | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: tuple, value: tuple) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.SIZE:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every entry (a benchmark starting each method equally cold)."""
        with self._lock:
            self._items.clear()


def clear_memos(*stores) -> None:
    """Empty the continuation memo of each store that has one (None and stores without a
    memo are skipped). The benchmarks call it before each method's run on a task: two
    methods drafting from the same datastores on the same prompt would otherwise share
    searches, and the second would draft faster for the first's work (the suite's
    interleaved runs measured 0.57 ms of drafting per step right after another drafter
    against 0.83-1.19 ms otherwise, 2026-11-27)."""
    for store in stores:
        memo = getattr(store, "memo", None)
        if memo is not None:
            memo.clear()
        clear_memos(*getattr(store, "shards", ()))  # a sharded store: its shards' memos


class TokenDatastore:
    """Suffix-array index over token documents. Immutable once built."""

    def __init__(
        self,
        tokens: np.ndarray,
        sa: np.ndarray,
        doc_starts: np.ndarray,
        *,
        fingerprint: str = "",
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.tokens = tokens
        self.sa = sa
        self.doc_starts = doc_starts
        # the search reads plain ndarray views: np.memmap's Python-level __getitem__ /
        # __array_finalize__ runs on every element read otherwise (the views share the
        # mapping; nothing is copied)
        self._tok = np.asarray(tokens).view(np.ndarray)
        self._sa = np.asarray(sa).view(np.ndarray)
        self._first_table: tuple[np.ndarray, np.ndarray] | None = None
        self.fingerprint = fingerprint
        self.meta = dict(meta or {})
        # continuations of whole suffix-array ranges, kept: an immutable store answers
        # the same range the same way, and typing asks for the same short matches again
        # and again (:func:`fastcoder.search.search`)
        self.memo = ContinuationMemo()

    # ------------------------------------------------------------------ building
    @classmethod
    def build(
        cls,
        docs: Iterable[Sequence[int] | np.ndarray],
        *,
        fingerprint: str = "",
        meta: dict[str, Any] | None = None,
    ) -> "TokenDatastore":
        """Build from token documents (each a sequence of non-negative ids < 2**31-1)."""
        parts: list[np.ndarray] = []
        starts: list[int] = []
        pos = 0
        sep = np.array([SEP], dtype=np.int32)
        for doc in docs:
            arr = np.asarray(doc, dtype=np.int64)
            if arr.size and (arr.min() < 0 or arr.max() >= int(SEP)):
                raise DatastoreError("token ids must be in [0, 2**31 - 1)")
            starts.append(pos)
            parts.append(arr.astype(np.int32))
            parts.append(sep)
            pos += arr.size + 1
        tokens = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        if tokens.size:
            sa = suffix_array(tokens)
        else:
            sa = np.zeros(0, dtype=np.int32)
        return cls(tokens, sa, np.asarray(starts, dtype=np.int64), fingerprint=fingerprint, meta=meta)

    # ------------------------------------------------------------------ sizes
    @property
    def n_tokens(self) -> int:
        """Tokens stored, separators excluded."""
        return int(self.tokens.size - self.doc_starts.size)

    @property
    def n_docs(self) -> int:
        return int(self.doc_starts.size)

    def doc_tokens(self, doc: int) -> np.ndarray:
        start = int(self.doc_starts[doc])
        end = int(self.doc_starts[doc + 1]) - 1 if doc + 1 < self.n_docs else self.tokens.size - 1
        return self.tokens[start:end]

    def doc_of(self, positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.doc_starts, positions, side="right") - 1

    # ------------------------------------------------------------------ search
    def _compare_at(self, i: int, pattern: list[int]) -> int:
        """Compare suffix SA[i] (first len(pattern) tokens) with pattern: -1, 0, 1."""
        s = int(self._sa[i])
        seg = self._tok[s : s + len(pattern)].tolist()
        if seg == pattern:
            return 0
        return -1 if seg < pattern else 1

    def _first_token_ranges(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(tokens, starts): the suffix-array ranges of the suffixes starting with each
        token (sorted; range i is [starts[i], starts[i + 1])), built once, lazily, in
        chunks (one pass over the arrays). None for stores above FIRST_TABLE_MAX."""
        table = self._first_table
        if table is None and 0 < self.sa.size <= FIRST_TABLE_MAX:
            toks, starts, prev = [], [], None
            for a in range(0, int(self.sa.size), 1 << 22):
                first = self._tok[self._sa[a : a + (1 << 22)]]
                change = np.flatnonzero(first[1:] != first[:-1]) + 1
                idx = np.concatenate(([0], change)) if prev is None or first[0] != prev else change
                toks.append(first[idx].astype(np.int64))
                starts.append(idx.astype(np.int64) + a)
                prev = first[-1]
            table = self._first_table = (
                np.concatenate(toks),
                np.concatenate(starts + [np.asarray([self.sa.size], dtype=np.int64)]),
            )
        return table

    def find_range(self, pattern: Sequence[int]) -> tuple[int, int]:
        """Suffix-array range [lo, hi) of suffixes that start with ``pattern``: the
        range of its first token from a table, then binary searches inside it."""
        pat = [int(t) for t in pattern]
        n = int(self.sa.size)
        lo, hi = 0, n
        table = self._first_token_ranges() if pat else None
        if table is not None:
            i = int(np.searchsorted(table[0], pat[0]))
            if i >= table[0].size or int(table[0][i]) != pat[0]:
                return 0, 0
            lo, hi = int(table[1][i]), int(table[1][i + 1])
            if len(pat) == 1:
                return lo, hi
        end = hi
        while lo < hi:  # first suffix >= pattern
            mid = (lo + hi) // 2
            if self._compare_at(mid, pat) < 0:
                lo = mid + 1
            else:
                hi = mid
        first = lo
        hi = end
        while lo < hi:  # first suffix > pattern (as a prefix)
            mid = (lo + hi) // 2
            if self._compare_at(mid, pat) <= 0:
                lo = mid + 1
            else:
                hi = mid
        return first, lo

    def retrieve(
        self,
        context: Sequence[int],
        *,
        n_max: int = 16,
        n_min: int = 2,
        max_nodes: int = 64,
        max_depth: int = 16,
        dead_docs: np.ndarray | None = None,
    ) -> Retrieval:
        """Longest-suffix match of ``context`` and its heaviest continuations (exact
        counts), through the one search of :mod:`fastcoder.search`."""
        return search([(self, dead_docs)], context, n_max=n_max, n_min=n_min, max_nodes=max_nodes, max_depth=max_depth)

    # ------------------------------------------------------------------ integrity
    def check(self, samples: int = 2000, seed: int = 0) -> None:
        """Integrity check: sizes agree, separators sit where doc_starts say, and a
        sample of adjacent suffix-array entries is in order. Raises DatastoreError."""
        n = self.tokens.size
        if self.sa.size != n:
            raise DatastoreError(f"suffix array has {self.sa.size} entries for {n} tokens")
        if self.n_docs:
            ends = np.concatenate((self.doc_starts[1:], [n])) - 1
            if np.any(self.tokens[ends] != SEP) or int(np.count_nonzero(self.tokens == SEP)) != self.n_docs:
                raise DatastoreError("document separators do not match the document table")
        if n < 2:
            return
        rng = np.random.default_rng(seed)
        for i in rng.integers(0, n - 1, size=min(samples, n - 1)).tolist():
            a, b = int(self.sa[i]), int(self.sa[i + 1])
            if not (0 <= a < n and 0 <= b < n):
                raise DatastoreError("suffix array entry out of range")
            la = self.tokens[a : a + 32].tolist()
            lb = self.tokens[b : b + 32].tolist()
            if la > lb:
                raise DatastoreError(f"suffix array out of order at {i}")

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (temp file in the same directory, then rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = [np.ascontiguousarray(self.tokens), np.ascontiguousarray(self.sa), np.ascontiguousarray(self.doc_starts)]
        header = {
            "fingerprint": self.fingerprint,
            "n_docs": self.n_docs,
            "n_tokens": self.n_tokens,
            "n_total": int(self.tokens.size),
            "sa_dtype": str(self.sa.dtype),
            "crc32": _crc(arrays),
            "meta": self.meta,
        }
        blob = json.dumps(header).encode()
        head = MAGIC + struct.pack("<II", FORMAT_VERSION, len(blob)) + blob
        head += b"\0" * (-len(head) % _ALIGN)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(head)
                for arr in arrays:
                    fh.write(memoryview(arr).cast("B"))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    @staticmethod
    def read_header(path: str | os.PathLike[str]) -> tuple[dict[str, Any], int]:
        """(header dict, offset of the first array). Raises DatastoreError."""
        try:
            with open(path, "rb") as fh:
                start = fh.read(12)
                if len(start) < 12 or start[:4] != MAGIC:
                    raise DatastoreError(f"{path}: not a FastCoder datastore (bad magic)")
                version, hlen = struct.unpack("<II", start[4:12])
                if version != FORMAT_VERSION:
                    raise DatastoreError(f"{path}: datastore format version {version}, expected {FORMAT_VERSION}; rebuild it")
                blob = fh.read(hlen)
        except OSError as exc:
            raise DatastoreError(f"{path}: cannot read datastore: {exc}") from exc
        try:
            header = json.loads(blob)
        except ValueError as exc:
            raise DatastoreError(f"{path}: corrupt datastore header") from exc
        offset = 12 + hlen
        offset += -offset % _ALIGN
        return header, offset

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        expected_fingerprint: str | None = None,
        verify: bool = True,
    ) -> "TokenDatastore":
        """Memory-map a saved store. ``verify`` checks the CRC32 of the arrays."""
        header, offset = cls.read_header(path)
        fp = header.get("fingerprint", "")
        if expected_fingerprint is not None and fp != expected_fingerprint:
            raise DatastoreError(
                f"{path}: built for tokenizer {fp or '?'}, but the model's tokenizer is {expected_fingerprint}"
            )
        try:
            n_total = int(header["n_total"])
            n_docs = int(header["n_docs"])
            sa_dtype = np.dtype(header["sa_dtype"])
            size = os.path.getsize(path)
            need = offset + n_total * 4 + n_total * sa_dtype.itemsize + n_docs * 8
            if size != need:
                raise DatastoreError(f"{path}: truncated or corrupt datastore ({size} bytes, expected {need})")
            if n_total == 0:
                tokens = np.zeros(0, np.int32)
                sa = np.zeros(0, sa_dtype)
            else:
                tokens = np.memmap(path, dtype=np.int32, mode="r", offset=offset, shape=(n_total,))
                sa = np.memmap(path, dtype=sa_dtype, mode="r", offset=offset + n_total * 4, shape=(n_total,))
            off_docs = offset + n_total * (4 + sa_dtype.itemsize)
            doc_starts = (
                np.memmap(path, dtype=np.int64, mode="r", offset=off_docs, shape=(n_docs,))
                if n_docs
                else np.zeros(0, np.int64)
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DatastoreError(f"{path}: corrupt datastore header ({exc})") from exc
        if verify and _crc([tokens, sa, doc_starts]) != header.get("crc32"):
            raise DatastoreError(f"{path}: checksum mismatch: the datastore is corrupt; rebuild it")
        return cls(tokens, sa, doc_starts, fingerprint=fp, meta=header.get("meta") or {})
