"""Folded GQA attention (``fastcoder/attention.py``) against the model's own ``sdpa``
attention: tiny random models in fp32, every bucket of a tree step, the (chunked)
prefill, the decode loop, and the models that must keep their attention."""

from __future__ import annotations

import copy
import random

import pytest
import torch
from transformers import DynamicCache

from conftest import build_model, random_tree
from fastcoder import attention, matmul
from fastcoder.attention import NAME, folded_gqa_attention_forward
from fastcoder.config import DecodeConfig
from fastcoder.datastore import TokenDatastore
from fastcoder.drafters import Sources
from fastcoder.engine import Engine
from fastcoder.session import Session
from fastcoder.verifier import KVState, Verifier, attention_rows
from transformers.integrations.sdpa_attention import sdpa_attention_forward

TOL = 1e-5


def gqa_model(arch: str, vocab: int, heads: int = 4, kv_heads: int = 2, seed: int = 0):
    """A tiny model (as conftest's) with ``heads`` query heads on ``kv_heads`` KV heads."""
    model = build_model(arch, vocab, seed=seed)
    if (heads, kv_heads) == (4, 2):
        return model
    from transformers import AutoModelForCausalLM

    cfg = copy.deepcopy(model.config)
    cfg.num_attention_heads, cfg.num_key_value_heads = heads, kv_heads
    cfg.head_dim = cfg.hidden_size // heads
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    return model.eval()


# (arch, query heads, KV heads): Qwen2-like and Llama-like (2 groups), and 4 groups
CONFIGS = [("qwen2", 4, 2), ("llama", 4, 2), ("qwen2", 8, 2)]


@pytest.fixture(scope="module", params=CONFIGS, ids=lambda c: f"{c[0]}-{c[1]}q{c[2]}kv")
def pair(request, tiny_tokenizer):
    """(reference model on sdpa, the same weights switched to the fold)."""
    arch, heads, kv_heads = request.param
    ref = gqa_model(arch, len(tiny_tokenizer), heads, kv_heads)
    folded = copy.deepcopy(ref)
    assert attention.enable(folded)
    assert folded.config._attn_implementation == NAME and ref.config._attn_implementation == "sdpa"
    return ref, folded


@pytest.mark.parametrize("explicit", [False, True], ids=["sdpa", "explicit"])
def test_every_bucket_equals_the_original_attention(pair, explicit):
    """Tree steps of every bucket (1..128 rows), with compaction in between, over a
    prompt long enough for the chunked prefill: logits within 1e-5 (with the attention
    as two matrix products, ``explicit_attention=True``: every masked step in fp32,
    4e-5: its float32 sums run in another order, up to 1.1e-5 seen on logits of
    magnitude ~4, this model's weights being scaled up 3x), same argmax, same accepted
    path and bonus, and the same KV cache."""
    ref, folded = pair
    rv, fv = Verifier(ref, fold_gqa=False), Verifier(folded, explicit_attention=explicit)
    assert not rv.folded_attention and fv.folded_attention
    assert ref.config._attn_implementation == "sdpa"
    assert fv.explicit_from == (0 if explicit else None)
    tol = 4 * TOL if explicit else TOL
    rng = random.Random(1)
    vocab = ref.config.vocab_size
    prompt = [rng.randrange(4, vocab) for _ in range(300)]
    rkv, fkv = KVState(), KVState()
    first = rv.prefill(rkv, prompt, reserve=600)
    assert fv.prefill(fkv, prompt, reserve=600) == first
    n = len(prompt)
    assert (rkv.cache.buf[..., :n, :] - fkv.cache.buf[..., :n, :]).abs().max() <= TOL
    root = first[0]
    for size in [0, 3, 7, 15, 31, 63, 127, 2, 100, 0]:
        tree = random_tree(rng, size, vocab)
        a, b = rv.step(rkv, root, tree), fv.step(fkv, root, tree)
        assert fv.last_logits.shape == rv.last_logits.shape == (size + 1, vocab)
        err = (fv.last_logits - rv.last_logits).abs().max()
        assert err <= tol, (size, err)
        assert torch.equal(fv.last_logits.argmax(-1), rv.last_logits.argmax(-1))
        assert (a.accepted, a.bonus) == (b.accepted, b.bonus)
        assert rkv.ids == fkv.ids
        root = a.bonus
    n = len(rkv.ids)
    assert (rkv.cache.buf[..., :n, :] - fkv.cache.buf[..., :n, :]).abs().max() <= tol


