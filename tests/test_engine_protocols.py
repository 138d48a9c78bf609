"""The engine's three protocols, end to end on the tiny models:

- a draft source is one module: a source registered from this test alone drafts and is
  counted in ``accepted_by_source`` and the server's ``acceptedBySource``;
- one decode loop: the benchmark's simulator (the real loop over a replay verifier of
  the recorded AR output) agrees with the real loop token for token and step for step;
- stops in the engine: stop ids end the output; stop detection decodes only new text
  (a 4,096-token output decodes a small multiple of its characters, not its square).
"""

from __future__ import annotations

import random
import time
import sysconfig
from pathlib import Path

import pytest

from fastcoder.config import DecodeConfig
from fastcoder.datastore import TokenDatastore
from fastcoder.decode import generate
from fastcoder.drafters import Drafter, FastCoderDrafter, Sources
from fastcoder.engine import Engine
from fastcoder.budget import DraftCost
from fastcoder.replay import ReplayVerifier
from fastcoder.search import Retrieval
from fastcoder.session import DraftState, Session
from fastcoder.sources import DraftSource, register, unregister
from fastcoder.stats import GenStats
from fastcoder.stops import StopStrings, any_of, block_end, control_chars, loop, runs_into


@pytest.fixture(scope="module")
def engine(tiny_model, tiny_tokenizer):
    return Engine(tiny_model, tiny_tokenizer, name="tiny")


def prompt_of(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


PROMPT = "def pairs(items):\n    out = []\n    for i, x in enumerate(items):\n"


# --------------------------------------------------------------------------------------
# a draft source is one module and one registration
# --------------------------------------------------------------------------------------


def test_a_source_registered_from_a_test_drafts_and_is_counted(engine):
    from lsp_server.metrics import ServerMetrics

    prompt = prompt_of(engine.tokenizer, PROMPT)
    ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=30)).tokens
    full = prompt + ar

    class Oracle(DraftSource):
        """Knows the greedy output: proposes its next 6 tokens."""

        name = "oracle"

        def propose(self, st, max_nodes):
            n = len(st.tokens)
            nxt = full[n : n + 6] if st.tokens == full[:n] else []
            return Retrieval(len(nxt), [(tuple(nxt[: i + 1]), 1) for i in range(len(nxt))], 1) if nxt else None

    register(Oracle)
    try:
        cfg = DecodeConfig(method="fastcoder", max_new_tokens=30, max_draft_tokens=8, use_cache=False)
        st = DraftState(list(prompt), len(prompt), cfg, Session(cfg), GenStats())
        tree = FastCoderDrafter(Sources()).draft(st, 8)
        assert "oracle" in tree.sources  # in the drafts
        gen = engine.generate(prompt, cfg)
    finally:
        unregister("oracle")
    assert gen.tokens == ar  # only drafts: the text is AR's
    assert gen.stats.accepted_by_source["oracle"] >= len(ar) // 2
    metrics = ServerMetrics()
    metrics.generation(gen.stats, "completion")
    assert metrics.to_json()["last"]["acceptedBySource"]["oracle"] == gen.stats.accepted_by_source["oracle"]
    # unregistered: gone from the drafts
    assert "oracle" not in FastCoderDrafter(Sources()).draft(DraftState(list(prompt), len(prompt), cfg, Session(cfg), GenStats()), 8).sources


def test_source_weights_by_name_and_old_keys():
    from fastcoder.sources import weight_of

    cfg = DecodeConfig.from_dict({"alpha": 2.0, "buffersWeight": 0, "sourceWeights": {"context": 0.5}})
    assert cfg.source_weights == {"context": 0.5, "D_r": 2.0, "buffers": 0.0}
    assert (weight_of(cfg, "D_r"), weight_of(cfg, "D_c"), weight_of(cfg, "buffers"), weight_of(cfg, "context")) == (2.0, 1.0, 0.0, 0.5)
    s = Sources(dr=object(), buffers=None)
    assert [x.name for x in s] == ["D_r"] and s.dc is None
    s.dc = TokenDatastore.build([[1, 2, 3]])
    assert [x.name for x in s] == ["D_r", "D_c"] and s.get("D_c").datastore


