"""Batch-invariant steps (``Verifier.invariant``, CPU bf16): a token's logits and its
keys/values are bit for bit the same whether a 1-row AR step, a chain in any
bucket or a prefill chunk computed them, so FastCoder's bf16 output is AR's exactly.

The model has Qwen2.5-Coder-0.5B's layer shapes (hidden 896, 14 query heads on 2 KV
heads, MLP 4,864) with 2 layers and random weights: oneDNN picks its kernels by shape,
and at these shapes a 1-row matmul and an unaligned attention width round differently
from the tree rows on the CPUs this project runs on (``docs/bench/bf16-rows``). Contexts
cross SDPA's 512-column blocks. Nothing here is timed.
"""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from fastcoder import matmul
from fastcoder.config import DecodeConfig
from fastcoder.drafters import Sources
from fastcoder.engine import Engine
from fastcoder.ngram import NgramIndex
from fastcoder.session import Session
from fastcoder.trie import DraftTree
from fastcoder.verifier import PATH_PREFILL_ROWS, KVState, Verifier
from fastcoder_bench.probes.ar_reference import ar_logits

CONTEXTS = (300, 505, 1000)
N_AR = 24


@pytest.fixture(scope="module")
def qwen_shaped(tiny_tokenizer):
    torch.manual_seed(0)
    cfg = Qwen2Config(  # the vocabulary padded to whole 128-entry chunks, as Qwen2.5's (verifier.first_argmax)
        vocab_size=128 * -(-len(tiny_tokenizer) // 128), hidden_size=896, intermediate_size=4864, num_hidden_layers=2,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=4096,
        eos_token_id=0, bos_token_id=0, pad_token_id=0, tie_word_embeddings=False,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    if matmul.can_pack(torch.bfloat16):  # what `auto` runs on a CPU with bf16 hardware
        matmul.pack_linears(model)
    return model


def test_bf16_cpu_verifier_is_invariant_by_default(qwen_shaped, tiny_model):
    assert Verifier(qwen_shaped).invariant
    # packed: an AR step runs 1 row (the layers whose 1-row call rounds otherwise run 2);
    # unpacked (no bf16 packing on this CPU): every forward at least 2 rows
    assert Verifier(qwen_shaped).min_rows == (1 if matmul.is_packed(qwen_shaped) else 2)
    assert Verifier(qwen_shaped).step_rows(1) == Verifier(qwen_shaped).min_rows
    assert not Verifier(tiny_model).invariant  # fp32: exact to 1e-5 already; no padding paid
    # path attention: any path of a tree is exact, not the first children's only
    assert Verifier(qwen_shaped).paths and not Verifier(qwen_shaped).exact_paths
    assert Verifier(qwen_shaped, path_attention=False).exact_paths and not Verifier(tiny_model).paths
    status = Verifier(qwen_shaped).graph_status()
    assert status["path_attention"] and not status["exact_paths"]
    assert status["batch_invariant"] and status["min_rows"] == Verifier(qwen_shaped).min_rows
    marked = [n for n, m in qwen_shaped.named_modules() if getattr(m, "pad_one_row", False)]
    assert sum(status["one_row_as_two"].values()) == len(marked)  # reported as the stats and reports show them


def _uniform_prefill(v: Verifier) -> Verifier:
    """``v`` with prefill chunks computed as its steps: its own where they are
    (``prefill_invariant``), else of at most ``uniform_rows`` rows (an Intel Xeon with AMX:
    oneDNN's calls of more than 32 rows round otherwise; the server keeps the faster 128-row
    chunks there, so a prefilled token's keys/values are not always the ones a step would
    write; its tree steps stay within the limit) and, with path attention, of at most
    PATH_PREFILL_ROWS (longer chunks attend the plain way)."""
    paths_ok = not v.paths or v.prefill_chunk <= PATH_PREFILL_ROWS
    assert v.buckets[-1] <= v.uniform_rows and v.prefill_invariant == (v.uniform_rows >= v.prefill_chunk and paths_ok)
    if not v.prefill_invariant:
        v.prefill_chunk = min(v.uniform_rows, PATH_PREFILL_ROWS) if v.paths else v.uniform_rows
        v.prefill_invariant = True
    return v


def _ar(v: Verifier, ids: list[int]):
    return ar_logits(v, ids, N_AR, reserve=64)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_chains_prefill_and_ar_steps_give_the_same_bits(qwen_shaped, ctx):
    """AR's 1-row steps (the MLP's down projection, whose 1-row call rounds otherwise on
    the CPUs seen, run as 2 rows), then the same tokens verified as chains of every length
    from 2 to 16 and 23 rows from the same cache (eager steps run their own rows; 5, 14
    and 23 rows, 35, 98 and 161 folded query rows, would leave the attention kernel a
    last block of 3, 2 and 1 rows and get a padding row): every row's logits equal AR's bit for bit; and a prefill of the prompt
    plus those tokens leaves the very keys/values the steps wrote."""
    rng = random.Random(ctx)
    v = _uniform_prefill(Verifier(qwen_shaped))
    ids = [rng.randrange(4, 600) for _ in range(ctx)]
    kv, toks, ref = _ar(v, ids)
    stepped = kv.cache.buf[..., : ctx + N_AR, :].clone()
    for b in (*range(2, 17), 23):
        kv.truncate(ctx)
        kv.cache.length = ctx
        for pos in range(0, N_AR - b + 1, b):
            v.step(kv, toks[pos], DraftTree.chain(toks[pos + 1 : pos + b], "probe"))
            for j in range(b):
                assert torch.equal(v.last_logits[j], ref[pos + j]), f"chain of {b} rows, row {pos + j} differs from the AR step"
            kv.ids = ids + toks[: pos + b]  # the chain's rows hold these tokens' keys/values
            kv.cache.length = len(kv.ids)
    fresh = KVState()
    v.prefill(fresh, ids + toks[:N_AR], reserve=64)
    assert torch.equal(fresh.cache.buf[..., : ctx + N_AR, :], stepped)
    # a 1-token prefill chunk gives the logits AR's step gave
    one = KVState()
    v.prefill(one, ids, reserve=64)
    tok, n, _ = v.prefill(one, ids + toks[:1], reserve=64)
    assert n == 1 and torch.equal(v.last_logits[0], ref[0]) and tok == toks[1]


def test_fastcoder_bf16_output_is_ar_output(qwen_shaped, tiny_tokenizer):
    """Whole generations with drafts from the AR output itself (mutated): FastCoder and
    PLD commit exactly AR's tokens in bf16."""
    _assert_drafted_output_is_ar(Engine(qwen_shaped, tiny_tokenizer, name="qwen-shaped-bf16"), random.Random(7), (200, 530))


def _assert_drafted_output_is_ar(engine: Engine, rng: random.Random, contexts) -> None:
    """For random prompts of each length: AR's 40 tokens, then PLD and FastCoder drafting
    from a mutated copy of them commit exactly those tokens, in fewer steps.

    The cost curve comes first: it picks the prefill chunk (``Engine._curve_chosen``), and
    on AMX a 128- and a 256-row chunk's matmuls round otherwise, so an AR reference
    prefilled before the curve could differ from every later generation of this engine
    (the drafted methods included) at a near tie."""
    engine.cost_curve()
    for ctx in contexts:
        prompt = [rng.randrange(4, 600) for _ in range(ctx)]
        ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=40)).tokens
        buffers = NgramIndex(key_len=2)
        buffers.add(prompt[-50:] + ar[:10] + [rng.randrange(4, 600)] + ar[11:30])
        for method in ("pld", "fastcoder"):
            gen = engine.generate(prompt, DecodeConfig(method=method, max_new_tokens=40),
                                  sources=Sources(buffers=buffers), reference=ar[5:])  # fmt: skip
            assert gen.tokens == ar, (ctx, method)
            assert gen.stats.forward_steps < len(ar)  # drafts were accepted: tree buckets ran


