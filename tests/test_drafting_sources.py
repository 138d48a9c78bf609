"""The editor's draft sources: learned source weights, the CACHE of this document's
outputs, the text after the cursor and the other open documents.

Behaviour, not speed: which source leads the draft, what enters the CACHE, what the
open-buffers index holds. Losslessness with these sources is in test_lossless.py.
"""

from __future__ import annotations

from fastcoder.config import DecodeConfig
from fastcoder.drafters import DraftState, FastCoderDrafter, Sources
from fastcoder.ngram import NgramIndex
from fastcoder.session import Session
from fastcoder.source_weights import SourceWeights, matched_depth
from fastcoder.sources import weight_of
from fastcoder.stats import GenStats
from fastcoder.trie import DraftTree


def state(tokens, cfg, session):
    return DraftState(list(tokens), len(tokens), cfg, session, GenStats(), None)


def test_matched_depth_and_decayed_factor():
    paths = {(1,), (1, 2), (1, 2, 3), (4,)}
    assert matched_depth(paths, [1, 2, 9]) == 2
    assert matched_depth(paths, [9]) == 0
    w = SourceWeights(decay=0.5, prior=1.0)
    assert w.factor("x") == 1.0  # never seen: the prior
    for _ in range(10):
        w.observe({"good": 4, "bad": 0})
    assert w.factor("good") > 2.9 and w.factor("bad") < 0.34  # (hits + prior) / (n + 1), n -> 2
    for _ in range(10):  # the past decays: a source that turns bad loses its weight
        w.observe({"good": 0})
    assert w.factor("good") < 0.6


def test_learned_weights_move_the_draft_to_the_source_that_gets_accepted():
    """Two sources disagree after the context [5, 6]; the one whose drafts the model
    accepted leads the next tree once weights are learned, not before."""
    cfg = DecodeConfig(use_cache=False, learn_weights=True, weight_decay=0.5, weighting="freq")
    ses = Session(cfg)
    buffers = NgramIndex(key_len=2)
    buffers.add([5, 6, 70, 71, 72])
    d = FastCoderDrafter(Sources(buffers=buffers), reference=[5, 6, 80, 81, 82, 5, 6, 80, 81, 82])
    st = state([1, 5, 6], cfg, ses)
    d.start(st)
    cfg_fixed = cfg.replace(learn_weights=False)
    assert d.draft(state([1, 5, 6], cfg_fixed, ses), 8).tokens[0] in (70, 80)
    for _ in range(6):  # the model keeps writing what the buffers source drafts
        tree = d.draft(st, 8)
        assert {"buffers", "reference"} <= set(d._offered)
        d.update(st, tree, [], [70, 71, 72])
        st.tokens = [1, 5, 6]  # same place again (the live context grows, irrelevant here)
    assert ses.weights.factor("buffers") > 2.0 > ses.weights.factor("reference")
    tree = d.draft(st, 8)
    assert tree.tokens[0] == 70 and tree.sources[0] in ("buffers", "context")


def test_short_outputs_enter_the_cache_and_draft_the_next_request():
    """An editor suggestion is shorter than a CACHE chunk; its tokens still go into the
    document's CACHE at the end of the generation, so the next request in the same
    place drafts them from the first sequence (cache_min_sequences 0)."""
    cfg = DecodeConfig(use_context=False, use_datastores=False, cache_min_sequences=0, cache_output_chunk=20)
    ses = Session(cfg)
    d = FastCoderDrafter(Sources())
    st = state([1, 2, 3], cfg, ses)
    d.start(st)
    st.tokens += [40, 41, 42]
    d.update(st, DraftTree(), [], [40, 41, 42])
    assert len(ses.cache) == 0  # fewer than cache_output_chunk tokens so far
    d.close()
    assert len(ses.cache) == 1
    d2 = FastCoderDrafter(Sources())
    st2 = state([9, 2, 3], cfg, ses)  # the user changed something earlier in the line
    d2.start(st2)
    tree = d2.draft(st2, 8)
    assert tree.tokens[:3] == [40, 41, 42] and tree.sources[0] == "cache"