# --------------------------------------------------------------------------------------
# one decode loop: the simulator is the real loop over recorded tokens
# --------------------------------------------------------------------------------------


def _record(prompt, gen, indent):
    return {"id": "t", "task": {"group": None, "indent": indent}, "prompt_ids": list(prompt),
            "results": {"ar": {"tokens": list(gen.tokens), "stats": gen.stats.to_dict()}}}  # fmt: skip


def _steps(st):
    return (st.forward_steps, st.draft_sizes, st.accept_lengths, dict(st.accepted_by_source), st.stop_reason)


@pytest.mark.parametrize("method,budget", [("fastcoder", None), ("fastcoder", 16), ("rest", 8), ("pld", None), ("reuse", 16)])
def test_simulator_and_real_loop_agree_step_for_step(engine, method, budget):
    from fastcoder_bench.suite.simulate import replay_task

    tok = engine.tokenizer
    rng = random.Random(7)
    for indent, text in ((4, PROMPT + "        "), (0, "import os\n\n"), (8, "class A:\n    def f(self):\n")):
        prompt = prompt_of(tok, text)
        ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=48), stop_fn=block_end(indent, check_first_line=True))
        full = prompt + ar.tokens
        # datastores and a reference from pieces of the output: drafts partly right
        pieces = [full[i : i + rng.randint(3, 12)] for i in range(0, len(full), 5)]
        dc = TokenDatastore.build(pieces[::2] + [[rng.randrange(len(tok)) for _ in range(20)]])
        dr = TokenDatastore.build(pieces[1::2])
        # (the source gate decides on measured search times: off, as the drafting cost is fixed;
        # token recycling drafts from the model's rows, which a recording does not hold: off)
        cfg = DecodeConfig(method=method, max_new_tokens=48, max_draft_tokens=budget, source_gate=False, recycle_k=0)
        reference = ar.tokens[2:30] if method in ("reuse", "fastcoder") else None
        rule = block_end(indent, check_first_line=True)
        # the adaptive budget sizes its requests by the measured drafting time: both loops
        # get the same drafting-cost model, so their steps depend on nothing timed
        sessions = [Session(cfg), Session(cfg)]
        for s in sessions:
            s.draft_cost = DraftCost(fixed=(2e-4, 2e-5))
        real = engine.generate(prompt, cfg, session=sessions[0], sources=Sources(dr=dr, dc=dc), reference=reference, stop_fn=rule)
        assert real.tokens == ar.tokens
        curve = engine.cost_curve() if budget is None else None
        sim = replay_task(_record(prompt, ar, indent), cfg, Sources(dr=dr, dc=dc), tok, curve, sessions[1],
                          max_nodes=engine.verifier.max_nodes, reference=reference)  # fmt: skip
        assert sim.tokens == real.tokens and sim.text == real.text
        assert _steps(sim.stats) == _steps(real.stats)


def test_simulate_replay_counts_the_loops_steps(engine):
    from fastcoder_bench.suite.simulate import replay

    tok = engine.tokenizer
    prompt = prompt_of(tok, PROMPT)
    ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=40), stop_fn=block_end(8, check_first_line=True))
    cfg = DecodeConfig(method="pld", max_new_tokens=40)
    real = engine.generate(prompt, cfg, stop_fn=block_end(8, check_first_line=True))
    res = replay([_record(prompt, ar, 8)], "pld", cfg, lambda rec: Sources(), tok, None)
    assert res.steps == real.stats.forward_steps and res.tokens == len(ar.tokens) - 1


# --------------------------------------------------------------------------------------
# stops in the engine
# --------------------------------------------------------------------------------------