def test_path_attention_equals_the_original_attention(pair, monkeypatch):
    """Path attention (every row attends its own path in two parts merged by their
    log-sum-exp; fastcoder/attention.py) is the model's attention: in fp32 (asked for
    with ``invariant=True``; the fp32 linear layers' rounding by row count, which would
    cut the buckets to 1 row, is not what is checked here), tree steps of random shapes
    with compaction in between, from
    a 312-token prompt (rows on both sides of the 320-column block boundary: steps with
    two bulk widths): logits within 4e-5 of the reference's (the merge sums in another
    order), the same argmax, accepted path, bonus and KV cache."""
    ref, folded = pair
    monkeypatch.setattr(matmul, "uniform_rows", lambda model, rows: max(rows))
    monkeypatch.setattr(matmul, "mark_one_row_rounding", lambda model: [])
    rv, pv = Verifier(ref, fold_gqa=False), Verifier(folded, invariant=True)
    assert pv.paths and not pv.exact_paths and not rv.paths
    rng = random.Random(3)
    vocab = ref.config.vocab_size
    prompt = [rng.randrange(4, vocab) for _ in range(312)]
    rkv, pkv = KVState(), KVState()
    first = rv.prefill(rkv, prompt, reserve=600)
    assert pv.prefill(pkv, prompt, reserve=600)[0] == first[0]
    root, widths = first[0], set()
    for size in [0, 3, 7, 15, pv.max_nodes, 2, 11, 0, 5, 9, 13, 6]:
        tree = random_tree(rng, size, vocab)
        a, b = rv.step(rkv, root, tree), pv.step(pkv, root, tree)
        widths.add(len(pv._plan.groups))
        err = (pv.last_logits - rv.last_logits).abs().max()
        assert err <= 4 * TOL, (size, err)
        assert torch.equal(pv.last_logits.argmax(-1), rv.last_logits.argmax(-1))
        assert (a.accepted, a.bonus) == (b.accepted, b.bonus)
        root = a.bonus
    assert widths == {1, 2}  # some steps had rows on both sides of a block boundary
    n = len(rkv.ids)
    assert rkv.ids == pkv.ids and (rkv.cache.buf[..., :n, :] - pkv.cache.buf[..., :n, :]).abs().max() <= 4 * TOL


def test_explicit_attention_decodes_as_the_original_attention(pair, tiny_tokenizer):
    """The decode loop with the attention as two matrix products (``explicit_attention=
    True``; off unless asked in fp32, where steps are not batch-invariant): AR, PLD and
    FastCoder give the model's own sdpa AR tokens."""
    ref, folded = pair
    ev = Verifier(folded, explicit_attention=True)
    assert ev.explicit_from == 0 and ev.graph_status()["explicit_attention_from"] == 0
    assert Verifier(folded).explicit_from is None
    rng = random.Random(3)
    prompt = [rng.randrange(4, ref.config.vocab_size) for _ in range(60)]
    plain, explicit = Engine(ref, tiny_tokenizer, name="ref"), Engine(folded, tiny_tokenizer, name="explicit")
    explicit.verifier = ev
    ar = plain.generate(prompt, DecodeConfig(method="ar", max_new_tokens=24)).tokens
    assert explicit.generate(prompt, DecodeConfig(method="ar", max_new_tokens=24)).tokens == ar
    sources = Sources(dr=TokenDatastore.build([ar[2:14], prompt[5:30] + ar[:8]]))
    for method in ("pld", "fastcoder"):
        cfg = DecodeConfig(method=method, max_new_tokens=24, max_draft_tokens=32, cache_min_sequences=0)
        gen = explicit.generate(prompt, cfg, session=Session(cfg), sources=sources, reference=ar[3:])
        assert gen.tokens == ar and gen.stats.forward_steps < len(ar), method


