"""``fastcoder index``: build, update, watch or query a workspace's repository index.

* ``fastcoder index ROOT --model M``: build the index (or load it and apply the changes
  since the last run) and print its stats.
* ``... --watch [--events]``: keep it up to date until SIGINT/SIGTERM (exit code 0).
  With ``--events``, stdout carries one JSON object per line, flushed each:
  ``{"event":"ready","files":N,"tokens":T,"seconds":S}`` once the initial build or
  load is done, ``{"event":"indexed","path":REL,"tokens":T,"latency_ms":X}`` when a
  changed file is searchable, ``{"event":"removed","path":REL}``, and
  ``{"event":"status","state":S,"message":M}`` for errors.
* ``... --lookup TEXT``: one JSON object ``{"match_len":n,"continuations":[{"text",
  "count","source"}]}`` from D_r (the persisted index, updated) and D_c (``--common``
  or the default stdlib D_c if it was built), and D_d with ``--deps``. A continuation
  from a store built from packages (D_d, a package D_c) also names where it came from:
  ``"package"``, ``"version"``, ``"file"`` (the most frequent origin) and
  ``"packages"`` (``{name: count}`` over all its occurrences).
* ``... --deps [--python PY]``: also build or update D_d, the datastore of the
  workspace's installed dependencies (``.venv``/``venv`` in the root, ``--python``, or
  this interpreter), and print its stats.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``index`` subcommand."""
    p = subparsers.add_parser(
        "index",
        help="build, update, watch or query a workspace's repository index (D_r)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("roots", nargs="+", type=Path, metavar="ROOT", help="workspace root folder(s)")
    p.add_argument("--model", required=True, help="model whose tokenizer to use (builtin name, HF folder, .gguf, hub id)")
    p.add_argument("--watch", action="store_true", help="keep watching for changes until interrupted")
    p.add_argument("--events", action="store_true", help="with --watch: JSON lines on stdout")
    p.add_argument("--lookup", metavar="TEXT", help="print the continuations of TEXT as JSON")
    p.add_argument("--common", type=Path, metavar="PATH", help="D_c file for --lookup (default: the stdlib D_c if built)")
    p.add_argument("--max-nodes", type=int, default=64, help="continuation-trie size for --lookup (default 64)")
    p.add_argument("--deps", action="store_true", help="also build/update D_d (the installed dependencies) and use it for --lookup")
    p.add_argument("--python", metavar="PY", help="the workspace's interpreter or virtualenv for D_d (default: ROOT/.venv, ROOT/venv, this Python)")
    p.add_argument("--rebuild", action="store_true", help="discard the saved index and build it from scratch")
    p.add_argument("--json", action="store_true", help="print the stats as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


class _Printer:
    """Thread-safe JSON-lines writer on stdout."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __call__(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, ensure_ascii=False)
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


def leaves(nodes: list[tuple[tuple[int, ...], int]]) -> list[tuple[tuple[int, ...], int]]:
    """The maximal paths of a prefix-closed node list (those no other path extends)."""
    prefixes = {path[:-1] for path, _ in nodes}
    return [(path, c) for path, c in nodes if path not in prefixes]


def run(args: argparse.Namespace) -> int:
    from fastcoder.errors import FastCoderError
    from indexer.tokenizing import load_tokenizer

    for root in args.roots:
        if not root.is_dir():
            raise FastCoderError(f"workspace root {root} is not a directory")
    if args.events and not args.watch:
        raise FastCoderError("--events needs --watch")
    tok = load_tokenizer(args.model, progress=not args.no_progress)
    if args.lookup is not None:
        return _lookup(args, tok)
    if args.watch:
        return _watch(args, tok)
    code = _build(args, tok)
    if args.deps:
        code = code or _deps(args, tok)
    return code


def _build_deps(args: argparse.Namespace, tok: Any):
    from indexer.deps import build_deps
    from indexer.progress import progress_bar

    with progress_bar("Indexing dependencies (D_d)", enabled=not args.no_progress and sys.stderr.isatty()) as bar:
        return build_deps(args.roots[0], tok, python=args.python, progress=bar)


def _deps(args: argparse.Namespace, tok: Any) -> int:
    res = _build_deps(args, tok)
    rep = res.report
    info = {
        "env": res.env.key if res.env else None,
        "origin": res.env.origin if res.env else None,
        "packages": len(res.store.packages()),
        "tokens": res.store.n_tokens,
        "shards": len(res.store.shards),
        "rebuilt_shards": rep.rebuilt_shards if rep else 0,
        "tokenized_packages": len(rep.tokenized) if rep else 0,
        "seconds": round(res.seconds, 3),
        "skipped": res.skipped,
    }
    if args.json:
        print(json.dumps(info))
    elif res.env is None:
        print("D_d: no usable Python environment; nothing indexed")
    else:
        print(
            f"D_d ({info['origin']}: {info['env']}): {info['packages']} packages, {info['tokens']:,} tokens in "
            f"{info['shards']} shards ({info['rebuilt_shards']} rebuilt, {info['tokenized_packages']} packages "
            f"tokenized) in {res.seconds:.1f} s"
        )
    return 0


def _make_index(args: argparse.Namespace, tok: Any, **callbacks: Any):
    from indexer.workspace import WorkspaceIndex

    index = WorkspaceIndex(args.roots, tok, **callbacks)
    if args.rebuild and index.store is not None:
        index.store.clear()
    return index


def _build(args: argparse.Namespace, tok: Any) -> int:
    from indexer.progress import progress_bar

    with progress_bar("Indexing", enabled=not args.no_progress and sys.stderr.isatty()) as bar:
        index = _make_index(args, tok, on_progress=lambda d, t: bar(d, t))
        rep = index.open()
    st = index.stats()
    index.stop()
    info = {
        "mode": rep.mode,
        "files": st["files"],
        "tokens": st["tokens"],
        "changed": rep.changed,
        "removed": rep.removed,
        "seconds": round(rep.seconds, 3),
        "base_tokens": st["base_tokens"],
        "delta_files": st["delta_files"],
        "delta_tokens": st["delta_tokens"],
        "store": st["store"],
    }
    if args.json:
        print(json.dumps(info))
    else:
        what = "built" if rep.mode == "built" else f"loaded ({rep.changed} changed, {rep.removed} removed since last run)"
        print(
            f"{what}: {st['files']:,} files, {st['tokens']:,} tokens in {rep.seconds:.2f} s "
            f"(base {st['base_tokens']:,} tokens, delta {st['delta_files']} files / {st['delta_tokens']:,} tokens)\n"
            f"store: {st['store']}"
        )
    return 0


def _watch(args: argparse.Namespace, tok: Any) -> int:
    import logging

    log = logging.getLogger("indexer")
    emit = _Printer()
    t0 = time.perf_counter()
    stop = threading.Event()
    state = {"ready": False}
    index_ref: list[Any] = []

    def on_status(s: str, message: str) -> None:
        if s == "ready" and not state["ready"]:
            state["ready"] = True
            st = index_ref[0].repo.stats() if index_ref else {"files": 0, "tokens": 0}
            if args.events:
                emit({"event": "ready", "files": st["files"], "tokens": st["tokens"], "seconds": round(time.perf_counter() - t0, 3)})
            else:
                log.info("ready: %s", message)
        elif s == "error":
            if args.events:
                emit({"event": "status", "state": s, "message": message})
            else:
                log.error("%s", message)

    def on_indexed(rel: str, tokens: int, latency_ms: float) -> None:
        if args.events:
            emit({"event": "indexed", "path": rel, "tokens": tokens, "latency_ms": round(latency_ms, 1)})
        else:
            log.info("indexed %s (%d tokens, %.0f ms)", rel, tokens, latency_ms)

    def on_removed(rel: str) -> None:
        if args.events:
            emit({"event": "removed", "path": rel})
        else:
            log.info("removed %s", rel)

    index = _make_index(args, tok, on_status=on_status, on_indexed=on_indexed, on_removed=on_removed)
    index_ref.append(index)
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        index.start()
        while not stop.wait(0.5):
            pass
    finally:
        index.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _lookup(args: argparse.Namespace, tok: Any) -> int:
    from fastcoder.errors import DatastoreError
    from fastcoder.tokens import encode
    from indexer.common import default_common_path, load_common

    index = _make_index(args, tok)
    index.open()
    sources: list[tuple[str, Any]] = [("D_r", index.source)]
    common_path = args.common or default_common_path(tok, fingerprint=index.fingerprint)
    if args.common is not None or common_path.is_file():
        try:
            sources.append(("D_c", load_common(common_path, fingerprint=index.fingerprint)))
        except DatastoreError:
            if args.common is not None:
                raise
    if args.deps:
        sources.append(("D_d", _build_deps(args, tok).store))
    ctx = encode(tok, args.lookup, special="parse")
    best = 0
    results = []
    per_source = {}
    for name, src in sources:
        r = src.retrieve(ctx, n_max=16, n_min=2, max_nodes=args.max_nodes, max_depth=16)
        per_source[name] = {"match_len": r.match_len, "total": r.total}
        best = max(best, r.match_len)
        results.append((name, src, r))
    conts = []
    for name, src, r in results:
        for path, count in leaves(r.nodes):
            item = {"text": tok.decode(list(path)), "count": count, "source": name, "tokens": len(path)}
            item.update(_origin(src, list(ctx[-r.match_len :]) + list(path)))
            conts.append(item)
    conts.sort(key=lambda c: (-c["count"], -c["tokens"]))
    index.stop()
    print(json.dumps({"match_len": best, "continuations": conts, "sources": per_source}, ensure_ascii=False))
    sys.stdout.flush()
    return 0


def _origin(src: Any, pattern: list[int]) -> dict[str, Any]:
    """Where a continuation came from, for stores built from packages (D_d, a package
    D_c): the most frequent (package, version, file) and the count per package."""
    from fastcoder.datastore import TokenDatastore
    from indexer.package_stores import package_table, pattern_origins
    from indexer.shards import ShardedStore

    if isinstance(src, ShardedStore):
        stores = src.shards
    elif isinstance(src, TokenDatastore) and package_table(src):
        stores = [src]
    else:
        return {}
    found = pattern_origins(stores, pattern)
    if not found:
        return {}
    (pkg, version, file), _ = found.most_common(1)[0]
    per_pkg: dict[str, int] = {}
    for (p, _, _), c in found.items():
        per_pkg[p] = per_pkg.get(p, 0) + c
    return {"package": pkg, "version": version, "file": file,
            "packages": dict(sorted(per_pkg.items(), key=lambda kv: -kv[1]))}
