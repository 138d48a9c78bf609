"""Benchmark of the repository index (prints numbers; not a test).

    fastcoder bench index [--root DIR] [--model SPEC] [--saves 50] [--common]

1. Full build of a real repository (default: the Django 5.1.4 sdist, about 2,800
   Python files, fetched with ``pip download --no-deps --no-binary :all:`` and
   extracted into ``--work``): seconds, files, tokens, tokens/s, store size on disk,
   peak RSS.
2. Reload of the persisted index with nothing changed.
3. Update latency after a save: ``--saves`` times, append a unique line to a file,
   write it, and wait for ``on_indexed``; p50 / p95 / max of the time from the write
   to the callback (the file is then searchable; each one is checked).
4. Retrieval time of D_r (base + delta) for contexts taken from the repository.
5. With ``--common``: the stdlib D_c build (tokens, seconds, file size).

The repository is copied to a temporary directory first, and the index and D_c go to
a temporary cache, so nothing of yours is touched. The tokenizer is the real Qwen one
(``qwen2.5-coder-0.5b``) if it is cached; otherwise the tests' tiny tokenizer, and the
output says so.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from fastcoder.tokens import encode
from fastcoder_bench.output import recording

DJANGO = "django==5.1.4"


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, MB (Linux reports KiB)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024.0 if sys.platform != "darwin" else r / 1e6


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def fetch_django(work: Path) -> Path:
    """The extracted Django sdist under ``work`` (downloaded once with pip)."""
    work.mkdir(parents=True, exist_ok=True)
    found = sorted(work.glob("src/Django-*"))
    if found:
        return found[0]
    archives = sorted(work.glob("[Dd]jango-*.tar.gz"))
    if not archives:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", DJANGO, "-d", str(work)],
            check=True,
        )
        archives = sorted(work.glob("[Dd]jango-*.tar.gz"))
    with tarfile.open(archives[0]) as tf:
        tf.extractall(work / "src", filter="data")
    return sorted(work.glob("src/Django-*"))[0]


def load_bench_tokenizer(spec: str | None) -> tuple[Any, str]:
    """(tokenizer, description). Prefers ``spec`` or the cached Qwen tokenizer."""
    from fastcoder.models import cached_path

    from indexer.tokenizing import load_tokenizer

    if spec:
        return load_tokenizer(spec), spec
    if cached_path("qwen2.5-coder-0.5b") is not None:
        return load_tokenizer("qwen2.5-coder-0.5b", progress=False), "qwen2.5-coder-0.5b (real Qwen tokenizer, 151k vocab)"
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import build_tokenizer  # the tests' tiny BPE, trained in a second

    return build_tokenizer(), "tiny test tokenizer (600 vocab) - the Qwen model is not cached"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fastcoder bench index", description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, help="repository to index (default: Django 5.1.4 sdist)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/dj"), help="where the Django sdist is kept")
    ap.add_argument("--model", help="tokenizer's model spec (default: qwen2.5-coder-0.5b if cached)")
    ap.add_argument("--saves", type=int, default=50, help="saves to time (default 50)")
    ap.add_argument("--common", action="store_true", help="also time the stdlib D_c build")
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR", help="write DIR/report.json and DIR/report.md")
    args = ap.parse_args(argv)
    with recording(args.out, "index", args, argv) as rec:
        rec.results = _run(args)
    return 0


def _run(args: argparse.Namespace) -> dict[str, Any]:
    """The benchmark; prints its figures and returns them."""

    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    results: dict[str, Any] = {}
    source = args.root or fetch_django(args.work)
    tok, tok_desc = load_bench_tokenizer(args.model)
    results["tokenizer"] = tok_desc
    print(f"tokenizer: {tok_desc}")

    from fastcoder.models import tokenizer_fingerprint
    from indexer.workspace import WorkspaceIndex

    fp = tokenizer_fingerprint(tok)
    tmp = Path(tempfile.mkdtemp(prefix="fc-bench-"))
    try:
        root = tmp / "repo"
        shutil.copytree(source, root, symlinks=True)
        cache = tmp / "index"

        # 1. full build -------------------------------------------------------------
        rss0 = peak_rss_mb()
        t0 = time.perf_counter()
        idx = WorkspaceIndex([root], tok, fingerprint=fp, cache_dir=cache)
        rep = idx.open()
        build_s = time.perf_counter() - t0
        st = idx.stats()
        idx.stop()
        results["build"] = {
            "files": st["files"],
            "tokens": st["tokens"],
            "seconds": round(build_s, 2),
            "tokens_per_s": round(st["tokens"] / build_s),
            "store_mb": round(dir_bytes(cache) / 1e6, 1),
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "peak_rss_before_mb": round(rss0, 1),
        }
        b = results["build"]
        print(
            f"full build: {b['files']:,} files, {b['tokens']:,} tokens in {b['seconds']} s "
            f"({b['tokens_per_s']:,} tokens/s); store {b['store_mb']} MB; peak RSS {b['peak_rss_mb']} MB "
            f"(before: {b['peak_rss_before_mb']} MB)"
        )

        # 2. reload -----------------------------------------------------------------
        t0 = time.perf_counter()
        idx = WorkspaceIndex([root], tok, fingerprint=fp, cache_dir=cache)
        rep = idx.open()
        results["reload"] = {"seconds": round(time.perf_counter() - t0, 3), "mode": rep.mode, "changed": rep.changed}
        print(f"reload, nothing changed: {results['reload']['seconds']} s ({rep.mode}, {rep.changed} changed)")
        idx.stop()

        # 3. update latency ---------------------------------------------------------
        done: dict[str, threading.Event] = {}
        reported: dict[str, float] = {}
        lock = threading.Lock()

        def on_indexed(rel: str, tokens: int, latency_ms: float) -> None:
            with lock:
                reported[rel] = latency_ms
                ev = done.get(rel)
            if ev is not None:
                ev.set()

        idx = WorkspaceIndex([root], tok, fingerprint=fp, cache_dir=cache, on_indexed=on_indexed)
        idx.start()
        if not idx.wait_ready(600):
            raise SystemExit("the index did not become ready")
        time.sleep(0.5)  # let the observer settle
        pkg = root / "django" if (root / "django").is_dir() else root  # the Django sdist: its package, not its tests
        files = sorted(p for p in pkg.rglob("*.py") if p.stat().st_size > 200)
        rng = random.Random(0)
        picks = rng.sample(files, min(args.saves, len(files)))
        lat: list[float] = []
        rep_lat: list[float] = []
        missed = 0
        searchable_fail = 0
        for i, path in enumerate(picks):
            rel = path.relative_to(root).as_posix()
            ev = threading.Event()
            with lock:
                done[rel] = ev
                reported.pop(rel, None)
            marker = f"bench_marker_{i}_{rng.randrange(10**9)}"
            text = path.read_text(encoding="utf-8") + f"\n{marker} = compute_value({i}, 'benchmark')\n"
            t0 = time.perf_counter()
            path.write_text(text, encoding="utf-8")
            if not ev.wait(10):
                missed += 1
                continue
            lat.append((time.perf_counter() - t0) * 1000)
            with lock:
                rep_lat.append(reported[rel])
            ids = encode(tok, text, special="parse")
            ctx, want = ids[-20:-4], tuple(ids[-4:])
            r = idx.source.retrieve(ctx)
            if r.match_len < 16 or want not in {p for p, _ in r.nodes}:
                searchable_fail += 1
                rec = idx.repo.record(str(path))
                print(
                    f"  not searchable after on_indexed: {rel} (match {r.match_len} of {len(ctx)}, "
                    f"indexed {rec.tokens if rec else None} tokens, file {len(ids)})",
                    file=sys.stderr,
                )
            time.sleep(0.05)
        st = idx.stats()
        results["update"] = {
            "saves": len(picks),
            "p50_ms": round(pct(lat, 0.5), 1),
            "p95_ms": round(pct(lat, 0.95), 1),
            "max_ms": round(max(lat), 1) if lat else None,
            "reported_p50_ms": round(pct(rep_lat, 0.5), 1),
            "reported_p95_ms": round(pct(rep_lat, 0.95), 1),
            "missed": missed,
            "not_searchable": searchable_fail,
            "delta_files_at_end": st["delta_files"],
            "peak_rss_mb": round(peak_rss_mb(), 1),
        }
        u = results["update"]
        print(
            f"update after save ({u['saves']} saves, write -> on_indexed): p50 {u['p50_ms']} ms, "
            f"p95 {u['p95_ms']} ms, max {u['max_ms']} ms (index-reported p50 {u['reported_p50_ms']} / "
            f"p95 {u['reported_p95_ms']} ms); missed {missed}, not searchable {searchable_fail}"
        )

        # 4. retrieval ---------------------------------------------------------------
        ctxs = []
        for path in rng.sample(files, min(50, len(files))):
            ids = encode(tok, path.read_text(encoding="utf-8"), special="parse")
            for _ in range(4):
                end = rng.randrange(16, max(17, len(ids)))
                ctxs.append(ids[end - 16 : end])
        idx.source.retrieve(ctxs[0])
        t0 = time.perf_counter()
        hits = sum(bool(idx.source.retrieve(c)) for c in ctxs)
        per = (time.perf_counter() - t0) * 1000 / len(ctxs)
        results["retrieve"] = {"ms_per_query": round(per, 3), "hit_rate": round(hits / len(ctxs), 3), "queries": len(ctxs)}
        print(f"D_r retrieval: {per:.2f} ms/query over {len(ctxs)} contexts, hit rate {hits / len(ctxs):.2f}")
        idx.stop()

        # 5. D_c ---------------------------------------------------------------------
        if args.common:
            from indexer.common import build_common

            _, crep = build_common(tok, fingerprint=fp, out=tmp / "dc.fcds")
            results["common"] = {
                "documents": crep.documents,
                "tokens": crep.tokens,
                "tokenize_s": round(crep.tokenize_s, 2),
                "sort_s": round(crep.sort_s, 2),
                "file_mb": round(crep.file_bytes / 1e6, 1),
                "peak_rss_mb": round(peak_rss_mb(), 1),
            }
            c = results["common"]
            print(
                f"stdlib D_c: {c['documents']:,} files, {c['tokens']:,} tokens; tokenize {c['tokenize_s']} s, "
                f"suffix array {c['sort_s']} s; {c['file_mb']} MB; peak RSS {c['peak_rss_mb']} MB"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results))
    return results


if __name__ == "__main__":
    sys.exit(main())