def test_trees_an_exact_path_verifier_gets_are_chains(qwen_shaped, tiny_tokenizer):
    """Without path attention the verifier accepts along the path of first children only
    (``exact_paths``), so the decode loop sends it that path alone: no step verifies a
    side branch (with ``side_branches`` some do: the drafts here branch), and the output
    is AR's either way."""
    engine = Engine(qwen_shaped, tiny_tokenizer, name="qwen-shaped-bf16", path_attention=False)
    assert engine.verifier.exact_paths
    rng = random.Random(7)
    prompt = [rng.randrange(4, 600) for _ in range(200)]
    ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=40)).tokens
    buffers = NgramIndex(key_len=2)
    for cut in (8, 16, 24):  # continuations that leave AR's at three places: branches
        buffers.add(prompt[-50:] + ar[:cut] + [rng.randrange(4, 600) for _ in range(6)])
    buffers.add(prompt[-50:] + ar)
    seen: list[DraftTree] = []
    step = engine.verifier.step

    def spy(kv, root, tree, **kw):
        seen.append(tree)
        return step(kv, root, tree, **kw)

    engine.verifier.step = spy
    try:
        branched = {}
        for side in (False, True):
            seen.clear()
            gen = engine.generate(prompt, DecodeConfig(method="fastcoder", max_new_tokens=40, max_draft_tokens=32,
                                                       side_branches=side), sources=Sources(buffers=buffers))  # fmt: skip
            assert gen.tokens == ar
            branched[side] = sum(len(t.first_path()) < len(t) for t in seen)
            assert any(len(t) for t in seen)
    finally:
        del engine.verifier.step
    assert branched[False] == 0 and branched[True] > 0


