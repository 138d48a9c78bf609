"""The CPU matmul path (fastcoder/matmul.py): oneDNN-packed linear weights give the
steps of the unpacked model (fp32 tolerance, same argmax, same decoded output), the
choice between paths follows the probe's timings, and load_model applies it."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest
import torch

from conftest import build_model, random_tree
from fastcoder import matmul
from fastcoder.config import DecodeConfig
from fastcoder.datastore import TokenDatastore
from fastcoder.drafters import Sources
from fastcoder.engine import Engine
from fastcoder.errors import ModelError
from fastcoder.verifier import KVState, Verifier

pytestmark = pytest.mark.skipif(not matmul.can_pack(torch.float32), reason="oneDNN cannot pack float32 weights here")


def _with_biases(model):
    """Random init leaves biases at zero: give the ones there are (Qwen2's q/k/v) values."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and m.bias is not None:
                m.bias.uniform_(-0.5, 0.5)
    return model


def _packed_copy(model):
    twin = copy.deepcopy(model)
    n = matmul.pack_linears(twin)
    assert n == sum(type(m) is torch.nn.Linear for m in model.modules()) and n > 0
    assert not any(type(m) is torch.nn.Linear for m in twin.modules()) and matmul.is_packed(twin)
    return twin


@pytest.mark.parametrize("arch", ["llama", "qwen2"])  # llama: tied embeddings; qwen2: a separate lm_head
def test_packed_steps_equal_unpacked_ones(arch, tiny_tokenizer):
    """Every bucket, random trees, steps with compaction in between: the packed model's
    logits equal the unpacked one's to fp32 rounding, every argmax, accepted path and
    bonus token is the same."""
    model = _with_biases(build_model(arch, len(tiny_tokenizer), seed=3))
    packed = _packed_copy(model)
    layers = model.config.num_hidden_layers  # q/k/v and gate/up of every layer run fused
    assert sum(isinstance(m, matmul.FusedPackedLinear) for m in packed.modules()) == 2 * layers
    if arch == "llama":  # the tied lm_head weight is the embedding's, kept as it is
        assert packed.lm_head.weight is packed.model.embed_tokens.weight
    else:
        assert torch.equal(packed.lm_head.weight, model.lm_head.weight)  # unpacked on demand
    rng = random.Random(1)
    vocab = model.config.vocab_size
    plain_v, packed_v = Verifier(model), Verifier(packed)
    prompt = [rng.randrange(4, vocab) for _ in range(150)]  # > one prefill chunk
    kv_a, kv_b = KVState(), KVState()
    first_a, _, _ = plain_v.prefill(kv_a, prompt, reserve=400)
    first_b, _, _ = packed_v.prefill(kv_b, prompt, reserve=400)
    assert first_a == first_b
    assert torch.allclose(plain_v.last_logits, packed_v.last_logits, atol=1e-5, rtol=1e-5)
    root = first_a
    for size in [0, 3, 7, 15, 31, 63, 127, 5]:
        tree = random_tree(rng, size, vocab)
        a, b = plain_v.step(kv_a, root, tree), packed_v.step(kv_b, root, tree)
        diff = (plain_v.last_logits - packed_v.last_logits).abs().max()
        assert torch.allclose(plain_v.last_logits, packed_v.last_logits, atol=1e-5, rtol=1e-5), diff
        assert torch.equal(plain_v.last_logits.argmax(-1), packed_v.last_logits.argmax(-1))
        assert (a.accepted, a.bonus) == (b.accepted, b.bonus)
        assert kv_a.ids == kv_b.ids
        root = a.bonus


def test_packed_decoding_equals_unpacked_decoding(tiny_tokenizer):
    """The whole decode loop, AR and FastCoder, on the packed and the unpacked model:
    identical tokens."""
    model = _with_biases(build_model("qwen2", len(tiny_tokenizer), seed=4))
    plain, packed = Engine(model, tiny_tokenizer, name="plain"), Engine(_packed_copy(model), tiny_tokenizer, name="packed")
    rng = random.Random(2)
    vocab = len(tiny_tokenizer)
    prompt = [rng.randrange(4, vocab) for _ in range(40)]
    ar = plain.generate(prompt, DecodeConfig(method="ar", max_new_tokens=40)).tokens
    sources = Sources(dr=TokenDatastore.build([prompt[5:30] + ar[:10], ar[5:30]]), dc=None)
    for method in ("ar", "fastcoder"):
        cfg = DecodeConfig(method=method, max_new_tokens=40, max_draft_tokens=16)
        assert packed.generate(prompt, cfg, sources=sources).tokens == ar, method
    plain.close()
    packed.close()


def test_decide_follows_the_timings():
    t = {
        "float32/plain": {"1": 40.0, "16": 100.0},
        "float32/packed": {"1": 20.0, "16": 30.0},
        "bfloat16/plain": {"1": 16.0, "16": 25.0},
        "bfloat16/packed": {"1": 12.0, "16": 17.0},
    }
    assert matmul.decide(t, ("float32", "bfloat16"))[:2] == ("bfloat16", True)
    assert matmul.decide(t, ("float32",))[:2] == ("float32", True)
    # bfloat16 must beat float32 by BF16_GAIN: float32 (exact) is kept when it is close
    close = {**t, "bfloat16/packed": {"1": 19.0, "16": 28.0}, "bfloat16/plain": {"1": 30.0, "16": 40.0}}
    assert matmul.decide(close, ("float32", "bfloat16"))[:2] == ("float32", True)
    # packing must beat plain by PACK_GAIN; a dtype oneDNN cannot pack has no packed timings
    slow_pack = {"float32/plain": {"1": 10.0, "16": 20.0}, "float32/packed": {"1": 9.8, "16": 19.5}}
    assert matmul.decide(slow_pack, ("float32",))[:2] == ("float32", False)
    assert matmul.decide({"float32/plain": {"1": 1.0, "16": 2.0}}, ("float32", "bfloat16"))[:2] == ("float32", False)
    with pytest.raises(ValueError):
        matmul.decide({}, ("float32",))


def test_choose_probes_once_then_reads_the_cache(monkeypatch):
    calls = []

    def fake_probe(out_f, in_f, dtypes, *a, **k):
        calls.append((out_f, in_f, dtypes))
        return {"float32/plain": {"1": 40.0, "16": 100.0}, "float32/packed": {"1": 20.0, "16": 30.0}}

    monkeypatch.setattr(matmul, "probe", fake_probe)
    first = matmul.choose(("float32",), 5000, 300)
    again = matmul.choose(("float32",), 5000, 300)
    assert (first.dtype, first.packed) == (again.dtype, again.packed) == ("float32", True) and len(calls) == 1
    off = matmul.choose(("float32",), 5000, 300, allow_pack=False)
    assert (off.dtype, off.packed) == ("float32", False) and len(calls) == 1
    matmul.choose(("float32",), 5001, 300)  # another shape: probed
    assert len(calls) == 2


def test_probe_times_plain_and_packed_per_dtype():
    t = matmul.probe(256, 64, ("float32",), rows=(1, 4), reps=1)
    assert set(t) == {"float32/plain", "float32/packed"} and set(t["float32/plain"]) == {"1", "4"}
    assert all(v > 0 for rows in t.values() for v in rows.values())


def test_fused_parts_give_each_sibling_its_own_output_whatever_the_call_order():
    """q/k/v fused into one packed matmul: each part equals its own ``nn.Linear`` (fp32
    rounding) called in the forward's order, alone, out of order, or on another input
    than the one its siblings saw; the fused output is not kept after the last part."""
    torch.manual_seed(0)
    attn = torch.nn.Module()
    attn.q_proj, attn.k_proj, attn.v_proj = (torch.nn.Linear(32, n) for n in (32, 8, 8))
    attn.o_proj = torch.nn.Linear(32, 32, bias=False)  # not a sibling: packed alone
    plain = copy.deepcopy(attn)
    assert matmul.pack_linears(attn) == 4
    fused = attn.qkv_proj
    assert isinstance(fused, matmul.FusedPackedLinear) and type(attn.o_proj) is matmul.PackedLinear
    assert [type(getattr(attn, n)) for n in ("q_proj", "k_proj", "v_proj")] == [matmul.FusedPart] * 3
    assert torch.equal(attn.k_proj.weight, plain.k_proj.weight) and torch.equal(attn.v_proj.bias, plain.v_proj.bias)
    x, y = torch.randn(1, 3, 32), torch.randn(1, 5, 32)

    def close(name, inp):
        got, want = getattr(attn, name)(inp), getattr(plain, name)(inp)
        return got.shape == want.shape and torch.allclose(got, want, atol=1e-5, rtol=1e-5)

    with torch.inference_mode():
        assert all(close(n, x) for n in ("q_proj", "k_proj", "v_proj"))  # the forward's order
        assert fused._kept.pair is None  # released after the last part
        assert close("v_proj", y) and close("k_proj", x)  # alone, out of order
        assert close("q_proj", x) and close("k_proj", y) and close("v_proj", y)  # another input
    # the plain weights are dropped (the packed copy replaces them): the biases remain
    assert fused._weight is None and sum(p.numel() for p in attn.parameters()) == 48


def test_load_model_packs_on_request(tiny_model_dir):
    from fastcoder.models import load_model

    on = load_model(str(tiny_model_dir), dtype="float32", device="cpu", pack="on", progress=False)
    off = load_model(str(tiny_model_dir), dtype="float32", device="cpu", pack="off", progress=False)
    auto = load_model(str(tiny_model_dir), dtype="float32", device="cpu", progress=False)
    assert on.matmul["packed"] and on.matmul["layers"] > 0 and matmul.is_packed(on.model) and on.matmul["fused"] > 0
    assert not off.matmul["packed"] and not matmul.is_packed(off.model)
    # a toy model's weights stay in the caches: auto does not probe it and keeps it plain
    assert auto.matmul["why"] == "not probed" and not matmul.is_packed(auto.model)
    ids = torch.tensor([[5, 9, 30, 41, 7]])
    with torch.inference_mode():
        a, b = on.model(ids).logits, off.model(ids).logits
    assert torch.allclose(a, b, atol=1e-5, rtol=1e-5) and torch.equal(a.argmax(-1), b.argmax(-1))
    with pytest.raises(ModelError, match="pack"):
        load_model(str(tiny_model_dir), dtype="float32", device="cpu", pack="yes", progress=False)


@pytest.mark.parametrize("faster", ["float32", "bfloat16"])
def test_auto_dtype_on_the_cpu_follows_the_probe(tiny_model_dir, monkeypatch, tmp_path: Path, faster):
    """``--dtype auto`` on the CPU is decided by the probe's timings, not by the CPU flags."""
    from fastcoder.models import load_model

    slow, fast = {"1": 40.0, "16": 100.0}, {"1": 10.0, "16": 20.0}
    timings = {"float32/plain": fast if faster == "float32" else slow, "bfloat16/plain": fast if faster == "bfloat16" else slow}
    monkeypatch.setattr(matmul, "probe", lambda *a, **k: timings)
    monkeypatch.setattr(matmul, "_cache_file", lambda key: tmp_path / "matmul.json")  # a fresh cache: probed
    loaded = load_model(str(tiny_model_dir), dtype="auto", device="cpu", progress=False)
    assert str(loaded.dtype) == f"torch.{faster}" and loaded.matmul["dtype"] == faster
    assert not loaded.matmul["packed"]  # no packed timings: plain


@pytest.mark.skipif(not matmul.can_pack(torch.bfloat16), reason="oneDNN cannot pack bfloat16 weights here")
def test_one_row_calls_round_as_many_row_calls_once_marked():
    """After ``mark_one_row_rounding`` every packed layer's 1-row call gives the bits its
    row gets among others (the marked layers run it as 2 rows), whatever this CPU's
    kernels do; shapes include Qwen2.5-Coder-0.5B's MLP (4,864 -> 896: the one marked on
    a 2-vCPU AMD EPYC with AVX512-BF16). A model with an unpacked linear layer is not
    marked (``None``): its verifier keeps 2-row forwards."""
    torch.manual_seed(0)
    shapes = [(896, 896), (896, 128), (896, 4864), (4864, 896), (64, 4000)]
    model = torch.nn.Sequential(*[torch.nn.Linear(i, o, bias=(i == 896)) for i, o in shapes]).to(torch.bfloat16)
    plain = copy.deepcopy(model)
    matmul.pack_linears(model)
    marked = matmul.mark_one_row_rounding(model)
    assert marked is not None and all(model.get_submodule(n).pad_one_row for n in marked)
    with torch.inference_mode():
        for seed in range(3):
            g = torch.Generator().manual_seed(seed)
            for m in model:
                x = (torch.randn(9, m.in_features, generator=g) * 2).to(torch.bfloat16).unsqueeze(0)
                many = m(x)[0]
                for i in range(9):
                    assert torch.equal(m(x[:, i : i + 1])[0, 0], many[i]), (m, i)
    assert matmul.mark_one_row_rounding(plain) is None


class _OneRowOff(matmul.PackedLinear):
    """A packed layer whose unpadded 1-row calls round one output element otherwise (the
    last column: a kernel's tail block), for rows whose first input is positive."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        if x.shape[-2] == 1 and not self.pad_one_row and float(x[..., 0, 0]) > 0:
            y = y.clone()
            y[..., 0, -1] = torch.nextafter(y[..., 0, -1].float(), torch.tensor(float("inf"))).to(y.dtype) + 2 ** -6
        return y


def test_probe_rows_scale_with_the_shape_width():
    assert matmul.probe_rows(896, matmul.ONE_ROW_PROBE_ROWS) == 64  # the narrowest shape: every row
    assert matmul.probe_rows(151_936, matmul.ONE_ROW_PROBE_ROWS) == matmul.MIN_PROBE_ROWS
    assert matmul.probe_rows(9_728, matmul.ONE_ROW_PROBE_ROWS) * 9_728 >= matmul.PROBE_OUTPUTS
    assert matmul._spread(4, 16) == [0, 5, 10, 15] and matmul._spread(64, 64) == list(range(64))


@pytest.mark.skipif(not matmul.can_pack(torch.bfloat16), reason="oneDNN cannot pack bfloat16 weights here")
def test_a_wide_layer_is_still_marked_from_its_few_probe_rows():
    """A 20,000-wide layer is probed on MIN_PROBE_ROWS rows only; a 1-row call that rounds
    one element otherwise (on about half the rows) is still found."""
    torch.manual_seed(0)
    wide = _OneRowOff(torch.nn.Linear(64, 20_000, bias=False).to(torch.bfloat16))
    narrow = matmul.PackedLinear(torch.nn.Linear(64, 896, bias=False).to(torch.bfloat16))
    model = torch.nn.Sequential(narrow, torch.nn.Linear(896, 64, bias=False).to(torch.bfloat16), wide)
    model[1] = matmul.PackedLinear(model[1])
    assert matmul.probe_rows(20_000, matmul.ONE_ROW_PROBE_ROWS) == matmul.MIN_PROBE_ROWS
    marked = matmul.mark_one_row_rounding(model)
    assert "2" in marked and wide.pad_one_row
    # and the marked layer's 1-row calls now give the rows' many-row bits
    x = (torch.randn(1, 16, 64) * 2).to(torch.bfloat16)
    with torch.inference_mode():
        many = wide(x)[0]
        assert all(torch.equal(wide(x[:, i : i + 1])[0, 0], many[i]) for i in range(16))


class _SwitchingLinear(torch.nn.Linear):
    """A linear layer whose calls of more than ``switch`` rows round otherwise (one output
    moved), as oneDNN's AMX kernel does from 33 rows on an Intel Xeon with AMX."""

    def __init__(self, in_features: int, out_features: int, switch: int) -> None:
        super().__init__(in_features, out_features)
        self.switch = switch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # each row summed on its own (F.linear's kernels round by row count themselves)
        y = (x.unsqueeze(-1) * self.weight.T).sum(-2) + self.bias
        if x.shape[-2] > self.switch:
            y = y.clone()
            y[..., 0, 0] = torch.nextafter(y[..., 0, 0].float(), torch.tensor(float("inf"))).to(y.dtype) + 2 ** -6
        return y


def test_uniform_rows_finds_where_calls_round_otherwise():
    """``uniform_rows``: the largest tested row count up to which every shape's calls give
    each row a 2-row call's bits; a layer switching kernels past 32 rows caps it at 32 (the
    verifier then keeps its tree steps within 32 rows and says its prefill chunks are not
    invariant); plain layers that never switch pass every size."""
    torch.manual_seed(0)

    def model(switch: int) -> torch.nn.Module:
        return torch.nn.Sequential(_SwitchingLinear(64, 48, 10**9), _SwitchingLinear(48, 64, switch))

    assert matmul.uniform_rows(model(10**9), (4, 8, 16, 32, 64, 128)) == 128
    assert matmul.uniform_rows(model(32), (4, 8, 16, 32, 64, 128)) == 32
    assert matmul.uniform_rows(model(3), (4, 8, 16)) == 2


def test_the_verifier_keeps_tree_steps_within_uniform_rows(tiny_tokenizer, monkeypatch):
    """Where linear calls of more than 32 rows round otherwise (bf16, batch-invariant
    steps), the verifier drops the buckets above 32 rows, reports it and marks its 128-row
    prefill chunks as not invariant; steps within the limit still give AR's bits."""
    from conftest import build_model

    from fastcoder.verifier import BUCKETS, Verifier

    model = build_model("qwen2", len(tiny_tokenizer)).to(torch.bfloat16)
    monkeypatch.setattr(matmul, "uniform_rows", lambda m, sizes: 32 if max(sizes) > 32 else max(sizes))
    v = Verifier(model)
    assert v.invariant and v.buckets == tuple(b for b in BUCKETS if b <= 32) and not v.prefill_invariant
    status = v.graph_status()
    assert status["uniform_rows"] == 32 and status["buckets"][-1] == 32 and status["prefill_invariant"] is False
    assert v.max_nodes == 31  # what the draft budget trims a tree to
    monkeypatch.setattr(matmul, "uniform_rows", lambda m, sizes: max(sizes))
    v = Verifier(model, path_attention=False)
    assert v.buckets == BUCKETS and v.prefill_invariant
    # with path attention (the default) 128-row chunks attend the plain way: not invariant
    v = Verifier(model)
    assert v.paths and v.buckets == BUCKETS and not v.prefill_invariant
