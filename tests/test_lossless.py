"""Losslessness: every drafter yields exactly the greedy AR output (fp32, tiny random models).

Datastores and reference texts are built from mutated pieces of the AR output itself,
so drafts are partly right and partly wrong: acceptance, rejection mid-path and KV
compaction are all exercised.
"""

from __future__ import annotations

import random
import threading

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fastcoder.config import DecodeConfig
from fastcoder.datastore import TokenDatastore
from fastcoder.drafters import Sources
from fastcoder.engine import Engine
from fastcoder.ngram import NgramIndex
from fastcoder.session import Session
from fastcoder.verifier import decoder_layers

N_NEW = 24


@pytest.fixture(scope="module")
def engine(tiny_model, tiny_tokenizer):
    return Engine(tiny_model, tiny_tokenizer, name="tiny")


def mutate(seq: list[int], rng: random.Random, vocab: int) -> list[int]:
    out = list(seq)
    for _ in range(rng.randint(0, 3)):
        if not out:
            break
        i = rng.randrange(len(out))
        op = rng.random()
        if op < 0.4:
            out[i] = rng.randrange(vocab)
        elif op < 0.7:
            del out[i]
        else:
            out.insert(i, rng.randrange(vocab))
    return out


def ar_output(engine, prompt, n=N_NEW):
    return engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=n)).tokens


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), prompt_len=st.integers(1, 40), budget=st.sampled_from([1, 4, 16, 64]))
def test_every_drafter_equals_ar(engine, seed, prompt_len, budget):
    rng = random.Random(seed)
    vocab = len(engine.tokenizer)
    prompt = [rng.randrange(4, vocab) for _ in range(prompt_len)]
    ar = ar_output(engine, prompt)
    full = prompt + ar
    docs = []
    for _ in range(rng.randint(1, 6)):
        a = rng.randrange(len(full))
        b = min(len(full), a + rng.randint(2, 30))
        docs.append(mutate(full[a:b], rng, vocab))
    docs += [[rng.randrange(vocab) for _ in range(rng.randint(0, 30))] for _ in range(3)]
    dc = TokenDatastore.build(docs)
    dr = TokenDatastore.build(docs[: len(docs) // 2 + 1])
    # the other open documents (the editor's buffers): more mutated pieces
    buffers = NgramIndex(key_len=2)
    for doc in docs[::2]:
        buffers.add(mutate(doc, rng, vocab))
    sources = Sources(dr=dr, dc=dc, buffers=buffers)
    reference = mutate(ar, rng, vocab)  # for fastcoder: the text after the cursor
    session = Session(DecodeConfig())
    for method in ("pld", "rest", "fastcoder", "reuse"):
        cfg = DecodeConfig(
            method=method,
            max_new_tokens=N_NEW,
            max_draft_tokens=budget,
            cache_min_sequences=rng.choice([0, 2, 50]),
            skip_probability=rng.random(),
            seed=seed,
            # the editor's drafting settings and the paper's
            context_recency=rng.choice([1.0, 0.5, 0.05]),
            learn_weights=rng.random() < 0.5,
            weight_decay=rng.choice([0.0, 0.9]),
            cache_exclusive=rng.random() < 0.5,
            weighting=rng.choice(["freq", "count"]),
            max_draft_depth=rng.choice([4, 16, 32]),
        )
        for _ in range(2):  # the second run reuses the session's CACHE and KV prefix
            g = engine.generate(prompt, cfg, session=session, sources=sources, reference=reference)
            assert g.tokens == ar, (method, g.stats.summary())


def test_adaptive_budget_and_stop_rules_equal_ar(engine):
    vocab = len(engine.tokenizer)
    rng = random.Random(5)
    prompt = [rng.randrange(4, vocab) for _ in range(30)]
    ar = ar_output(engine, prompt, 40)
    dc = TokenDatastore.build([prompt + ar, ar[5:30]])
    text_ar = engine.tokenizer.decode(ar)
    stop = text_ar[len(text_ar) // 2 : len(text_ar) // 2 + 3]
    for method in ("ar", "pld", "rest", "fastcoder"):
        cfg = DecodeConfig(method=method, max_new_tokens=40, stop_strings=(stop,) if stop.strip() else ())
        g = engine.generate(prompt, cfg, sources=Sources(dc=dc))
        ref = engine.generate(prompt, cfg.replace(method="ar"))
        assert g.tokens == ref.tokens and g.text == ref.text
    # a caller predicate cuts at the same token for every method
    fn = lambda text: (len(text) - 1) if len(text) > 20 else None  # noqa: E731
    outs = {m: engine.generate(prompt, DecodeConfig(method=m, max_new_tokens=40), sources=Sources(dc=dc), stop_fn=fn) for m in ("ar", "fastcoder")}
    assert outs["ar"].tokens == outs["fastcoder"].tokens
    assert outs["ar"].stats.stop_reason == "stop"


def test_drafts_are_accepted_when_right(engine):
    """When D_c holds the AR continuation, FastCoder needs far fewer forwards."""
    vocab = len(engine.tokenizer)
    rng = random.Random(7)
    prompt = [rng.randrange(4, vocab) for _ in range(20)]
    ar = ar_output(engine, prompt, 40)
    dc = TokenDatastore.build([prompt + ar])
    g = engine.generate(prompt, DecodeConfig(method="rest", max_new_tokens=40, max_draft_tokens=16), sources=Sources(dc=dc))
    assert g.tokens == ar
    assert g.stats.forward_steps <= 6
    assert g.stats.accepted_by_source["D_c"] >= 30


def test_cancellation_stops_within_one_forward(engine):
    vocab = len(engine.tokenizer)
    prompt = list(range(5, 25))
    cancel = threading.Event()
    steps = []

    def on_step(new, stats):
        steps.append(stats.forward_steps)
        if stats.forward_steps == 3:
            cancel.set()

    g = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=200), cancel=cancel, on_step=on_step)
    assert g.cancelled and g.stats.stop_reason == "cancelled"
    assert g.stats.forward_steps == 3


@pytest.mark.parametrize("method", ["ar", "pld"])
def test_a_cancel_mid_forward_stops_before_the_next_layer_and_commits_nothing(engine, method):
    """A newer request sets the running generation's event while a step's forward is in
    its first layer: the forward stops before the next one, the step commits nothing,
    and the session's cache is whole (the next generation from it is AR's output)."""
    prompt = list(range(5, 25)) * 2  # repeated: PLD drafts trees
    whole = ar_output(engine, prompt, 30)
    assert engine.verifier.interruptible
    layers = decoder_layers(engine.verifier.model)
    cancel = threading.Event()
    calls = {"first": 0, "last_after_cancel": 0}

    def first(module, args, out):
        calls["first"] += 1
        if calls["first"] == 4:  # the prefill, two steps, then the third step's forward
            cancel.set()

    def last(module, args, out):
        calls["last_after_cancel"] += cancel.is_set()

    hooks = [layers[0].register_forward_hook(first), layers[-1].register_forward_hook(last)]
    config = DecodeConfig(method=method, max_new_tokens=30, interrupt_steps=True)
    session = Session(config)
    try:
        g = engine.generate(prompt, config, session=session, cancel=cancel)
    finally:
        for h in hooks:
            h.remove()
    assert g.cancelled and g.stats.stop_reason == "cancelled"
    assert g.stats.forward_steps == 2 and calls["last_after_cancel"] == 0
    assert g.tokens == whole[: len(g.tokens)] and len(g.tokens) >= 3
    assert session.kv.ids == prompt + g.tokens[:-1]  # committed rows only
    # the stopped step's seconds are kept apart from the steps that ran (per-step costs)
    assert g.stats.stopped_s > 0 and g.stats.retrieval_s >= 0 and g.stats.tree_s >= 0
    assert g.stats.decode_s == pytest.approx(g.stats.total_s - g.stats.prefill_s - g.stats.stopped_s)
    again = engine.generate(prompt, config, session=session)
    assert again.tokens == whole and again.stats.prefill_tokens <= 1
    # interrupt_steps off, or nobody waiting for the thread (preempt False): the step runs
    # to its end and commits, then the loop stops
    for cfg, preempt in ((config.replace(interrupt_steps=False), None), (config, lambda: False)):
        calls.update(first=0, last_after_cancel=0)
        cancel.clear()
        hooks = [layers[0].register_forward_hook(first), layers[-1].register_forward_hook(last)]
        try:
            whole_step = engine.generate(prompt, cfg, session=Session(config), cancel=cancel, preempt=preempt)
        finally:
            for h in hooks:
                h.remove()
        assert whole_step.cancelled and whole_step.stats.forward_steps == 3 and calls["last_after_cancel"] == 1
        assert whole_step.stats.stopped_s == 0
        assert whole_step.tokens == whole[: len(whole_step.tokens)] and len(whole_step.tokens) > len(g.tokens)
