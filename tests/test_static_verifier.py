"""The static, fixed-shape verifier against the old eager one (fp32, tiny models).

The old eager verifier (growing DynamicCache, host-built mask, index_select over the
whole cache) lives on only as ``tests/eager_reference.py``, the reference here.
"""

from __future__ import annotations

import random
import time

import pytest
import torch

from eager_reference import EagerKV, EagerVerifier
from fastcoder.config import DecodeConfig
from fastcoder.datastore import TokenDatastore
from fastcoder.decode import generate
from fastcoder.drafters import Sources, make_drafter
from fastcoder.engine import Engine
from fastcoder.session import Session
from conftest import random_tree
from fastcoder.trie import DraftTree
from fastcoder.verifier import BUCKETS, KVState, StaticKV, Verifier

TREE = DraftTree(
    tokens=[5, 6, 7, 8, 9, 11],
    parents=[-1, 0, 1, -1, 3, 1],
    depths=[1, 2, 3, 1, 2, 3],
    sources=["x"] * 6,
    probs=[1.0] * 6,
)


def test_static_step_logits_equal_eager_reference(tiny_model):
    """Every bucket, random trees, several steps with compaction in between: the static
    path's logits equal the old eager path's (fp32 rounding) and every greedy choice,
    accepted path and bonus token is the same."""
    rng = random.Random(0)
    vocab = tiny_model.config.vocab_size
    sv, ev = Verifier(tiny_model), EagerVerifier(tiny_model)
    prompt = [rng.randrange(4, vocab) for _ in range(37)]
    kv, ekv = KVState(), EagerKV()
    first, n, _ = sv.prefill(kv, prompt, reserve=400)
    assert (first, n) == ev.prefill(ekv, prompt)[:2]
    root = first
    for size in [0, 3, 6, 7, 15, 31, 63, 127, 0, 12]:
        tree = random_tree(rng, size, vocab)
        a, b = sv.step(kv, root, tree), ev.step(ekv, root, tree)
        assert sv.last_logits.shape == ev.last_logits.shape == (size + 1, vocab)
        assert torch.allclose(sv.last_logits, ev.last_logits, atol=1e-4, rtol=0), (sv.last_logits - ev.last_logits).abs().max()
        assert torch.equal(sv.last_logits.argmax(-1), ev.last_logits.argmax(-1))
        assert (a.accepted, a.bonus) == (b.accepted, b.bonus)
        assert kv.ids == ekv.ids and kv.cache.length == len(kv.ids)
        root = a.bonus


def test_compaction_moves_only_accepted_rows(tiny_model):
    v = Verifier(tiny_model)
    kv = KVState()
    prompt = list(range(20, 45))
    first, _, _ = v.prefill(kv, prompt)
    # make the model's own greedy chain the second branch so nodes 3, 4 are accepted
    ref = EagerVerifier(tiny_model)
    ekv = EagerKV()
    ref.prefill(ekv, prompt)
    chain = []
    tok = first
    for _ in range(2):
        tok = ref.step(ekv, tok, DraftTree()).bonus
        chain.append(tok)
    tree = DraftTree(
        tokens=[(chain[0] + 1) % 600, (chain[0] + 2) % 600, (chain[0] + 3) % 600, chain[0], chain[1]],
        parents=[-1, -1, 1, -1, 3],
        depths=[1, 1, 2, 1, 2],
        sources=["x"] * 5,
        probs=[1.0] * 5,
    )
    past = len(kv.ids)
    before = kv.cache.buf.clone()
    step = v.step(kv, first, tree)
    assert step.accepted == [3, 4]
    after = kv.cache.buf
    # rows of the past are untouched; the accepted rows (4, 5 after the root) moved to 1, 2
    assert torch.equal(after[..., :past, :], before[..., :past, :])
    fresh = Verifier(tiny_model)
    fkv = KVState()
    fresh.prefill(fkv, prompt + [first] + chain)
    n = past + 3
    assert torch.allclose(after[..., :n, :], fkv.cache.buf[..., :n, :], atol=1e-5)


