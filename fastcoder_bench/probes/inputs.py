"""What the probes run on: a real prompt from the bench projects, or the repo suite's
tasks with the suite's engine, sources and a cost curve measured now."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def bench_source(min_bytes: int = 60_000) -> Path:
    """The first Python file of at least ``min_bytes`` in the bench projects' cache (a
    real file long enough for a 2,048-token prompt)."""
    from fastcoder_bench.suite.projects import bench_cache

    for dirpath, _, files in sorted(os.walk(bench_cache())):
        for f in sorted(files):
            path = Path(dirpath) / f
            if f.endswith(".py") and path.stat().st_size >= min_bytes:
                return path
    raise SystemExit(f"no bench project file of {min_bytes} bytes: fetch the projects first (README)")


def real_prompt(engine: Any, tokens: int) -> list[int]:
    """The first ``tokens`` tokens of :func:`bench_source`."""
    return engine.encode(bench_source().read_text(encoding="utf-8"))[:tokens]


def prefilled_step(ctx: int, model: str = "qwen2.5-coder-0.5b", reserve: int = 128) -> Any:
    """A verifier over ``model`` loaded as the server loads it on the CPU (dtype and
    weight packing ``auto``) with :func:`real_prompt`'s first ``ctx`` tokens prefilled:
    a namespace of ``loaded``, ``engine``, ``prompt``, ``verifier`` and its ``kv``, for
    timing steps at a real context."""
    from types import SimpleNamespace

    from fastcoder.engine import Engine
    from fastcoder.models import load_model
    from fastcoder.verifier import KVState, Verifier

    loaded = load_model(model, dtype="auto", device="cpu", pack="auto", progress=False)
    engine = Engine.from_loaded(loaded)
    prompt = real_prompt(engine, ctx)
    verifier = Verifier(loaded.model)
    kv = KVState()
    verifier.prefill(kv, prompt, reserve=reserve)
    return SimpleNamespace(loaded=loaded, engine=engine, prompt=prompt, verifier=verifier, kv=kv)


def suite_harness(methods: list[str], tasks: int, max_new_tokens: int, model: str = "qwen2.5-coder-0.5b",
                  record_margins: bool = False, **engine_kw: Any) -> tuple[Any, Any, list[Any], Any]:  # fmt: skip
    """(engine, harness, tasks, curve): the repo suite's first ``tasks`` tasks, one engine
    as ``fastcoder bench --suite repo`` builds it (auto dtype, packed weights, D_c; other
    :class:`~fastcoder.engine.Engine` settings in ``engine_kw``), warmed up and with a cost
    curve measured after the warm-up (``--cost-curve measure``)."""
    from fastcoder.engine import Engine
    from fastcoder.models import load_model
    from fastcoder_bench.suite.cli import repo_suite
    from fastcoder_bench.suite.runner import Harness, remeasure_cost_curve
    from fastcoder_bench.suite.variants import make_variants
    from indexer.common import ensure_common

    chosen, corpora = repo_suite(None, tasks)
    loaded = load_model(model, dtype="auto", device="cpu", pack="auto", progress=False)
    engine = Engine.from_loaded(loaded, record_margins=record_margins, **engine_kw)
    dc = ensure_common(loaded.tokenizer, progress=False, fingerprint=loaded.fingerprint)
    variants = make_variants(methods, ablate=False, max_new_tokens=max_new_tokens)
    harness = Harness(engine, variants, dc, max_new_tokens, 2048, corpora=dict(corpora), fingerprint=loaded.fingerprint)
    harness.warm_up(chosen[0], fixed_budget=16)
    return engine, harness, chosen, remeasure_cost_curve(engine)
