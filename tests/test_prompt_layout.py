"""The anchored prompt layout under editing: typing, backspace, cursor moves,
auto-closed brackets, paste, undo and an edit above the cursor.

What must hold for every state (checked by :func:`check`): the prompt is
``<fim_prefix> head <fim_suffix> suffix <fim_middle> typed``, where ``head + typed +
heal`` is exactly the document before the cursor (from the kept start), the suffix is
the start of the document after the cursor (auto-closers at the cursor left out), the
prompt fits ``maxPromptTokens`` and every allowed first token starts with ``heal``.
And what the layout is for: while the user types or deletes after the anchor, the
prompt only changes at its end.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastcoder.models import FimTokens
from fastcoder.tokens import TokenInfo
from lsp_server.prompt import (
    CursorContext, build_prompt, encode, heal_split, plan_start, prompt_suffix, remember_window,
)  # fmt: skip

FIM = FimTokens("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")

DOC = '''import os


def read_config(path):
    """Read a config file."""
    with open(path) as f:
        return f.read()


def main():
    config = read_config("x.cfg")
    |
    print(config)
'''


@pytest.fixture(scope="module")
def tok(tiny_tokenizer):
    return tiny_tokenizer


@pytest.fixture(scope="module")
def info(tok):
    return TokenInfo.for_tokenizer(tok)


class Editor:
    """A document with a cursor and the prompts the server would build for it."""

    def __init__(self, tok, info, text: str, budget: int = 2048, headroom: bool = True, plan: bool = False) -> None:
        self.tok, self.info, self.budget, self.headroom = tok, info, budget, headroom
        self.plan = plan  # plan the window's next start, as the server does (prepareWindow)
        self.planned = None
        self.windows = []  # the marks of the last two windows, as the server keeps them
        self.cursor = text.index("|")
        self.text = text.replace("|", "", 1)
        self.anchor = None
        self.prompt = None
        self.history: list[tuple[str, int]] = []

    @property
    def ctx(self) -> CursorContext:
        return CursorContext(self.text[: self.cursor], self.text[self.cursor :])

    def build(self):
        prev = self.prompt
        self.prompt = build_prompt(
            self.tok, FIM, self.ctx, self.budget, max_suffix_tokens=64, layout="anchored", anchor=self.anchor,
            info=self.info, sticky_start=self.prompt.prefix_start if self.prompt else None, headroom=self.headroom,
            planned_start=self.planned,
            recent_starts=[s for s in (m.locate(self.ctx.prefix) for m in self.windows) if s is not None],
        )  # fmt: skip
        self.anchor = self.prompt.anchor
        self.windows = remember_window(self.windows, self.ctx.prefix, self.prompt.prefix_start)
        if self.plan:
            self.planned = plan_start(self.tok, self.ctx.prefix, self.prompt, self.planned)
        check(self.tok, self.ctx, self.prompt, self.budget)
        return prev, self.prompt

    def type(self, s: str, closer: str = ""):
        self.history.append((self.text, self.cursor))
        self.text = self.text[: self.cursor] + s + closer + self.text[self.cursor :]
        self.cursor += len(s)
        return self.build()

    def backspace(self, n: int = 1):
        self.history.append((self.text, self.cursor))
        self.text = self.text[: self.cursor - n] + self.text[self.cursor :]
        self.cursor -= n
        return self.build()

    def undo(self):
        self.text, self.cursor = self.history.pop()
        return self.build()


def check(tok, ctx: CursorContext, p, budget: int) -> None:
    special = [tok.convert_tokens_to_ids(t) for t in (FIM.prefix, FIM.suffix, FIM.middle)]
    assert len(p.ids) <= budget
    assert p.ids[0] == special[0] and p.ids.count(special[1]) == 1 and p.ids.count(special[2]) == 1
    i_suf, i_mid = p.ids.index(special[1]), p.ids.index(special[2])
    head = tok.decode(p.ids[1:i_suf])
    suffix = tok.decode(p.ids[i_suf + 1 : i_mid])
    typed = tok.decode(p.ids[i_mid + 1 :])
    assert head + typed + p.heal == ctx.prefix[p.prefix_start :]
    skip, text = prompt_suffix(ctx)
    assert text.startswith(suffix) and ctx.suffix[skip:].startswith(suffix)
    # where the kept suffix ends in the real one (the reference drafter reads on from there)
    assert ctx.suffix[: p.suffix_end] == ctx.suffix[:skip] + p.anchor.suffix_kept
    if p.heal:
        assert len(p.allowed)
        for t in p.allowed.tolist():
            assert tok.decode([t]).startswith(p.heal)
    else:
        assert p.allowed is None


def tail_change(prev, cur) -> int:
    """Tokens of ``cur`` past the longest common prefix with ``prev``."""
    n = 0
    while n < min(len(prev.ids), len(cur.ids)) and prev.ids[n] == cur.ids[n]:
        n += 1
    return len(cur.ids) - n


def test_typing_only_changes_the_end(tok, info):
    ed = Editor(tok, info, DOC)
    ed.build()
    anchor = ed.anchor
    changes = []
    for ch in "if config is not None:\n        print(config.strip())":
        prev, cur = ed.type(ch)
        changes.append(tail_change(prev, cur))
    assert ed.anchor.head == anchor.head  # one anchor for the whole typing
    # every keystroke changes only the last few tokens of the prompt
    assert max(changes) <= 4, changes


def test_backspace_shrinks_the_end(tok, info):
    ed = Editor(tok, info, DOC)
    ed.type("value = compute")
    head = ed.anchor.head
    for _ in range(5):
        prev, cur = ed.backspace()
        assert ed.anchor.head == head
        assert tail_change(prev, cur) <= 2


def test_auto_closed_bracket_leaves_the_suffix_alone(tok, info):
    ed = Editor(tok, info, DOC)
    ed.type("value = compute")
    head, suffix_ids = ed.anchor.head, ed.anchor.suffix_ids
    prev, cur = ed.type("(", closer=")")  # the editor inserts ")" after the cursor
    assert ed.ctx.suffix.startswith(")\n")
    assert ed.anchor.head == head and ed.anchor.suffix_ids == suffix_ids
    assert tail_change(prev, cur) <= 2
    ed.type("path")
    assert ed.anchor.head == head


def test_brackets_after_lines_typed_keep_the_anchor(tok, info):
    # lines typed since the anchor, then a bracket the editor closes and the closer typed
    # over: the closers at the cursor come and go, the prompt's suffix stays the same, so
    # the anchor (and the KV cache of everything before the typed text) stays
    ed = Editor(tok, info, DOC)
    ed.type("x = 1")
    head = ed.anchor.head
    ed.type("\n    y = 2\n    z = ")
    for s, closer in (("max", ""), ("(", ")"), ("x, y", ""), (")", "")):
        if s == ")":  # stepping over the auto-inserted closer: the cursor moves past it
            ed.history.append((ed.text, ed.cursor))
            ed.cursor += 1
            prev, cur = ed.build()
        else:
            prev, cur = ed.type(s, closer=closer)
        assert ed.anchor.head == head, s
        assert tail_change(prev, cur) <= 3, s
    assert ed.ctx.prefix.endswith("z = max(x, y)")


LONG_DOC = "".join(f"def f{i}(a, b):\n    return a * {i} + b\n\n\n" for i in range(60)) + "def main():\n    |\n"
LONGER_DOC = "".join(f"def f{i}(a, b):\n    return a * {i} + b\n\n\n" for i in range(300)) + "def main():\n    |\n"


@pytest.mark.parametrize("headroom", [True, False])
def test_first_anchor_leaves_headroom_in_a_long_document(tok, info, headroom):
    # a document longer than the budget: the first anchor leaves headroom, so the next
    # anchors (here: one set by an edit in the suffix after lines typed) keep its start;
    # filled to the budget, the next anchor must move the start (a whole new prefill)
    ed = Editor(tok, info, LONG_DOC, budget=300, headroom=headroom)
    ed.build()
    start = ed.prompt.prefix_start
    assert start > 0  # the document does not fit
    ed.type("total = 0\n    total += 1\n    ")
    ed.history.append((ed.text, ed.cursor))
    ed.text = ed.text[: ed.cursor] + "pass" + ed.text[ed.cursor :]  # an edit in the suffix: a new anchor
    ed.build()
    assert ed.anchor.head == ed.ctx.prefix[: ed.ctx.prefix.rfind("\n") + 1]  # a new anchor at the cursor's line
    assert (ed.prompt.prefix_start == start) == headroom


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_the_window_moves_where_it_was_planned_and_the_planned_start_is_the_prompts(tok, info):
    # typing on at the end of a document longer than the window: once little room is
    # left, the next start is planned (a line start); the move goes there, and the
    # prompt then starts with the very ids prefilled for the plan (FIM prefix + the text
    # from the plan to the cursor's line when it was planned) but for the last few: the
    # move prefills only what was typed since, not the whole prompt
    ed = Editor(tok, info, LONGER_DOC, budget=1200, plan=True)
    ed.build()
    fim_prefix = tok.convert_tokens_to_ids(FIM.prefix)
    windows, moves = {}, []
    for i in range(80):
        start = ed.prompt.prefix_start
        ed.type(f"total = total * {i} + len(names)\n    ")
        if ed.prompt.prefix_start != start:
            moves.append(ed.prompt.prefix_start)
            window = windows[ed.prompt.prefix_start]  # it was planned
            assert _common(window, ed.prompt.ids) >= len(window) - 2
            assert len(ed.prompt.ids) - _common(window, ed.prompt.ids) < len(ed.prompt.ids) // 3
        if ed.planned is not None:
            assert ed.planned > ed.prompt.prefix_start and ed.ctx.prefix[ed.planned - 1] == "\n"
            head = ed.ctx.prefix[: ed.ctx.prefix.rfind("\n") + 1]
            windows.setdefault(ed.planned, [fim_prefix] + encode(tok, head[ed.planned :]))  # what the server prefills
    assert len(moves) >= 2


def test_a_plan_that_no_longer_fits_is_passed_over(tok, info):
    # the plan only chooses among starts that fit: after a long paste the planned start
    # does not, and the start moves with headroom as it does without a plan
    plain = Editor(tok, info, LONGER_DOC, budget=1200)
    planned = Editor(tok, info, LONGER_DOC, budget=1200, plan=True)
    lines = (f"total = total * {i} + len(names)\n    " for i in range(1000))
    for ed in (plain, planned):
        ed.build()
    while planned.planned is None:
        line = next(lines)
        for ed in (plain, planned):
            ed.type(line)
    assert plain.prompt.ids == planned.prompt.ids  # a plan alone changes nothing
    paste = "".join(f"x{i} = compute(x{i - 1}, names, {i})\n    " for i in range(1, 120))
    for ed in (plain, planned):
        ed.type(paste)
    assert planned.prompt.prefix_start == plain.prompt.prefix_start != planned.planned
    assert planned.prompt.ids == plain.prompt.ids


def test_back_from_a_jump_the_window_starts_where_it_did(tok, info):
    # typing at the end of a long document, a jump to its top to add an import, and back:
    # the window starts again where it started before the jump (found after the line
    # inserted above it), so the prompt shares all but the end of what was typed with the
    # one before the jump (which the session's other KV cache still holds)
    ed = Editor(tok, info, LONGER_DOC, budget=1200)
    ed.build()
    ed.type("total = 0\n    for name in names:\n        ")
    before = ed.prompt
    start, head_ids = before.prefix_start, len(before.anchor.head_ids)
    back = len(ed.text) - ed.cursor  # where the cursor was, from the end
    ed.history.append((ed.text, ed.cursor))
    ed.cursor = 0
    ed.type("import os\n")  # at the top: a window of its own
    assert ed.prompt.prefix_start == 0
    ed.cursor = len(ed.text) - back  # back where typing was
    _prev, after = ed.build()
    assert after.prefix_start == start + len("import os\n")
    assert _common(before.ids, after.ids) >= 1 + head_ids - 2
    # without the marks the window starts elsewhere: nothing but the FIM token is shared
    ed.windows = []
    ed.history.append((ed.text, ed.cursor))
    ed.cursor = 0
    ed.build()
    ed.windows = []
    ed.cursor = len(ed.text) - back
    _prev, fresh = ed.build()
    assert fresh.prefix_start != after.prefix_start and _common(before.ids, fresh.ids) < 5


def test_paste_extends_the_end(tok, info):
    ed = Editor(tok, info, DOC)
    ed.type("x")
    head = ed.anchor.head
    prev, cur = ed.type("= [item.strip() for item in config.split(',') if item]")
    assert ed.anchor.head == head
    # only the pasted tokens (and the healed last one) are new
    assert tail_change(prev, cur) <= len(cur.ids) - len(prev.ids) + 2


def test_undo_gives_the_earlier_prompt_back(tok, info):
    ed = Editor(tok, info, DOC)
    _, first = ed.type("result = ")
    ed.type("read_config(")
    _, back = ed.undo()
    assert back.ids == first.ids and back.heal == first.heal


def test_edit_above_or_cursor_before_the_anchor_sets_a_new_anchor(tok, info):
    ed = Editor(tok, info, DOC)
    ed.type("value = 1")
    old = ed.anchor.head
    # an edit above the cursor: a new anchor (the text before the old one changed)
    at = ed.text.index("import os") + len("import os")
    ed.history.append((ed.text, ed.cursor))
    ed.text = ed.text[:at] + ", sys" + ed.text[at:]
    ed.cursor += len(", sys")
    ed.build()
    assert ed.anchor.head != old and ed.anchor.head.endswith("\n")
    assert ed.anchor.head == ed.ctx.prefix[: ed.ctx.prefix.rfind("\n") + 1]  # at the line start
    # the cursor moves up, before the anchor: a new anchor on that line
    ed.cursor = ed.text.index("        return f.read()") + len("        return")
    ed.build()
    assert ed.anchor.head == ed.ctx.prefix[: ed.ctx.prefix.rfind("\n") + 1]


def test_the_suffix_changing_sets_a_new_anchor(tok, info):
    ed = Editor(tok, info, DOC)
    ed.type("value = 1")
    kept = ed.anchor.suffix_kept
    ed.history.append((ed.text, ed.cursor))
    at = ed.text.index("    print(config)")
    ed.text = ed.text[:at] + "    # changed\n" + ed.text[at:]
    ed.build()
    assert ed.anchor.suffix_kept != kept and ed.anchor.suffix_kept.startswith("\n    # changed")


def test_whitespace_heals_by_one_character(tok):
    kept, heal = heal_split(tok, "    if x:\n        ")
    assert heal == " " and kept == "    if x:\n       "
    kept, heal = heal_split(tok, "    retu")
    assert kept + heal == "    retu" and heal and not heal.isspace()
    assert heal_split(tok, "") == ("", "")
    assert heal_split(tok, "x = café")[1] == ""  # the last token is not ASCII: not healed


def test_healing_takes_back_more_tokens_while_one_token_can_still_cover_them(tok, info):
    """A name typed half way that ends in two tokens: the heal goes back over both when
    a vocabulary token starts with their text (the one-token heal is its end), every
    allowed first token starts with it, and whitespace still heals by one character."""
    longer = 0
    for word in ("Foundation", "wrapper", "filename", "Texture"):
        for cut in range(1, len(word)):
            typed = "    x = " + word[:cut]
            one_kept, one = heal_split(tok, typed)
            kept, heal = heal_split(tok, typed, info)
            assert kept + heal == typed and heal.endswith(one)
            assert len(info.starting_with(heal)) > 0
            assert all(tok.decode([int(t)]).startswith(heal) for t in info.starting_with(heal)[:50])
            longer += len(heal) > len(one)
    assert longer > 0  # the tiny vocabulary has such names: the rule ran
    assert heal_split(tok, "    if x:\n        ", info) == ("    if x:\n       ", " ")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("type"), st.text(alphabet="abc xyz()[]:=.,'\"\n\t_0", min_size=1, max_size=12)),
            st.tuples(st.just("back"), st.integers(1, 4)),
            st.tuples(st.just("move"), st.integers(-40, 40)),
            st.tuples(st.just("undo"), st.just(0)),
        ),
        max_size=25,
    ),
    budget=st.sampled_from([24, 64, 300]),
)
def test_any_edit_sequence_keeps_the_prompt_exact_and_within_budget(tok, info, ops, budget):
    ed = Editor(tok, info, DOC, budget=budget)
    ed.build()
    for op, arg in ops:
        if op == "type":
            ed.type(arg)
        elif op == "back" and ed.cursor >= arg:
            ed.backspace(arg)
        elif op == "move":
            ed.history.append((ed.text, ed.cursor))
            ed.cursor = max(0, min(len(ed.text), ed.cursor + arg))
            ed.build()
        elif op == "undo" and ed.history:
            ed.undo()


def test_a_window_mark_is_found_again_nearest_to_where_it_was():
    from lsp_server.prompt import WindowMark

    text = "a\n" * 10 + "MARK\nbody\n" + "x\n" * 10 + "MARK\nbody\n"
    first, second = text.index("MARK"), text.rindex("MARK")
    assert WindowMark(first, "MARK\nbody\n").locate(text) == first
    # a line inserted above: each mark finds its own copy of the same text, not the other
    assert WindowMark(first, "MARK\nbody\n").locate("zz\n" + text) == first + 3
    assert WindowMark(second, "MARK\nbody\n").locate("zz\n" + text) == second + 3
    assert WindowMark(first, "MARK\nbody\n").locate("gone") is None
    assert WindowMark(5, "").locate(text) is None