def test_prefix_reuse_prefills_only_the_delta(tiny_model):
    v = Verifier(tiny_model)
    kv = KVState()
    a = list(range(30, 90))
    b = a[:50] + [7, 8, 9, 10]
    v.prefill(kv, a)
    buf = kv.cache.buf
    tok, prefilled, _ = v.prefill(kv, b)
    assert prefilled == 4 and kv.cache.buf is buf  # kept in place, no new cache
    fresh = KVState()
    assert v.prefill(fresh, b)[0] == tok
    assert torch.allclose(kv.cache.buf[..., : len(b), :], fresh.cache.buf[..., : len(b), :], atol=1e-5)
    # a request that needs more room moves to a bigger cache, keeping the common prefix
    longer = b + list(range(100, 140))
    tok2, prefilled2, _ = v.prefill(kv, longer, reserve=kv.cache.capacity)
    assert prefilled2 == 40 and kv.cache.capacity >= len(longer) + kv.cache.capacity // 2
    assert tok2 == v.prefill(KVState(), longer)[0]


def test_buckets_and_capacity(tiny_model):
    v = Verifier(tiny_model)
    assert [v.bucket(r) for r in (1, 2, 5, 16, 17, 65, 128)] == [1, 4, 8, 16, 32, 128, 128]
    with pytest.raises(ValueError):
        v.bucket(129)
    kv = KVState()
    v.prefill(kv, list(range(10, 20)), reserve=100)
    assert kv.cache.capacity >= 10 + 100 + BUCKETS[-1]
    from lsp_server.sessions import kv_bytes  # the one measure of a session's KV memory

    assert isinstance(kv.cache, StaticKV) and kv_bytes(kv) == kv.cache.buf.numel() * 4
    kv.reset()
    assert kv.ids == [] and kv.cache is not None  # reset keeps the buffer for reuse
    kv.release()
    assert kv.cache is None


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_step_logits_equal_eager(tiny_tokenizer, backend):
    """The step as one compiled unit (device-side preparation + forward + argmax over
    the whole fixed-shape cache, the code CUDA graphs capture): aot_eager (dynamo's
    captured graph run op by op) is bit-identical to eager; inductor (fused kernels)
    equal up to fp32 rounding with identical greedy choices."""
    from conftest import build_model

    model = build_model("qwen2", len(tiny_tokenizer), seed=3)
    eager = Verifier(model)
    eager._run_step = lambda cache, b, past, real=None: eager._forward(cache, b, cache.capacity, True)  # same fixed shapes
    eager.padded = True  # and the same buckets
    comp = Verifier(model, compile=backend)
    prompt = list(range(40, 75))
    kv_e, kv_c = KVState(), KVState()
    root = eager.prefill(kv_e, prompt)[0]
    assert comp.prefill(kv_c, prompt)[0] == root
    for tree in (TREE, DraftTree.chain([9, 10, 11], "x")):
        a, b = eager.step(kv_e, root, tree), comp.step(kv_c, root, tree)
        if backend == "aot_eager":
            assert torch.equal(comp.last_logits, eager.last_logits)
        else:
            assert torch.allclose(comp.last_logits, eager.last_logits, atol=1e-4, rtol=0)
            assert torch.equal(comp.last_logits.argmax(-1), eager.last_logits.argmax(-1))
        assert (a.accepted, a.bonus) == (b.accepted, b.bonus)
        root = a.bonus


