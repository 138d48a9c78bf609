"""The CPU prefill chunk chosen by measurement: the cost curve's measurement times 128- and
256-row chunks, :meth:`CostCurve.prefill_chunk` picks one, the engine applies it to the
verifier (which keeps a batch-invariant prefill invariant), and a prefill in either chunk
gives the same greedy token (fp32)."""

from __future__ import annotations

import json

import pytest
import torch

import fastcoder.budget as budget
from fastcoder import matmul
from fastcoder.budget import CostCurve
from fastcoder.engine import Engine
from fastcoder.verifier import PREFILL_CHUNK_CPU, PREFILL_CHUNKS_CPU, KVState, Verifier


def _curve(prefill: dict[int, float], step: float = 0.1) -> CostCurve:
    """A curve whose 1-row step costs ``step`` seconds at its longest context."""
    return CostCurve([0, 3], [step * 0.9, step], 512, by_length={2048: [step, step * 1.1]}, prefill=prefill)


@pytest.mark.parametrize(
    "prefill, step, chosen",
    [
        ({128: 1.4e-3, 256: 1.05e-3}, 0.11, 256),  # AMX, fast phase: 25% cheaper a token, a chunk of 2.4 steps
        ({128: 2.71e-3, 256: 2.23e-3}, 0.118, 256),  # AMX, slow phase: 18% cheaper, 4.8 steps
        ({128: 1.7e-3, 256: 1.6e-3}, 0.029, 128),  # EPYC-like: 6% cheaper a token (and 14 steps)
        ({128: 2.0e-3, 256: 1.5e-3}, 0.029, 128),  # cheaper by a quarter, but a chunk of 13 steps: too long a hold
        ({128: 1.0e-3, 256: 0.97e-3}, 0.1, 128),  # quick, but not cheaper enough a token
        ({128: 1.0e-3, 256: 0.88e-3}, 0.1, 256),  # AMX, paired pieces (median 0.878)
        ({128: 2.0e-3}, 0.1, 128),  # one chunk timed: nothing to choose
        ({}, 0.1, 128),  # an older curve: nothing timed
    ],
)
def test_the_curve_chooses_the_larger_chunk_only_where_it_pays_and_holds_the_thread_briefly(prefill, step, chosen):
    assert _curve(prefill, step).prefill_chunk(PREFILL_CHUNK_CPU) == chosen
    assert CostCurve.from_json(_curve(prefill, step).to_json()).prefill == prefill  # cached with the curve


def test_an_older_cached_curve_has_no_prefill_timing():
    assert CostCurve.from_json({"ks": [0, 3], "seconds": [0.1, 0.2]}).prefill == {}


def test_the_measurement_times_every_piece_in_each_cpu_chunk(tiny_model):
    v = Verifier(tiny_model, buckets=(1, 4))
    seen = []
    prefill = v.prefill
    v.prefill = lambda kv, ids, reserve=None, **kw: seen.append((len(kv.ids), len(ids), kw.get("chunk"))) or prefill(kv, ids, reserve, **kw)
    m = budget.CurveMeasurement(v, (600, 1100), rounds=1)
    curve = m.finish()
    assert m.units_done == m.units_total
    # 3 pieces of the 600-token context, 5 of the 1,100 one; each prefilled from its start
    # in both chunks, the order alternating piece to piece
    pieces = [(0, 256), (256, 512), (512, 600), (0, 256), (256, 512), (512, 768), (768, 1024), (1024, 1100)]
    expected = []
    for i, (a, b) in enumerate(pieces):
        for c in (PREFILL_CHUNKS_CPU if i % 2 == 0 else PREFILL_CHUNKS_CPU[::-1]):
            expected.append((a, b, c))
    assert seen == expected
    assert set(curve.prefill) == set(PREFILL_CHUNKS_CPU) and all(0 < x < 1 for x in curve.prefill.values())


def test_paired_pieces_give_the_median_ratio_whatever_a_slow_spell_does():
    # the fourth piece fell in a slow spell for both chunks; the third for 256 rows only
    pieces = [{128: 2.0e-3, 256: 1.76e-3}, {128: 2.2e-3, 256: 1.9e-3}, {128: 2.1e-3, 256: 4.0e-3},
              {128: 6.0e-3, 256: 5.3e-3}, {128: 2.4e-3, 256: 2.1e-3}]  # fmt: skip
    got = budget.paired_prefill(pieces)
    ratios = sorted(p[256] / p[128] for p in pieces)
    assert got[128] == pytest.approx(2.0e-3) and got[256] / got[128] == pytest.approx(ratios[2])  # best piece, median ratio
    assert _curve(got).prefill_chunk(PREFILL_CHUNK_CPU) == 256
    # the sums, as the measurement compared them before: 15.06 / 14.7 ms, 1.02x: 128 rows kept
    assert sum(p[256] for p in pieces) / sum(p[128] for p in pieces) > budget.PREFILL_GAIN
    assert budget.paired_prefill([{128: 1e-3}]) == {} and budget.paired_prefill([]) == {}