def test_cache_is_exclusive_only_in_the_papers_setting():
    from fastcoder.datastore import TokenDatastore

    dc = TokenDatastore.build([[1, 2, 3, 4, 5]])
    for exclusive, searches in ((True, 0), (False, 1)):
        cfg = DecodeConfig(use_context=False, use_skip=False, cache_min_sequences=0, cache_exclusive=exclusive)
        ses = Session(cfg)
        ses.cache.add([1, 2, 30])
        d = FastCoderDrafter(Sources(dc=dc))
        st = state([0, 1, 2], cfg, ses)
        tree = d.draft(st, 8)
        assert st.stats.searches == searches
        assert (3 in tree.tokens) == (not exclusive) and 30 in tree.tokens


def test_paper_settings_are_selectable():
    paper = DecodeConfig.paper()
    assert (paper.cache_min_sequences, paper.cache_exclusive, paper.learn_weights) == (50, True, False)
    assert (weight_of(paper, "D_r"), weight_of(paper, "D_c"), paper.weighting, paper.context_recency) == (1.0, 1.0, "count", 1.0)
    assert paper.max_draft_tokens == 64 and not paper.use_context
    assert DecodeConfig.paper(max_new_tokens=7).max_new_tokens == 7


def test_open_buffers_index_other_documents_and_retokenize_only_changes(tiny_tokenizer):
    from lsp_server.buffers import OpenBuffers

    calls = []

    class Counting:
        def __getattr__(self, name):
            return getattr(tiny_tokenizer, name)

        def __call__(self, text, **kw):
            calls.append(text)
            return tiny_tokenizer(text, **kw)

    tok = Counting()
    ob = OpenBuffers()
    docs = {"a": (1, "def helper_one(x):\n    return x + 1\n"), "b": (1, "print('b')\n")}
    assert ob.source(tok, {"a": docs["a"]}, exclude="a") is None  # nothing else is open
    idx = ob.source(tok, docs, exclude="b")
    ids = tiny_tokenizer("def helper_one(x):\n    return x + 1\n", add_special_tokens=False)["input_ids"]
    r = idx.retrieve(ids[:4], max_depth=3)
    assert r and r.nodes[0][0][0] == ids[4]
    n = len(calls)
    assert ob.source(tok, docs, exclude="b") is idx and len(calls) == n  # unchanged: cached
    docs["b"] = (2, "print('b2')\n")  # the excluded document changes: nothing to redo
    assert ob.source(tok, docs, exclude="b") is idx and len(calls) == n
    docs["a"] = (2, "def helper_two(y):\n    return y\n")
    idx2 = ob.source(tok, docs, exclude="b")
    assert idx2 is not idx and len(calls) == n + 1


def test_a_one_token_suffix_still_drafts_by_default_and_longer_matches_lead():
    """Where no two-token suffix of the context occurs, the default drafter still
    drafts the continuations of the last token, from the live context and from a
    datastore (n_min 1); with n_min 2 (the old default) it drafts nothing there.
    A longer match still wins over a one-token one."""
    from fastcoder.datastore import TokenDatastore

    cfg = DecodeConfig(use_cache=False, learn_weights=False)
    assert cfg.n_min == 1
    ctx = [1, 3, 7, 8, 9, 4, 3]  # (4, 3) occurs nowhere before; 3 is followed by 7 once
    d = FastCoderDrafter(Sources())
    st = state(ctx, cfg, Session(cfg))
    d.start(st)
    tree = d.draft(st, 8)
    assert tree.tokens[:3] == [7, 8, 9] and tree.sources[0] == "context"
    old = cfg.replace(n_min=2)
    d_old = FastCoderDrafter(Sources())
    st_old = state(ctx, old, Session(old))
    d_old.start(st_old)
    assert len(d_old.draft(st_old, 8).tokens) == 0

    store = TokenDatastore.build([[50, 3, 60, 61], [52, 4, 3, 70, 71]])
    only_store = cfg.replace(use_context=False)
    d_store = FastCoderDrafter(Sources(dc=store))
    st_store = state([9, 3], only_store, Session(only_store))  # (9, 3) is not in the store
    d_store.start(st_store)
    assert paths(d_store.draft(st_store, 8)) == {(60, 61), (70, 71)}  # both continuations of 3
    st_long = state([9, 4, 3], only_store, Session(only_store))  # (4, 3) is in the store: only it
    d_store.start(st_long)
    assert paths(d_store.draft(st_long, 8)) == {(70, 71)}