def test_generate_static_equals_eager_reference_every_drafter(tiny_model, tiny_tokenizer):
    """The whole decode loop on the old eager verifier and on the static one: identical
    tokens for every drafter, with prefix reuse across two runs of a session."""
    engine = Engine(tiny_model, tiny_tokenizer, name="tiny")
    rng = random.Random(5)
    vocab = len(tiny_tokenizer)
    prompt = [rng.randrange(4, vocab) for _ in range(30)]
    ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=20)).tokens
    docs = [ar[3:15], prompt[5:25] + ar[:6], [rng.randrange(vocab) for _ in range(20)]]
    sources = Sources(dr=TokenDatastore.build(docs[:2]), dc=TokenDatastore.build(docs))
    eager = EagerVerifier(tiny_model)
    for method in ("ar", "pld", "rest", "fastcoder", "reuse"):
        cfg = DecodeConfig(method=method, max_new_tokens=20, max_draft_tokens=16, cache_min_sequences=0)
        s_static, s_eager = Session(cfg), Session(cfg)
        s_eager.kv = EagerKV()
        for _ in range(2):
            g1 = engine.generate(prompt, cfg, session=s_static, sources=sources, reference=ar[2:])
            d = make_drafter(cfg, sources, reference=ar[2:], pool=engine.pool)
            g2 = generate(eager, tiny_tokenizer, d, prompt, cfg, session=s_eager)
            assert g1.tokens == g2.tokens == ar, method


def test_recorded_margins_equal_the_eager_reference_and_are_read_after_the_steps(tiny_model, tiny_tokenizer):
    """With margins asked for, a step hands back its emitted tokens' top-2 margins
    unread (a :class:`Margins`, read once after the generation: no sync inside the
    steps); they equal the eager reference's, one per emitted token."""
    from fastcoder.verifier import Margins

    rng = random.Random(11)
    vocab = len(tiny_tokenizer)
    prompt = [rng.randrange(4, vocab) for _ in range(30)]
    engine = Engine(tiny_model, tiny_tokenizer, name="tiny", record_margins=True)
    ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=16))
    cfg = DecodeConfig(method="fastcoder", max_new_tokens=16, max_draft_tokens=8, cache_min_sequences=0)
    sources = Sources(dr=TokenDatastore.build([prompt[4:] + ar.tokens[:12]]))
    fc = engine.generate(prompt, cfg, sources=sources)
    eager, s_eager = EagerVerifier(tiny_model, record_margins=True), Session(cfg)
    s_eager.kv = EagerKV()
    ref = generate(eager, tiny_tokenizer, make_drafter(cfg, sources, pool=engine.pool), prompt, cfg, session=s_eager)
    assert fc.tokens == ar.tokens == ref.tokens
    assert fc.stats.forward_steps < len(fc.tokens)  # drafts were accepted: several tokens a step
    for g in (ar, fc):
        assert len(g.margins) == len(g.tokens)
        assert all(isinstance(m, float) and m >= 0 for m in g.margins)
    assert fc.margins == pytest.approx(ar.margins, abs=1e-4)
    assert fc.margins == pytest.approx(ref.margins, abs=1e-4)
    kv = KVState()
    first, _, _ = engine.verifier.prefill(kv, prompt, reserve=16)
    r = engine.verifier.step(kv, first, DraftTree.chain(ar.tokens[1:5], "x"))
    assert isinstance(r.margins, Margins) and len(r.margins) == len(r.accepted) + 1
    assert r.margins.tolist() == pytest.approx(ar.margins[1 : len(r.accepted) + 2], abs=1e-4)


def test_budget_picks_the_bucket_with_the_best_expected_rate():
    from fastcoder.budget import CostCurve

    curve = CostCurve([0, 3, 7, 15], [1.0, 1.1, 1.3, 2.0])
    assert curve.cost(0) == 1.0 and curve.cost(2) == curve.cost(3) == 1.1 and curve.cost(5) == 1.3
    # four sure nodes then weak ones: bucket 4 (3 nodes) gives 4/1.1; bucket 8 (7) 4.4/1.3
    probs = [0.95, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05]
    assert curve.best_size(probs) == 3
    assert curve.best_size([1.0] * 7) == 7  # 8 / 1.3 beats 4 / 1.1
    assert curve.best_size([0.05, 0.05]) == 0  # no tree pays: verify nothing (bucket 1)
    # the drafting time counts: a tree that pays for its forward but not its drafting
    assert curve.best_size([0.15, 0.1, 0.05]) == 3
    assert curve.best_size([0.15, 0.1, 0.05], draft_s=0.2) == 0


