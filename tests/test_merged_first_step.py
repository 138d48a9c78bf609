"""The first step of a generation that runs the prompt's uncached tail with the first
draft (``DecodeConfig.merge_prompt_tail``): one forward instead of a prefill and then a
step, and the same output (fp32, tiny random models)."""

from __future__ import annotations

import random

import pytest
import torch

from conftest import random_tree
from eager_reference import EagerKV, EagerVerifier
from fastcoder.config import DecodeConfig
from fastcoder.datastore import TokenDatastore
from fastcoder.drafters import Sources
from fastcoder.engine import Engine
from fastcoder.session import Session
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier


def _greedy_after(v: Verifier, prompt: list[int], n: int) -> list[int]:
    """Plain greedy decoding: a prefill, then one-row steps."""
    kv = KVState()
    out = [v.prefill(kv, prompt, reserve=n + 8)[0]]
    while len(out) < n:
        out.append(v.step(kv, out[-1], DraftTree()).bonus)
    return out


@pytest.mark.parametrize("tail", [1, 2, 5, 8])
def test_forced_rows_equal_the_eager_reference_and_greedy_decoding(tiny_model, tail):
    """A step with ``forced`` prompt tokens: its logits (from the tree's root on) equal the
    eager reference's, and what it commits (accepted path + bonus) is plain greedy
    decoding's first tokens, for random trees holding a branch that follows the greedy
    output for a while."""
    rng = random.Random(tail)
    vocab = tiny_model.config.vocab_size
    prompt = [rng.randrange(4, vocab) for _ in range(40)]
    head, rest = prompt[: len(prompt) - tail], prompt[len(prompt) - tail :]
    v, e = Verifier(tiny_model), EagerVerifier(tiny_model)
    greedy = _greedy_after(v, prompt, 12)
    for size, follow in ((0, 0), (3, 1), (9, 4), (20, 8)):
        tree = random_tree(rng, size, vocab)
        if follow:  # a branch of the greedy output's first `follow` tokens below the root
            n = len(tree)
            tree = DraftTree(tree.tokens + greedy[:follow], tree.parents + [-1] + list(range(n, n + follow - 1)),
                             tree.depths + list(range(1, follow + 1)), tree.sources + ["g"] * follow,
                             tree.probs + [0.5] * follow)  # fmt: skip
        kv, ekv = KVState(), EagerKV()
        v.prefill(kv, head + [0], reserve=64)  # a different last token: begin() keeps head only
        e.prefill(ekv, head + [0])
        assert v.begin(kv, prompt, reserve=64) == tail == e.begin(ekv, prompt)
        got = v.step(kv, rest[0], tree, forced=rest[1:])
        want = e.step(ekv, rest[0], tree, forced=rest[1:])
        assert v.last_logits.shape == e.last_logits.shape == (len(tree) + 1, vocab)
        torch.testing.assert_close(v.last_logits, e.last_logits, atol=1e-4, rtol=0)
        assert (got.accepted, got.bonus) == (want.accepted, want.bonus)
        committed = [tree.tokens[i] for i in got.accepted] + [got.bonus]
        assert len(committed) >= follow + 1
        assert committed == greedy[: len(committed)]
        assert kv.ids == ekv.ids == prompt + committed[:-1]


def test_forced_rows_then_later_steps_continue_the_same_greedy_output(tiny_model):
    """After a merged first step the cache is right for the steps that follow: the next
    tokens equal plain greedy decoding (a prefill, then one-row steps)."""
    rng = random.Random(3)
    vocab = tiny_model.config.vocab_size
    prompt = [rng.randrange(4, vocab) for _ in range(30)]
    v = Verifier(tiny_model)
    ref, kv = KVState(), KVState()
    tok, _, _ = v.prefill(ref, prompt, reserve=64)
    greedy = [tok]
    for _ in range(11):
        greedy.append(v.step(ref, greedy[-1], DraftTree()).bonus)
    v.prefill(kv, prompt[:25] + [1], reserve=64)
    assert v.begin(kv, prompt, reserve=64) == 5
    # the tree: the greedy output's first 6 tokens as a chain, plus a wrong sibling
    tree = DraftTree.chain(greedy[:6], "x")
    tree = DraftTree(tree.tokens + [(greedy[0] + 1) % vocab], tree.parents + [-1], tree.depths + [1],
                     tree.sources + ["x"], tree.probs + [0.1])  # fmt: skip
    r = v.step(kv, prompt[25], tree, forced=prompt[26:])
    assert r.accepted == [0, 1, 2, 3, 4, 5] and r.bonus == greedy[6]
    out = greedy[:7]
    while len(out) < len(greedy):
        out.append(v.step(kv, out[-1], DraftTree()).bonus)
    assert out == greedy


