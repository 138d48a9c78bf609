"""Code edits (fastcoder/edit.py, `fastcoder edit`) and the `reuse` drafter.

Lossless: with references that overlap the AR output in random ways (pieces of it,
reordered, repeated, mutated, mixed with junk), `reuse` yields exactly the AR tokens
(fp32, tiny random models). Re-sync: the nearest following occurrence. Edits: prompt
building (chat template and the plain fallback), fence handling, line endings, and
the CLI's clear errors.
"""

from __future__ import annotations

import json
import logging
import random
import threading

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import EDIT_ANSWER
from fastcoder_cli.main import main
from fastcoder.config import DecodeConfig
from fastcoder.drafters import DraftState, ReuseDrafter, Sources, resync
from fastcoder.edit import (
    build_edit_prompt,
    choose_fence,
    edit_code,
    edit_reference,
    edit_stop_fn,
    finish_edit,
    select_lines,
    split_lines,
    strip_fences,
)
from fastcoder.engine import Engine
from fastcoder.errors import FastCoderError
from fastcoder.session import Session
from fastcoder.stats import GenStats

N_NEW = 40

SNIPPET = '''def shorten(text, width, **kwargs):
    """Collapse and truncate the given text to fit in the given width."""
    w = TextWrapper(width=width, max_lines=1, **kwargs)
    return w.fill(' '.join(text.strip().split()))
'''


@pytest.fixture(scope="module")
def engine(tiny_model, tiny_tokenizer):
    return Engine(tiny_model, tiny_tokenizer, name="tiny")


def ar_output(engine, prompt, n=N_NEW):
    return engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=n)).tokens


def overlapping_reference(ar: list[int], rng: random.Random, vocab: int) -> list[int]:
    """An "original" that partly overlaps the AR output: slices of it (in order or
    not, some twice), point mutations, and junk between them."""
    ref: list[int] = []
    i = 0
    while i < len(ar):
        op = rng.random()
        if op < 0.55:  # keep a run of the output
            j = min(len(ar), i + rng.randint(1, 25))
            ref += ar[i:j]
            i = j
        elif op < 0.7:  # the edit replaced something: junk in the original
            ref += [rng.randrange(vocab) for _ in range(rng.randint(1, 6))]
            i += rng.randint(0, 4)
        elif op < 0.8:  # the edit inserted something: the original lacks it
            i += rng.randint(1, 5)
        elif op < 0.9:  # a repeated block (an earlier or later piece of the output)
            a = rng.randrange(len(ar))
            ref += ar[a : a + rng.randint(2, 12)]
        else:  # a mutated copy of what follows
            piece = ar[i : i + rng.randint(2, 10)]
            if piece:
                piece[rng.randrange(len(piece))] = rng.randrange(vocab)
            ref += piece
    if rng.random() < 0.3:
        ref += [rng.randrange(vocab) for _ in range(rng.randint(1, 10))]
    return ref


# ----------------------------------------------------------------------------- lossless


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    seed=st.integers(0, 100_000),
    prompt_len=st.integers(1, 30),
    reuse_max=st.sampled_from([1, 3, 16, 96]),
    resync_n=st.integers(1, 6),
    budget=st.sampled_from([None, 0, 4, 16]),
)
def test_reuse_equals_ar_with_overlapping_references(engine, seed, prompt_len, reuse_max, resync_n, budget):
    rng = random.Random(seed)
    vocab = len(engine.tokenizer)
    prompt = [rng.randrange(4, vocab) for _ in range(prompt_len)]
    ar = ar_output(engine, prompt)
    reference = overlapping_reference(ar, rng, vocab)
    cfg = DecodeConfig(
        method="reuse",
        max_new_tokens=N_NEW,
        max_draft_tokens=budget,
        reuse_max_tokens=reuse_max,
        reuse_resync_tokens=resync_n,
        cache_min_sequences=rng.choice([0, 50]),
        seed=seed,
    )
    session = Session(cfg)
    for _ in range(2):  # the second run reuses the session's KV prefix and CACHE
        g = engine.generate(prompt, cfg, session=session, reference=reference)
        assert g.tokens == ar, g.stats.summary()
        assert g.stats.new_tokens == len(ar)