def test_prefill_logits_equal_the_original_attention(pair):
    """Every position's logits of a prefill: no past (SDPA's causal kernel, no mask), then
    a second chunk over a past (transformers builds the causal mask for the fold, which
    needs the AttentionMaskInterface registration), then a prefix-reuse prefill."""
    ref, folded = pair
    rng = random.Random(2)
    vocab = ref.config.vocab_size
    ids = torch.tensor([[rng.randrange(4, vocab) for _ in range(90)]])
    with torch.inference_mode():
        for split in (90, 57, 1):
            outs = []
            for model in (ref, folded):
                cache = DynamicCache(config=model.config)
                a = model(input_ids=ids[:, :split], past_key_values=cache, use_cache=True).logits
                parts = [a]
                if split < ids.shape[1]:
                    pos = torch.arange(split, ids.shape[1]).unsqueeze(0)
                    parts.append(model(input_ids=ids[:, split:], position_ids=pos, past_key_values=cache, use_cache=True).logits)
                outs.append(torch.cat(parts, dim=1))
            assert (outs[0] - outs[1]).abs().max() <= TOL, split
            assert torch.equal(outs[0].argmax(-1), outs[1].argmax(-1))
    rv, fv = Verifier(ref, fold_gqa=False), Verifier(folded)
    base = [rng.randrange(4, vocab) for _ in range(200)]
    other = base[:150] + [rng.randrange(4, vocab) for _ in range(20)]
    rkv, fkv = KVState(), KVState()
    for prompt in (base, other):
        r, f = rv.prefill(rkv, prompt), fv.prefill(fkv, prompt)
        assert r[:2] == f[:2]
        n = len(prompt)
        assert (rkv.cache.buf[..., :n, :] - fkv.cache.buf[..., :n, :]).abs().max() <= TOL


def test_decode_is_identical_with_and_without_the_fold(pair, tiny_tokenizer, monkeypatch):
    """The whole decode loop (AR and drafters with trees) gives the same tokens."""
    ref, folded = pair
    with monkeypatch.context() as m:
        m.setattr(attention, "enable", lambda model: False)
        e_ref = Engine(ref, tiny_tokenizer, name="ref")
    e_fold = Engine(folded, tiny_tokenizer, name="fold")
    assert not e_ref.verifier.folded_attention and e_fold.verifier.folded_attention
    rng = random.Random(3)
    vocab = ref.config.vocab_size
    prompt = [rng.randrange(4, vocab) for _ in range(40)]
    ar = e_ref.generate(prompt, DecodeConfig(method="ar", max_new_tokens=24)).tokens
    assert e_fold.generate(prompt, DecodeConfig(method="ar", max_new_tokens=24)).tokens == ar
    docs = [ar[2:14], prompt[5:30] + ar[:8], [rng.randrange(vocab) for _ in range(20)]]
    sources = Sources(dr=TokenDatastore.build(docs[:2]), dc=TokenDatastore.build(docs))
    for method in ("pld", "rest", "fastcoder"):
        cfg = DecodeConfig(method=method, max_new_tokens=24, max_draft_tokens=32, cache_min_sequences=0)
        outs = [e.generate(prompt, cfg, session=Session(cfg), sources=sources, reference=ar[3:]).tokens for e in (e_ref, e_fold)]
        assert outs[0] == outs[1] == ar, method


def test_a_mask_rewritten_in_place_is_folded_again(pair):
    """The folded mask is reused across the layers of ONE forward only: a mask buffer
    rewritten in place for the next forward (as CUDA-graph code does) is folded again."""
    ref, folded = pair
    rng = random.Random(4)
    vocab = ref.config.vocab_size
    ids = torch.tensor([[rng.randrange(4, vocab) for _ in range(12)]])
    neg = torch.finfo(torch.float32).min
    mask = torch.zeros(1, 1, 12, 12)
    with torch.inference_mode():
        for pattern in (torch.ones(12, 12).tril(), (torch.rand(12, 12) > 0.5).float().tril() + torch.eye(12)):
            mask.copy_(torch.where(pattern > 0, 0.0, neg).view(1, 1, 12, 12))
            pos = torch.arange(12).unsqueeze(0)
            a = ref(input_ids=ids, position_ids=pos, attention_mask=mask.clone()).logits
            b = folded(input_ids=ids, position_ids=pos, attention_mask=mask).logits
            assert (a - b).abs().max() <= TOL


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_function_equals_sdpa(dtype):
    """The function itself against transformers' sdpa_attention_forward: float and bool
    masks, shared and per-head masks, a one-row mask, one query row, no mask (causal)."""
    torch.manual_seed(0)

    class Module(torch.nn.Module):
        num_key_value_groups = 3
        is_causal = True

    mod = Module().eval()
    b, kvh, g, d, s = 2, 2, 3, 8, 40
    for q_len in (1, 5, 16):
        q = torch.randn(b, q_len, kvh * g, d, dtype=dtype).transpose(1, 2)  # as the models lay it out
        k, v = torch.randn(b, kvh, s, d, dtype=dtype), torch.randn(b, kvh, s, d, dtype=dtype)
        allowed = torch.rand(b, 1, q_len, s) > 0.3
        allowed[..., 0] = True
        per_head = torch.rand(b, kvh * g, q_len, s) > 0.3
        per_head[..., 0] = True
        masks = [
            torch.where(allowed, 0.0, torch.finfo(dtype).min).to(dtype),
            allowed,
            per_head,
            allowed[:, :, :1],
            None,
        ]
        for mask in masks:
            kv_len = s if mask is not None else q_len  # causal with no past: square
            want, _ = sdpa_attention_forward(mod, q, k[:, :, :kv_len], v[:, :, :kv_len], mask, scaling=0.3)
            for explicit in (False, True):  # SDPA, or two matrix products (attention.explicit_attention)
                got, none = folded_gqa_attention_forward(mod, q, k[:, :, :kv_len], v[:, :, :kv_len], mask, scaling=0.3,
                                                         **{attention.EXPLICIT_KWARG: explicit})  # fmt: skip
                assert none is None and got.shape == want.shape == (b, q_len, kvh * g, d) and got.is_contiguous()
                assert (got.float() - want.float()).abs().max() <= (TOL if dtype == torch.float32 else 1e-2)


