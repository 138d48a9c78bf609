"""The prefill a keystroke runs: KV reuse, chunks, cancellation and the first-token
constraint of token healing (fp32, tiny random models)."""

from __future__ import annotations

import random
import threading

import pytest
import torch

from fastcoder.config import DecodeConfig
from fastcoder.datastore import TokenDatastore
from fastcoder.drafters import Sources
from fastcoder.engine import Engine
from fastcoder.session import Session
from fastcoder.verifier import KVState, Verifier


def _prompt(rng: random.Random, n: int, vocab: int) -> list[int]:
    return [rng.randrange(4, vocab) for _ in range(n)]


@pytest.mark.parametrize("chunk", [5, 128])
def test_reused_kv_gives_the_logits_of_a_fresh_prefill(tiny_model, chunk):
    rng = random.Random(3)
    vocab = tiny_model.config.vocab_size
    v = Verifier(tiny_model)
    v.prefill_chunk = chunk
    a = _prompt(rng, 60, vocab)
    # as typing does: the same start, a changed and longer end
    b = a[:45] + _prompt(rng, 9, vocab)
    c = b[:-3]  # backspace
    kv = KVState()
    v.prefill(kv, a)
    for ids in (b, c, b):
        tok, prefilled, _ = v.prefill(kv, ids)
        reused = v.last_logits.clone()
        assert 1 <= prefilled <= 9  # only the changed end ran (the first 45 tokens never change)
        fresh = Verifier(tiny_model)
        fresh.prefill_chunk = 10_000  # one forward over the whole prompt
        ftok, fprefilled, _ = fresh.prefill(KVState(), ids)
        assert fprefilled == len(ids)
        assert tok == ftok
        torch.testing.assert_close(reused, fresh.last_logits, atol=1e-5, rtol=0)


def test_reuse_prefills_only_what_changed(tiny_model):
    rng = random.Random(4)
    vocab = tiny_model.config.vocab_size
    v = Verifier(tiny_model)
    v.prefill_chunk = 8
    a = _prompt(rng, 50, vocab)
    kv = KVState()
    assert v.prefill(kv, a)[1] == 50
    assert v.prefill(kv, a + [7, 8])[1] == 2
    assert v.prefill(kv, a[:30])[1] == 1  # shorter: the last token is fed again for its logits


def test_allowed_first_token_is_the_greedy_choice_among_them(tiny_model):
    rng = random.Random(5)
    vocab = tiny_model.config.vocab_size
    v = Verifier(tiny_model)
    ids = _prompt(rng, 20, vocab)
    free, _, _ = v.prefill(KVState(), ids)
    logits = v.last_logits[0]
    allowed = [t for t in rng.sample(range(vocab), 40) if t != free]
    tok, _, _ = v.prefill(KVState(), ids, allowed=allowed)
    assert tok in allowed
    assert tok == max(allowed, key=lambda t: float(logits[t]))
    with pytest.raises(ValueError):
        v.prefill(KVState(), ids, allowed=[])


def test_cancel_stops_between_chunks_and_keeps_what_was_prefilled(tiny_model):
    rng = random.Random(6)
    vocab = tiny_model.config.vocab_size
    v = Verifier(tiny_model)
    v.prefill_chunk = 10
    ids = _prompt(rng, 45, vocab)
    kv = KVState()
    cancel = threading.Event()
    cancel.set()
    tok, done, _ = v.prefill(kv, ids, cancel=cancel)
    assert tok is None and done == 10 and kv.ids == ids[:10]  # one chunk, then it stopped
    tok, prefilled, _ = v.prefill(kv, ids)
    assert prefilled == 35  # the chunk done before the cancel is reused
    assert tok == Verifier(tiny_model).prefill(KVState(), ids)[0]


def test_a_cancelled_prefill_ends_the_generation(tiny_model, tiny_tokenizer):
    engine = Engine(tiny_model, tiny_tokenizer)
    engine.verifier.prefill_chunk = 4
    cancel = threading.Event()
    cancel.set()
    gen = engine.generate(list(range(10, 40)), DecodeConfig(method="fastcoder", max_new_tokens=8), cancel=cancel)
    assert gen.cancelled and gen.tokens == [] and gen.stats.stop_reason == "cancelled"


def test_every_drafter_keeps_the_first_token_constraint_lossless(tiny_model, tiny_tokenizer):
    """The first token is chosen among the allowed ids in the one prefill, so every
    method's output equals AR's under the same constraint (fp32)."""
    engine = Engine(tiny_model, tiny_tokenizer)
    vocab = len(tiny_tokenizer)
    for seed in range(6):
        rng = random.Random(seed)
        prompt = _prompt(rng, rng.randint(3, 40), vocab)
        allowed = rng.sample(range(4, vocab), rng.randint(1, 30))
        ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=20), first_allowed=allowed).tokens
        assert ar[0] in allowed
        free = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=20)).tokens
        docs = [prompt + ar, ar[3:] + free, free]
        sources = Sources(dr=TokenDatastore.build(docs), dc=TokenDatastore.build(docs[1:]))
        for method in ("pld", "rest", "fastcoder", "reuse"):
            gen = engine.generate(
                prompt, DecodeConfig(method=method, max_new_tokens=20, max_draft_tokens=rng.choice([4, 16])),
                session=Session(DecodeConfig()), sources=sources, reference=ar[1:], first_allowed=allowed,
            )  # fmt: skip
            assert gen.tokens == ar, method