def test_reuse_cuts_where_ar_stops(engine):
    """A stop predicate met in the middle of a long accepted chain cuts at the same token."""
    vocab = len(engine.tokenizer)
    rng = random.Random(3)
    prompt = [rng.randrange(4, vocab) for _ in range(12)]
    ar = ar_output(engine, prompt, 60)
    for cut in (5, 23, 41):

        def stop(text: str, cut=cut) -> int | None:
            return len(text) if len(text) >= cut else None

        a = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=60), stop_fn=stop)
        r = engine.generate(prompt, DecodeConfig(method="reuse", max_new_tokens=60), reference=ar, stop_fn=stop)
        assert r.tokens == a.tokens and r.text == a.text
        assert r.stats.stop_reason == a.stats.stop_reason


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), instruction=st.sampled_from(["add type hints", "rename w to wrapper", "add a docstring"]))
def test_edit_code_reuse_equals_ar(engine, seed, instruction):
    """The whole edit path (prompt, reference, fence stop, post-processing) is lossless."""
    rng = random.Random(seed)
    lines = SNIPPET.splitlines(keepends=True)
    a = rng.randrange(len(lines))
    code = "".join(lines[a : a + rng.randint(1, len(lines))])
    if not code.strip():
        code = SNIPPET
    res = {m: edit_code(engine, code, instruction, method=m, max_new_tokens=30) for m in ("ar", "reuse", "fastcoder")}
    assert res["reuse"].generation.tokens == res["ar"].generation.tokens
    assert res["reuse"].text == res["ar"].text == res["fastcoder"].text


# ----------------------------------------------------------------------------- re-sync


def test_resync_picks_the_nearest_following_occurrence():
    ref = [1, 2, 3, 9, 1, 2, 3, 8, 1, 2, 3, 7]
    out = [5, 1, 2, 3]
    assert resync(ref, out, 0, 3) == 3
    assert resync(ref, out, 1, 3) == 7
    assert resync(ref, out, 4, 3) == 7
    assert resync(ref, out, 5, 3) == 11
    assert resync(ref, out, 9, 3) is None
    assert resync(ref, out, 0, 4) is None  # 5 1 2 3 is not in ref
    assert resync(ref, [3, 8], 0, 4) == 8  # fewer output tokens than n: all of them
    assert resync(ref, [], 0, 4) is None
    assert resync(ref, [7], 0, 1) == 12  # at the very end: nothing left to draft
    assert resync([], [1], 0, 1) is None


def test_resync_agrees_with_brute_force():
    rng = random.Random(0)
    for _ in range(300):
        ref = [rng.randrange(3) for _ in range(rng.randint(0, 30))]
        out = [rng.randrange(3) for _ in range(rng.randint(0, 6))]
        after, n = rng.randint(0, 32), rng.randint(1, 5)
        m = min(n, len(out))
        want = None
        if m:
            hits = [i + m for i in range(after, len(ref) - m + 1) if ref[i : i + m] == out[-m:]]
            want = hits[0] if hits else None
        assert resync(ref, out, after, n) == want


def _state(tokens: list[int], n_prompt: int) -> DraftState:
    cfg = DecodeConfig(method="reuse", use_cache=False, reuse_resync_tokens=2)
    return DraftState(list(tokens), n_prompt, cfg, Session(cfg), GenStats())


def _step(drafter: ReuseDrafter, state: DraftState, new: list[int]) -> None:
    tree = drafter.draft(state, 16)
    acc = []
    for i, t in enumerate(new):  # a chain: accepted while it agrees
        if i < len(tree) and tree.tokens[i] == t and (not acc or tree.parents[i] == acc[-1]):
            acc.append(i)
        else:
            break
    state.tokens.extend(new)
    drafter.update(state, tree, acc, new)


def test_reuse_drafter_follows_the_reference_and_resyncs_after_an_insertion():
    prompt = [900, 901]
    ref = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    st_ = _state(prompt, len(prompt))
    d = ReuseDrafter(ref, Sources(), start=0)
    d.start(st_)
    assert d.draft(st_, 16).tokens == ref
    _step(d, st_, [10, 11, 12])
    assert d.pos == 3
    _step(d, st_, [77, 78])  # an insertion: out of sync
    assert d.pos is None
    _step(d, st_, [13, 14])  # the output is back in the original
    assert d.pos == 5 and d.draft(st_, 16).tokens == ref[5:]