def _branching_step(v: Verifier, kv: KVState, saved, ids: list[int], toks: list[int], pos: int, depth: int,
                    decoy_first: bool) -> list[tuple[int, int]]:
    """One step over AR's next ``depth`` tokens, each drafted beside a decoy sibling, from
    AR's cache at ``pos``; returns (logits row, AR position) of the root and the true path."""
    ctx = len(ids)
    kv.truncate(ctx + pos)
    with torch.inference_mode():
        kv.cache.buf.copy_(saved)
    kv.cache.length = ctx + pos
    kv.ids = ids + toks[:pos]
    tokens, parents, depths, rows = [], [], [], [(0, pos)]
    parent = -1
    for k in range(1, depth + 1):
        decoy, true = (toks[pos + k] + 7) % 590 + 4, toks[pos + k]
        tokens += [decoy, true] if decoy_first else [true, decoy]
        parents += [parent, parent]
        depths += [k, k]
        parent = len(tokens) - (1 if decoy_first else 2)
        rows.append((parent + 1, pos + k))
    step = v.step(kv, toks[pos], DraftTree(tokens, parents, depths, ["probe"] * len(tokens), [1.0] * len(tokens)))
    if v.paths:  # any path: the true one, up to its first row whose bulk holds a decoy (a block boundary crossed)
        ok = [r for r, _ in rows[1:]]
        upto = next((k for k, r in enumerate(ok) if not v._plan_ok[r]), len(ok))
        assert step.accepted == [r - 1 for r in ok[:upto]] and step.bonus == toks[pos + upto + 1]
    elif decoy_first:  # the true path is not the path of first children: the walk stops at once, AR's token the bonus
        assert step.accepted == [] and step.bonus == toks[pos + 1]
    else:  # the whole true path, as indices of the tree as given (the rows were laid out depth first)
        assert step.accepted == [r - 1 for r, _ in rows[1:]] and step.bonus == toks[pos + depth + 1]
    return rows


