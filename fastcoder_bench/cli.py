"""`fastcoder bench KIND ...`: one entry for every benchmark in this package.

    fastcoder bench [suite] (--suite humaneval|repo | --tasks FILE.jsonl) --out DIR ...
    fastcoder bench replay|live|edit|retrieval|index|scale|sources|soak [ARGS] [--out DIR]

Without a KIND, `fastcoder bench` is the suite (today's flags and ``report.json`` keys).
Each kind is one module with its own ``main(argv)`` (``fastcoder bench KIND --help``);
with ``--out DIR`` each writes ``DIR/report.json`` and ``DIR/report.md`` (see
:mod:`fastcoder_bench.output`). ``python -m fastcoder_bench.KIND`` runs the same module.
"""

from __future__ import annotations

import argparse
import importlib

# kind -> (module with main(argv), what it measures)
KINDS: dict[str, tuple[str, str]] = {
    "suite": ("fastcoder_bench.suite.cli", "AR, prompt lookup, REST and FastCoder side by side on function bodies"),
    "replay": ("fastcoder_bench.replay", "typing replay through the real server over stdio: per-request latency"),
    "live": ("fastcoder_bench.live", "live typing: keystrokes in real time through the real server; how soon a suggestion shows"),
    "edit": ("fastcoder_bench.edit", "edit by instruction: AR against the reuse / retrieval drafters"),
    "retrieval": ("fastcoder_bench.retrieval", "D_c retrieval and CACHE lookup latency on real contexts"),
    "index": ("fastcoder_bench.index", "workspace indexing: full build, reload, saves, D_r retrieval"),
    "scale": ("fastcoder_bench.scale", "retrieval latency, build time and memory at 10M-100M tokens"),
    "sources": ("fastcoder_bench.sources", "FastCoder with several D_c / D_d choices side by side"),
    "soak": ("fastcoder_bench.soak", "10,000 requests with random cancels over several documents: server RSS and latency"),
    "quality": ("fastcoder_bench.quality", "cross-file tasks through the real server: does a suggestion match what was written next?"),
}


def run_kind(kind: str, argv: list[str]) -> int:
    """Run benchmark ``kind`` with its own arguments ``argv``."""
    module, _ = KINDS[kind]
    return int(importlib.import_module(module).main(argv) or 0)


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `bench`: the suite's flags, plus an optional KIND taking the rest of the line."""
    from fastcoder_bench.suite.cli import add_parser as add_suite_parser

    p = add_suite_parser(subparsers)
    p.usage = "fastcoder bench [KIND] [ARGS ...]   (no KIND: the suite, with the options below)"
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=False,
                             title="benchmarks (fastcoder bench KIND --help)")
    for kind, (_, what) in KINDS.items():
        # prefix_chars that never occur: every following argument, --help included, goes to the kind
        k = kinds.add_parser(kind, help=what, add_help=False, prefix_chars="\x00")
        k.add_argument("argv", nargs="*")
        k.set_defaults(func=lambda args, kind=kind: run_kind(kind, args.argv))