def test_token_healing_restricts_the_first_token_in_a_merged_step(tiny_model):
    """``allowed`` in a merged step picks the first token among the allowed ids, as the
    prefill does."""
    rng = random.Random(4)
    vocab = tiny_model.config.vocab_size
    prompt = [rng.randrange(4, vocab) for _ in range(20)]
    v = Verifier(tiny_model, record_margins=True)
    free, _, _ = v.prefill(KVState(), prompt, reserve=16)
    allowed = [t for t in range(4, 40) if t != free]
    want, _, want_margin = v.prefill(KVState(), prompt, reserve=16, allowed=allowed)
    kv = KVState()
    v.prefill(kv, prompt[:17] + [2], reserve=16)
    assert v.begin(kv, prompt, reserve=16) == 3
    tree = DraftTree.chain([want, free], "x")
    r = v.step(kv, prompt[17], tree, forced=prompt[18:], allowed=allowed)
    assert r.accepted[:1] == [0]  # the allowed greedy token, drafted, is accepted
    assert r.margins[0] == pytest.approx(want_margin, abs=1e-4)
    kv2 = KVState()  # without the restriction the unrestricted token wins and the draft fails
    v.prefill(kv2, prompt[:17] + [2], reserve=16)
    v.begin(kv2, prompt, reserve=16)
    r2 = v.step(kv2, prompt[17], tree, forced=prompt[18:])
    assert r2.accepted == [] and r2.bonus == free


@pytest.mark.parametrize("method", ["ar", "pld", "fastcoder"])
def test_generate_merged_and_prefilled_first_steps_give_the_same_tokens(tiny_model, tiny_tokenizer, method):
    """A session answers a prompt, then prompts that extend it by 1..12 tokens (typing):
    with the tail merged into the first step and without, the same tokens every time;
    merged (a short tail), there is no prefill forward: the first token comes from the
    first step (for AR one step more and no prefill, so the same number of forwards)."""
    engine = Engine(tiny_model, tiny_tokenizer, name="tiny")
    rng = random.Random(7)
    vocab = len(tiny_tokenizer)
    base = [rng.randrange(4, vocab) for _ in range(40)]
    ar = engine.generate(base, DecodeConfig(method="ar", max_new_tokens=16)).tokens
    sources = Sources(dr=TokenDatastore.build([base[5:30] + ar[:8], ar[2:14]]))
    merged_cfg = DecodeConfig(method=method, max_new_tokens=16, max_draft_tokens=12)
    plain_cfg = DecodeConfig(method=method, max_new_tokens=16, max_draft_tokens=12, merge_prompt_tail=0)
    s_m, s_p = Session(merged_cfg), Session(plain_cfg)
    prompt = list(base)
    saw_merge = False
    for extra in (0, 1, 3, 8, 9, 12, 2):
        prompt = prompt + [rng.randrange(4, vocab) for _ in range(extra)]
        healing = list(range(4, 60)) if extra == 3 else None
        gm = engine.generate(prompt, merged_cfg, session=s_m, sources=sources, first_allowed=healing)
        gp = engine.generate(prompt, plain_cfg, session=s_p, sources=sources, first_allowed=healing)
        assert gm.tokens == gp.tokens, (method, extra)
        assert gp.stats.merged_tail == 0
        uncached = gp.stats.prefill_tokens
        if uncached <= 8:  # merged: no prefill forward; the first step made the first token
            saw_merge = True
            assert gm.stats.merged_tail == uncached == gm.stats.prefill_tokens
            if method == "ar":
                assert gm.stats.forward_steps == gp.stats.forward_steps + 1 == len(gm.tokens)
                # one token per forward either way: the first one came from a step, not the prefill
                assert gm.stats.decoded_tokens == len(gm.tokens) and gm.stats.mean_accept_len == 1.0
                assert gp.stats.decoded_tokens == len(gp.tokens) - 1 and gp.stats.mean_accept_len == 1.0
        else:
            assert gm.stats.merged_tail == 0
    assert saw_merge


def test_generate_on_the_eager_reference_with_a_merged_first_step(tiny_model, tiny_tokenizer):
    """The decode loop over the eager reference verifier and over the static one, a
    session typing ahead: identical tokens, merged first steps on both."""
    from fastcoder.decode import generate
    from fastcoder.drafters import make_drafter

    engine = Engine(tiny_model, tiny_tokenizer, name="tiny")
    rng = random.Random(11)
    vocab = len(tiny_tokenizer)
    prompt = [rng.randrange(4, vocab) for _ in range(30)]
    cfg = DecodeConfig(method="fastcoder", max_new_tokens=12, max_draft_tokens=8, cache_min_sequences=0)
    s_static, s_eager = Session(cfg), Session(cfg)
    s_eager.kv = EagerKV()
    eager = EagerVerifier(tiny_model)
    for extra in (0, 2, 4):
        prompt = prompt + [rng.randrange(4, vocab) for _ in range(extra)]
        g1 = engine.generate(prompt, cfg, session=s_static)
        g2 = generate(eager, tiny_tokenizer, make_drafter(cfg, None, pool=engine.pool), prompt, cfg, session=s_eager)
        assert g1.tokens == g2.tokens
        assert (g1.stats.merged_tail > 0) == (g2.stats.merged_tail > 0) == (extra > 0)


def test_merge_prompt_tail_is_validated():
    with pytest.raises(ValueError, match="merge_prompt_tail"):
        DecodeConfig(merge_prompt_tail=-1)
    with pytest.raises(ValueError, match="merge_prompt_tail"):
        DecodeConfig(merge_prompt_tail=65)
    with pytest.raises(ValueError, match="merge_prompt_tail"):
        DecodeConfig.from_dict({"mergePromptTail": "8"})
    assert DecodeConfig.from_dict({"mergePromptTail": 0}).merge_prompt_tail == 0