def test_the_engine_prefills_in_the_chunk_its_curve_chose(tiny_model, tiny_tokenizer):
    """A curve given (a benchmark's) or read from the cache sets the verifier's chunk; the
    first token after a prompt is the same in either chunk (fp32), and the stats say which."""
    engine = Engine(tiny_model, tiny_tokenizer)
    prompt = [int(t) for t in torch.randint(10, len(tiny_tokenizer) - 10, (700,), generator=torch.Generator().manual_seed(1))]
    before = engine.verifier.prefill(KVState(), prompt)[0]
    engine.use_cost_curve(_curve({128: 1.4e-3, 256: 1.05e-3}))
    assert engine.verifier.prefill_chunk == 256 and engine.verifier.graph_status()["prefill_chunk"] == 256
    calls = []
    forward = engine.verifier._prefill_chunk
    engine.verifier._prefill_chunk = lambda cache, ids, start, end: calls.append(end - start) or forward(cache, ids, start, end)
    assert engine.verifier.prefill(KVState(), prompt)[0] == before
    assert calls == [256, 256, 188]
    engine.use_cost_curve(_curve({128: 1.7e-3, 256: 1.6e-3}, 0.029))
    assert engine.verifier.prefill_chunk == 128
    engine.verifier.prefill_chunk = 16  # a caller's own chunk (not one the curve times) stays
    engine.use_cost_curve(_curve({128: 1.4e-3, 256: 1.05e-3}))
    assert engine.verifier.prefill_chunk == 16


def test_a_cached_curve_sets_the_chunk_when_the_engine_reads_it(tiny_model, tiny_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("FASTCODER_CACHE", str(tmp_path))  # (the other tests' engines do not read this curve)
    first = Engine(tiny_model, tiny_tokenizer)
    first.verifier.buckets = (1, 4)  # a quick measurement
    first._measuring = budget.CurveMeasurement(first.verifier, (300,), rounds=1)
    first.measure_some(lambda: False)  # measured and cached under the engine's key
    key = first._curve_key()
    cached, _ = budget.load_cached(key)
    assert cached is not None and set(cached.prefill) == set(PREFILL_CHUNKS_CPU)
    assert first.verifier.prefill_chunk == cached.prefill_chunk(PREFILL_CHUNK_CPU)  # applied once measured
    # a later process reads it (the AMX Xeon's timings put in): its verifier prefills
    # in the chunk they choose
    path = budget._cache_file(key)
    data = json.loads(path.read_text())
    data["prefill"], data["seconds"] = {"128": 1.4e-3, "256": 1.05e-3}, [0.11, 0.12]  # (a 1-row step of 110 ms)
    path.write_text(json.dumps(data))
    second = Engine(tiny_model, tiny_tokenizer)
    assert second.verifier.prefill_chunk == PREFILL_CHUNK_CPU
    assert second.cached_cost_curve() is not None and second.verifier.prefill_chunk == 256


def test_an_invariant_prefill_stays_invariant(tiny_tokenizer, monkeypatch):
    """bf16 batch-invariant steps without path attention whose 128-row prefill chunks round
    as steps do: a 256-row
    chunk is taken only where its calls round the same; where they do not (the AMX kernel
    past 32 rows, here past 128) the verifier keeps 128 and says the prefill is invariant."""
    from conftest import build_model

    model = build_model("qwen2", len(tiny_tokenizer)).to(torch.bfloat16)
    limit = {"rows": 128}
    monkeypatch.setattr(matmul, "uniform_rows", lambda m, sizes: max(s for s in sizes if s <= limit["rows"]))
    # with path attention (the default) chunks longer than PATH_PREFILL_ROWS attend the plain
    # way: not invariant, so the faster chunk is taken at once
    p = Verifier(model)
    assert p.paths and not p.prefill_invariant and p.set_prefill_chunk(256) == 256
    v = Verifier(model, path_attention=False)
    assert v.invariant and v.prefill_invariant and v.prefill_chunk == 128
    assert v.set_prefill_chunk(256) == 128 and v.prefill_chunk == 128 and v.prefill_invariant
    limit["rows"] = 4096
    assert v.set_prefill_chunk(256) == 256 and v.prefill_invariant and v.uniform_rows >= 256
    # where prefill was not invariant anyway (AMX: calls of more than 32 rows), it just switches
    monkeypatch.setattr(matmul, "uniform_rows", lambda m, sizes: 32 if max(sizes) > 32 else max(sizes))
    w = Verifier(model, path_attention=False)
    assert not w.prefill_invariant and w.set_prefill_chunk(256) == 256 and not w.prefill_invariant