def test_reuse_drafter_resyncs_after_the_last_synced_position():
    """Regression (fixed in c69122d): out of sync, the re-sync used to search from the
    start of the reference, jumping back to an earlier copy in repetitive code."""
    prompt = [900]
    # the same line twice; the edit replaces the token after the first copy
    ref = [10, 11, 12, 13, 50, 10, 11, 12, 13, 60, 61]
    st_ = _state(prompt, len(prompt))
    d = ReuseDrafter(ref, Sources(), start=0)
    d.start(st_)
    _step(d, st_, [10, 11, 12, 13, 50])
    assert d.pos == 5
    _step(d, st_, [99])  # the edit: no longer in sync
    assert d.pos is None
    _step(d, st_, [10, 11, 12, 13])  # the second copy of the line
    assert d.pos == 9  # nearest occurrence after position 5 (not 4: the first copy)


def test_reuse_first_chain_is_aligned_after_the_prefill_token(engine):
    """Regression (fixed in c69122d): the prefill's token was never shown to the
    drafter, so the first chain started at ref[0] while the output already held it:
    one wasted full-length verification per edit."""
    vocab = len(engine.tokenizer)
    rng = random.Random(1)
    prompt = [rng.randrange(4, vocab) for _ in range(20)]
    ar = ar_output(engine, prompt, 60)
    g = engine.generate(prompt, DecodeConfig(method="reuse", max_new_tokens=60, max_draft_tokens=16), reference=ar)
    assert g.tokens == ar
    assert g.stats.forward_steps == 1  # the whole output in one verification


def test_reuse_acceptance_is_high_with_repeats_in_the_reference(engine):
    """A duplicated block, an insertion and a deletion in the original: the reference
    still supplies most tokens, re-syncing to the right copy each time."""
    vocab = len(engine.tokenizer)
    rng = random.Random(11)
    while True:  # a prompt whose output does not end early at EOS
        prompt = [rng.randrange(4, vocab) for _ in range(16)]
        ar = ar_output(engine, prompt, 80)
        if len(ar) == 80:
            break
    junk = [rng.randrange(4, vocab) for _ in range(3)]
    # original: block A twice (the edit removed one copy), junk the edit replaced
    ref = ar[:20] + ar[:20] + ar[20:50] + junk + ar[50:70] + ar[72:]
    g = engine.generate(prompt, DecodeConfig(method="reuse", max_new_tokens=80, max_draft_tokens=4), reference=ref)
    assert g.tokens == ar
    assert g.stats.accepted_by_source["reuse"] >= 0.75 * len(ar), g.stats.summary()
    # 3 chains, and per edit the fallback steps until reuse_resync_tokens output
    # tokens match the original again
    assert g.stats.forward_steps <= len(ar) // 5, g.stats.summary()
    a = engine.generate(prompt, DecodeConfig(method="ar", max_new_tokens=80))
    assert a.stats.forward_steps == len(ar) - 1


# ----------------------------------------------------------------------------- prompt and text


def test_build_edit_prompt_plain_fallback_logs(tiny_tokenizer, caplog):
    assert tiny_tokenizer.chat_template is None
    with caplog.at_level(logging.INFO, logger="fastcoder.edit"):
        ids = build_edit_prompt(tiny_tokenizer, SNIPPET, "add type hints")
    assert any("no chat template" in r.getMessage() for r in caplog.records)
    text = tiny_tokenizer.decode(ids)
    assert "add type hints" in text and SNIPPET.rstrip("\n") in text
    assert text.endswith("```python\n")  # primed with the opening fence


