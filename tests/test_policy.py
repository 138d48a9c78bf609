"""FastCoder retrieval policy: skip tokens, missing table, CACHE activation and bounds."""

from __future__ import annotations

from fastcoder.config import DecodeConfig
from fastcoder.datastore import TokenDatastore
from fastcoder.drafters import DraftState, FastCoderDrafter, Sources
from fastcoder.session import Session
from fastcoder.stats import GenStats
from fastcoder.tokens import TokenInfo


def state(tokens, cfg, session, tok):
    return DraftState(list(tokens), len(tokens), cfg, session, GenStats(), TokenInfo.for_tokenizer(tok))


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_token_info_line_position(tiny_tokenizer):
    info = TokenInfo.for_tokenizer(tiny_tokenizer)
    assert info.line_position(ids(tiny_tokenizer, "x = 1\n")) == 0
    assert info.line_position(ids(tiny_tokenizer, "x = 1\n    ")) == 0
    assert info.line_position(ids(tiny_tokenizer, "x = 1\n    return")) == 1


def test_skip_tokens_follow_p_and_are_reproducible(tiny_tokenizer):
    text = "def f(x):\n    return x\n"
    dc = TokenDatastore.build([ids(tiny_tokenizer, text * 3)])
    ctx = ids(tiny_tokenizer, "def f(x):\n")  # next token starts a line: a skip token
    for p, expect_skipped in ((0.0, 20), (1.0, 0)):
        cfg = DecodeConfig(use_skip=True, skip_probability=p, use_context=False, use_missing_table=False)
        ses = Session(cfg)
        d = FastCoderDrafter(Sources(dc=dc))
        st = state(ctx, cfg, ses, tiny_tokenizer)
        d.start(st)
        for _ in range(20):
            d.draft(st, 8)
        assert st.stats.skipped_retrievals == expect_skipped
        assert st.stats.searches == 20 - expect_skipped

    def pattern(seed):
        cfg = DecodeConfig(use_skip=True, skip_probability=0.5, seed=seed, use_context=False, use_missing_table=False)
        ses = Session(cfg)
        d = FastCoderDrafter(Sources(dc=dc))
        st = state(ctx, cfg, ses, tiny_tokenizer)
        out = []
        for _ in range(30):
            before = st.stats.skipped_retrievals
            d.draft(st, 8)
            out.append(st.stats.skipped_retrievals - before)
        return out

    assert pattern(3) == pattern(3)
    assert 0 < sum(pattern(3)) < 30


def test_missing_table_prevents_repeated_searches_and_is_bounded(tiny_tokenizer):
    dc = TokenDatastore.build([[1, 2, 3, 4]])
    cfg = DecodeConfig(use_context=False, use_skip=False, missing_table_size=2)
    ses = Session(cfg)
    d = FastCoderDrafter(Sources(dc=dc))
    st = state([9, 9, 8, 7], cfg, ses, tiny_tokenizer)
    assert len(d.draft(st, 8)) == 0
    assert st.stats.searches == 1 and len(ses.missing) == 1
    d.draft(st, 8)
    assert st.stats.searches == 1 and st.stats.missing_hits == 1
    for ctx in ([5, 5], [6, 6], [7, 7]):
        st.tokens = list(ctx)
        d.draft(st, 8)
    assert len(ses.missing) == 2  # LRU bound


def test_cache_searched_first_only_once_it_holds_l_sequences(tiny_tokenizer):
    dc = TokenDatastore.build([[1, 2, 3, 4, 5]])
    cfg = DecodeConfig(use_context=False, use_skip=False, cache_min_sequences=3, cache_exclusive=True)
    ses = Session(cfg)
    ses.cache.add([1, 2, 30, 40])
    d = FastCoderDrafter(Sources(dc=dc))
    st = state([0, 1, 2], cfg, ses, tiny_tokenizer)
    tree = d.draft(st, 8)
    assert st.stats.cache_hits == 0 and st.stats.searches == 1 and tree.tokens[0] == 3
    ses.cache.add([7, 7])
    ses.cache.add([8, 8])
    tree = d.draft(st, 8)
    assert st.stats.cache_hits == 1 and st.stats.searches == 1  # datastores not searched
    assert tree.tokens[:2] == [30, 40] and tree.sources[0] == "cache"


def test_cache_collects_accepted_drafts_and_output_chunks(tiny_tokenizer):
    cfg = DecodeConfig(cache_output_chunk=5, cache_max_sequences=4)
    ses = Session(cfg)
    d = FastCoderDrafter(Sources())
    st = state([1, 2, 3], cfg, ses, tiny_tokenizer)
    d.start(st)
    from fastcoder.trie import DraftTree

    tree = DraftTree.chain([4, 5], "D_c")
    st.tokens += [4, 5, 6]
    d.update(st, tree, [0, 1], [4, 5, 6])
    assert len(ses.cache) == 1  # the verified retrieved sequence
    assert dict(ses.cache.retrieve([2, 3], max_depth=2).nodes)[(4, 5)] == 1
    for i in range(20):
        st.tokens += [100 + i]
        d.update(st, DraftTree(), [], [100 + i])
    assert len(ses.cache) == 4  # bounded
