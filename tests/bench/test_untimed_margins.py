"""The suite's AR margins are computed outside the timed runs: no timed step of ours
computes a top-2 margin (transformers' generate() rows compute none), and where a
task's outputs differ, AR decodes the task once more, untimed, with margins."""

from __future__ import annotations

import pytest

from fastcoder.config import DecodeConfig
from fastcoder.engine import Engine
from fastcoder_bench.suite.runner import Harness
from fastcoder_bench.suite.tasks import BenchTask
from fastcoder_bench.suite.variants import Variant

N = 12
TASK = BenchTask(id="t0", suite="unit", prompt="import os\nimport sys\n\nx = 1\ny = 2\n", reference="", indent=0)


@pytest.fixture()
def harness(tiny_model, tiny_tokenizer):
    tiny_model.float()
    variants = [
        Variant("ar", DecodeConfig(method="ar", max_new_tokens=N)),
        Variant("pld", DecodeConfig(method="pld", max_new_tokens=N)),
        # a real divergence without a fault: the same decode, cut short
        Variant("short", DecodeConfig(method="pld", max_new_tokens=N // 2)),
    ]
    return Harness(Engine(tiny_model, tiny_tokenizer, name="tiny"), variants, None, N, 256)


def _reference_margins(tiny_model, tiny_tokenizer, ids):
    g = Engine(tiny_model, tiny_tokenizer, name="tiny", record_margins=True).generate(
        ids, DecodeConfig(method="ar", max_new_tokens=N), stop_fn=TASK.stop_fn())
    return list(g.tokens), list(g.margins)


def test_a_divergence_gets_ar_margins_from_an_untimed_rerun(harness, tiny_model, tiny_tokenizer):
    rec = harness.run_task(TASK, 0)
    res = rec["results"]
    ar = res["ar"]
    assert len(ar["tokens"]) == N  # the prompt keeps the random model writing to the limit
    assert res["pld"]["tokens"] == ar["tokens"]  # fp32: lossless
    assert res["short"]["tokens"] == ar["tokens"][: N // 2]
    # the timed runs computed no margins; AR's come from the re-run, for its own tokens
    assert res["pld"]["margins"] == [] and res["short"]["margins"] == []
    tokens, margins = _reference_margins(tiny_model, tiny_tokenizer, harness.prompt_ids(TASK))
    assert tokens == ar["tokens"]
    assert ar["margins"] == pytest.approx(margins, abs=1e-3)
    assert len(ar["margins"]) == N and all(m >= 0 for m in ar["margins"])
    assert harness.engine.verifier.record_margins is False  # restored for the next timed run


def test_identical_outputs_cost_no_rerun_and_no_margins(harness):
    harness.variants = harness.variants[:2]
    rec = harness.run_task(TASK, 0)
    assert rec["results"]["pld"]["tokens"] == rec["results"]["ar"]["tokens"]
    assert all(r["margins"] == [] for r in rec["results"].values())


def test_a_rerun_that_writes_other_tokens_records_no_margins(harness):
    ids = harness.prompt_ids(TASK)
    results = {"ar": {"tokens": [], "margins": []}, "pld": {"tokens": [], "margins": []}}
    rec = harness.run_task(TASK, 0)
    results["ar"]["tokens"] = list(rec["results"]["ar"]["tokens"])
    results["ar"]["tokens"][3] += 1  # what the timed run "wrote" is not what AR writes
    results["pld"]["tokens"] = list(rec["results"]["ar"]["tokens"])
    harness.untimed_margins(ids, TASK, results, None)
    assert results["ar"]["margins"] == []
    assert results["ar"]["margins_rerun"] == {"identical": False, "first_diff_token": 3}


def test_timed_margins_are_kept_as_recorded(tiny_model, tiny_tokenizer):
    tiny_model.float()
    variants = [Variant("ar", DecodeConfig(method="ar", max_new_tokens=N)),
                Variant("short", DecodeConfig(method="pld", max_new_tokens=N // 2))]
    h = Harness(Engine(tiny_model, tiny_tokenizer, name="tiny", record_margins=True), variants, None, N, 256,
                margins="timed")
    rec = h.run_task(TASK, 0)
    for r in rec["results"].values():
        assert len(r["margins"]) == len(r["tokens"]) > 0
    assert "margins_rerun" not in rec["results"]["ar"]


def test_the_edit_bench_takes_ar_margins_from_an_untimed_rerun(tiny_model, tiny_tokenizer):
    """``fastcoder bench edit`` too: its engine records no margins in the timed runs; where
    a method's tokens differ from AR's, AR edits once more with margins (those an engine
    recording them throughout gives); identical outputs cost no re-run."""
    from dataclasses import replace

    from fastcoder_bench.edit import run_method, untimed_ar_margins

    tiny_model.float()
    code, instruction = "def add(a, b):\n    return a + b\n", "rename b to c"
    engine = Engine(tiny_model, tiny_tokenizer, name="tiny")
    ar = run_method(engine, code, instruction, "ar", 8)
    assert ar.margins == [] and len(ar.tokens) > 0  # timed: none computed
    runs = {"ar": ar, "same": replace(ar, method="same")}
    untimed_ar_margins(engine, code, instruction, runs, 8)
    assert ar.margins == []  # nothing differs: no re-run
    runs["other"] = replace(ar, method="other", tokens=ar.tokens[:-1])
    untimed_ar_margins(engine, code, instruction, runs, 8)
    reference = run_method(Engine(tiny_model, tiny_tokenizer, name="tiny", record_margins=True), code, instruction, "ar", 8)
    assert reference.tokens == ar.tokens and len(ar.margins) == len(reference.margins) > 0
    assert ar.margins == pytest.approx(reference.margins, abs=1e-3)
    assert engine.verifier.record_margins is False
