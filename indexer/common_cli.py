"""``fastcoder build-common``: build the common-code datastore D_c."""

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
    p.add_argument("--model", required=True, help="model whose tokenizer to use (builtin name, HF folder, .gguf, hub id)")
    p.add_argument("--out", type=Path, help="output file (default: the cache path the server uses)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from fastcoder.models import tokenizer_fingerprint
    from indexer.common import build_common, default_common_path
    from indexer.progress import progress_bar
    from indexer.tokenizing import load_tokenizer

    tok = load_tokenizer(args.model, progress=not args.no_progress)
    fp = tokenizer_fingerprint(tok)
    name = "stdlib" if not args.source and not args.jsonl else "custom"
    out = args.out or default_common_path(tok, name, fingerprint=fp)
    with progress_bar("Building D_c", enabled=not args.no_progress and sys.stderr.isatty()) as bar:
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
    }
    if args.json:
        print(json.dumps(info))
    else:
        print(
            f"D_c: {rep.documents:,} documents, {rep.tokens:,} tokens; tokenized in {rep.tokenize_s:.1f} s "
            f"({info['tokens_per_s'] or 0:,} tokens/s), suffix array in {rep.sort_s:.1f} s; "
            f"{rep.file_bytes / 1e6:.1f} MB at {rep.path}"
        )
        if name == "custom" and args.out is None:
            print("note: the server uses the stdlib D_c by default; pass this file with --common", file=sys.stderr)
    return 0
