"""Datastore scale benchmark (prints numbers; not a test).

    python -m indexer.scale_bench --source D_C.fcds [--source DIR_OF_SHARDS ...]
        [--sizes 10e6,50e6,100e6] [--out DIR] [--queries 2000] [--keep]

Builds stores of about the given token counts from the documents of real stores (a
PyPI D_c, D_d shard folders; taken in order, whole documents, each document at most
once: a size larger than the sources together is refused), saves each, then measures
it in a fresh subprocess:

* build: suffix-array sort seconds, save seconds, file size;
* load: milliseconds to map it (no CRC: the CRC is a separate, streamed read), and the
  resident memory before and after loading and after the queries, split into anonymous
  memory (what the process owns) and file-backed pages (the page cache of the mapped
  file, shared and reclaimable);
* retrieval: p50 / p95 / p99 of ``TokenDatastore.retrieve`` (longest suffix match from
  16 tokens down to 2, then the 64 heaviest continuation prefixes with exact counts),
  split into the match search and the continuation count, on contexts that are *not*
  in the store: token positions of this repository's own Python files.

``--sharded DIR`` measures a :class:`indexer.shards.ShardedStore` over a shard folder
instead (sequential pruned search, and ``--parallel N`` threads).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def _status() -> dict[str, float]:
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
                out[key] = int(line.split()[1]) / 1024
    return out


def _queries(tok, n: int, root: Path, seed: int = 0) -> list[list[int]]:
    files = sorted(p for d in ("fastcoder", "indexer", "lsp_server", "tests") for p in (root / d).rglob("*.py"))
    streams = [tok(p.read_text(encoding="utf-8", errors="replace"), add_special_tokens=False)["input_ids"] for p in files]
    streams = [s for s in streams if len(s) >= 20]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        s = streams[int(rng.integers(len(streams)))]
        end = int(rng.integers(16, len(s)))
        out.append(s[end - 16 : end])
    return out


def _pct(a: list[float]) -> dict[str, float]:
    x = np.asarray(a) * 1000
    return {"p50": round(float(np.percentile(x, 50)), 3), "p95": round(float(np.percentile(x, 95)), 3),
            "p99": round(float(np.percentile(x, 99)), 3), "mean": round(float(x.mean()), 3)}


def measure(path: str, n_queries: int, model: str, sharded: bool, parallel: int, max_positions: int = -1) -> dict:
    """Load a store (or shard folder) and time retrievals; run in a fresh process."""
    from transformers import AutoTokenizer

    from fastcoder.models import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model(model, progress=False))
    queries = _queries(tok, n_queries, Path(__file__).resolve().parent.parent)
    import gc

    gc.collect()
    before = _status()
    t0 = time.perf_counter()
    if sharded:
        from fastcoder.models import tokenizer_fingerprint
        from indexer.shards import ShardSet

        store = ShardSet(path, tokenizer_fingerprint(tok)).load(verify=False)
        if parallel or max_positions >= 0:
            from indexer.shards import ShardedStore

            store = ShardedStore(store.shards, parallel=parallel, max_positions=max(0, max_positions))
        n_tokens, parts = store.n_tokens, len(store.shards)
    else:
        from fastcoder.datastore import TokenDatastore

        store = TokenDatastore.load(path, verify=False)
        n_tokens, parts = store.n_tokens, 1
        if max_positions >= 0:
            from indexer.shards import ShardedStore

            store = ShardedStore([store], max_positions=max_positions)
            sharded = True
    load_ms = (time.perf_counter() - t0) * 1000
    after_load = _status()
    for q in queries[:50]:
        store.retrieve(q)
    lat, match, lens = [], [], []
    for q in queries:
        t = time.perf_counter()
        r = store.retrieve(q, n_max=16, n_min=2, max_nodes=64, max_depth=16)
        lat.append(time.perf_counter() - t)
        lens.append(r.match_len)
    if not sharded:
        for q in queries:
            t = time.perf_counter()
            store.longest_match(q, 16, 2)
            match.append(time.perf_counter() - t)
    after = _status()
    hist = np.bincount(np.asarray(lens), minlength=17).tolist()
    return {
        "path": path, "tokens": n_tokens, "parts": parts, "file_mb": round(_size(path) / 2**20, 1),
        "load_ms": round(load_ms, 1), "retrieve_ms": _pct(lat), "match_ms": _pct(match) if match else None,
        "rss_mb": {"before": round(before["VmRSS"]), "after_load": round(after_load["VmRSS"]), "after_queries": round(after["VmRSS"]),
                   "anon_growth": round(after["RssAnon"] - before["RssAnon"]), "file_after_queries": round(after["RssFile"] - before["RssFile"])},
        "match_hist": {str(i): c for i, c in enumerate(hist) if c}, "queries": len(queries),
    }


def _size(path: str) -> int:
    p = Path(path)
    return sum(f.stat().st_size for f in p.glob("*.fcds")) if p.is_dir() else p.stat().st_size


def _docs(sources: list[str]):
    """Documents (token arrays) of the sources, in order."""
    from fastcoder.datastore import TokenDatastore

    for src in sources:
        p = Path(src)
        files = sorted(p.glob("shard-*.fcds")) if p.is_dir() else [p]
        for f in files:
            s = TokenDatastore.load(f, verify=False)
            for d in range(s.n_docs):
                yield s.doc_tokens(d)


def build(sources: list[str], n: int, out: Path) -> dict:
    from fastcoder.datastore import TokenDatastore

    docs, total = [], 0
    for d in _docs(sources):
        if total >= n:
            break
        docs.append(np.array(d, dtype=np.int32))
        total += d.size
    if total < n * 0.98:
        raise SystemExit(f"the sources hold only {total:,} tokens; cannot build {n:,}")
    t0 = time.perf_counter()
    store = TokenDatastore.build(docs, fingerprint=TokenDatastore.read_header(_first_file(sources[0]))[0]["fingerprint"],
                                 meta={"kind": "scale-bench", "sources": sources})
    sort_s = time.perf_counter() - t0
    path = out / f"scale-{n // 1_000_000}M.fcds"
    t1 = time.perf_counter()
    store.save(path)
    save_s = time.perf_counter() - t1
    return {"path": str(path), "tokens": store.n_tokens, "docs": store.n_docs, "build_s": round(sort_s, 1),
            "save_s": round(save_s, 1), "file_mb": round(path.stat().st_size / 2**20, 1)}


def _first_file(src: str) -> Path:
    p = Path(src)
    return sorted(p.glob("shard-*.fcds"))[0] if p.is_dir() else p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", action="append", default=[], help="a store file or shard folder to take documents from")
    ap.add_argument("--sizes", default="10e6,50e6,100e6")
    ap.add_argument("--out", type=Path, default=Path("/tmp/fastcoder-scale"))
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    ap.add_argument("--sharded", help="measure a ShardedStore over this shard folder")
    ap.add_argument("--parallel", type=int, default=0)
    ap.add_argument("--max-positions", type=int, default=-1,
                    help="search through indexer.shards.ShardedStore with this cap on counted occurrences (0: exact; default: plain TokenDatastore.retrieve)")
    ap.add_argument("--keep", action="store_true", help="keep the built stores")
    ap.add_argument("--caps", default="0,32768", help="also measure ShardedStore with these max_positions (comma-separated)")
    args = ap.parse_args(argv)
    if args.measure or args.sharded:
        res = measure(args.measure or args.sharded, args.queries, args.model, bool(args.sharded), args.parallel, args.max_positions)
        print(json.dumps(res))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in [int(float(x)) for x in args.sizes.split(",")]:
        b = build(args.source, n, args.out)
        print(json.dumps({"built": b}), flush=True)
        for cap in [-1] + [int(c) for c in args.caps.split(",") if c]:
            proc = subprocess.run([sys.executable, "-m", "indexer.scale_bench", "--measure", b["path"], "--queries", str(args.queries),
                                   "--model", args.model, "--max-positions", str(cap)], capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            m = json.loads(proc.stdout.strip().splitlines()[-1])
            row = {**b, **m, "search": "TokenDatastore.retrieve" if cap < 0 else f"ShardedStore(max_positions={cap})"}
            rows.append(row)
            print(json.dumps(row), flush=True)
        if not args.keep:
            os.unlink(b["path"])
    print("| tokens | search | build (SA sort) s | file MB | load ms | p50 ms | p95 ms | p99 ms | match p50/p95 ms | RSS after load / queries MB | anon growth MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        mm = r["match_ms"] or {}
        print(f"| {r['tokens']:,} | {r['search']} | {r['build_s']} | {r['file_mb']} | {r['load_ms']} | {r['retrieve_ms']['p50']} | {r['retrieve_ms']['p95']} | "
              f"{r['retrieve_ms']['p99']} | {mm.get('p50')}/{mm.get('p95')} | {r['rss_mb']['after_load']}/{r['rss_mb']['after_queries']} | {r['rss_mb']['anon_growth']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