def test_drafts_hold_only_what_could_be_committed(engine):
    # a drafter that proposes 12 tokens with a stop id third: nothing after the stop id
    # and nothing past max_new_tokens reaches the verifier (a 2-token answer left must
    # not pay for a 16-row step)
    stop = engine.tokenizer.convert_tokens_to_ids("<|fim_suffix|>")

    class Chain(Drafter):
        name = "chain"
        drafts = True
        adaptive_budget = False

        def draft(self, st, max_nodes):
            return DraftTree.chain([11, 12, stop] + list(range(20, 29)), "chain")

    from fastcoder.trie import DraftTree

    prompt = prompt_of(engine.tokenizer, PROMPT)
    for max_new, most in ((30, 3), (3, 1)):
        cfg = DecodeConfig(method="ar", max_new_tokens=max_new, max_draft_tokens=16)
        gen = generate(engine.verifier, engine.tokenizer, Chain(), prompt, cfg, stop_ids={stop})
        assert gen.tokens == engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=max_new), stop_ids={stop}).tokens
        assert gen.stats.draft_sizes and max(gen.stats.draft_sizes) <= most
    tree = DraftTree([1, 2, 3, 4, 5], [-1, 0, 1, -1, 3], [1, 2, 3, 1, 2], ["s"] * 5, [0.9] * 5)
    cut = tree.limit_depth(5, {2})
    assert cut.tokens == [1, 2, 4, 5] and cut.parents == [-1, 0, -1, 2]
    assert tree.limit_depth(1).tokens == [1, 4] and tree.limit_depth(5) is tree


def test_nothing_is_drafted_below_a_newline_when_a_newline_ends_the_output(engine):
    """A single-line stop rule: a draft node whose token holds a newline stays (it ends
    the output) but nothing below it reaches the verifier; a block rule keeps it all;
    a rule that judges only the text after a healed prefix prunes once that is out.
    The output is the same either way."""
    from fastcoder.stops import StopStrings, block_end
    from fastcoder.tokens import TokenInfo
    from fastcoder.trie import DraftTree

    info = TokenInfo.for_tokenizer(engine.tokenizer)
    newline = int(next(i for i in range(len(info.has_newline)) if info.has_newline[i]))
    plain = [int(i) for i in range(100, 400) if not info.has_newline[i]][:10]

    class Chain(Drafter):
        name = "chain"
        drafts = True
        adaptive_budget = False

        def draft(self, st, max_nodes):
            return DraftTree.chain(plain[:2] + [newline] + plain[2:], "chain")

    prompt = prompt_of(engine.tokenizer, PROMPT)
    cfg = DecodeConfig(method="ar", max_new_tokens=20, max_draft_tokens=16)
    for rule, most in ((block_end(0, single_line=True), 3), (StopStrings(["\n"]), 3), (block_end(4), 11)):
        gen = generate(engine.verifier, engine.tokenizer, Chain(), prompt, cfg, stop_fn=rule)
        ref = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=20), stop_fn=rule)
        assert gen.tokens == ref.tokens and gen.text == ref.text
        assert gen.stats.draft_sizes and max(gen.stats.draft_sizes) == most, (rule, gen.stats.draft_sizes)
    off = DecodeConfig(method="ar", max_new_tokens=20, max_draft_tokens=16, prune_at_line_end=False)  # the ablation
    gen = generate(engine.verifier, engine.tokenizer, Chain(), prompt, off, stop_fn=block_end(0, single_line=True))
    assert max(gen.stats.draft_sizes) == 11
    import numpy as np

    from fastcoder.decode import _EndingIds

    ending = _EndingIds(frozenset({5}), info.has_newline)  # drafters may hand numpy integers
    assert np.int64(newline) in ending and newline in ending and 5 in ending and np.int64(plain[0]) not in ending
    healed = block_end(0, single_line=True).after(10**6).matcher()  # its prefix never comes out
    assert not healed.newline_ends() and block_end(0, single_line=True).after(0).matcher().newline_ends()


