"""The benchmark harness: one process, one loaded model, methods interleaved task by task.

Per task: the prompt (left-truncated to ``max_prompt_tokens``), D_r without the body
(repository tasks), then every variant in turn (the order rotates by one each task,
so no method always runs first or last), each with the same prompt, the same stop rule
and the same ``max_new_tokens``. Results are appended to ``OUT/tasks.jsonl`` as each
task finishes; a rerun with the same arguments skips finished tasks.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from fastcoder.datastore import clear_memos
from fastcoder_bench.suite.tasks import BenchTask
from fastcoder_bench.suite.variants import Variant
from fastcoder.errors import FastCoderError

log = logging.getLogger(__name__)

RESULTS = "tasks.jsonl"
RUN_INFO = "run.json"
WARMUP_TOKENS = 16


@dataclass
class RunSpec:
    """What identifies a run (a rerun must match it to resume)."""

    model: str
    dtype: str
    suite: str
    variants: list[str]
    max_new_tokens: int
    max_prompt_tokens: int
    session: str
    common: str
    seed: int
    pass_at_1: bool
    device: str = "auto"
    tasks_file: str | None = None
    projects: str | None = None
    threads: int | None = None
    cost_curve: str = "cached"
    max_draft_tokens: int | None = None  # fixed tree size for rest / fastcoder (None: the cost curve)
    pack_weights: str = "auto"  # CPU matmul path (fastcoder.matmul): auto, on, off
    margins: str = "untimed"  # where AR's top-2 margins are computed: untimed (a re-run) or timed

    def identity(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        if d.get("max_draft_tokens") is None:  # runs recorded before the option resume as before
            d.pop("max_draft_tokens", None)
        if d.get("pack_weights") == "auto":  # so do runs recorded before packing was chosen
            d.pop("pack_weights", None)
        if d.get("margins") == "timed":  # runs recorded before the untimed pass recorded them so
            d.pop("margins", None)
        return d


# --------------------------------------------------------------------------------------
# results file
# --------------------------------------------------------------------------------------


def read_results(out: Path) -> list[dict[str, Any]]:
    """Finished task records of ``out/tasks.jsonl``. A torn last line (the run was
    killed while writing) is cut off so appending goes on cleanly."""
    path = out / RESULTS
    if not path.exists():
        return []
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        log.warning("%s: dropping a torn last line (%d bytes)", path, len(data) - cut)
        with open(path, "r+b") as fh:
            fh.truncate(cut)
        data = data[:cut]
    records = []
    for i, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            raise FastCoderError(f"{path}:{i}: corrupt result line ({exc}); remove it to resume") from None
    return records


def append_result(out: Path, record: dict[str, Any]) -> None:
    with open(out / RESULTS, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def check_run_info(out: Path, spec: RunSpec, *, force: bool = False) -> dict[str, Any]:
    """Create ``run.json`` or check that it matches ``spec`` (same run, resumable)."""
    path = out / RUN_INFO
    ident = spec.identity()
    if path.exists():
        try:
            info = json.loads(path.read_text())
        except ValueError as exc:
            raise FastCoderError(f"{path} is corrupt ({exc})") from None
        old = info.get("spec", {})
        diff = sorted(k for k in set(old) | set(ident) if old.get(k) != ident.get(k))
        if diff and not force:
            details = "; ".join(f"{k}: {old.get(k)!r} -> {ident.get(k)!r}" for k in diff)
            raise FastCoderError(
                f"{out} holds a run with other arguments ({details}); use another --out, or --force "
                "to start over there"
            )
        if diff:
            (out / RESULTS).unlink(missing_ok=True)
            info = {"spec": ident, "started": time.time(), "resumed": []}
        else:
            info.setdefault("resumed", []).append(time.time())
    else:
        info = {"spec": ident, "started": time.time(), "resumed": []}
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=2))
    return info


# --------------------------------------------------------------------------------------
# machine
# --------------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    """The common machine facts of every benchmark report, and torch's thread count."""
    import torch

    from fastcoder_bench.output import machine_info as common_machine_info

    return {**common_machine_info(), "threads": torch.get_num_threads()}


# --------------------------------------------------------------------------------------
# cost curve
# --------------------------------------------------------------------------------------