def paths(tree: DraftTree) -> set[tuple[int, ...]]:
    """The root-to-leaf token paths of a draft tree."""
    leaves = set(range(len(tree))) - set(tree.parents)
    out = set()
    for i in leaves:
        path = []
        while i >= 0:
            path.append(tree.tokens[i])
            i = tree.parents[i]
        out.add(tuple(reversed(path)))
    return out


def test_the_live_context_and_reference_indexes_are_kept_across_a_documents_generations():
    """A keystroke's generation reuses the document's live-context index (cut back to
    the prompt's shared prefix: the last output and the tokens after the cursor go, the
    new ones come in) and the reference's when the text after the cursor is unchanged;
    every draft equals the one a fresh session gives."""
    cfg = DecodeConfig(use_datastores=False, use_cache=False, learn_weights=False)
    ses = Session(cfg)
    after = [70, 71, 72, 73, 74, 75]
    before = [1, 2, 3, 4, 5, 6, 7, 8, 9, 5, 6]
    held = {}
    for step, typed in enumerate([[], [7], [7, 8], [7, 8, 40]]):
        prompt = [100] + before + typed + [101] + after + [102]
        drafts = []
        for session in (ses, Session(cfg)):
            d = FastCoderDrafter(Sources(), reference=after)
            st = state(prompt, cfg, session)
            d.start(st)
            tree = d.draft(st, 16)
            drafts.append((tree.tokens, tree.sources))
            out = [5, 6, 7] if step % 2 else [8, 9]  # the generation's output grows the live context
            st.tokens += out
            d.update(st, DraftTree(), [], out)
            d.close()
        assert drafts[0] == drafts[1]
        if held:  # the same index objects, not rebuilt
            assert ses.source_state["context"] is held["context"] and ses.source_state["reference"] is held["reference"]
        held = dict(ses.source_state)
        assert held["context"].sequence(held["context"].last_id) == prompt + out
    d = FastCoderDrafter(Sources(), reference=after[1:])  # the text after the cursor changed
    d.start(state([100] + before + [101] + after[1:] + [102], cfg, ses))
    assert ses.source_state["reference"] is not held["reference"]


def test_the_source_gate_drops_a_source_that_costs_more_than_it_adds_and_asks_it_again():
    """At a GPU's step cost (4 ms) a source that costs 0.7 ms a search and never has an
    accepted token of its own (one no other source drafted) is dropped after MIN_OBS steps,
    asked at every PROBE_EVERY-th draft, and back once its probes show it pays; at a CPU's
    (100 ms) it is never dropped."""
    from fastcoder.source_weights import SourceGate

    def run(gate, step_s, slow_own, steps):
        for _ in range(steps):
            gate.next_draft()
            asked = {n: s for n, s in (("fast", 0.00005), ("slow", 0.0007)) if gate.asks(n)}
            own = {"fast": 1, "slow": slow_own}
            gate.observe(asked, {n: own[n] for n in asked}, step_s, 3)

    cpu = SourceGate()
    run(cpu, 0.100, 0, 100)
    assert not cpu.dropped
    gpu = SourceGate()
    run(gpu, 0.004, 0, SourceGate.MIN_OBS - 1)
    assert not gpu.dropped  # not before MIN_OBS observations
    run(gpu, 0.004, 0, 2)
    assert gpu.dropped == {"slow"} and gpu.loss("slow") > 0 > gpu.loss("fast")
    asked = []
    for _ in range(3 * SourceGate.PROBE_EVERY):
        gpu.next_draft()
        asked.append(gpu.asks("slow"))
    assert sum(asked) == 3 and gpu.asks("fast")
    run(gpu, 0.004, 2, 40 * SourceGate.PROBE_EVERY)  # it now adds 2 tokens a step: worth 8 ms
    assert not gpu.dropped
    gpu.clear()
    assert not gpu.dropped and gpu.loss("slow") is None
    assert SourceGate().loss("x") is None  # never seen