def test_budget_on_unpadded_steps_weighs_every_size():
    """Eager steps run the rows they have: c(k) is linear between the measured sizes and
    every tree size is weighed, not only each bucket's largest."""
    from fastcoder.budget import CostCurve

    curve = CostCurve([0, 3, 7, 15], [1.0, 1.1, 1.3, 2.0], padded=False)
    assert curve.cost(0) == 1.0 and curve.cost(3) == 1.1 and curve.cost(5) == pytest.approx(1.2)
    assert curve.cost(11) == pytest.approx(1.65) and curve.cost(2) == pytest.approx(1.1 - 0.1 / 3)
    # five sure nodes then weak ones: 6 / 1.2 beats bucket 4's 4 / 1.1 and bucket 8's ~6.2 / 1.3
    probs = [0.95, 0.95, 0.95, 0.95, 0.95, 0.1, 0.1, 0.05]
    assert curve.best_size(probs) == 5
    assert CostCurve([0, 3, 7, 15], [1.0, 1.1, 1.3, 2.0]).best_size(probs) == 7  # padded: a whole bucket
    assert CostCurve.from_json(curve.to_json()) == curve
    assert CostCurve.from_json({"ks": [0, 3], "seconds": [1.0, 1.1]}).padded  # older curves: buckets
    assert not curve.at(2048).padded


def test_eager_steps_run_their_rows_and_graphs_a_bucket(tiny_model):
    """``step_rows``: eager fp32 steps run exactly their rows; bf16 batch-invariant ones at
    least 2 and never a tiny last attention block (5 rows of 7 folded heads: 35 = 32 + 3,
    so 6); fixed shapes (graphs, a compiled step) a whole bucket."""
    from fastcoder.verifier import attention_rows

    v = Verifier(tiny_model)
    assert not v.padded and [v.step_rows(r) for r in (1, 2, 5, 9, 128)] == [1, 2, 5, 9, 128]
    with pytest.raises(ValueError):
        v.step_rows(129)
    v.padded = True  # what graphs and compiled steps run
    assert [v.step_rows(r) for r in (1, 2, 5, 9)] == [1, 4, 8, 16]
    assert [attention_rows(r, 7) for r in (1, 2, 4, 5, 6, 13, 14, 16, 23, 37)] == [1, 2, 4, 6, 6, 13, 15, 16, 24, 38]
    assert [attention_rows(r, 1) for r in (1, 3, 4, 32, 33, 64, 65)] == [4, 4, 4, 32, 36, 64, 68]
    assert attention_rows(110, 7) == 111  # 770 rows: blocks of 256, 2 left over


def test_cost_curve_measures_whole_steps_per_bucket(tiny_model):
    from fastcoder.budget import measure

    v = Verifier(tiny_model, buckets=(1, 4, 8))
    curve = measure(v, context_len=32, rounds=1)
    assert curve.ks == [0, 3, 5, 7] and not curve.padded  # eager: a size between the buckets too
    assert all(s > 0 for s in curve.seconds) and curve.seconds == sorted(curve.seconds)
    v.padded = True
    assert measure(v, context_len=32, rounds=1).ks == [0, 3, 7]
    # at each attended length the model's positions allow (4,096 here: not 5,000)
    from fastcoder.budget import measure_lengths

    curve = measure_lengths(v, lengths=(32, 96, 5000), rounds=1)
    assert curve.context_len == 32 and list(curve.by_length) == [96] and len(curve.by_length[96]) == 3