def test_models_the_fold_does_not_suit_keep_their_attention(tiny_tokenizer):
    from transformers import AutoModelForCausalLM, Qwen2Config

    vocab = len(tiny_tokenizer)
    mha = gqa_model("llama", vocab, heads=4, kv_heads=4)
    assert not attention.enable(mha) and mha.config._attn_implementation == "sdpa"
    assert "grouped" in attention.unsupported(mha)
    eager = copy.deepcopy(build_model("qwen2", vocab))
    eager.set_attn_implementation("eager")
    assert not Verifier(eager).folded_attention and eager.config._attn_implementation == "eager"
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, use_sliding_window=True, sliding_window=16,
                      max_window_layers=0)
    sliding = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    assert "sliding" in attention.unsupported(sliding)
    assert not attention.enable(sliding) and sliding.config._attn_implementation == "sdpa"
    sink = build_model("qwen2", vocab)
    sink.model.layers[0].self_attn.sinks = torch.nn.Parameter(torch.zeros(4))
    assert attention.unsupported(sink) == "attention sinks" and not attention.enable(sink)


def test_tree_steps_run_the_fold_and_never_expand_kv(pair, monkeypatch):
    """After the prefill, no step of any bucket goes to transformers' sdpa function (the
    one that calls repeat_kv): every layer runs the fold."""
    _, folded = pair
    v = Verifier(folded)
    rng = random.Random(5)
    vocab = folded.config.vocab_size
    kv = KVState()
    root = v.prefill(kv, [rng.randrange(4, vocab) for _ in range(50)])[0]
    calls = []
    monkeypatch.setattr(attention, "sdpa_attention_forward", lambda *a, **k: calls.append(1) / 0)
    real = torch.nn.functional.scaled_dot_product_attention
    shapes = []
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda q, k, v_, **kw: shapes.append((q.shape, k.shape)) or real(q, k, v_, **kw))
    kv_heads = folded.config.num_key_value_heads
    groups = folded.config.num_attention_heads // kv_heads
    for size in [0, 3, 7, 15, 31, 63, 127, 1, 5, 20]:
        shapes.clear()
        root = v.step(kv, root, random_tree(rng, size, vocab)).bonus
        assert len(shapes) == folded.config.num_hidden_layers
        assert all(q[1] == k[1] == kv_heads for q, k in shapes)  # K/V heads never expanded
        # eager steps run the tree's rows, not a bucket's
        want = v.step_rows(size + 1)
        assert want == size + 1 and all(q[2] == groups * want for q, k in shapes), (size, shapes[0])
    assert not calls


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_padding_rows_skip_attention_and_change_no_real_row(dtype):
    """``fastcoder_query_rows``: the first rows come out as with every row computed (to
    1e-5; in bf16 bit for bit at the counts the verifier asks for, ``attention_rows``',
    which batch-invariant steps rely on: SDPA's CPU kernel blocks the folded query rows,
    and a last block of 1-3 rows can move an ulp), the padding rows as zeros; masks of
    every shape the fold knows."""
    torch.manual_seed(1)

    class Module(torch.nn.Module):
        num_key_value_groups = 7
        is_causal = True

    mod = Module().eval()
    b, kvh, g, d, s, q_len = 1, 2, 7, 64, 600, 8
    q = torch.randn(b, q_len, kvh * g, d, dtype=dtype).transpose(1, 2)
    k, v = torch.randn(b, kvh, s, d, dtype=dtype), torch.randn(b, kvh, s, d, dtype=dtype)
    allowed = torch.rand(b, 1, q_len, s) > 0.3
    allowed[..., 0] = True
    additive = torch.where(allowed, 0.0, torch.finfo(dtype).min).to(dtype)
    per_head = torch.where(torch.rand(b, kvh * g, q_len, s) > 0.3, 0.0, torch.finfo(dtype).min).to(dtype)
    for mask in (additive, per_head, additive[:, :, :1], per_head[:, :, :1]):
        full, _ = folded_gqa_attention_forward(mod, q, k, v, mask, scaling=0.125)
        for real in (1, 2, 5, 6, q_len):
            got, _ = folded_gqa_attention_forward(mod, q, k, v, mask, scaling=0.125, **{attention.ROWS_KWARG: real})
            assert got.shape == full.shape and got.is_contiguous()
            if dtype == torch.bfloat16 and attention_rows(real, g) == real:
                assert torch.equal(got[:, :real], full[:, :real]), (real, mask.shape)
            tol = TOL if dtype == torch.float32 else 1e-2
            assert (got[:, :real].float() - full[:, :real].float()).abs().max() <= tol, (real, mask.shape)
            assert not got[:, real:].any()