def test_build_edit_prompt_uses_the_chat_template(tiny_tokenizer):
    import copy

    tok = copy.deepcopy(tiny_tokenizer)
    tok.chat_template = (
        "{% for m in messages %}<|fim_prefix|>{{ m['role'] }}\n{{ m['content'] }}<|fim_suffix|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|fim_prefix|>assistant\n{% endif %}"
    )
    ids = build_edit_prompt(tok, "x = 1\n", "make it 2", language="python")
    text = tok.decode(ids)
    assert text.startswith("<|fim_prefix|>system\nYou are a code editor")
    assert "<|fim_prefix|>user\n```python\nx = 1\n```\n\nmake it 2" in text
    assert text.endswith("<|fim_prefix|>assistant\n```python\n")
    plain = build_edit_prompt(tok, "x = 1\n", "make it 2", prefill=False)
    assert tok.decode(plain).endswith("<|fim_prefix|>assistant\n")


def test_fences_line_endings_and_trailing_newlines():
    assert choose_fence("a = 1") == "```"
    assert choose_fence("s = '```'") == "````"
    assert strip_fences("```python\nx = 1\n```\nSome prose") == "x = 1"
    assert strip_fences("x = 1\n```") == "x = 1"
    assert strip_fences("x = 1") == "x = 1"
    assert finish_edit("x = 2", "x = 1\n") == "x = 2\n"
    assert finish_edit("x = 2\n\n", "x = 1") == "x = 2"
    assert finish_edit("a\nb", "a\r\nc\r\n") == "a\r\nb\r\n"
    assert finish_edit("a", "a\n\n") == "a\n\n"
    stop = edit_stop_fn("```")
    assert stop("x = 1\ny") is None
    assert stop("x = 1\n```") == 5
    assert stop("```\n") == 0  # an empty block
    assert stop("```python\nx\n```") == 11  # an unprimed answer: its own closing fence


def test_reference_is_the_code_and_the_closing_fence(tiny_tokenizer):
    ref = edit_reference(tiny_tokenizer, "x = 1\r\n\r\n")
    assert tiny_tokenizer.decode(ref) == "x = 1\n```"


def test_split_and_select_lines():
    assert split_lines("a\r\nb\x0cc\n\nd") == ["a\r\n", "b\x0cc\n", "\n", "d"]
    assert select_lines("a\nb\nc", 2, 3) == ("a\n", "b\nc", "")
    for a, b in ((3, 2), (0, 1), (1, 4)):
        with pytest.raises(FastCoderError):
            select_lines("a\nb\nc", a, b)
    with pytest.raises(FastCoderError, match="only whitespace"):
        select_lines("a\n  \n\nb", 2, 3)


def test_edit_code_errors_and_defaults(engine):
    for code in ("", "   \n\t\n"):
        with pytest.raises(FastCoderError, match="empty"):
            edit_code(engine, code, "add type hints")
    with pytest.raises(FastCoderError, match="instruction"):
        edit_code(engine, "x = 1\n", "  ")
    with pytest.raises(FastCoderError, match="unknown method"):
        edit_code(engine, "x = 1\n", "make it 2", method="nope")
    res = edit_code(engine, "x = 1\n", "make it 2")
    n_code = len(engine.tokenizer("x = 1", add_special_tokens=False)["input_ids"])
    assert res.max_new_tokens == 8 * n_code + 256
    assert res.generation.stats.new_tokens <= res.max_new_tokens
    cancel = threading.Event()
    cancel.set()
    res = edit_code(engine, "x = 1\n", "make it 2", cancel=cancel)
    assert res.cancelled and res.generation.stats.stop_reason == "cancelled"


# ----------------------------------------------------------------------------- CLI


def _cli(tmp_path, tiny_model_dir, content: bytes | str, *args: str) -> list[str]:
    f = tmp_path / "mod.py"
    if isinstance(content, str):
        f.write_text(content, encoding="utf-8", newline="")
    else:
        f.write_bytes(content)
    return ["edit", str(f), *args, "--model", str(tiny_model_dir), "--dtype", "float32", "--device", "cpu", "--max-new-tokens", "12"]


def test_cli_whole_file_selection_compare_ar_json(tmp_path, edit_model_dir, capsys):
    n = len(SNIPPET.splitlines())
    argv = _cli(tmp_path, edit_model_dir, SNIPPET, "--start-line", "1", "--end-line", str(n), "--instruction", "add type hints", "--compare-ar", "--json")
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"text", "finished", "identical_to_ar", "speedup_vs_ar", "mean_accept_len", "reuse_share"}
    assert out["identical_to_ar"] is True and out["finished"] is True
    # the step whose token is the end of turn commits nothing: a mean below 1 is possible
    assert out["speedup_vs_ar"] > 0 and out["mean_accept_len"] > 0 and 0 <= out["reuse_share"] <= 1
    assert out["text"] == EDIT_ANSWER + "\n"  # the selection's trailing newline is kept