def test_the_likeliest_path_of_a_branching_tree_gives_ar_bits(qwen_shaped):
    """The path of first children (the likeliest: listed first at every level) is laid out
    depth first, in the columns AR's steps used: its rows are AR's bit for bit."""
    rng = random.Random(11)
    v = Verifier(qwen_shaped)
    ids = [rng.randrange(4, 600) for _ in range(505)]
    kv, toks, ref = _ar(v, ids)
    saved = kv.cache.buf.clone()
    for pos in range(0, N_AR - 4, 4):
        for row, i in _branching_step(v, kv, saved, ids, toks, pos, 4, decoy_first=False):
            assert torch.equal(v.last_logits[row], ref[i]), f"tree row {row} differs from AR's step at {i}"


def test_branching_tree_rows_are_ar_up_to_rounding(qwen_shaped):
    """Each true token of AR's output drafted next to a decoy sibling (a branching tree):
    the true path's rows carry AR's logits up to a few bf16 ulps (a wrong mask or a wrong
    position would be off by whole units), with AR's argmax. Not bit for bit: in a branching
    tree a node's ancestors are not the contiguous columns AR's step saw, and the CPU
    attention kernel's rounding depends on the column (docs/BENCHMARKS.md, sixteenth
    session); chains are exact (above)."""
    rng = random.Random(11)
    v = Verifier(qwen_shaped, path_attention=False)
    ids = [rng.randrange(4, 600) for _ in range(505)]
    kv, toks, ref = _ar(v, ids)
    saved = kv.cache.buf.clone()
    depth, worst, checked = 4, 0.0, 0
    for pos in range(0, N_AR - depth, depth):
        rows = _branching_step(v, kv, saved, ids, toks, pos, depth, decoy_first=True)
        for row, i in rows:
            got, want = v.last_logits[row].float(), ref[i].float()
            ulp = 2.0 ** (torch.floor(torch.log2(want.abs().max())) - 7)  # one bf16 ulp at the largest logit
            worst = max(worst, float((got - want).abs().max() / ulp))
            assert int(got.argmax()) == int(want.argmax()) == toks[i + 1]
            checked += 1
    assert checked == 5 * (depth + 1)
    assert worst <= 4, f"tree rows differ from AR's by {worst:.1f} bf16 ulps"


@pytest.mark.parametrize("ctx", (300, 505, 1000))
def test_side_branch_rows_give_ar_bits_with_path_attention(qwen_shaped, ctx):
    """Path attention: each true token of AR's output drafted *behind* a decoy sibling
    (the true path is never the first children's): the true path's rows carry AR's
    logits bit for bit and the walk accepts them, except a row whose bulk would hold a
    decoy (its path crosses a PATH_BLOCK boundary after leaving the first children):
    there the walk stops and AR's token is the bonus. The contexts put block boundaries
    inside steps (300 + 20 = 320, 505 + 7 = 512)."""
    rng = random.Random(ctx)
    v = Verifier(qwen_shaped)
    assert v.paths
    ids = [rng.randrange(4, 600) for _ in range(ctx)]
    kv, toks, ref = _ar(v, ids)
    saved = kv.cache.buf.clone()
    checked = refused = 0
    for depth in (4, 7):
        for pos in range(0, N_AR - depth, depth):
            rows = _branching_step(v, kv, saved, ids, toks, pos, depth, decoy_first=True)
            for row, i in rows:
                if v._plan_ok[row]:
                    assert torch.equal(v.last_logits[row], ref[i]), f"side-branch row {row} differs from AR's step at {i}"
                    checked += 1
                else:
                    refused += 1
    assert checked > 20
    assert refused > 0 or ctx == 1000  # steps from 316 and 509 cross the boundaries at 320 and 512