def test_the_source_gate_never_drops_two_sources_that_draft_the_same_tokens():
    """Each of two equal sources adds nothing beyond the other (no accepted token is its
    own): one is dropped, and then the other, asked alone, owns every token and stays."""
    from fastcoder.source_weights import SourceGate

    gate = SourceGate()
    for _ in range(200):
        gate.next_draft()
        asked = {n: 0.0005 for n in ("a", "b") if gate.asks(n)}
        gate.observe(asked, {n: 3 for n in asked} if len(asked) == 1 else {}, 0.004, 4)
        assert len(gate.dropped) <= 1
    assert len(gate.dropped) == 1


def test_the_drafter_stops_asking_a_slow_datastore_that_adds_nothing_at_a_gpus_step_cost():
    """Through FastCoderDrafter: a datastore that takes 2 ms a search and never drafts what
    is committed is asked at every draft while the step cost is unknown (no curve), with
    the gate off and where a step costs 1 s, and only at probe drafts where it costs 4 ms."""
    import time as _time

    from fastcoder.sources import DraftSource

    class Slow(DraftSource):  # a datastore: the in-memory sources are cheap and always asked
        name = "slow"
        datastore = True

        def __init__(self):
            self.calls = 0

        def propose(self, st, max_nodes):
            self.calls += 1
            _time.sleep(0.002)
            return None

    def drive(cfg, step_s, n=40):
        slow = Slow()
        buffers = NgramIndex(key_len=2)
        buffers.add([5, 6, 70, 71, 72] * 4)
        d = FastCoderDrafter(Sources([slow], buffers=buffers))
        st = state([1, 5, 6], cfg, Session(cfg))
        d.start(st)
        for _ in range(n):
            st.step_s = step_s
            tree = d.draft(st, 8)
            d.update(st, tree, [], [70, 71, 72])
            st.tokens = [1, 5, 6]
        return slow.calls

    cfg = DecodeConfig(use_cache=False, use_missing_table=False)  # (the same context at every draft)
    assert drive(cfg, None) == 40  # no curve: no gate
    assert drive(cfg.replace(source_gate=False), 0.004) == 40
    gated = drive(cfg, 0.004)
    assert gated <= 10 + 40 // 8 + 1, gated
    assert drive(cfg, 1.0) == 40  # a slow CPU's step: 2 ms is below MIN_LOSS of it


def test_a_new_session_starts_from_the_gate_of_the_sessions_before_it():
    """The server's registry keeps one parent gate: what one document learned (a datastore
    that does not pay here) a new document starts with, and its own steps feed it back."""
    from fastcoder.source_weights import SourceGate

    parent = SourceGate()
    first = Session(DecodeConfig(), gate_parent=parent).gate
    for _ in range(3 * SourceGate.MIN_OBS):
        first.next_draft()
        asked = {n: s for n, s in (("D_r", 0.00005), ("D_c", 0.0007)) if first.asks(n)}
        first.observe(asked, {"D_r": 1} if "D_r" in asked else {}, 0.004, 3)
    assert first.dropped == {"D_c"} and parent.dropped == {"D_c"}
    second = Session(DecodeConfig(), gate_parent=parent).gate
    assert second.dropped == {"D_c"} and second.loss("D_c") > 0  # from its first draft
    alone = Session(DecodeConfig()).gate
    assert not alone.dropped and alone.loss("D_c") is None
    second.clear()  # (a session reset) back to the parent's figures, not to nothing
    assert second.dropped == {"D_c"}