def test_cli_an_edit_that_does_not_end_exits_3(tmp_path, tiny_model_dir, capsys):
    """The random model runs to the token cap: the text is a cut piece of an edit, printed
    with a warning, and the exit status says so (a script must not write it back)."""
    argv = _cli(tmp_path, tiny_model_dir, SNIPPET, "--start-line", "1", "--end-line", "4", "--instruction", "add type hints")
    assert main(argv) == 3
    assert "the edit did not end (max_new_tokens after 12 tokens)" in capsys.readouterr().err
    assert main([*argv, "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["finished"] is False


def test_cli_prints_the_edited_code(tmp_path, edit_model_dir, capsys):
    argv = _cli(tmp_path, edit_model_dir, SNIPPET, "--start-line", "3", "--end-line", "4", "--instruction", "rename w")
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == EDIT_ANSWER + "\n"
    assert "reuse:" in captured.err  # stats go to stderr, the code alone to stdout


@pytest.mark.parametrize(
    "content,lines,message",
    [
        (SNIPPET, ("3", "2"), "empty selection"),
        ("x = 1\n\n   \ny = 2\n", ("2", "3"), "only whitespace"),
        (SNIPPET, ("1", "99"), "outside the file"),
        (SNIPPET, ("0", "1"), "outside the file"),
        ("", ("1", "1"), "empty"),
        (b"x = '\xff\xfe'\n", ("1", "1"), "not UTF-8"),
    ],
)
def test_cli_clear_errors(tmp_path, tiny_model_dir, capsys, content, lines, message):
    argv = _cli(tmp_path, tiny_model_dir, content, "--start-line", lines[0], "--end-line", lines[1], "--instruction", "x")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("fastcoder: error:") and message in err
    assert "Traceback" not in err


def test_cli_missing_file(tmp_path, capsys):
    assert main(["edit", str(tmp_path / "nope.py"), "--start-line", "1", "--end-line", "1", "--instruction", "x"]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_an_edit_ended_by_its_fence_or_end_of_turn_is_finished_and_one_cut_short_is_not(tiny_tokenizer):
    """``finished``: the fence rule on the whole decoded output cuts where the generation
    was cut (not the loop rule earlier), or the model ended its turn."""
    from fastcoder.decode import Generation
    from fastcoder.edit import _ended, edit_stop_fn
    from fastcoder.tokens import encode

    fence = edit_stop_fn("```")

    def gen(written: str, kept: str, reason: str) -> Generation:
        stats = GenStats()
        stats.stop_reason = reason
        return Generation(tokens=encode(tiny_tokenizer, written, special="plain"), text=kept, stats=stats)

    assert _ended(gen("x = 1\n```", "x = 1", "stop"), fence, tiny_tokenizer)
    assert _ended(gen("x = 1", "x = 1", "eos"), fence, tiny_tokenizer)
    assert not _ended(gen("a = f(a)\na = f(a)\na = f(a)\na = f(a)\n", "a = f(a)", "stop"), fence, tiny_tokenizer)
    assert not _ended(gen("x = 1\ny = 2", "x = 1\ny = 2", "max_new_tokens"), fence, tiny_tokenizer)
    assert not _ended(gen("x = 1", "x = 1", "cancelled"), fence, tiny_tokenizer)


def test_an_edit_that_loops_ends_early_unfinished(looping_edit_model_dir):
    """A model that writes its line again and again: the loop rule ends the edit at the
    line's first writing, long before the cap, and the edit is not finished."""
    from fastcoder.models import load_model

    engine = Engine.from_loaded(load_model(str(looping_edit_model_dir), dtype="float32", device="cpu"))
    try:
        res = edit_code(engine, SNIPPET, "use sum")
    finally:
        engine.close()
    assert res.finished is False and res.generation.stats.stop_reason == "stop"
    assert res.generation.stats.new_tokens < 60 < res.max_new_tokens
