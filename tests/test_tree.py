"""Tree attention mask and KV compaction against sequential decoding (fp32)."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from fastcoder.trie import DraftTree, WeightedTrie
from fastcoder.verifier import KVState, Verifier


def chain_logits(model, ids):
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def test_tree_logits_equal_each_branch_as_a_chain(tiny_model):
    prompt = list(range(10, 30))
    root = 42
    # two branches below the root and a fork at depth 2
    tree = DraftTree(
        tokens=[5, 6, 7, 8, 9, 11],
        parents=[-1, 0, 1, -1, 3, 1],
        depths=[1, 2, 3, 1, 2, 3],
        sources=["x"] * 6,
        probs=[1.0] * 6,
    )
    cache = DynamicCache(config=tiny_model.config)
    with torch.inference_mode():
        tiny_model(input_ids=torch.tensor([prompt]), past_key_values=cache, use_cache=True)
        past = len(prompt)
        out = tiny_model(
            input_ids=torch.tensor([[root] + tree.tokens]),
            position_ids=tree.position_ids(past),
            attention_mask=tree.attention_mask(past, torch.float32),
            past_key_values=cache,
            use_cache=True,
        ).logits[0].float()
    for path in ([0, 1, 2], [3, 4], [0, 1, 5]):
        ref = chain_logits(tiny_model, prompt + [root] + [tree.tokens[i] for i in path])
        rows = [0] + [i + 1 for i in path]
        assert torch.allclose(out[rows], ref[past:], atol=1e-4), (out[rows] - ref[past:]).abs().max()


def test_mask_is_additive_float_in_model_dtype():
    tree = DraftTree.chain([1, 2], "x")
    m = tree.attention_mask(3, torch.bfloat16)
    assert m.dtype == torch.bfloat16 and m.shape == (1, 1, 3, 6)
    assert (m[0, 0, :, :3] == 0).all()
    assert m[0, 0, 0, 4] == torch.finfo(torch.bfloat16).min  # root cannot see node 1
    assert m[0, 0, 2, 4] == 0  # node 2 sees its parent


def test_kv_compaction_then_decoding_matches_sequential(tiny_model):
    v = Verifier(tiny_model)
    prompt = list(range(50, 70))
    seq = chain_logits(tiny_model, prompt)
    # greedy AR continuation of 6 tokens
    ids = list(prompt)
    for _ in range(6):
        ids.append(int(chain_logits(tiny_model, ids)[-1].argmax()))
    ar = ids[len(prompt):]
    kv = KVState()
    first, _, _ = v.prefill(kv, prompt)
    assert first == ar[0] == int(seq[-1].argmax())
    # a tree with a wrong branch first and the right path (ar[1:4]) second
    wrong = (ar[1] + 1) % 500
    tree = DraftTree(
        tokens=[wrong, ar[1], ar[2], ar[3] + 1, ar[3]],
        parents=[-1, -1, 1, 2, 2],
        depths=[1, 1, 2, 3, 3],
        sources=["x"] * 5,
        probs=[1.0] * 5,
    )
    step = v.step(kv, first, tree)
    assert [tree.tokens[i] for i in step.accepted] == ar[1:4]
    assert step.bonus == ar[4]
    assert kv.cache.get_seq_length() == len(prompt) + 4 == len(kv.ids)
    # decoding on from the compacted cache gives the sequential next token
    step2 = v.step(kv, step.bonus, DraftTree())
    assert step2.bonus == ar[5]


def _path(tree: DraftTree, i: int) -> list[int]:
    out = []
    while i >= 0:
        out.append(i)
        i = tree.parents[i]
    return out[::-1]


def test_trie_weights_and_selection():
    trie = WeightedTrie(weighting="count")
    trie.add([((1,), 3), ((1, 2), 2), ((4,), 1)], "D_r", weight=1.0)
    trie.add([((4,), 5), ((4, 5), 5)], "D_c", weight=1.0)
    tree = trie.select(3)
    assert tree.tokens == [4, 4 + 1, 1]  # weights 6, 5, 3
    assert tree.parents == [-1, 0, -1]
    assert tree.sources == ["D_c", "D_c", "D_r"]
    assert tree.agree == [2, 1, 1]  # (4,) drafted by both sources
    both = WeightedTrie()
    both.add([((1,), 3), ((1, 2), 2), ((4,), 1)], "D_r")
    both.add([((1,), 1), ((1, 3), 1)], "context")
    t = both.select(4)
    agree = {tuple(t.tokens[j] for j in _path(t, i)): a for i, a in enumerate(t.agree)}
    assert agree == {(1,): 2, (1, 2): 1, (1, 3): 1, (4,): 1}  # how many sources drafted each path
    assert t.permute([0, 1]).agree == t.agree[:2] and t.truncate(1).agree == t.agree[:1]
    freq = WeightedTrie(weighting="freq")
    freq.add([((1,), 3), ((2,), 1)], "a", weight=1.0)  # frequencies 0.75 / 0.25
    freq.add([((2,), 1)], "b", weight=1.0)  # frequency 1.0
    assert freq.select(1).tokens == [2]
def test_depth_first_lays_the_first_children_path_out_contiguously():
    # root -> a(0) -> c(2) -> e(4); root -> b(1) -> d(3); a -> f(5)
    tree = DraftTree([10, 11, 12, 13, 14, 15], [-1, -1, 0, 1, 2, 0], [1, 1, 2, 2, 3, 2], ["s"] * 6, [1.0] * 6)
    order = tree.depth_first()
    assert order == [0, 2, 4, 5, 1, 3]
    p = tree.permute(order)
    assert p.tokens == [10, 12, 14, 15, 11, 13]
    assert p.parents == [-1, 0, 1, 0, -1, 4]  # parents still come before children
    assert p.depths == [1, 2, 3, 2, 1, 2]
    assert DraftTree.chain([1, 2, 3], "s").depth_first() == [0, 1, 2]
    assert DraftTree().depth_first() == []
    assert tree.first_path() == [0, 2, 4]  # the first children from the root: a, c, e
    assert DraftTree.chain([1, 2, 3], "s").first_path() == [0, 1, 2] and DraftTree().first_path() == []