def test_each_timed_step_of_the_cost_curve_follows_a_step_of_its_size(tiny_model, monkeypatch):
    """A step right after a much larger one costs more (its pages are faulted in again), so
    the curve times every size right after an untimed step of that size, as a decode's steps
    follow steps of about their own size, never right after the largest size."""
    import types

    from fastcoder import budget

    v = Verifier(tiny_model, buckets=(1, 4, 8))
    events: list = []
    real_step = v.step

    def step(kv, root, tree, **kw):
        events.append(len(tree))
        return real_step(kv, root, tree, **kw)

    def clock():
        events.append("clock")
        return time.perf_counter()

    v.step = step
    monkeypatch.setattr(budget, "time", types.SimpleNamespace(perf_counter=clock))
    curve = budget.measure(v, context_len=32, rounds=2)
    clocks, timed = 0, []
    for i, e in enumerate(events):
        if e == "clock":
            clocks += 1
        elif clocks % 2:  # between a start and a stop
            timed.append(i)
    assert [events[i] for i in timed] == curve.ks * 2  # every size timed once per round, in order
    assert all(events[i - 2] == events[i] for i in timed)  # right after an untimed step of its size


def test_time_split_sums_to_the_decode_time(tiny_model, tiny_tokenizer):
    engine = Engine(tiny_model, tiny_tokenizer, name="tiny")
    prompt = list(range(40, 80)) * 2
    g = engine.generate(prompt, DecodeConfig(method="pld", max_new_tokens=16))
    s = g.stats
    parts = s.retrieval_s + s.tree_s + s.prep_s + s.forward_s + s.walk_s + s.compact_s + s.accept_s + s.other_s
    assert abs(parts - s.decode_s) < 1e-9 and s.forward_s > 0 and s.other_s >= 0
    assert sum(n for n, _ in s.step_by_bucket.values()) == s.forward_steps
    assert set(s.step_by_bucket) <= set(BUCKETS)


def _chain_steps(v: Verifier, prompt: list[int], buckets, kv: KVState | None = None) -> list[tuple[list[int], int]]:
    """One full-chain step per bucket (bucket b: b - 1 nodes from the prompt) after a
    fresh prefill of ``prompt`` (into ``kv`` when given)."""
    assert len(prompt) > max(buckets)
    out = []
    for b in buckets:
        kv = kv if kv is not None else KVState()
        v.prefill(kv, prompt, reserve=b + 1)
        step = v.step(kv, prompt[-1], DraftTree.chain(prompt[1:b], "probe"))
        out.append((list(step.accepted), int(step.bonus)))
    return out


def _forced_graph_mode(v: Verifier, capacity: int, monkeypatch) -> None:
    """``v`` as on CUDA, every capture failing (on any device): the work area, the
    session switching and the eager fallback over the graphs' fixed shapes."""

    def fail(*a, **k):
        raise RuntimeError("capture refused (test)")

    monkeypatch.setattr(v, "_capture", fail)
    v.use_graphs = True
    v.capture_graphs(capacity)


def test_a_failed_graph_capture_falls_back_for_that_shape_only(tiny_model, monkeypatch):
    prompt = list(range(40, 90)) * 3
    buckets = (1, 4, 8, 16)
    eager = Verifier(tiny_model, buckets=buckets, graphs=False)
    forced = Verifier(tiny_model, buckets=buckets, graphs=False)
    _forced_graph_mode(forced, 1024, monkeypatch)
    assert _chain_steps(forced, prompt, buckets) == _chain_steps(eager, prompt, buckets)
    status = forced.graph_status()
    assert status["mode"] == "cuda-graphs" and status["captured"] == [] and status["widths"] == [1024]
    assert set(status["failed"]) == {f"{b}@1024" for b in buckets}
    assert "capture refused" in status["failed"]["4@1024"]
    assert forced.use_graphs  # a failed shape does not turn graphs off for the others
    assert eager.graph_status() == {
        "mode": "eager", "captured": [], "failed": {}, "batch_invariant": False,
        "exact_paths": False, "path_attention": False, "prefill_chunk": 128,
    }  # fp32