def remeasure_cost_curve(engine: Any) -> Any:
    """Measure c(k) now (after the warm-up, under this run's conditions, with the
    engine's own method) and make the engine use it for this run instead of the curve
    it cached on disk earlier."""
    from fastcoder.budget import measure_lengths

    curve = measure_lengths(engine.verifier)
    engine.use_cost_curve(curve)  # (and the step calibration starts over against it)
    for n, seconds in {curve.context_len: curve.seconds, **curve.by_length}.items():
        log.info("cost curve c(k) at %d cached rows, ms: %s", n, ", ".join(f"{k}:{1000 * s:.0f}" for k, s in zip(curve.ks, seconds)))
    return curve


# --------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------


@dataclass
class Harness:
    """Runs variants on tasks with one engine; keeps D_r corpora and sessions."""

    engine: Any
    variants: Sequence[Variant]
    dc: Any
    max_new_tokens: int
    max_prompt_tokens: int
    session_mode: str = "per-project"
    pass_at_1: bool = False
    corpora: dict[str, Any] = field(default_factory=dict)
    sessions: dict[tuple[str, str], Any] = field(default_factory=dict)
    gates: dict[str, Any] = field(default_factory=dict)  # variant -> its SourceGate parent
    fingerprint: str = ""
    engines: dict[str, Any] = field(default_factory=dict)  # Variant.engine -> another engine over the same model
    # "untimed": the timed runs compute no top-2 margins (as transformers' generate() rows
    # compute none); where a task's outputs differ, AR is decoded once more, untimed, with
    # margins (:meth:`untimed_margins`). "timed": the engines record them in their steps.
    margins: str = "untimed"

    def engine_for(self, variant: Variant) -> Any:
        return self.engines[variant.engine] if variant.engine else self.engine

    def prompt_ids(self, task: BenchTask) -> list[int]:
        ids = self.engine.encode(task.prompt)
        if self.max_prompt_tokens and len(ids) > self.max_prompt_tokens:
            ids = ids[-self.max_prompt_tokens :]
        if not ids:
            raise FastCoderError(f"task {task.id}: empty prompt")
        return ids

    def corpus(self, task: BenchTask):
        from fastcoder_bench.suite.repo import RepoCorpus

        key = str(task.repo)
        if key not in self.corpora:
            self.corpora[key] = RepoCorpus(task.repo, name=task.group)
        return self.corpora[key]

    def dr_for(self, task: BenchTask):
        if task.repo is None:
            return None
        return self.corpus(task).dr_for(task, self.engine.tokenizer, self.fingerprint)

    def session_for(self, variant: Variant, task: BenchTask):
        from fastcoder.session import Session
        from fastcoder.source_weights import SourceGate

        gate = self.gates.setdefault(variant.name, SourceGate())  # one per method, as the server keeps one
        if self.session_mode == "per-task" or task.group is None:
            return Session(variant.config, gate)
        key = (variant.name, task.group)
        if key not in self.sessions:
            self.sessions[key] = Session(variant.config, gate)
        return self.sessions[key]

    def sources(self, variant: Variant, dr):
        from fastcoder.drafters import Sources

        return Sources(dr=dr if variant.use_dr else None, dc=self.dc if variant.use_dc else None)

    def warm_up(self, task: BenchTask, fixed_budget: int | None = None) -> None:
        """One short generation per variant (not recorded): kernels, token tables,
        the cost curve and the search threads are ready before anything is timed."""
        from fastcoder.session import Session

        ids = self.prompt_ids(task)
        dr = self.dr_for(task)
        for v in self.variants:
            if v.hf_kwargs is not None:
                self.run_hf(v, ids, task, min(WARMUP_TOKENS, self.max_new_tokens))
                continue
            cfg = v.config.replace(max_new_tokens=min(WARMUP_TOKENS, self.max_new_tokens))
            if fixed_budget is not None and cfg.max_draft_tokens is None:
                cfg = cfg.replace(max_draft_tokens=fixed_budget)
            self.engine_for(v).generate(ids, cfg, session=Session(cfg), sources=self.sources(v, dr), stop_fn=task.stop_fn())

    def run_hf(self, variant: Variant, ids: list[int], task: BenchTask, max_new_tokens: int) -> dict[str, Any]:
        """An hf-* row: transformers' own generate() on the same prompt and stop rule."""
        from fastcoder.decode import _eos_ids
        from fastcoder_bench.suite.hf_peer import hf_generate

        model, tok = self.engine.model, self.engine.tokenizer
        return hf_generate(
            model, tok, ids, max_new_tokens=max_new_tokens, stop_fn=task.stop_fn(), eos=_eos_ids(tok, model),
            name=variant.name, kwargs=variant.hf_kwargs or {},
        )

    def run_task(self, task: BenchTask, index: int, on_variant: Callable[[str], None] | None = None) -> dict[str, Any]:
        ids = self.prompt_ids(task)
        t0 = time.perf_counter()
        dr = self.dr_for(task)
        dr_s = time.perf_counter() - t0
        order = list(self.variants)
        k = index % len(order)
        order = order[k:] + order[:k]
        results: dict[str, Any] = {}
        for v in order:
            if on_variant is not None:
                on_variant(v.name)
            if v.hf_kwargs is not None:
                gc.collect()
                results[v.name] = self.run_hf(v, ids, task, self.max_new_tokens)
                continue
            session = self.session_for(v, task)
            clear_memos(dr, self.dc)  # no method drafts faster for another's searches on this task
            gc.collect()
            gen = self.engine_for(v).generate(ids, v.config, session=session, sources=self.sources(v, dr), stop_fn=task.stop_fn())
            session.kv.reset()  # no KV prefix reuse across tasks: every prefill is a full prefill
            stats = gen.stats.to_dict()
            results[v.name] = {
                "tokens": list(gen.tokens),
                "text": gen.text,
                "margins": [round(float(m), 4) for m in gen.margins[: len(gen.tokens)]],
                "stats": stats,
            }
        if self.margins == "untimed":
            self.untimed_margins(ids, task, results, dr)
        record: dict[str, Any] = {
            "id": task.id,
            "index": index,
            "task": task.describe(),
            "prompt_tokens": len(ids),
            "prompt_ids": ids,
            "dr_tokens": int(dr.n_tokens) if dr is not None else 0,
            "dr_build_s": round(dr_s, 4),
            "order": [v.name for v in order],
            "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else [],
            "results": {v.name: results[v.name] for v in self.variants},
        }
        if self.pass_at_1 and task.problem is not None:
            from fastcoder_bench.suite.humaneval import passes

            record["pass"] = {}
            for name, r in record["results"].items():
                ok, why = passes(task.problem, r["text"])
                record["pass"][name] = {"passed": ok, "result": why[:200]}
        return record


    def untimed_margins(self, ids: list[int], task: BenchTask, results: dict[str, Any], dr) -> None:
        """AR's top-2 logit margins, for the report's divergence table, computed outside
        every timed run: only where some method's tokens differ from AR's, AR decodes the
        task once more with margins (a fresh session: AR drafts nothing, so its output
        depends only on the prompt). ``results["ar"]["margins"]`` gets them when the
        re-run wrote AR's tokens again; otherwise none, and ``margins_rerun`` records
        where the re-run differed (a margin of another output would explain nothing)."""
        ar = results.get("ar")
        if ar is None or ar["margins"] or all(r["tokens"] == ar["tokens"] for r in results.values()):
            return
        from fastcoder.session import Session
        from fastcoder_bench.suite.report import first_diff, margins_recorded

        variant = next(v for v in self.variants if v.name == "ar")
        engine = self.engine_for(variant)
        with margins_recorded(engine.verifier):
            session = Session(variant.config)
            gen = engine.generate(ids, variant.config, session=session, sources=self.sources(variant, dr), stop_fn=task.stop_fn())
        tokens = list(gen.tokens)
        if tokens == ar["tokens"]:
            ar["margins"] = [round(float(m), 4) for m in gen.margins[: len(tokens)]]
        else:
            i = first_diff(ar["tokens"], tokens)
            ar["margins_rerun"] = {"identical": False, "first_diff_token": i}
            log.warning("task %s: AR's untimed re-run differs from its timed run at token %d; no margins recorded", task.id, i)
