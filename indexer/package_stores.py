"""Package datastores: token stores built from packages, with provenance.

**Provenance.** Every store built here carries in its header ``meta["packages"]``: one
entry per package, ``{"name", "version", "first_doc", "n_docs", "tokens", "files"}``;
the package's documents are ``first_doc .. first_doc + n_docs - 1`` and ``files[i]``
is the path of document ``first_doc + i`` inside the package. That is the doc→package
table :func:`origins` and ``fastcoder index --lookup`` read.

**Building**: :func:`tokenize_packages` reads and tokenizes packages in large batches;
:func:`build_from_docs` makes one store over their documents, with the table;
:func:`package_docs` copies a package's documents back out of a store (so a rebuilt
shard of :mod:`indexer.shards` does not tokenize its unchanged packages again).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from fastcoder.datastore import TokenDatastore
from fastcoder.errors import FastCoderError


# --------------------------------------------------------------------------------------
# provenance
# --------------------------------------------------------------------------------------


def package_table(store: TokenDatastore) -> list[dict[str, Any]]:
    """``meta["packages"]`` of a store (empty when it has none)."""
    table = store.meta.get("packages") if isinstance(store.meta, dict) else None
    return table if isinstance(table, list) else []


def _doc_bounds(store: TokenDatastore) -> tuple[np.ndarray, list[dict[str, Any]]]:
    table = package_table(store)
    starts = np.asarray([int(p.get("first_doc", 0)) for p in table], dtype=np.int64)
    return starts, table


def origins(store: TokenDatastore, positions: np.ndarray) -> Counter:
    """Counter of ``(package, version, file)`` of the documents holding ``positions``
    (token positions of ``store``); ``("?", "", "")`` where the store has no table."""
    out: Counter = Counter()
    if positions.size == 0:
        return out
    docs = store.doc_of(np.asarray(positions, dtype=np.int64))
    starts, table = _doc_bounds(store)
    if not table:
        out[("?", "", "")] += int(positions.size)
        return out
    which = np.searchsorted(starts, docs, side="right") - 1
    for k, d in zip(which.tolist(), docs.tolist()):
        if k < 0:
            out[("?", "", "")] += 1
            continue
        p = table[k]
        files = p.get("files") or []
        i = d - int(p.get("first_doc", 0))
        out[(str(p.get("name")), str(p.get("version", "")), files[i] if 0 <= i < len(files) else "")] += 1
    return out


def pattern_origins(stores: Sequence[TokenDatastore], pattern: Sequence[int]) -> Counter:
    """Where ``pattern`` (token ids) occurs, by (package, version, file), over stores."""
    out: Counter = Counter()
    for s in stores:
        if s.sa.size == 0:
            continue
        lo, hi = s.find_range(list(pattern))
        if hi > lo:
            out.update(origins(s, np.asarray(s.sa[lo:hi], dtype=np.int64)))
    return out


# --------------------------------------------------------------------------------------
# building a store from packages
# --------------------------------------------------------------------------------------


@dataclass
class PackageDocs:
    """A package's tokenized documents, ready for a store."""

    name: str
    version: str
    files: list[str]
    docs: list[np.ndarray]

    @property
    def tokens(self) -> int:
        return int(sum(d.size for d in self.docs))


def tokenize_packages(
    tokenizer: Any,
    packages: Sequence[Any],
    *,
    progress: Callable[..., None] | None = None,
    cancel: threading.Event | None = None,
    on_package: Callable[[str], None] | None = None,
) -> Iterator[PackageDocs]:
    """Read and tokenize packages (:class:`indexer.deps.PackageSource`) in large batches
    across package boundaries; yields each package's documents in order once done.
    ``on_package(key)`` is called for every package tokenized (a counter for tests)."""
    from indexer.packages import read_package
    from fastcoder.tokens import encode_batch
    from indexer.tokenizing import BATCH_CHARS

    done_files = 0
    total_files = sum(len(p.files) for p in packages)
    tokens = 0
    pending: list[PackageDocs] = []
    batch: list[tuple[PackageDocs, str]] = []
    chars = 0

    def flush() -> None:
        nonlocal batch, chars, tokens
        if batch:
            ids = encode_batch(tokenizer, [t for _, t in batch], special="parse")
            for (pd, _), arr in zip(batch, ids):
                pd.docs.append(arr)
                tokens += int(arr.size)
        batch, chars = [], 0

    for pkg in packages:
        if cancel is not None and cancel.is_set():
            raise FastCoderError("cancelled")
        texts = read_package(pkg)
        pd = PackageDocs(pkg.name, pkg.version, [rel for rel, _ in texts], [])
        if on_package is not None:
            on_package(pkg.key)
        for _, text in texts:
            batch.append((pd, text))
            chars += len(text)
            if chars >= BATCH_CHARS:
                flush()
        done_files += len(pkg.files)
        pending.append(pd)
        if chars == 0:  # everything so far is encoded
            yield from pending
            pending = []
        if progress is not None:
            progress(done_files, total_files, extra=f"{pkg.name} {pkg.version} | {tokens:,} tokens")
    flush()
    yield from pending
    if progress is not None:
        progress(total_files, total_files, extra=f"{tokens:,} tokens")


def build_from_docs(
    parts: Sequence[PackageDocs], *, fingerprint: str, meta: dict[str, Any] | None = None
) -> TokenDatastore:
    """One store over the packages' documents, with the provenance table in meta."""
    table = []
    docs: list[np.ndarray] = []
    for p in parts:
        table.append({"name": p.name, "version": p.version, "first_doc": len(docs), "n_docs": len(p.docs),
                      "tokens": p.tokens, "files": list(p.files)})
        docs.extend(p.docs)
    m = dict(meta or {})
    m["packages"] = table
    return TokenDatastore.build(docs, fingerprint=fingerprint, meta=m)


def package_docs(store: TokenDatastore, key: str) -> PackageDocs | None:
    """A package's documents copied out of a store (by normalized name), or None."""
    from indexer.packages import normalize

    for p in package_table(store):
        if normalize(str(p.get("name", ""))) == key:
            first, n = int(p["first_doc"]), int(p["n_docs"])
            docs = [np.array(store.doc_tokens(d), dtype=np.int32) for d in range(first, first + n)]
            return PackageDocs(str(p["name"]), str(p.get("version", "")), list(p.get("files") or [""] * n), docs)
    return None
