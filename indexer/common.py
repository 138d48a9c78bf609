"""D_c: the datastore of common code, built once from a corpus.

Corpora: source directories (default: the standard library of the running Python,
``*.py`` without ``test/``, ``tests/``, ``idlelib``, ``site-packages``) and JSONL files
in The Stack's format (one JSON object a line, the code in a field, ``content`` by
default; ``.jsonl.gz`` works too). Files are tokenized in large batches with the
model's fast tokenizer and indexed by one suffix-array build.

:func:`ensure_common` is what the bench, the demo and the server call: it returns the
cached stdlib D_c for a tokenizer, building it the first time (under a lock, so two
processes do not build it twice).

:func:`build_common_from_packages` builds D_c from whole packages (the most-downloaded
PyPI projects, a requirements file, an environment's site-packages: see
:mod:`indexer.pypi` and :mod:`indexer.deps`). Its header records what went in: the
package names and versions, and which document came from which package and file
(``meta["packages"]``, read by ``fastcoder index --lookup``). The tokens are kept per
package group in a :class:`indexer.shards.ShardSet` next to the cache, so an
interrupted build resumes and a rebuild with more packages tokenizes only the new ones.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from fastcoder.datastore import TokenDatastore
from fastcoder.errors import DatastoreError, FastCoderError
from indexer.scan import read_source
from fastcoder.tokens import encode_batch
from indexer.tokenizing import batched

log = logging.getLogger(__name__)

SKIP_DIRS = frozenset({"test", "tests", "idlelib", "site-packages", "dist-packages", "__pycache__"})
"""Directory names left out of source directories."""

COMMON_MAX_BYTES = 4 << 20
"""Largest single source file read into D_c."""


def stdlib_dir() -> Path:
    """The standard library directory of the running Python."""
    return Path(sysconfig.get_paths()["stdlib"])


def default_common_path(tokenizer: Any, name: str = "stdlib", *, fingerprint: str | None = None) -> Path:
    """``cache_root()/common/<tokenizer fingerprint>-<name>.fcds``."""
    from fastcoder.models import cache_root, tokenizer_fingerprint

    fp = fingerprint or tokenizer_fingerprint(tokenizer)
    return cache_root() / "common" / f"{fp}-{name}.fcds"


def iter_source_files(directory: str | os.PathLike[str], extensions: Sequence[str] = (".py",)) -> Iterator[Path]:
    """Files under ``directory`` with one of ``extensions``, sorted, skipping
    :data:`SKIP_DIRS` and symlinked directories."""
    exts = tuple(e.lower() for e in extensions)
    for dirpath, dirnames, filenames in os.walk(directory, followlinks=False, onerror=lambda e: log.info("skipping %s", e)):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.lower().endswith(exts):
                yield Path(dirpath) / name


def iter_jsonl(path: str | os.PathLike[str], field_name: str = "content") -> Iterator[str]:
    """The ``field_name`` string of each JSON line of ``path`` (``.gz`` decompressed).
    Malformed lines and lines without the field are skipped with a count in the log.

    Raises :class:`FastCoderError` when the file cannot be opened.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    bad = 0
    try:
        fh = opener(path, "rt", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise FastCoderError(f"cannot read {path}: {exc}") from exc
    with fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                value = json.loads(line).get(field_name)
            except (ValueError, AttributeError):
                value = None
            if isinstance(value, str) and value:
                yield value
            else:
                bad += 1
    if bad:
        log.warning("%s: %d lines without a string %r field were skipped", path, bad, field_name)


@dataclass
class CommonReport:
    """What a D_c build did: documents, tokens, seconds (tokenizing and suffix-array
    sort), the output file and its size (when saved)."""

    documents: int = 0
    tokens: int = 0
    tokenize_s: float = 0.0
    sort_s: float = 0.0
    path: Path | None = None
    file_bytes: int = 0
    sources: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.tokenize_s + self.sort_s


def build_common(
    tokenizer: Any,
    *,
    sources: Sequence[str | os.PathLike[str]] = (),
    jsonl: Sequence[tuple[str | os.PathLike[str], str]] = (),
    fingerprint: str | None = None,
    out: str | os.PathLike[str] | None = None,
    progress: Callable[..., None] | None = None,
) -> tuple[TokenDatastore, CommonReport]:
    """Build a common-code datastore.

    Parameters:
        tokenizer: the model's fast tokenizer.
        sources: directories of ``*.py`` files (default, when ``jsonl`` is empty too:
            the standard library).
        jsonl: (file, field) pairs of JSONL corpora.
        fingerprint: the tokenizer fingerprint (computed when None).
        out: where to save it (atomically); None: not saved.
        progress: ``progress(done, total, extra=str)`` per batch (total None when unknown).
    """
    from fastcoder.models import tokenizer_fingerprint

    fp = fingerprint or tokenizer_fingerprint(tokenizer)
    if not sources and not jsonl:
        sources = [stdlib_dir()]
    report = CommonReport(sources=[str(s) for s in sources] + [f"{p}:{f}" for p, f in jsonl])
    files: list[Path] = []
    for s in sources:
        if not Path(s).is_dir():
            raise FastCoderError(f"source directory {s} does not exist")
        files.extend(iter_source_files(s))
    for p, _ in jsonl:
        if not Path(p).is_file():
            raise FastCoderError(f"JSONL file {p} does not exist")
    total = len(files) if not jsonl else None

    def texts() -> Iterable[str]:
        for f in files:
            src = read_source(f, COMMON_MAX_BYTES)
            if src is not None and src.text.strip():
                yield src.text
        for p, fld in jsonl:
            yield from iter_jsonl(p, fld)

    docs = []
    n_tokens = 0
    t0 = time.perf_counter()
    for batch in batched(texts(), len):
        ids = encode_batch(tokenizer, batch, special="parse")
        docs.extend(ids)
        n_tokens += sum(int(a.size) for a in ids)
        if progress is not None:
            progress(len(docs), total, extra=f"{n_tokens:,} tokens")
    report.tokenize_s = time.perf_counter() - t0
    report.documents, report.tokens = len(docs), n_tokens
    meta = {
        "kind": "common",
        "sources": report.sources,
        "files": len(docs),
        "python": sys.version.split()[0],
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    t1 = time.perf_counter()
    store = TokenDatastore.build(docs, fingerprint=fp, meta=meta)
    report.sort_s = time.perf_counter() - t1
    if out is not None:
        out = Path(out)
        store.save(out)
        report.path, report.file_bytes = out, out.stat().st_size
    return store, report


def load_common(path: str | os.PathLike[str], tokenizer: Any = None, *, fingerprint: str | None = None) -> TokenDatastore:
    """Memory-map a saved D_c, checking it fits the tokenizer (when given).
    Raises :class:`DatastoreError` for a missing, foreign or corrupt file."""
    if fingerprint is None and tokenizer is not None:
        from fastcoder.models import tokenizer_fingerprint

        fingerprint = tokenizer_fingerprint(tokenizer)
    if not Path(path).is_file():
        raise DatastoreError(f"no common-code datastore at {path}; build it with `fastcoder build-common`")
    return TokenDatastore.load(path, expected_fingerprint=fingerprint)


def ensure_common(tokenizer: Any, progress: bool = True, *, fingerprint: str | None = None) -> TokenDatastore:
    """The standard-library D_c for ``tokenizer``: loaded from
    :func:`default_common_path`, or built and cached there the first time (also when
    the cached file is corrupt or foreign).

    Parameters:
        tokenizer: the model's fast tokenizer.
        progress: draw a progress bar on stderr while building.
        fingerprint: the tokenizer fingerprint (computed when None).
    """
    from fastcoder.models import tokenizer_fingerprint
    from indexer.persist import dir_lock
    from indexer.progress import progress_bar

    fp = fingerprint or tokenizer_fingerprint(tokenizer)
    path = default_common_path(tokenizer, fingerprint=fp)

    def try_load() -> TokenDatastore | None:
        if not path.is_file():
            return None
        try:
            return TokenDatastore.load(path, expected_fingerprint=fp)
        except DatastoreError as exc:
            log.warning("rebuilding the common-code datastore: %s", exc)
            return None

    store = try_load()
    if store is not None:
        return store
    with dir_lock(path.parent):
        store = try_load()  # another process may have built it meanwhile
        if store is not None:
            return store
        with progress_bar("Building D_c (standard library)", enabled=progress) as bar:
            store, rep = build_common(tokenizer, fingerprint=fp, out=path, progress=bar)
        log.info(
            "built D_c: %d files, %d tokens in %.1f s, %.1f MB at %s",
            rep.documents, rep.tokens, rep.seconds, rep.file_bytes / 1e6, path,
        )
    return TokenDatastore.load(path, expected_fingerprint=fp)


def build_common_from_packages(
    tokenizer: Any,
    packages: Sequence[Any],
    *,
    fingerprint: str | None = None,
    out: str | os.PathLike[str] | None = None,
    work_dir: str | os.PathLike[str] | None = None,
    source: str = "packages",
    progress: Callable[..., None] | None = None,
    extra_meta: dict[str, Any] | None = None,
) -> tuple[TokenDatastore, CommonReport]:
    """Build a D_c from packages (:class:`indexer.packages.PackageSource`) with provenance.

    Parameters:
        tokenizer: the model's fast tokenizer.
        packages: the packages, in the order their documents should take.
        fingerprint: the tokenizer fingerprint (computed when None).
        out: where to save the store (atomically); None: not saved.
        work_dir: where the tokenized package groups are kept between runs (default:
            ``cache_root()/common/tokens-<fingerprint>``); an interrupted build resumes
            from there.
        source: what the packages are, for the header (``pypi-top-300``,
            ``requirements:FILE``, ``env:PYTHON``).
        progress: ``progress(done, total, extra=str)`` while tokenizing.
        extra_meta: more header fields.
    """
    from fastcoder.models import cache_root, tokenizer_fingerprint
    from indexer.packages import normalize
    from indexer.persist import dir_lock
    from indexer.package_stores import PackageDocs, build_from_docs, package_docs
    from indexer.shards import ShardSet

    fp = fingerprint or tokenizer_fingerprint(tokenizer)
    work = Path(work_dir) if work_dir is not None else cache_root() / "common" / f"tokens-{fp}"
    report = CommonReport(sources=[source])
    t0 = time.perf_counter()
    shard_set = ShardSet(work, fp, kind="common-tokens")
    with dir_lock(work):
        sharded, srep = shard_set.update(tokenizer, packages, progress=progress, prune=False)
        by_key: dict[str, TokenDatastore] = {}
        for shard in sharded.shards:
            for p in shard.meta.get("packages", []):
                by_key[normalize(str(p["name"]))] = shard
        parts: list[PackageDocs] = []
        for pkg in packages:
            hit = by_key.get(pkg.key)
            pd = package_docs(hit, pkg.key) if hit is not None else None
            if pd is not None and pd.docs:
                parts.append(pd)
    report.tokenize_s = time.perf_counter() - t0
    report.documents = sum(len(p.docs) for p in parts)
    report.tokens = sum(p.tokens for p in parts)
    meta = {
        "kind": "common",
        "sources": report.sources,
        "files": report.documents,
        "python": sys.version.split()[0],
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **(extra_meta or {}),
    }
    t1 = time.perf_counter()
    store = build_from_docs(parts, fingerprint=fp, meta=meta)
    report.sort_s = time.perf_counter() - t1
    del parts
    if out is not None:
        out = Path(out)
        store.save(out)
        report.path, report.file_bytes = out, out.stat().st_size
    log.info(
        "D_c from %s: %d packages, %d documents, %d tokens (%d packages tokenized now, %d reused)",
        source, len(store.meta["packages"]), report.documents, report.tokens, len(srep.tokenized),
        len(packages) - len(srep.tokenized),
    )
    return store, report
