"""Sharded package datastores: a folder of shards updated package by package, searched
as one store.

**Shards** (:class:`ShardSet`): a folder with ``manifest.json`` and ``shard-*.fcds``
files, each a :class:`~fastcoder.datastore.TokenDatastore` over a group of whole
packages (a package bigger than :data:`TARGET_TOKENS` alone, smaller ones packed
together), carrying the packages' provenance table (:mod:`indexer.package_stores`).
:meth:`ShardSet.update` compares the packages wanted (names and versions) with the
shards' headers and rebuilds only the shards holding a package that changed, appeared
or went away; the unchanged packages of a rebuilt shard are not tokenized again (their
tokens are copied out of the old shard). A shard that fails its checks (header, size,
CRC32 of the arrays) is rebuilt from scratch.

**Search** (:class:`ShardedStore`): a ``RetrievalSource`` over the shards with exactly
the answer of one store over all their documents (same match length, exact counts,
same order): the engine's one search, :func:`fastcoder.search.search`, over the shards
as parts. :meth:`ShardSet.merged` concatenates the shards into one store (one suffix
array), which searches faster.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
import zlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from fastcoder.datastore import Retrieval, TokenDatastore
from fastcoder.search import search
from fastcoder.errors import DatastoreError, FastCoderError
from indexer.package_stores import (
    PackageDocs,
    build_from_docs,
    package_docs,
    package_table,
    pattern_origins,
    tokenize_packages,
)

log = logging.getLogger(__name__)

TARGET_TOKENS = 8_000_000
"""Shard size: packages are grouped into shards of about this many tokens (a bigger
package is a shard of its own). Larger shards mean fewer look-ups per query; smaller
ones a cheaper rebuild when one package changes."""

BYTES_PER_TOKEN = 3.5
"""Estimate of source bytes per token, to plan shards before tokenizing."""

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1


# --------------------------------------------------------------------------------------
# loading without paging the whole file in
# --------------------------------------------------------------------------------------


def file_crc(path: str | os.PathLike[str], offset: int, chunk: int = 1 << 24) -> int:
    """CRC32 of the file from ``offset`` to its end, read with plain reads: the pages go
    through the page cache but never into this process's resident set (a CRC over the
    memory map would make the whole file resident)."""
    crc = 0
    with open(path, "rb", buffering=0) as fh:
        fh.seek(offset)
        while True:
            block = fh.read(chunk)
            if not block:
                break
            crc = zlib.crc32(block, crc)
    return crc


def load_store(path: str | os.PathLike[str], fingerprint: str | None = None, *, verify: bool = True) -> TokenDatastore:
    """Memory-map a saved store, checking the tokenizer and (``verify``) the CRC32 with
    :func:`file_crc`, so that loading a large store does not grow the RSS by its size.
    Raises :class:`DatastoreError` for a missing, foreign, truncated or corrupt file."""
    if not Path(path).is_file():
        raise DatastoreError(f"{path}: no such datastore")
    header, offset = TokenDatastore.read_header(path)
    if fingerprint is not None and header.get("fingerprint") != fingerprint:
        raise DatastoreError(f"{path}: built for tokenizer {header.get('fingerprint') or '?'}, expected {fingerprint}")
    store = TokenDatastore.load(path, expected_fingerprint=fingerprint, verify=False)  # size and layout checked here
    if verify:
        try:
            crc = file_crc(path, offset)
        except OSError as exc:
            raise DatastoreError(f"{path}: cannot read datastore: {exc}") from exc
        if crc != header.get("crc32"):
            raise DatastoreError(f"{path}: checksum mismatch: the datastore is corrupt; rebuild it")
    return store


# --------------------------------------------------------------------------------------
# the sharded store
# --------------------------------------------------------------------------------------


class ShardedStore:
    """Several token stores searched as one (see the module doc).

    Parameters:
        shards: the stores.
        parallel: search the shards' longest matches in a thread pool of this many
            workers (0: sequentially, a later shard only asked whether it reaches
            the longest match so far, as :mod:`fastcoder.search` describes). The
            search is Python code under the GIL, so threads rarely pay; measured by
            ``fastcoder bench scale --sharded DIR --parallel N``.
        max_positions: when the longest match occurs more often than this (a short,
            common suffix such as ``self.``), the continuations are counted on an evenly
            strided sample of that many occurrences of the suffix-array range (every
            k-th, in sorted order, so every continuation is represented in proportion)
            and the counts scaled by k. ``total`` stays exact. 0: always exact. Exact
            counting gathers one token per occurrence per trie level, which at 100M
            tokens means millions of random reads for the commonest suffixes (tens of
            milliseconds); the sample bounds it.
    """

    def __init__(self, shards: Sequence[TokenDatastore], parallel: int = 0, max_positions: int = 0) -> None:
        self.shards = sorted((s for s in shards if s is not None), key=lambda s: -int(s.tokens.size))
        self.max_positions = int(max_positions)
        self._pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="fc-shards") if parallel > 0 and len(self.shards) > 1 else None

    @property
    def n_tokens(self) -> int:
        return int(sum(s.n_tokens for s in self.shards))

    @property
    def n_docs(self) -> int:
        return int(sum(s.n_docs for s in self.shards))

    @property
    def file_bytes(self) -> int:
        return int(sum(s.tokens.nbytes + s.sa.nbytes + s.doc_starts.nbytes for s in self.shards))

    def packages(self) -> dict[str, str]:
        """{package name: version} over all shards."""
        out: dict[str, str] = {}
        for s in self.shards:
            for p in package_table(s):
                out[str(p.get("name"))] = str(p.get("version", ""))
        return dict(sorted(out.items()))

    def origins_of(self, pattern: Sequence[int]) -> Counter:
        """(package, version, file) counts of the occurrences of ``pattern``."""
        return pattern_origins(self.shards, pattern)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)

    def retrieve(
        self,
        context: Sequence[int],
        *,
        n_max: int = 16,
        n_min: int = 2,
        max_nodes: int = 64,
        max_depth: int = 16,
    ) -> Retrieval:
        """Longest-suffix match over all shards and its heaviest continuations, with
        exact counts (identical to one store built over every shard's documents) unless
        ``max_positions`` caps them: :func:`fastcoder.search.search` over the shards."""
        return search(
            [(s, None) for s in self.shards], context, n_max=n_max, n_min=n_min, max_nodes=max_nodes,
            max_depth=max_depth, max_positions=self.max_positions, pool=self._pool,
        )


# --------------------------------------------------------------------------------------
# a folder of shards, updated incrementally
# --------------------------------------------------------------------------------------


@dataclass
class ShardReport:
    """What :meth:`ShardSet.update` did. ``tokenized``: packages (normalized names)
    read and tokenized; ``reused``: packages copied out of an old shard; ``corrupt``:
    shard files that failed their checks."""

    kept_shards: int = 0
    rebuilt_shards: int = 0
    tokenized: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    tokenize_s: float = 0.0
    sort_s: float = 0.0


class ShardSet:
    """The shards of one package collection in ``directory`` (see the module doc).

    Parameters:
        directory: the folder (created on the first update).
        fingerprint: the tokenizer fingerprint every shard must carry.
        kind: ``meta["kind"]`` of the shards (``deps`` for D_d).
        info: extra meta written into the manifest and every shard (the environment).
    """

    def __init__(self, directory: str | os.PathLike[str], fingerprint: str, *, kind: str = "deps",
                 info: dict[str, Any] | None = None) -> None:
        self.directory = Path(directory)
        self.fingerprint = fingerprint
        self.kind = kind
        self.info = dict(info or {})

    # ------------------------------------------------------------------ manifest
    def read_manifest(self) -> list[dict[str, Any]]:
        """The manifest's shard entries; empty when missing, unreadable or foreign."""
        try:
            data = json.loads((self.directory / MANIFEST).read_text())
            if data.get("version") != MANIFEST_VERSION or data.get("fingerprint") != self.fingerprint:
                return []
            shards = data["shards"]
            return [s for s in shards if isinstance(s.get("file"), str) and isinstance(s.get("packages"), dict)]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return []

    def _write_manifest(self, entries: list[dict[str, Any]]) -> None:
        data = {"version": MANIFEST_VERSION, "fingerprint": self.fingerprint, "kind": self.kind, "info": self.info,
                "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "shards": entries}
        fd, tmp = tempfile.mkstemp(prefix=".manifest.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.directory / MANIFEST)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def merged(self, shards: Sequence[TokenDatastore]) -> TokenDatastore | None:
        """One store over all ``shards`` (their token arrays concatenated, one suffix
        array), cached as ``merged-<digest of the shard files>.fcds``; older merged
        files are removed. None when there are fewer than two shards.

        Shards are the unit of incremental rebuild; searching one suffix array is much
        faster than searching several (every shard costs its own range look-ups and
        its own pass per trie node): 0.4 / 1.2 ms p50 / p95 for one 50M-token store
        against 1.3 / 6.6 ms for five shards of 39M tokens together (``fastcoder bench scale``).
        """
        from fastcoder.datastore import suffix_array

        files = sorted(e["file"] for e in self.read_manifest())
        if len(shards) < 2 or len(files) != len(shards):
            return None
        digest = hashlib.sha256(json.dumps(files).encode()).hexdigest()[:16]
        path = self.directory / f"merged-{digest}.fcds"
        store = None
        if path.is_file():
            try:
                store = load_store(path, self.fingerprint)
            except DatastoreError as exc:
                log.warning("merged store %s is unusable (%s); rebuilding it", path.name, exc)
        if store is None:
            ordered = sorted(shards, key=lambda st: str(st.meta.get("packages", [{}])[0].get("name", "")) if package_table(st) else "")
            tokens = np.concatenate([np.asarray(st.tokens) for st in ordered])
            starts, table, tok_off, doc_off = [], [], 0, 0
            for st in ordered:
                starts.append(np.asarray(st.doc_starts, dtype=np.int64) + tok_off)
                for p in package_table(st):
                    table.append({**p, "first_doc": int(p.get("first_doc", 0)) + doc_off})
                tok_off += int(st.tokens.size)
                doc_off += st.n_docs
            sa = suffix_array(tokens)
            meta = {"kind": self.kind, **self.info, "merged_from": files, "packages": table,
                    "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            TokenDatastore(tokens, sa, np.concatenate(starts), fingerprint=self.fingerprint, meta=meta).save(path)
            del tokens, sa
            store = load_store(path, self.fingerprint, verify=False)
        for old in self.directory.glob("merged-*.fcds"):
            if old != path:
                old.unlink(missing_ok=True)
        return store

    def load(self, *, verify: bool = True) -> ShardedStore:
        """The shards of the manifest as a ShardedStore. Raises DatastoreError when a
        shard is missing or corrupt (``update`` rebuilds it)."""
        stores = []
        for entry in self.read_manifest():
            stores.append(load_store(self.directory / entry["file"], self.fingerprint, verify=verify))
        return ShardedStore(stores)

    # ------------------------------------------------------------------ update
    def update(
        self,
        tokenizer: Any,
        packages: Sequence[Any],
        *,
        target_tokens: int = TARGET_TOKENS,
        progress: Callable[..., None] | None = None,
        cancel: threading.Event | None = None,
        prune: bool = True,
    ) -> tuple[ShardedStore, ShardReport]:
        """Bring the shards in line with ``packages`` (:class:`indexer.deps.PackageSource`,
        compared by normalized name and version) and return them as a ShardedStore.
        ``prune=False`` keeps the packages of old shards that ``packages`` does not name
        (a token cache shared by several package lists); a package named with another
        version is always replaced.

        The caller holds the folder's lock (:func:`indexer.persist.dir_lock`).
        """
        report = ShardReport()
        self.directory.mkdir(parents=True, exist_ok=True)
        wanted = {p.key: p for p in packages}
        # key -> (name, version) of every package the result holds: the wanted ones,
        # and (prune=False) the ones of old shards nobody asked about
        versions: dict[str, tuple[str, str]] = {k: (p.name, str(p.version)) for k, p in wanted.items()}
        old = self.read_manifest()
        kept: list[tuple[dict[str, Any], TokenDatastore]] = []
        reuse_from: dict[str, Path] = {}
        reuse_tokens: dict[str, int] = {}
        present: set[str] = set()

        def release(entry: dict[str, Any], keys: Iterable[str]) -> None:
            path = self.directory / entry["file"]
            tokens = entry.get("package_tokens") or {}
            for k in keys:
                reuse_from[k] = path
                reuse_tokens[k] = int(tokens.get(k, 0))

        for entry in old:
            pk = entry["packages"]
            present.update(pk)
            path = self.directory / entry["file"]
            same = {k for k, nv in pk.items() if k in wanted and versions[k][1] == str(nv[1])}
            extra = {k for k in pk if k not in wanted}
            if not prune:
                for k in extra:
                    versions.setdefault(k, (str(pk[k][0]), str(pk[k][1])))
            if len(same) == len(pk) or (not prune and len(same) + len(extra) == len(pk)):
                try:
                    kept.append((entry, load_store(path, self.fingerprint)))
                    continue
                except DatastoreError as exc:
                    log.warning("shard %s is unusable (%s); rebuilding it", path.name, exc)
                    report.corrupt.append(entry["file"])
                    if not prune:
                        for k in extra:
                            versions.pop(k, None)  # no source to rebuild it from
                    continue
            release(entry, same | (extra if not prune else set()))
        report.removed = sorted(present - set(versions))
        # consolidate: small kept shards join the rebuild when there is one anyway
        covered = {k for entry, _ in kept for k in entry["packages"]}
        pending_keys = [k for k in sorted(versions) if k not in covered]
        if pending_keys:
            small = [(e, st) for e, st in kept if int(e.get("tokens", 0)) < target_tokens // 4]
            if len(small) > 1:
                for e, st in small:
                    kept.remove((e, st))
                    release(e, e["packages"])
                covered = {k for entry, _ in kept for k in entry["packages"]}
                pending_keys = [k for k in sorted(versions) if k not in covered]
        report.kept_shards = len(kept)

        def estimate(k: str) -> int:
            if reuse_tokens.get(k) or k not in wanted:
                return reuse_tokens.get(k, 0)
            return int(wanted[k].source_bytes() / BYTES_PER_TOKEN)

        bins: list[list[str]] = []
        current: list[str] = []
        size = 0
        for k in pending_keys:
            est = estimate(k)
            if est >= target_tokens:
                bins.append([k])
                continue
            if current and size + est > target_tokens:
                bins.append(current)
                current, size = [], 0
            current.append(k)
            size += est
        if current:
            bins.append(current)

        old_stores: dict[Path, TokenDatastore | None] = {}

        def reused(k: str) -> PackageDocs | None:
            path = reuse_from.get(k)
            if path is None:
                return None
            if path not in old_stores:
                try:
                    old_stores[path] = load_store(path, self.fingerprint)
                except DatastoreError as exc:
                    log.warning("D_d shard %s is unusable (%s); its packages are tokenized again", path.name, exc)
                    report.corrupt.append(path.name)
                    old_stores[path] = None
            store = old_stores[path]
            pd = package_docs(store, k) if store is not None else None
            if pd is not None and str(pd.version) != versions[k][1]:
                return None
            return pd

        new_entries: list[tuple[dict[str, Any], TokenDatastore]] = []
        total_files = sum(len(wanted[k].files) for b in bins for k in b if k in wanted)
        files_before = 0
        for b in bins:
            if cancel is not None and cancel.is_set():
                raise FastCoderError("cancelled")
            parts: dict[str, PackageDocs] = {}
            to_tokenize = []
            for k in b:
                pd = reused(k)
                if pd is not None:
                    parts[k] = pd
                    report.reused.append(k)
                elif k in wanted:
                    to_tokenize.append(wanted[k])
                else:
                    log.warning("%s %s: its old shard is unusable and it is not asked for; dropped", *versions[k])
            t0 = time.perf_counter()
            base = files_before

            def prog(done: int, total: int | None = None, extra: str = "") -> None:
                if progress is not None:
                    progress(base + done, total_files, extra=extra)

            for pd in tokenize_packages(tokenizer, to_tokenize, progress=prog, cancel=cancel,
                                        on_package=report.tokenized.append):
                from indexer.packages import normalize

                parts[normalize(pd.name)] = pd
            files_before += sum(len(wanted[k].files) for k in b if k in wanted)
            report.tokenize_s += time.perf_counter() - t0
            b = [k for k in b if k in parts]
            if not b:
                continue
            ordered = [parts[k] for k in b]
            t1 = time.perf_counter()
            meta = {"kind": self.kind, **self.info, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            store = build_from_docs(ordered, fingerprint=self.fingerprint, meta=meta)
            digest = hashlib.sha256(json.dumps([[k, versions[k][1]] for k in b]).encode()).hexdigest()[:16]
            name = f"shard-{digest}.fcds"
            store.save(self.directory / name)
            report.sort_s += time.perf_counter() - t1
            entry = {"file": name, "packages": {k: [versions[k][0], versions[k][1]] for k in b},
                     "tokens": store.n_tokens, "docs": store.n_docs,
                     "package_tokens": {k: parts[k].tokens for k in b}}
            new_entries.append((entry, load_store(self.directory / name, self.fingerprint, verify=False)))
            report.rebuilt_shards += 1
        entries = [e for e, _ in kept] + [e for e, _ in new_entries]
        if new_entries or len(entries) != len(old) or report.corrupt:
            self._write_manifest(entries)
        live = {e["file"] for e in entries}
        for p in self.directory.glob("shard-*.fcds"):
            if p.name not in live:
                try:
                    p.unlink()
                except OSError as exc:
                    log.info("cannot remove the old shard %s: %s", p, exc)
        return ShardedStore([s for _, s in kept] + [s for _, s in new_entries]), report