def test_stop_ids_end_the_output_before_them(engine):
    prompt = prompt_of(engine.tokenizer, PROMPT)
    ar = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=30))
    stop = ar.tokens[10]
    first = ar.tokens.index(stop)
    for method in ("ar", "fastcoder", "pld"):
        gen = engine.generate(prompt, DecodeConfig(method=method, max_new_tokens=30), stop_ids={stop})
        assert gen.tokens == ar.tokens[:first] and gen.stats.stop_reason == "stop_id"
        assert gen.text == engine.tokenizer.decode(ar.tokens[:first], skip_special_tokens=True)


class CountingTokenizer:
    """The tiny tokenizer, counting the characters every decode call returns."""

    def __init__(self, tok) -> None:
        self.tok = tok
        self.chars = 0
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self.tok, name)

    def __len__(self) -> int:
        return len(self.tok)

    def decode(self, ids, **kw):
        text = self.tok.decode(ids, **kw)
        self.chars += len(text)
        self.calls += 1
        return text


def test_stop_detection_is_linear_in_the_output(tiny_tokenizer):
    """A 4,096-token output with stop strings and line rules that never fire: the loop
    decodes a small multiple of the output's characters (re-decoding the whole output
    at every token, as before, decoded ~2,000 times as many)."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    text = "".join((lib / n).read_text(encoding="utf-8") for n in ("textwrap.py", "shlex.py", "fnmatch.py", "heapq.py"))
    ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"][:4096]
    assert len(ids) == 4096
    tok = CountingTokenizer(tiny_tokenizer)
    cfg = DecodeConfig(method="ar", max_new_tokens=4096, stop_strings=("\x00never",))
    rule = any_of(block_end(-1, check_first_line=True), runs_into("never_this_line()", check_first_line=True))
    gen = generate(ReplayVerifier(ids, eos=0), tok, Drafter(), [1, 2, 3], cfg, stop_fn=rule)
    assert gen.tokens == ids and gen.stats.stop_reason == "max_new_tokens"
    expected = tiny_tokenizer.decode(ids, skip_special_tokens=True)
    assert gen.text == expected
    assert tok.chars <= 6 * len(expected), (tok.chars, len(expected))
    assert tok.calls <= 2 * len(ids) + 2


def test_incremental_rules_cut_where_whole_text_rules_cut(tiny_tokenizer):
    """Fed token by token inside the loop, the rules stop at the same token and cut at
    the same character as on the whole text decoded after every token (as before, and
    as the benchmark's transformers peer still does)."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    text = (lib / "textwrap.py").read_text(encoding="utf-8")
    rng = random.Random(3)
    for _ in range(30):
        start = rng.randrange(len(text) - 2000)
        chunk = text[start : start + 1500]
        ids = tiny_tokenizer(chunk, add_special_tokens=False)["input_ids"]
        if rng.random() < 0.4:  # random ids: byte tokens, incomplete characters (U+FFFD in a whole decode)
            ids = [rng.randrange(4, len(tiny_tokenizer)) for _ in range(300)]
        elif rng.random() < 0.3:  # a loop: some lines written again and again
            lines = chunk.split("\n")
            ids = tiny_tokenizer("\n".join(lines[:3] + lines[3 : 3 + rng.randint(1, 3)] * 5), add_special_tokens=False)["input_ids"]
        indent = rng.choice([0, 4, 8])
        rules = [block_end(indent, check_first_line=rng.random() < 0.5), block_end(indent, single_line=True),
                 runs_into(rng.choice(chunk.split("\n")), check_first_line=False), StopStrings([chunk[700:703]]), loop(),
                 control_chars()]  # fmt: skip
        rule = any_of(*rng.sample(rules, rng.randint(1, 3)))
        decoded = tiny_tokenizer.decode(ids, skip_special_tokens=True)
        # the first token after which the whole-text rule cuts
        want_n, want_cut = len(ids), None
        for n in range(1, len(ids) + 1):
            cut = rule(tiny_tokenizer.decode(ids[:n], skip_special_tokens=True))
            if cut is not None:
                want_n, want_cut = n, cut
                break
        gen = generate(ReplayVerifier(ids, eos=0), tiny_tokenizer, Drafter(), [1, 2], DecodeConfig(method="ar", max_new_tokens=len(ids)),
                       stop_fn=rule)  # fmt: skip
        assert gen.tokens == ids[:want_n]
        full = tiny_tokenizer.decode(ids[:want_n], skip_special_tokens=True)
        assert gen.text == (full[:want_cut] if want_cut is not None else full)
        assert decoded.startswith(gen.text) or "\ufffd" in decoded


def test_replay_verifier_walks_as_the_real_one_with_exact_paths():
    from fastcoder.replay import ReplayVerifier
    from fastcoder.trie import DraftTree

    # root -> 5 (first child) -> 6; root -> 7 (side branch) -> 8; the recorded output is 7 8 9
    tree = DraftTree([5, 7, 6, 8], [-1, -1, 0, 1], [1, 1, 2, 2], ["s"] * 4, [1.0] * 4)
    loose = ReplayVerifier([1, 7, 8, 9], eos=0)
    loose.prefill(None, [3])
    step = loose.step(None, 1, tree)
    assert (step.accepted, step.bonus) == ([1, 3], 9)
    exact = ReplayVerifier([1, 7, 8, 9], eos=0, exact_paths=True)
    exact.prefill(None, [3])
    step = exact.step(None, 1, tree)
    assert (step.accepted, step.bonus) == ([], 7)  # off the path of first children: its token is the bonus
    step = exact.step(None, 7, DraftTree.chain([8, 9], "s"))
    assert (step.accepted, step.bonus) == ([0, 1], 0)


@pytest.mark.parametrize("method", ["ar", "fastcoder"])
def test_a_generation_run_between_the_steps_of_another_changes_neither(engine, tiny_tokenizer, method):
    """The server answers the completions asked during a function body between the body's
    steps (``on_step``): each with its own session, on the same model and verifier. Both
    outputs equal the ones generated alone (fp32), the inner generation's seconds are the
    outer's ``yielded_s``, outside its decode time and its time budget."""
    cfg = DecodeConfig(method=method, max_new_tokens=40)
    outer_prompt = prompt_of(tiny_tokenizer, PROMPT)
    inner_prompt = prompt_of(tiny_tokenizer, "import os\n\ndef walk(root):\n    for name in os.listdir(root):\n")
    alone_outer = engine.generate(outer_prompt, cfg, session=Session(cfg)).tokens
    alone_inner = engine.generate(inner_prompt, cfg, session=Session(cfg)).tokens
    inner_session = Session(cfg)
    engine.generate(inner_prompt[:10], cfg, session=inner_session)  # a document's session, with some cache
    inner: list[list[int]] = []

    def between(_committed, stats):
        if len(inner) < 3:
            t0 = time.perf_counter()
            inner.append(engine.generate(inner_prompt, cfg, session=inner_session).tokens)
            stats.yielded_s += time.perf_counter() - t0

    gen = engine.generate(outer_prompt, cfg, session=Session(cfg), on_step=between)
    assert gen.tokens == alone_outer
    assert inner and all(t == alone_inner for t in inner)
    assert gen.stats.yielded_s > 0 and gen.stats.decode_s > 0
    assert gen.stats.decode_s <= gen.stats.total_s - gen.stats.yielded_s


def test_time_spent_between_the_steps_does_not_count_against_the_budget(engine, tiny_tokenizer):
    cfg = DecodeConfig(method="ar", max_new_tokens=20, time_budget_s=2.0)
    prompt = prompt_of(tiny_tokenizer, PROMPT)
    slept: list[float] = []

    def between(_committed, stats):
        if not slept:
            time.sleep(2.5)  # another job, longer than the whole budget
            slept.append(2.5)
            stats.yielded_s += 2.5

    gen = engine.generate(prompt, cfg, session=Session(cfg), on_step=between)
    assert slept and gen.stats.stop_reason == "max_new_tokens" and len(gen.tokens) == 20
