"""Token recycling (fastcoder/sources/recycle.py): the table, the verifier's rows' top-k,
and a generation drafting from the model's own earlier predictions, equal to AR (fp32)."""

from __future__ import annotations

import pytest
import torch

from fastcoder.config import DecodeConfig
from fastcoder.drafters import make_drafter
from fastcoder.engine import Engine
from fastcoder.session import DraftState, Session
from fastcoder.stats import GenStats
from fastcoder.sources import recycle
from fastcoder.sources.recycle import RecycleTable
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier


def test_the_table_drafts_the_top_k_then_two_then_a_chain_with_shrinking_counts():
    t = RecycleTable(k=3)
    t.observe([(1, [2, 3, 4]), (2, [5, 6, 7]), (3, [8, 9, 10]), (5, [11, 12, 13]), (11, [14, 1, 2])])
    r = t.draft(1, max_nodes=64, max_depth=16)
    paths = [p for p, _ in r.nodes]
    assert paths[:3] == [(2,), (3,), (4,)]  # depth 1: the root's whole top-k
    assert set(paths[3:7]) == {(2, 5), (2, 6), (3, 8), (3, 9)}  # depth 2: each one's top 2
    assert (2, 5, 11) in paths and (2, 6, 11) not in paths  # below: the top-1 chain (6 is unknown)
    assert (2, 5, 11, 14) in paths and not any(len(p) > 4 for p in paths)  # 14 has no row: the chain ends
    count = dict(r.nodes)
    assert all(count[p] <= count[p[:-1]] for p in paths if len(p) > 1)  # prefix counts only shrink
    assert r.total == pytest.approx(1.0 + 0.5 + 0.33)
    assert len(t.draft(1, max_nodes=4, max_depth=16).nodes) == 4
    assert [p for p, _ in t.draft(1, max_nodes=64, max_depth=1).nodes] == [(2,), (3,), (4,)]
    assert not t.draft(99, 8, 16)  # a token never seen: nothing


def test_the_latest_row_wins_and_the_oldest_tokens_go_first(monkeypatch):
    t = RecycleTable(k=2)
    t.observe([(1, [2, 3, 4]), (1, [5, 6])])  # two rows of token 1 in one step: the later one
    assert t.next[1] == (5, 6)
    monkeypatch.setattr(recycle, "MAX_TOKENS", 3)
    t.observe([(7, [1, 1]), (8, [1, 1]), (1, [9, 9])])  # 1 refreshed: 7 is now the oldest
    t.observe([(10, [1, 1])])
    assert list(t.next) == [8, 1, 10]


def test_the_verifier_returns_every_rows_top_k_in_the_trees_own_order(tiny_model):
    v = Verifier(tiny_model, buckets=(1, 4, 8))
    prompt = list(range(5, 25))
    # node 2 is a child of the root, node 3 node 1's: depth first the rows run 0, 1, 3, 2
    tree = DraftTree(tokens=[30, 31, 32, 33], parents=[-1, 0, -1, 1], depths=[1, 2, 1, 3], sources=["t"] * 4, probs=[1.0] * 4)
    assert tree.depth_first() == [0, 1, 3, 2]  # the verifier permutes the rows: topk must come back in this order
    kv = KVState()
    first, _, _ = v.prefill(kv, prompt, reserve=16)
    base = len(kv.ids)
    plain = v.step(kv, first, tree)
    kv.truncate(base)
    res = v.step(kv, first, tree, topk=5)
    assert (res.accepted, res.bonus) == (plain.accepted, plain.bonus) and plain.topk is None
    want = torch.topk(v.last_logits, 5, dim=-1).indices.tolist()  # rows: root, node i of the tree as given
    assert res.topk == want and len(res.topk) == len(tree) + 1


@pytest.fixture(scope="module")
def engine(tiny_model, tiny_tokenizer):
    return Engine(tiny_model, tiny_tokenizer, name="tiny")


def test_a_document_drafts_from_its_own_earlier_predictions_and_equals_ar(engine, tiny_tokenizer):
    """Only the recycle source on: the first generation fills the table, the second (the same
    prompt again) drafts from it; both equal AR's output."""
    prompt = [int(t) for t in torch.randint(4, len(tiny_tokenizer), (30,), generator=torch.Generator().manual_seed(3))]
    ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=24)).tokens
    cfg = DecodeConfig(method="fastcoder", max_new_tokens=24, max_draft_tokens=8, use_context=False, use_cache=False)
    session = Session(cfg)
    one = engine.generate(prompt, cfg, session=session)
    two = engine.generate(prompt, cfg, session=session)
    assert one.tokens == ar and two.tokens == ar
    table = session.source_state["recycle"]
    assert isinstance(table, RecycleTable) and len(table) > 0
    assert set(two.stats.accepted_by_source) <= {"recycle"} and two.stats.accepted_by_source["recycle"] > 0
    assert two.stats.forward_steps < one.stats.forward_steps


def test_off_asks_the_verifier_for_nothing():
    """Auto (None): on where whole trees are verified, off where only the path of first
    children can be accepted; an explicit k either way; 0 or weight 0: off."""
    assert make_drafter(DecodeConfig(method="fastcoder")).topk_rows == 0  # before start(): not yet known
    for k, chain_only, want in ((None, False, 4), (None, True, 0), (0, False, 0), (6, True, 6)):
        cfg = DecodeConfig(method="fastcoder", recycle_k=k)
        d = make_drafter(cfg)
        d.start(DraftState([1, 2, 3], 3, cfg, Session(cfg), GenStats(), chain_only=chain_only))
        assert d.topk_rows == want, (k, chain_only)
    cfg = DecodeConfig(method="fastcoder", source_weights={"recycle": 0})
    d = make_drafter(cfg)
    d.start(DraftState([1, 2, 3], 3, cfg, Session(cfg), GenStats()))
    assert d.topk_rows == 0
    for bad in (17, -1, True):
        with pytest.raises(ValueError):
            DecodeConfig(recycle_k=bad)
