"""Retrieval latency benchmark (prints numbers; not a test).

    fastcoder bench retrieval [--model NAME] [--store PATH] [--queries N]

Queries are real code contexts that are *not* in the store: every token position of
this repository's own Python files (sampled), tokenized with the model's tokenizer.
Measures, per query, the datastore retrieval (longest suffix match from n_max = 16
down to 2, then the 64 heaviest continuation prefixes with exact counts) and a CACHE
lookup on a full session CACHE (2,000 sequences of 40 tokens cut from the same
code). Prints p50 / p95 / p99 in milliseconds, the match-length histogram and the
resident-memory growth.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np

from fastcoder.tokens import encode
from fastcoder_bench.output import recording


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentiles(samples: list[float]) -> str:
    a = np.asarray(samples) * 1000
    return f"p50 {np.percentile(a, 50):.3f} ms  p95 {np.percentile(a, 95):.3f} ms  p99 {np.percentile(a, 99):.3f} ms  (n={a.size})"


def quantiles_ms(samples: list[float]) -> dict[str, float]:
    a = np.asarray(samples) * 1000
    return {"n": int(a.size), **{f"p{q}_ms": round(float(np.percentile(a, q)), 4) for q in (50, 95, 99)}}


def main(argv: list[str] | None = None) -> int:
    from fastcoder.models import DEFAULT_MODEL

    ap = argparse.ArgumentParser(prog="fastcoder bench retrieval", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--store", type=Path, help="datastore file (default: the cached stdlib D_c)")
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--query-dir", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--out", type=Path, default=None, metavar="DIR", help="write DIR/report.json and DIR/report.md")
    args = ap.parse_args(argv)
    with recording(args.out, "retrieval", args, argv) as rec:
        rec.results = _run(args)
    return 0


def _run(args: argparse.Namespace) -> dict:
    """The benchmark; prints its figures and returns them."""
    from fastcoder.datastore import TokenDatastore
    from fastcoder.models import load_tokenizer
    from fastcoder.ngram import NgramIndex

    tok = load_tokenizer(args.model, progress=False)
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    if args.store:
        store = TokenDatastore.load(args.store)
    else:
        from indexer import ensure_common

        store = ensure_common(tok)
    load_s = time.perf_counter() - t0
    print(f"store: {store.n_tokens:,} tokens, {store.n_docs:,} docs; load {load_s * 1000:.0f} ms; RSS +{_rss_mb() - rss0:.0f} MB")
    results: dict = {"store_tokens": store.n_tokens, "store_docs": store.n_docs, "load_ms": round(load_s * 1000, 1),
                     "rss_load_mb": round(_rss_mb() - rss0, 1)}

    files = sorted(p for p in args.query_dir.rglob("*.py") if ".venv" not in p.parts)
    streams = [encode(tok, p.read_text(encoding="utf-8", errors="replace"), special="parse") for p in files]
    rng = np.random.default_rng(0)
    queries = []
    for _ in range(args.queries):
        s = streams[rng.integers(len(streams))]
        if len(s) < 20:
            continue
        end = int(rng.integers(16, len(s)))
        queries.append(s[end - 16 : end])
    for q in queries[:20]:  # warm the page cache
        store.retrieve(q)
    lat, lens = [], []
    for q in queries:
        t = time.perf_counter()
        r = store.retrieve(q, n_max=16, n_min=2, max_nodes=64, max_depth=16)
        lat.append(time.perf_counter() - t)
        lens.append(r.match_len)
    print(f"datastore retrieval: {percentiles(lat)}")
    hist = np.bincount(np.asarray(lens), minlength=17)
    print("match length histogram (0 = no match): " + " ".join(f"{i}:{c}" for i, c in enumerate(hist.tolist()) if c))
    print(f"RSS growth after queries: +{_rss_mb() - rss0:.0f} MB (store file ~{(store.tokens.nbytes + store.sa.nbytes) / 2**20:.0f} MB)")
    results.update(retrieve=quantiles_ms(lat), match_len_hist=hist.tolist(), rss_queries_mb=round(_rss_mb() - rss0, 1))

    cache = NgramIndex(key_len=2, max_sequences=2000)
    for _ in range(2000):
        s = streams[rng.integers(len(streams))]
        a = int(rng.integers(0, max(1, len(s) - 40)))
        cache.add(s[a : a + 40])
    clat = []
    for q in queries:
        t = time.perf_counter()
        cache.retrieve(q, n_max=16, max_nodes=64, max_depth=16)
        clat.append(time.perf_counter() - t)
    print(f"CACHE lookup (2,000 sequences): {percentiles(clat)}")
    results["cache_lookup"] = quantiles_ms(clat)
    return results


if __name__ == "__main__":
    raise SystemExit(main())