def test_prefill_chunks_padded_for_the_attention_kernel_give_their_own_logits(tiny_tokenizer):
    """Without GQA (1 query head per KV head: no fold) a batch-invariant 1-token prefill
    chunk runs 4 rows and a 33-token one 36 (``attention_rows``: a last block of 1-3 query
    rows rounds differently); the padding rows come after the real ones, and the logits
    returned are the last real row's: the same (to bf16 rounding) as a prefill of the whole
    prompt at once, with the same greedy token, and the keys/values are that prefill's."""
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tiny_tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
                      eos_token_id=0, bos_token_id=0, pad_token_id=0)  # fmt: skip
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    v = Verifier(model)
    assert v.invariant and not v.folded_attention and [v.step_rows(r) for r in (1, 2, 5, 33)] == [4, 4, 5, 36]
    rng = random.Random(3)
    ids = [rng.randrange(4, 600) for _ in range(300)]
    whole = KVState()
    want_tok, _, _ = v.prefill(whole, ids, reserve=64)
    want = v.last_logits[0].float()
    for head, grows in ((299, 1), (267, 33)):
        kv = KVState()
        v.prefill(kv, ids[:head], reserve=64)
        tok, n, _ = v.prefill(kv, ids, reserve=64)
        got = v.last_logits[0].float()
        assert n == grows and tok == want_tok == int(got.argmax())
        assert (got - want).abs().max() <= 0.05 * want.abs().max(), grows
        assert torch.equal(kv.cache.buf[..., :300, :], whole.cache.buf[..., :300, :]), grows


def _explicit(model) -> Verifier:
    """A verifier computing attention as two matrix products from its boundary on
    (``explicit_attention=True`` skips the speed check, not the invariance probe)."""
    v = Verifier(model, explicit_attention=True)
    if v.explicit_from is None:
        pytest.skip("the explicit attention is not batch-invariant on this CPU (attention.explicit_consistent_from)")
    return v


@pytest.mark.parametrize("ctx", (1000, 1700))
def test_explicit_attention_rows_give_ar_bits_across_its_boundary(qwen_shaped, ctx):
    """Forwards starting at or after ``explicit_from`` (1,024 on the 2-vCPU AMD EPYC with
    AVX512-BF16) compute attention as two matrix products, the others with SDPA. AR's
    1-row steps, then chains of 2..16 and 23 rows over the same tokens, from 1,000 (the
    boundary inside the chains) and from 1,700 (all past it): every row a step trusts
    equals AR's bit for bit; a chain straddling the boundary accepts nothing from the
    boundary on (those rows ran SDPA, AR's ran the products), and a prefill (its chunks
    split at the boundary) leaves the keys/values the steps wrote."""
    n_ar = 40
    v = _uniform_prefill(_explicit(qwen_shaped))
    edge = v.explicit_from
    assert v.graph_status()["explicit_attention_from"] == edge and edge % 512 == 0
    rng = random.Random(ctx)
    ids = [rng.randrange(4, 600) for _ in range(ctx)]
    kv, toks, ref = ar_logits(v, ids, n_ar, reserve=64)
    stepped = kv.cache.buf[..., : ctx + n_ar, :].clone()
    straddled = 0
    for b in (*range(2, 17), 23):
        kv.truncate(ctx)
        kv.cache.length = ctx
        pos = 0
        while pos + b <= n_ar:
            past = ctx + pos
            step = v.step(kv, toks[pos], DraftTree.chain(toks[pos + 1 : pos + b], "probe"))
            trusted = edge - past if v.straddles(past, past + b - 1) else b
            straddled += trusted < b
            for j in range(trusted):
                assert torch.equal(v.last_logits[j], ref[pos + j]), f"chain of {b} rows from {past}, row {pos + j} differs"
            assert len(step.accepted) == trusted - 1 and step.bonus == toks[pos + trusted]
            assert kv.ids == ids + toks[: pos + trusted]
            pos += trusted
    assert straddled > 0 if ctx < edge < ctx + n_ar else straddled == 0
    fresh = KVState()
    v.prefill(fresh, ids + toks[:n_ar], reserve=64)
    assert torch.equal(fresh.cache.buf[..., : ctx + n_ar, :], stepped)