@pytest.mark.parametrize("method", ["ar", "fastcoder"])
def test_a_spare_cache_filled_ahead_serves_the_prompt_it_starts(tiny_model, tiny_tokenizer, method):
    """A session's spare KV cache filled ahead of time with the start of a later prompt
    (the server's next prompt window, prefilled in idle time in small chunks): the
    generation for that prompt runs on it (the cache that holds more of the prompt),
    prefills only the rest, and writes what a fresh session writes (fp32)."""
    rng = random.Random(11)
    vocab = len(tiny_tokenizer)
    engine = Engine(tiny_model, tiny_tokenizer)
    engine.verifier.prefill_chunk = 16
    config = DecodeConfig(method=method, max_new_tokens=12, merge_prompt_tail=0)
    old = _prompt(rng, 50, vocab)  # the window before the move
    new = _prompt(rng, 40, vocab)  # the next window's start: a different first token on
    session = Session(config)
    engine.generate(old + [5, 6], config, session=session)
    held = list(session.kv.ids)
    cancel = threading.Event()
    first, _, _ = engine.verifier.prefill(session.spare, new, cancel=cancel, chunk=3)
    assert first is not None and session.spare.ids == new
    prompt = new + _prompt(rng, 6, vocab)  # what was typed since the window was planned
    gen = engine.generate(prompt, config, session=session)
    fresh = engine.generate(prompt, config, session=Session(config))
    assert gen.tokens == fresh.tokens
    assert gen.stats.prefill_tokens == 6 and fresh.stats.prefill_tokens == len(prompt)
    assert session.spare.ids == held  # the caches traded places: the old window is the spare now
    # the old window again: it runs on the spare (the old cache) and prefills nothing new but its last token
    again = engine.generate(old + [5, 6], config, session=session)
    assert again.stats.prefill_tokens == 1


def test_take_longest_keeps_the_cache_on_a_tie():
    s = Session(DecodeConfig())
    s.kv.ids, s.spare.ids = [1, 2, 3], [1, 2, 4]
    kv, spare = s.kv, s.spare
    s.take_longest([1, 2, 5])
    assert s.kv is kv and s.spare is spare
    s.take_longest([1, 2, 4, 9])
    assert s.kv is spare and s.spare is kv


def test_back_from_a_jump_the_prompt_before_it_is_still_cached(tiny_model, tiny_tokenizer):
    """A prompt from another part of the document (neither cache holds half of it) goes
    into the spare cache's buffer, so the prompt before the jump stays cached: back from
    the jump, a few typed tokens are prefilled, not the whole prompt; outputs as a fresh
    session's (fp32)."""
    rng = random.Random(12)
    vocab = len(tiny_tokenizer)
    engine = Engine(tiny_model, tiny_tokenizer)
    config = DecodeConfig(method="fastcoder", max_new_tokens=8, merge_prompt_tail=0)
    here, there = _prompt(rng, 60, vocab), _prompt(rng, 50, vocab)
    session = Session(config)
    engine.generate(here, config, session=session)
    jumped = engine.generate(there, config, session=session)
    assert jumped.stats.prefill_tokens == len(there)
    back = here + _prompt(rng, 3, vocab)  # typed on where it was
    gen = engine.generate(back, config, session=session)
    assert gen.stats.prefill_tokens == 3
    assert gen.tokens == engine.generate(back, config, session=Session(config)).tokens
    # typing on there again: the cache it was in is still the other one
    assert engine.generate(there + [7], config, session=session).stats.prefill_tokens == 1


def test_the_time_budget_counts_from_the_first_token(tiny_model, tiny_tokenizer, monkeypatch):
    """``time_budget_s`` bounds the decoding, not the prompt's prefill: after a cold
    prefill longer than the budget (a long file's first request, 3.3 s against the
    server's 2 s on a 2-core CPU) the generation still writes its tokens instead of
    stopping at the first one. A fake clock: the prefill takes 10 s, each step 0.01 s."""
    import fastcoder.decode as decode

    engine = Engine(tiny_model, tiny_tokenizer)
    clock = [0.0]
    monkeypatch.setattr(decode.time, "perf_counter", lambda: clock[0])
    prefill, step = engine.verifier.prefill, engine.verifier.step

    def slow_prefill(*args, **kwargs):
        clock[0] += 10.0
        return prefill(*args, **kwargs)

    def timed_step(*args, **kwargs):
        clock[0] += 0.01
        return step(*args, **kwargs)

    monkeypatch.setattr(engine.verifier, "prefill", slow_prefill)
    monkeypatch.setattr(engine.verifier, "step", timed_step)
    prompt = list(range(10, 40))
    config = DecodeConfig(method="ar", max_new_tokens=8, merge_prompt_tail=0, time_budget_s=1.0)
    gen = engine.generate(prompt, config)
    assert len(gen.tokens) == 8 and gen.stats.stop_reason == "max_new_tokens"
    short = engine.generate(prompt, config.replace(time_budget_s=0.035), session=Session(config))
    assert 1 < len(short.tokens) < 8 and short.stats.stop_reason == "time_budget"  # the steps still count
