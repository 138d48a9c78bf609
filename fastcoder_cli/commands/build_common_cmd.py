"""``fastcoder build-common``: build the common-code datastore D_c.

Corpora (one kind per run):

* default: the standard library of this Python;
* ``--source DIR`` / ``--jsonl FILE``: folders of ``*.py`` files, The Stack-style JSONL;
* ``--from-pypi-top N``: the wheels (sdists where there is no wheel) of the first N
  projects of ``indexer/data/pypi_top.json`` (the most-downloaded PyPI projects,
  pinned), downloaded with pip into ``cache_root()/pypi`` (kept: a rerun downloads
  nothing and an interrupted run resumes);
* ``--from-requirements FILE``: the projects a requirements file names;
* ``--from-env PYTHON``: the packages installed in an environment (an interpreter or a
  virtualenv folder), read like D_d.

The package kinds record in the store's header every package (name, version) and
which document came from which package and file; ``fastcoder index --lookup`` shows it.
``--exclude NAME`` (repeatable) leaves projects out, e.g. the projects a benchmark
completes code from.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``build-common`` subcommand."""
    p = subparsers.add_parser(
        "build-common",
        help="build the common-code datastore (D_c) from source folders or JSONL",
        description=(
            "Tokenize a corpus with the model's tokenizer and build D_c. Without --source "
            "or --jsonl, the standard library of this Python is used."
        ),
    )
    p.add_argument("--source", action="append", default=[], metavar="DIR", help="a folder of *.py files (repeatable)")
    p.add_argument("--jsonl", action="append", default=[], metavar="FILE", help="a JSONL corpus, e.g. The Stack (repeatable; .gz ok)")
    p.add_argument("--field", default="content", help="the JSONL field holding the code (default: content)")
    p.add_argument("--from-pypi-top", type=int, metavar="N", help="the N most-downloaded PyPI projects (indexer/data/pypi_top.json)")
    p.add_argument("--from-requirements", type=Path, metavar="FILE", help="the projects a requirements file names (downloaded with pip)")
    p.add_argument("--from-env", metavar="PYTHON", help="the packages installed in an environment (interpreter or virtualenv folder)")
    p.add_argument("--exclude", action="append", default=[], metavar="NAME", help="leave this project out (repeatable)")
    p.add_argument("--ranking", type=Path, metavar="FILE", help="another ranking file for --from-pypi-top (same format)")
    p.add_argument("--jobs", type=int, default=4, help="parallel downloads (default 4)")
    p.add_argument("--model", required=True, help="model whose tokenizer to use (builtin name, HF folder, .gguf, hub id)")
    p.add_argument("--out", type=Path, help="output file (default: the cache path the server uses)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


def _packages(args: argparse.Namespace, progress: bool) -> tuple[list, str, str, dict]:
    """(packages, store name, source description, extra meta) of a package corpus."""
    import hashlib

    from fastcoder.errors import FastCoderError
    from indexer import pypi
    from indexer.deps import iter_env_packages
    from indexer.packages import normalize, package_from_tree
    from indexer.progress import progress_bar

    drop = {normalize(n) for n in args.exclude}
    suffix = ("-without-" + hashlib.sha256(",".join(sorted(drop)).encode()).hexdigest()[:8]) if drop else ""
    extra: dict = {"excluded": sorted(drop)} if drop else {}
    if args.from_env:
        pkgs = [p for p in iter_env_packages(args.from_env) if p.key not in drop]
        h = hashlib.sha256(str(Path(args.from_env).resolve()).encode()).hexdigest()[:8]
        return pkgs, f"env-{h}{suffix}", f"env:{args.from_env}", extra
    if args.from_pypi_top is not None:
        reqs = pypi.load_top(args.ranking, args.from_pypi_top)
        name, source = f"pypi-top{args.from_pypi_top}{suffix}", f"pypi-top-{args.from_pypi_top}"
    else:
        reqs = pypi.parse_requirements(args.from_requirements)
        if not reqs:
            raise FastCoderError(f"{args.from_requirements} names no PyPI project")
        h = hashlib.sha256(str(args.from_requirements.resolve()).encode()).hexdigest()[:8]
        name, source = f"requirements-{h}{suffix}", f"requirements:{args.from_requirements}"
    reqs = pypi.exclude(reqs, drop)
    with progress_bar("Downloading", enabled=progress, unit="projects") as bar:
        rep = pypi.fetch_packages(reqs, jobs=args.jobs, progress=bar)
    if rep.failed:
        print(f"warning: {len(rep.failed)} project(s) could not be downloaded and are left out: "
              + ", ".join(sorted(rep.failed)), file=sys.stderr)
    if not rep.packages:
        raise FastCoderError("no project could be downloaded")
    extra["failed"] = sorted(rep.failed)
    return [package_from_tree(p.name, p.version, p.root) for p in rep.packages], name, source, extra


def run(args: argparse.Namespace) -> int:
    from fastcoder.errors import FastCoderError
    from fastcoder.models import tokenizer_fingerprint
    from indexer.common import build_common, default_common_path
    from indexer.progress import progress_bar
    from indexer.tokenizing import load_tokenizer

    kinds = [bool(args.source or args.jsonl), args.from_pypi_top is not None, args.from_requirements is not None, bool(args.from_env)]
    if sum(kinds) > 1:
        raise FastCoderError("give one corpus: --source/--jsonl, --from-pypi-top, --from-requirements or --from-env")
    show = not args.no_progress and sys.stderr.isatty()
    tok = load_tokenizer(args.model, progress=not args.no_progress)
    fp = tokenizer_fingerprint(tok)
    if any(kinds[1:]):
        from indexer.common import build_common_from_packages

        pkgs, name, source, extra = _packages(args, show)
        out = args.out or default_common_path(tok, name, fingerprint=fp)
        with progress_bar("Building D_c", enabled=show) as bar:
            store, rep = build_common_from_packages(tok, pkgs, fingerprint=fp, out=out, source=source, progress=bar, extra_meta=extra)
    else:
        if args.exclude:
            raise FastCoderError("--exclude works with the package corpora (--from-pypi-top, --from-requirements, --from-env)")
        name = "stdlib" if not args.source and not args.jsonl else "custom"
        out = args.out or default_common_path(tok, name, fingerprint=fp)
        with progress_bar("Building D_c", enabled=show) as bar:
            store, rep = build_common(
                tok,
                sources=args.source,
                jsonl=[(j, args.field) for j in args.jsonl],
                fingerprint=fp,
                out=out,
                progress=bar,
            )
    info = {
        "path": str(rep.path),
        "documents": rep.documents,
        "tokens": rep.tokens,
        "tokenize_s": round(rep.tokenize_s, 3),
        "sort_s": round(rep.sort_s, 3),
        "seconds": round(rep.seconds, 3),
        "file_bytes": rep.file_bytes,
        "tokens_per_s": round(rep.tokens / rep.tokenize_s) if rep.tokenize_s else None,
        "fingerprint": fp,
        "packages": len(store.meta.get("packages", [])),
    }
    if args.json:
        print(json.dumps(info))
    else:
        print(
            f"D_c: {rep.documents:,} documents, {rep.tokens:,} tokens; tokenized in {rep.tokenize_s:.1f} s "
            f"({info['tokens_per_s'] or 0:,} tokens/s), suffix array in {rep.sort_s:.1f} s; "
            f"{rep.file_bytes / 1e6:.1f} MB at {rep.path}"
        )
        if info["packages"]:
            print(f"packages: {info['packages']} (names, versions and per-file provenance are in the header)")
        if name != "stdlib" and args.out is None:
            print("note: the server uses the stdlib D_c by default; pass this file with --common", file=sys.stderr)
    return 0
