"""Datastore scale benchmark (prints numbers; not a test).

    fastcoder bench scale --source D_C.fcds [--source DIR_OF_SHARDS ...]
        [--sizes 10e6,50e6,100e6] [--work DIR] [--queries 2000] [--keep] [--out DIR]

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

from fastcoder.tokens import encode
from fastcoder_bench.output import recording


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
    streams = [encode(tok, p.read_text(encoding="utf-8", errors="replace"), special="parse") for p in files]
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


def measure(path: str, n_queries: int, model: str, sharded: bool, parallel: int, caps: list[int],
            queries_file: str | None = None) -> dict:
    """Load a store (or shard folder) and time retrievals, every search method on every
    query in rotating order (side by side, so machine load hits them alike). Run in a
    fresh process so the RSS numbers are this store's."""
    if queries_file:
        queries = json.loads(Path(queries_file).read_text())[:n_queries]
    else:
        queries = _queries(_tokenizer(model), n_queries, Path(__file__).resolve().parent.parent)
    import gc

    from fastcoder.datastore import TokenDatastore
    from indexer.shards import ShardedStore, ShardSet

    gc.collect()
    before = _status()
    t0 = time.perf_counter()
    if sharded:
        fp = TokenDatastore.read_header(_first_file(path))[0]["fingerprint"]
        shards = ShardSet(path, fp).load(verify=False).shards
    else:
        shards = [TokenDatastore.load(path, verify=False)]
    load_ms = (time.perf_counter() - t0) * 1000
    after_load = _status()
    methods: dict[str, object] = {}
    if not sharded:
        methods["TokenDatastore.retrieve"] = shards[0]
    for cap in caps:
        methods[f"ShardedStore(max_positions={cap})"] = ShardedStore(shards, max_positions=cap)
        if sharded and parallel:
            methods[f"ShardedStore(max_positions={cap}, parallel={parallel})"] = ShardedStore(shards, parallel=parallel, max_positions=cap)
    names = list(methods)
    for q in queries[:50]:
        for m in methods.values():
            m.retrieve(q)
    lat: dict[str, list[float]] = {n: [] for n in names}
    lens: dict[str, list[int]] = {n: [] for n in names}
    for i, q in enumerate(queries):
        for k in range(len(names)):
            name = names[(i + k) % len(names)]
            t = time.perf_counter()
            r = methods[name].retrieve(q, n_max=16, n_min=2, max_nodes=64, max_depth=16)
            lat[name].append(time.perf_counter() - t)
            lens[name].append(r.match_len)
    after = _status()
    hist = np.bincount(np.asarray(lens[names[0]]), minlength=17).tolist()
    n_tokens = int(sum(s.n_tokens for s in shards))
    return {
        "path": path, "tokens": n_tokens, "parts": len(shards), "file_mb": round(_size(path) / 2**20, 1),
        "load_ms": round(load_ms, 1), "retrieve_ms": {n: _pct(v) for n, v in lat.items()},
        "rss_mb": {"before": round(before["VmRSS"]), "after_load": round(after_load["VmRSS"]), "after_queries": round(after["VmRSS"]),
                   "anon_growth": round(after["RssAnon"] - before["RssAnon"]), "file_after_queries": round(after["RssFile"] - before["RssFile"])},
        "match_hist": {str(i): c for i, c in enumerate(hist) if c}, "queries": len(queries),
    }


def _tokenizer(model: str):
    from fastcoder.models import load_tokenizer

    return load_tokenizer(model, progress=False)


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
    ap = argparse.ArgumentParser(prog="fastcoder bench scale", description=__doc__.splitlines()[0])
    ap.add_argument("--source", action="append", default=[], help="a store file or shard folder to take documents from")
    ap.add_argument("--sizes", default="10e6,50e6,100e6")
    ap.add_argument("--work", type=Path, default=Path("/tmp/fastcoder-scale"), help="where the stores are built (and the query set kept)")
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    ap.add_argument("--queries-file", help=argparse.SUPPRESS)
    ap.add_argument("--sharded", help="measure a ShardedStore over this shard folder")
    ap.add_argument("--parallel", type=int, default=0, help="with --sharded: also search the shards in this many threads")
    ap.add_argument("--caps", default="0,32768", help="ShardedStore max_positions values to measure (comma-separated; 0 = exact)")
    ap.add_argument("--keep", action="store_true", help="keep the built stores")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR", help="write DIR/report.json and DIR/report.md")
    args = ap.parse_args(argv)
    if args.measure:  # the child process of a build-and-measure run
        _run(args)
        return 0
    with recording(args.out, "scale", args, argv) as rec:
        rec.results = _run(args)
    return 0


def _run(args: argparse.Namespace) -> list[dict]:
    """The benchmark; prints its rows and returns them."""
    caps = [int(c) for c in args.caps.split(",") if c]
    args.work.mkdir(parents=True, exist_ok=True)
    qfile = args.work / "queries.json"
    if args.queries_file is None:
        if not qfile.is_file():  # one fixed query set for every run (the repo's files change)
            qfile.write_text(json.dumps(_queries(_tokenizer(args.model), args.queries, Path(__file__).resolve().parent.parent)))
        args.queries_file = str(qfile)
    if args.measure or args.sharded:
        res = measure(args.measure or args.sharded, args.queries, args.model, bool(args.sharded), args.parallel, caps, args.queries_file)
        print(json.dumps(res))
        if args.sharded:
            _table([res])
        return [res]
    rows = []
    for n in [int(float(x)) for x in args.sizes.split(",")]:
        b = build(args.source, n, args.work)
        print(json.dumps({"built": b}), flush=True)
        proc = subprocess.run([sys.executable, "-m", "fastcoder_bench.scale", "--measure", b["path"], "--queries", str(args.queries),
                               "--queries-file", args.queries_file, "--caps", args.caps], capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(1)
        row = {**json.loads(proc.stdout.strip().splitlines()[-1]), **b}
        rows.append(row)
        print(json.dumps(row), flush=True)
        if not args.keep:
            os.unlink(b["path"])
    _table(rows)
    return rows


def _table(rows: list[dict]) -> None:
    print("| tokens | parts | search | build (SA sort) s | file MB | load ms | p50 ms | p95 ms | p99 ms | RSS before / after load / after queries MB | anon growth MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        for name, q in r["retrieve_ms"].items():
            rss = r["rss_mb"]
            print(f"| {r['tokens']:,} | {r['parts']} | {name} | {r.get('build_s', '-')} | {r['file_mb']} | {r['load_ms']} | {q['p50']} | {q['p95']} | "
                  f"{q['p99']} | {rss['before']} / {rss['after_load']} / {rss['after_queries']} | {rss['anon_growth']} |")


if __name__ == "__main__":
    raise SystemExit(main())