def test_fastcoder_bf16_output_is_ar_output_across_the_explicit_boundary(qwen_shaped, tiny_tokenizer):
    """Whole generations whose steps cross ``explicit_from`` (and a prompt tail that
    would straddle it, which the decode loop prefills instead of merging): PLD and
    FastCoder commit exactly AR's tokens in bf16; a step whose forced rows straddle it
    is refused with a clear error."""
    engine = Engine(qwen_shaped, tiny_tokenizer, name="qwen-shaped-bf16")
    engine.verifier = _explicit(qwen_shaped)
    edge = engine.verifier.explicit_from
    rng = random.Random(11)
    _assert_drafted_output_is_ar(engine, rng, (edge - 20, edge + 500))
    # a session holding a prompt that ends 3 rows before the boundary, then the same
    # prompt and 5 more tokens (a tail the first step would otherwise merge)
    prompt = [rng.randrange(4, 600) for _ in range(edge - 3)]
    longer = prompt + [rng.randrange(4, 600) for _ in range(5)]
    want = engine.generate(longer, DecodeConfig(method="ar", max_new_tokens=20)).tokens
    cfg = DecodeConfig(method="fastcoder", max_new_tokens=20)
    session = Session(cfg)
    engine.generate(prompt, cfg, session=session)
    gen = engine.generate(longer, cfg, session=session, reference=want)
    assert gen.tokens == want and gen.stats.merged_tail == 0
    v = engine.verifier
    kv = KVState()
    ids = [rng.randrange(4, 600) for _ in range(edge - 2)]
    v.prefill(kv, ids, reserve=64)
    with pytest.raises(ValueError, match="straddle"):
        v.step(kv, 5, DraftTree(), forced=[6, 7, 8])


def test_the_replay_verifier_refuses_the_rows_path_attention_refuses(qwen_shaped):
    """The offline simulator's verifier (``ReplayVerifier(paths=True)``) walks as the real
    one with path attention: for random trees at positions around PATH_BLOCK boundaries,
    and the recorded output following each node's path in turn, it accepts exactly the
    nodes before the first one whose row the real plan (``Verifier._path_plan``) marks not
    exact, and every node of the path where none is."""
    from types import SimpleNamespace

    from conftest import random_tree

    from fastcoder.replay import ReplayVerifier
    from fastcoder.verifier import PATH_BLOCK

    v = Verifier(qwen_shaped)
    assert v.paths
    cache = SimpleNamespace(capacity=4096, buf=torch.empty(1, 1, 1, qwen_shaped.config.num_key_value_heads, 1))
    rng = random.Random(5)
    compared = refused = 0
    for past in (PATH_BLOCK * 5 - 9, PATH_BLOCK * 5 - 2, PATH_BLOCK * 5, PATH_BLOCK * 7 - 5):
        for _ in range(6):
            raw = random_tree(rng, rng.randrange(4, 16), 50)
            tree = raw.permute(raw.depth_first())  # as Verifier.step lays it out
            tree = type(tree)([1000 + i for i in range(len(tree))], tree.parents, tree.depths, tree.sources, tree.probs)
            rows = len(tree) + 1
            v._path_plan(past, rows, [0] + [p + 1 for p in tree.parents], [0] + list(tree.depths), cache)
            for node in range(len(tree)):
                path = [node]
                while tree.parents[path[-1]] >= 0:
                    path.append(tree.parents[path[-1]])
                path.reverse()
                want = next((j for j, a in enumerate(path) if not v._plan_ok[a + 1]), len(path))
                rv = ReplayVerifier([7] + [tree.tokens[a] for a in path] + [9], eos=0, paths=True)
                rv.prefill(None, [3] * past)  # the root (token 7) at position `past`
                step = rv.step(None, 7, tree)
                assert step.accepted == path[:want], (past, tree.parents, node)
                compared += 1
                refused += want < len(path)
    assert compared > 100 and refused > 5