def test_sessions_take_turns_in_the_shared_work_area(tiny_model, monkeypatch):
    """Graph mode: two sessions alternate in the one work area (the other's rows are
    parked and brought back), one of them outgrows it (it grows, the graphs are captured
    again): every step equals an eager verifier with a cache per session."""
    from lsp_server.sessions import kv_bytes

    eager = Verifier(tiny_model, graphs=False)
    shared = Verifier(tiny_model, graphs=False)
    _forced_graph_mode(shared, 512, monkeypatch)
    assert shared.work.capacity == 512 and shared.graph_widths(4096) == [1024, 2048, 4096]
    prompts = {"a": list(range(40, 100)), "b": list(range(300, 340)) + list(range(40, 60))}
    ekv = {k: KVState() for k in prompts}
    skv = {k: KVState() for k in prompts}
    roots = {}
    for k, p in prompts.items():
        roots[k] = eager.prefill(ekv[k], p)[0]
        assert shared.prefill(skv[k], p)[0] == roots[k]
    # "a" was parked when "b" took the area: its rows are its own bytes now
    assert skv["a"].cache is None and skv["a"].parked is not None and skv["b"].cache is shared.work
    assert kv_bytes(skv["a"]) == skv["a"].parked.nbytes and kv_bytes(skv["b"]) == 0
    for i in range(12):  # alternate; each step carries a chain drafted from its prompt
        k = "ab"[i % 2]
        tree = DraftTree.chain(prompts[k][i % 7 : i % 7 + 5], "probe")
        e, s = eager.step(ekv[k], roots[k], tree), shared.step(skv[k], roots[k], tree)
        assert (e.accepted, e.bonus) == (s.accepted, s.bonus)
        assert torch.allclose(eager.last_logits, shared.last_logits, atol=1e-5)
        roots[k] = e.bonus
        assert ekv[k].ids == skv[k].ids
    # a longer request grows the area (from 512 rows) and keeps what the session holds
    longer = skv["a"].ids + [(7 * i) % 500 + 20 for i in range(400)]
    assert shared.prefill(skv["a"], longer)[0] == eager.prefill(ekv["a"], longer)[0]
    assert shared.work.capacity >= len(longer) and shared.graph_status()["work_rows"] == shared.work.capacity
    assert shared.prefill(skv["b"], skv["b"].ids + [7, 8])[0] == eager.prefill(ekv["b"], ekv["b"].ids + [7, 8])[0]


class _CountingGraph:
    def __init__(self, graph) -> None:
        self.graph, self.replays = graph, 0

    def replay(self) -> None:
        self.replays += 1
        self.graph.replay()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
def test_every_bucket_replays_a_captured_graph_equal_to_the_eager_step(tiny_model):
    """On CUDA: every (bucket, width) is captured when the verifier is built, and a step
    of every bucket, at a short and a long past, replays its graph with the eager step's
    result (same accepted path and bonus, logits within fp32 rounding)."""
    import copy

    model = copy.deepcopy(tiny_model).to("cuda")
    graphs = Verifier(model, graph_capacity=2048)
    eager = Verifier(model, graphs=False)
    assert graphs.use_graphs and not graphs.graph_failures
    status = graphs.graph_status()
    assert status["captured"] == list(graphs.buckets) and status["widths"] == [1024, 2048]
    for key, (g, out) in list(graphs.work.graphs.items()):
        graphs.work.graphs[key] = (_CountingGraph(g), out)
    short = list(range(40, 90)) * 3  # 150 tokens: width 1024
    long = [(7 * i) % 500 + 20 for i in range(1200)]  # width 2048
    for prompt in (short, long):
        assert _chain_steps(graphs, prompt, graphs.buckets) == _chain_steps(eager, prompt, eager.buckets)
    replays = {key: g.replays for key, (g, _) in graphs.work.graphs.items()}
    assert all(replays[(b, w)] >= 1 for b in graphs.buckets for w in (1024, 2048)), replays