def test_the_mask_fold_is_reused_within_one_forward_only():
    """Layers in increasing order reuse the folded mask; a layer index not above the last
    one seen (a new forward) folds again, so a mask rewritten in place is never stale."""
    from fastcoder.attention import _fold_mask

    class Layer:  # no config: the entry is never dropped after a "last" layer
        def __init__(self, i):
            self.layer_idx = i

    mask = torch.zeros(1, 1, 3, 5)
    first = _fold_mask(Layer(0), mask, 2, 4, 3)
    assert first.shape == (1, 1, 6, 5) and _fold_mask(Layer(1), mask, 2, 4, 3) is first
    assert _fold_mask(Layer(2), mask, 2, 4, 3) is first
    mask.fill_(-1.0)  # the next forward, same buffer
    again = _fold_mask(Layer(1), mask, 2, 4, 3)
    assert again is not first and bool((again == -1.0).all())
    assert _fold_mask(Layer(1), mask.clone(), 2, 4, 3) is not again  # another mask object


@pytest.mark.parametrize("groups", [7, 3])
def test_the_rows_the_verifier_attends_give_each_token_ar_bits_in_bf16(groups):
    """What batch-invariant steps rely on, at the kernel: a token's attention output in a
    step of ``attention_rows(n)`` rows (folded: ``groups`` query heads per KV head, 7 for
    Qwen2.5-Coder-0.5B, 3 for SmolLM2-135M) is bit for bit its output in an AR step (2
    rows, the first ``attention_rows(1)`` attended). SDPA's CPU kernel cuts the folded rows
    into blocks of 32 and computes a last block of 1-3 rows with other rounding: on a
    2-vCPU AMD EPYC (avx512_bf16) 5 and 14 rows of Qwen's as they are (35 and 98 folded
    rows) differed here in 3-4 elements over 20 draws, and SmolLM2's AR step attending its
    one row (3 folded rows) differed from every chain on the real model; where the CPU's
    kernel has no such block, this passes either way. Keys with a dominant first column,
    as real attention's sink."""

    class Module(torch.nn.Module):
        num_key_value_groups = groups

    mod, width, differ = Module().eval(), 1024, []
    ar_rows = {attention.ROWS_KWARG: attention_rows(1, groups)}
    for trial in range(60):
        g = torch.Generator().manual_seed(trial)
        k = torch.randn(1, 2, width, 64, generator=g)
        k[..., 0, :] *= 20
        k = (2 * k).to(torch.bfloat16)
        v = torch.randn(1, 2, width, 64, generator=g).to(torch.bfloat16)
        for n in range(1, 25):
            rows = attention_rows(n, groups)
            q = (2 * torch.randn(1, rows, 2 * groups, 64, generator=g)).to(torch.bfloat16).transpose(1, 2)
            mask = torch.zeros(1, 1, rows, width, dtype=torch.bfloat16)
            step, _ = folded_gqa_attention_forward(mod, q, k, v, mask, scaling=0.125)
            for t in range(n):
                ar_q = torch.cat([q[:, :, t : t + 1], q[:, :, t : t + 1]], dim=2)  # AR: 2 rows
                ar, _ = folded_gqa_attention_forward(mod, ar_q, k, v, mask[:, :, :2], scaling=0.125, **ar_rows)
                if not torch.equal(ar[:, 0], step[:, t]):
                    differ.append((trial, n, t))
    assert not differ, differ[:5]
