"""Unit tests of the server's plain functions: prompt building, stop rules,
post-processing, stub detection, settings and positions."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.workspace import TextDocument

from fastcoder.models import detect_fim
from lsp_server import actions
from lsp_server.recall import typed_through
from lsp_server.documents import BadRequest, offset_at, position_at
from lsp_server.postprocess import cut_before_closers, document_indent_unit, drop_repeated_lines, finalize, reindent, trim_overlap
from lsp_server.prompt import CursorContext, build_prompt, cut_prefix, encode
from lsp_server.sessions import Suggestion
from lsp_server.settings import ServerSettings, SettingsError
from lsp_server.stops import make_stop_fn

LINES = [f"value_{i} = compute(value_{i - 1}, {i})  # line {i}\n" for i in range(400)]
TEXT = "".join(LINES)


def ctx_at(text: str, marker: str = "|", language: str = "") -> CursorContext:
    i = text.index(marker)
    return CursorContext(text[:i], text[i + len(marker) :], language)


# ------------------------------------------------------------------------------ prompt


def test_fim_prompt_layout_and_budget(tiny_tokenizer):
    tok = tiny_tokenizer
    fim = detect_fim(tok)
    cursor = len("".join(LINES[:300]))
    ctx = CursorContext(TEXT[:cursor], TEXT[cursor:])
    p = build_prompt(tok, fim, ctx, 512)
    pre, suf, mid = (tok.convert_tokens_to_ids(t) for t in (fim.prefix, fim.suffix, fim.middle))
    assert len(p.ids) <= 512
    assert p.ids[0] == pre and p.ids[-1] == mid and p.ids.count(suf) == 1
    cut = p.ids.index(suf)
    prefix_text = tok.decode(p.ids[1:cut])
    suffix_text = tok.decode(p.ids[cut + 1 : -1])
    # both cut on line boundaries: the prefix keeps its last whole lines, the suffix its first
    assert ctx.prefix.endswith(prefix_text) and prefix_text.startswith("value_")
    assert ctx.prefix[p.prefix_start - 1] == "\n" and prefix_text == ctx.prefix[p.prefix_start :]
    assert ctx.suffix.startswith(suffix_text) and suffix_text.endswith("\n")
    # the split: the suffix gets at most its share, the prefix the rest
    assert p.suffix_tokens <= int((512 - 3) * 0.25)
    assert p.prefix_tokens + p.suffix_tokens + 3 <= 512
    assert p.prefix_tokens > 2 * p.suffix_tokens


def test_short_suffix_leaves_its_share_to_the_prefix(tiny_tokenizer):
    fim = detect_fim(tiny_tokenizer)
    ctx = CursorContext(TEXT, "\nprint(value_399)\n")
    p = build_prompt(tiny_tokenizer, fim, ctx, 512)
    assert p.suffix_end == len(ctx.suffix)
    assert p.prefix_tokens > int((512 - 3) * 0.75)
    assert len(p.ids) <= 512


def test_prefix_only_without_fim(tiny_tokenizer):
    ctx = CursorContext(TEXT[:5000], TEXT[5000:])
    p = build_prompt(tiny_tokenizer, None, ctx, 256)
    assert not p.fim and p.suffix_tokens == 0 and len(p.ids) <= 256
    assert ctx.prefix.endswith(tiny_tokenizer.decode(p.ids))


def test_whole_small_document_is_kept(tiny_tokenizer):
    fim = detect_fim(tiny_tokenizer)
    ctx = ctx_at("def f(x):\n    return |\n\nprint(f(1))\n")
    p = build_prompt(tiny_tokenizer, fim, ctx, 2048)
    assert p.prefix_start == 0 and p.suffix_end == len(ctx.suffix)
    assert tiny_tokenizer.decode(p.ids, skip_special_tokens=False) == (
        f"{fim.prefix}{ctx.prefix}{fim.suffix}{ctx.suffix}{fim.middle}"
    )


def test_sticky_prefix_start_keeps_the_prompt_start_while_typing(tiny_tokenizer):
    tok = tiny_tokenizer
    prefix = TEXT[:20000]
    start, ids = cut_prefix(tok, prefix, 300)
    assert len(ids) <= 300
    # typing a few characters: the start stays where it was (KV prefix reuse)
    typed = prefix + "x = 1"
    again, ids2 = cut_prefix(tok, typed, 300, sticky=start)
    assert again == start and ids2[: len(ids) - 2] == ids[: len(ids) - 2]
    # once it no longer fits, it moves to a later line start, with headroom
    much = typed + "".join(LINES[:20])
    moved, ids3 = cut_prefix(tok, much, 300, sticky=start)
    assert moved > start and much[moved - 1] == "\n"
    assert len(ids3) <= int(300 * 0.85) + 30


def test_text_that_looks_like_a_special_token_stays_text(tiny_tokenizer):
    ids = encode(tiny_tokenizer, "x = '<|fim_middle|>'")
    assert tiny_tokenizer.convert_tokens_to_ids("<|fim_middle|>") not in ids


def test_mode_and_cursor_context():
    assert ctx_at("    foo(|)\n").mode == "line"
    assert ctx_at("    foo(|   \nbar\n").mode == "block"
    c = ctx_at("def f():\n    |\n\nx = 1\n")
    assert c.mode == "block" and c.at_indentation and c.indent == "    "
    assert c.following_lines == ["", "x = 1", ""]
    assert ctx_at("x = 1|").following_lines == []


# ------------------------------------------------------------------------------ stop rules


def test_line_mode_stops_at_the_first_newline():
    stop = make_stop_fn("line", "    x = foo(")
    assert stop("a, b") is None
    assert stop("a, b\n    y = 2") == 4


def test_block_ends_at_a_dedent():
    stop = make_stop_fn("block", "    ")
    assert stop("x = 1\n    return x") is None
    text = "x = 1\n    return x\n\ndef g():\n"
    assert text[: stop(text)] == "x = 1\n    return x\n"


def test_blank_line_at_top_level_ends_the_block():
    stop = make_stop_fn("block", "")
    text = "import os\nimport sys\n\nprint(1)"
    assert text[: stop(text)] == "import os\nimport sys"
    assert stop("import os\nimport sys") is None


def test_generation_running_into_the_code_below_stops():
    following = ["", "    return result", ""]
    stop = make_stop_fn("block", "    ", following)
    text = "result = 2 * x\n    return result\n"
    assert text[: stop(text)] == "result = 2 * x"
    # at the indentation of an empty line, the first line itself may be the next line again
    assert make_stop_fn("block", "    ", following)("return result\n") == 0
    # at its indentation only: a "}" or "end" closing a block inside the output is not the one below
    body = "if (x) {\n        y();\n    }\n    return 0;\n}\n"
    assert body[: make_stop_fn("block", "    ", ["}"])(body)] == "if (x) {\n        y();\n    }\n    return 0;"
    lua = "if opts.debug then\n    print(opts)\n  end\n  return opts\nend\n"
    assert lua[: make_stop_fn("block", "  ", ["end"])(lua)] == "if opts.debug then\n    print(opts)\n  end\n  return opts"
    # a one-word line deeper is not the line below; a longer one is, at any indentation
    assert make_stop_fn("block", "    ", ["    return"])("if x:\n        return\n    y = 1") is None
    assert make_stop_fn("block", "    ", following)("        return result\n") == 0  # the model repeating it
    # after a comment's marker too: VS Code's JSDoc template, the model writing its next line
    jsdoc = ctx_at("/**\n * |\n * @param a \n * @returns \n */\nfunction f(a) {}\n")
    assert finalize("@param a", jsdoc) == "" and finalize("Adds one.", jsdoc) == "Adds one."
    assert finalize("@param", jsdoc) == "" and finalize("@param ab", jsdoc) == "@param ab"


def test_a_code_fence_ends_a_suggestion_in_a_document_without_one():
    """Seen after a Dockerfile's and a .gitignore's lines: the model closes a chat answer's
    fence. In a document that has none, a generated fence line ends the suggestion (fed
    token by token as the engine does, and on the whole text); in one that has fences
    (Markdown, a docstring's example) it may be the document's own."""
    text = 'RUN pip install -r requirements.txt\nCOPY . .\nCMD ["python", "app.py"]\n```'
    stop = make_stop_fn("block", "")
    assert text[: stop(text)] == 'RUN pip install -r requirements.txt\nCOPY . .\nCMD ["python", "app.py"]'
    matcher, cut = stop.matcher(), None
    for piece in ("RUN pip", " install -r requirements.txt\n", "COPY . .\n", "CMD", ' ["python", "app.py"]', "\n`", "``"):
        cut = matcher.feed(piece) if cut is None else cut
    assert cut == text.index("\n```")
    assert make_stop_fn("block", "", fences=True)(text) is None
    assert make_stop_fn("block", "")("```python\nx = 1") == 0  # the first line of an empty line's suggestion
    assert make_stop_fn("block", "    ")("x = 1\n    ``` \n") == len("x = 1")  # indented too
    # a fence inside a line is code (a string, a comment), and a line of two backticks too
    assert make_stop_fn("block", "    ")('x = "```"\n    ``\n    y = 2') is None
    assert make_stop_fn("block", "s = ", mid_line_blocks=True)("```") is None  # mid-line: not a line of its own


def test_a_mid_line_suggestion_ends_at_its_line_unless_it_opens_a_block():
    """``midLineBlocks`` false (the default): with code before the cursor (a statement being typed) the
    suggestion ends with its line; a line that opens a block (a header, a brace, an open
    bracket, a trailing comment after it) goes on into its body, one that starts with a
    line break (the cursor at the end of a complete line) is a block; an empty line's
    suggestion (only indentation before the cursor) is a block as before; true keeps
    the block rule alone."""
    following = ["", "", "def first(items: Sequence[T]) -> T:"]
    text = "*\nfrom collections import *"
    assert make_stop_fn("block", "from typing import ", following)(text) == 1  # the default
    assert make_stop_fn("block", "from typing import ", following, mid_line_blocks=True)(text) is None  # the block rule only
    assert make_stop_fn("block", "    total = ", mid_line_blocks=False)("sum(xs)\n    return total") == len("sum(xs)")
    for prefix, body in (("def area", "(self) -> float:\n        return 1.0\n"),
                         ("    for x in", " items:  # each\n        print(x)\n"),
                         ("function f() ", "{\n  return 1;\n"),
                         ("    values = ", "[\n        1,\n"),
                         ("    call(", "\n        a,\n")):  # fmt: skip
        assert make_stop_fn("block", prefix, mid_line_blocks=False)(body) is None, prefix
    assert make_stop_fn("block", "    ", mid_line_blocks=False)("x = 1\n    return x") is None
    # a comment or a docstring being typed: what follows is the code it describes
    for prefix in ("    # return the arithmetic mean of ", '    """Return x limited to ', "  // clamp x to "):
        assert make_stop_fn("block", prefix)("the values\n    return sum(values) / len(values)") is None, prefix
    # at the end of a complete line the suggestion is the next lines (it starts with a break)
    assert make_stop_fn("block", "    config = read(path)")("\n    run(config)\n    log(config)") is None
    assert make_stop_fn("line", "    x = foo(", mid_line_blocks=False)("a, b\n    y = 2") == 4


# ------------------------------------------------------------------------------ post-processing


def test_suffix_deduplication_in_line_mode():
    assert trim_overlap("a, b)", ")") == "a, b"
    assert trim_overlap("a, b):", "):") == "a, b"
    assert trim_overlap("x = compute(1)", "compute(1)") == "x = "
    assert trim_overlap("x = 1", "1 + y") == "x = 1"  # a short overlap of real code stays
    c = ctx_at("    total = sum(|)\n")
    assert finalize("values)\n    return total", c) == "values"


def test_a_line_that_leaves_a_bracket_open():
    """``(`` at ``return |;`` in TSX, cut at its line break (the model went on to lay JSX
    out on the lines below) was shown alone (thirty-eighth session's user flows): such a
    one-line suggestion is dropped (lsp_server/complete.py). Brackets closed on the line,
    in strings, or closed before they open do not count."""
    from lsp_server.postprocess import leaves_open

    assert leaves_open("(") and leaves_open("items.map(x =>") and leaves_open("a), g(h(")
    assert not leaves_open("f(x)") and not leaves_open("'('") and not leaves_open("a, b)") and not leaves_open("")


def test_a_one_line_suggestion_never_closes_what_the_code_right_of_the_cursor_closes():
    """``params=params)`` at ``requests.get(url, |timeout=5)`` (thirty-fifth session's user
    flows, qwen2.5-coder-0.5b) would leave ``params=params)timeout=5)``: nothing is shown. A
    closer the rest of the line does not close (a comment follows) stays, and an inserted
    argument keeps the space before the code it precedes."""
    c = ctx_at("resp = requests.get(url, |timeout=5)\n")
    assert finalize("params=params)", c) == ""
    assert finalize("params=params, ", c) == "params=params, "
    assert finalize("h=(1, 2), ", c) == "h=(1, 2), "  # balanced brackets of its own
    assert finalize(', b)', ctx_at("x = f(a|  # c\n")) == ", b)"
    assert finalize("a, b)", ctx_at("x = f(|b)\n")) == "a, "
    assert finalize('")", ', ctx_at("x = f(|b)\n")) == '")", '  # in a string: not a closer
    assert finalize("b)", ctx_at("x = (a + |) * 2\n")) == "b"  # the overlap with the rest is trimmed
    assert finalize("a), ", ctx_at("y = f(g(|x)\n")) == "a), "  # the line leaves two open
    assert finalize("c)", ctx_at("x = foo(\n    a, |b)\n")) == ""  # opened on the line above
    # a line that closes the call above and opens another: its opener is counted too
    assert finalize("c), ", ctx_at("x = foo(\n    a), g(h(|x)\n")) == "c), "  # g(h(c), x)
    assert finalize("c), ", ctx_at("x = foo(\n    a), g(h(|x))\n")) == ""  # the rest closes both already
    # inside an f-string the brackets are the literal's: left to the closers' trimming
    assert finalize('self.x}, {self.y})"', ctx_at('return f"Point({|})"\n')) == "self.x}, {self.y"


def test_a_suggestion_that_closes_the_auto_closed_brackets_and_goes_on_is_cut_where_it_closes_them():
    # inserted whole, each would leave the closers twice: {name}!")}")  [1, 2, 3]  # n]
    assert finalize('me}!")', ctx_at('    print(f"Hello, {na|}")\n')) == "me"
    assert finalize("1, 2, 3]  # three", ctx_at("x = [|]\n")) == "1, 2, 3"
    assert finalize("me}!`;", ctx_at("  return `Hello, ${na|}`;\n")) == "me"  # a typed ; after them
    assert finalize("bar(1), 2) + x", ctx_at("    y = foo(|)\n")) == "bar(1), 2"  # its own ( ) kept
    assert finalize('bc", x) or y', ctx_at('    print("a|")\n')) == "bc"
    assert finalize('bc", end="")', ctx_at('    print("a|")\n')) == 'bc", end="'  # the plain ending: trimmed
    # untouched: no closers right of the cursor, the closers never written, the plain ending
    assert finalize("total + 1", ctx_at("    y = foo(|)\n")) == "total + 1"
    assert finalize("a, b)", ctx_at("    y = foo(|)\n")) == "a, b"
    assert finalize("compute(1) + ", ctx_at("    x = |y\n")) == "compute(1) + "  # code right of the cursor
    assert cut_before_closers("a) + b", ")]") == "a) + b"  # "]" never follows: as it is


def test_a_one_line_suggestion_that_starts_the_next_line_is_dropped():
    c = ctx_at("def total(prices, tax):\n    subtotal = sum(prices)\n    |\n    return subtotal + tax_amount\n")
    assert finalize("return subtotal", c) == ""  # the model ran into the line below
    assert finalize("return subtotal + tax_amount", c) == ""
    assert finalize("tax_amount = subtotal * tax", c) == "tax_amount = subtotal * tax"
    c = ctx_at("def f():\n    |\n    x = 10\n")
    assert finalize("x = 1", c) == "x = 1"  # another statement: "1" does not end at a token boundary of "10"


def test_generated_lines_repeating_the_code_below_are_dropped():
    following = ["    return result", "", "def other():"]
    gen = "result = 1\n    result += 2\n    return result\n\ndef other():"
    assert drop_repeated_lines(gen, following) == "result = 1\n    result += 2"
    assert drop_repeated_lines("result = 1\n    return res", following) == "result = 1"  # cut off mid-line
    assert drop_repeated_lines("result = 1\n    log(result)", following) == "result = 1\n    log(result)"
    c = ctx_at("def f():\n    |\n    return result\n")
    assert finalize("result = 1\n    return result", c) == "result = 1"


def test_whitespace_only_becomes_nothing():
    c = ctx_at("def f():\n    |\n")
    assert finalize("   \n\n  ", c) == ""
    assert finalize("\n", ctx_at("x = (|)")) == ""
    assert finalize("  \n ", c, keep_whitespace=True) != ""


def test_trailing_whitespace_and_blank_lines_go():
    c = ctx_at("def f():\n    |")
    assert finalize("x = 1   \n    return x  \n\n\n", c) == "x = 1\n    return x"


def test_no_leading_line_break_on_an_indented_blank_line():
    # VS Code indents the new line on Enter; a model that starts with "\n" + the same
    # indentation would leave that line behind (seen in the browser test, issue 15)
    c = ctx_at('def f(text):\n    """Doc."""\n    |')
    assert finalize("\n    return len(text)\n    # done", c) == "return len(text)\n    # done"
    assert finalize("\ndef g():\n    pass", c) == "\ndef g():\n    pass"  # a dedent stays as it is


def test_indentation_follows_the_document():
    assert document_indent_unit("def f():\n\treturn 1\n") == "\t"
    assert document_indent_unit("def f():\n  if x:\n    return 1\n") == "  "
    assert document_indent_unit("x = 1\n") == "    "
    # nothing indented yet: the cursor's indented empty line, then the language's tool
    go = "package main\n\nfunc health(w http.ResponseWriter) {\n"
    assert document_indent_unit(go + "\t\n}\n") == "\t"
    assert document_indent_unit(go + "\n}\n", "go") == "\t" and document_indent_unit(go + "\n}\n") == "    "
    assert document_indent_unit(go + "  \n}\n", "go") == "    "  # the user indented with spaces
    assert document_indent_unit("def f():\n    return 1\n\t\n", "go") == "    "  # code lines decide
    assert reindent("a\n    b\n        c", "\t") == "a\n\tb\n\t\tc"
    assert reindent("a\n\tb", "    ") == "a\n    b"
    c = ctx_at("def f():\n\tif x:\n\t\t|\n")
    assert finalize("y = 1\n        return y", c, indent_unit="\t") == "y = 1\n\t\treturn y"


def test_crlf_documents_get_crlf_suggestions():
    c = ctx_at("def f():\r\n    |\r\n")
    assert finalize("x = 1\n    return x", c) == "x = 1\r\n    return x"


def test_typed_through_reuses_the_last_suggestion():
    last = Suggestion(prefix="def f():\n    ", suffix="\n", mode="block", text="return 42\n    # done")
    assert typed_through(last, CursorContext("def f():\n    ", "\n")) == last.text
    assert typed_through(last, CursorContext("def f():\n    ret", "\n")) == "urn 42\n    # done"
    assert typed_through(last, CursorContext("def f():\n    rex", "\n")) is None  # typed something else
    assert typed_through(last, CursorContext("def f():\n    ret", "\nx\n")) is None  # text below changed
    assert typed_through(last, CursorContext("def f():\n    return 42\n    # done", "\n")) is None  # all typed


# ------------------------------------------------------------------------------ stubs (code action)

PY = '''import os


def documented(a, b):
    """Add a and b."""


def passing(x):
    pass  # TODO


def ellipsis(x): ...


def todo(x):
    """Later."""
    raise NotImplementedError("soon")


def real(x):
    return x + 1


class C:
    def method(self):
        def inner():
            pass
        return inner
'''


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n")


def test_python_stubs_are_found_and_real_bodies_are_not():
    s = actions.find_stub(PY, line_of(PY, "def documented"), "python")
    assert s.name == "documented" and s.start == s.end == PY.index('"""Add a and b."""') + len('"""Add a and b."""')
    assert s.lead == "\n    "

    s = actions.find_stub(PY, line_of(PY, "pass  # TODO"), "python")
    assert s.name == "passing"
    assert PY[s.start : s.end] == "    pass  # TODO" and s.lead == "    "

    s = actions.find_stub(PY, line_of(PY, "def ellipsis"), "python")
    assert s.name == "ellipsis" and PY[s.start : s.end] == " ..." and s.lead == "\n    "

    s = actions.find_stub(PY, line_of(PY, "raise NotImplementedError"), "python")
    assert s.name == "todo" and PY[s.start : s.end].strip() == 'raise NotImplementedError("soon")'

    assert actions.find_stub(PY, line_of(PY, "return x + 1"), "python") is None
    assert actions.find_stub(PY, line_of(PY, "import os"), "python") is None
    assert actions.find_stub(PY, line_of(PY, "def method"), "python") is None  # real body
    s = actions.find_stub(PY, line_of(PY, "def inner"), "python")  # the innermost function
    assert s.name == "inner" and s.indent == "            "


def test_unparsable_python_uses_the_indentation_heuristic():
    text = 'def broken(:\n\ndef stub(a):\n    """Doc."""\n    pass\n\nx = (\n'
    s = actions.find_stub(text, line_of(text, "def stub"), "python")
    assert s is not None and s.name == "stub" and text[s.start : s.end] == "    pass"
    real = 'x = (\ndef f(a):\n    return a\n'
    assert actions.find_stub(real, 1, "python") is None


def test_brace_languages():
    js = "function add(a, b) {\n}\n\nfunction sub(a, b) { return a - b; }\n"
    s = actions.find_stub(js, 0, "javascript")
    assert s.name == "add" and s.lead == "\n    " and s.tail == "\n"
    assert js[: s.start].endswith("{") and js[s.end :].startswith("}")
    assert actions.find_stub(js, line_of(js, "function sub"), "javascript") is None
    one = "int f(void) {}\n"
    s = actions.find_stub(one, 0, "c")
    assert s is not None and one[: s.start].endswith("{") and s.tail == "\n"


def test_a_stub_is_found_by_name_where_it_moved():
    """A code action names its stub; resolved after lines were inserted or deleted above
    it, the stub is found by that name, nearest the line it was listed at."""
    moved = "import json\nimport re\n\n" + PY
    s = actions.find_stub_named(moved, "passing", line_of(PY, "def passing"), "python")
    assert s is not None and s.name == "passing" and s.def_line == line_of(moved, "def passing")
    assert moved[s.start : s.end] == "    pass  # TODO"
    assert actions.find_stub_named(moved, "real", line_of(PY, "def real"), "python") is None  # not a stub
    assert actions.find_stub_named(moved, "gone", 3, "python") is None
    # two stubs of one name (methods of two classes): the one nearest the listed line
    twice = "class A:\n    def f(self):\n        pass\n\n\nclass B:\n    def f(self):\n        pass\n"
    assert actions.find_stub_named("\n" + twice, "f", 6, "python").def_line == 7
    assert actions.find_stub_named("\n" + twice, "f", 1, "python").def_line == 2
    js = "// added\n// lines\nconst add = 1;\nfunction add2(a, b) {\n}\nfunction add(a, b) {\n}\n"
    s = actions.find_stub_named(js, "add", 0, "javascript")
    assert s is not None and s.def_line == 5 and s.name == "add"


def test_body_prompt_and_result():
    s = actions.find_stub(PY, line_of(PY, "pass  # TODO"), "python")
    prefix, suffix = actions.body_prompt_context(PY, s)
    assert prefix.endswith("def passing(x):\n    ") and suffix.startswith("\n\n\ndef ellipsis")
    assert actions.finish_body("return x * 2\n    ", s, truncated=False) == "    return x * 2"
    assert actions.finish_body("y = x\n    return y\n    z = fo", s, truncated=True) == "    y = x\n    return y"
    assert actions.finish_body("y = x\n    z = f(\n        y,\n        ", s, truncated=True) == "    y = x"
    assert actions.finish_body("  \n", s, truncated=False) == ""
    # a leading line break (seen in VS Code's editor, issue 15) leaves no whitespace-only line
    assert actions.finish_body("\n    return x * 2", s, truncated=False) == "    return x * 2"
    go = "package main\n\nfunc f() int {\n}\n"
    assert actions.find_stub(go, 2, "go").indent == "\t"  # gofmt's, in a file with nothing indented yet


# ------------------------------------------------------------------------------ settings


def test_settings_from_camel_case_with_a_nested_engine_config():
    s = ServerSettings().merged(
        {"maxNewTokens": 64, "timeBudgetMs": 500, "method": "pld", "engine": {"maxDraftTokens": 16, "useSkip": True}}
    )
    assert s.max_new_tokens == 64 and s.time_budget_s == 0.5 and s.method == "pld"
    assert s.engine.max_draft_tokens == 16 and s.engine.use_skip is True
    cfg = s.decode_config()
    assert cfg.method == "pld" and cfg.max_new_tokens == 64 and cfg.time_budget_s == 0.5 and cfg.max_draft_tokens == 16
    # a later change keeps the earlier engine options it does not mention
    t = s.merged({"engine": {"nMax": 8}})
    assert t.engine.max_draft_tokens == 16 and t.engine.n_max == 8
    assert ServerSettings().merged({"timeBudgetMs": 0}).time_budget_s is None
    assert ServerSettings().merged({"timeBudgetMs": None}).time_budget_s is None
    assert ServerSettings().time_budget_ms == 2000 and ServerSettings().max_prompt_tokens == 2048


def test_settings_changes_that_reload_the_model():
    base = ServerSettings()
    assert base.merged({"model": "/tmp/other"}).needs_reload(base)
    assert base.merged({"dtype": "bfloat16"}).needs_reload(base)
    assert base.merged({"packWeights": "off"}).needs_reload(base) and base.pack_weights == "auto"
    assert base.merged({"explicitAttention": "auto"}).needs_reload(base) and base.explicit_attention == "off"
    assert not base.merged({"maxNewTokens": 5}).needs_reload(base)


def test_the_window_is_planned_ahead_by_default_only_without_prefetch():
    base = ServerSettings()
    assert base.prepare_window == "auto" and base.prefetch and not base.plans_window
    assert base.merged({"prefetch": False}).plans_window
    assert base.merged({"prepareWindow": True}).plans_window
    assert not base.merged({"prepareWindow": False, "prefetch": False}).plans_window


@pytest.mark.parametrize(
    "bad",
    [{"maxNewTokens": 0}, {"maxNewTokens": "x"}, {"method": "magic"}, {"packWeights": "yes"}, {"explicitAttention": "on"}, {"enabled": "yes"},
     {"engine": {"nMin": 0}}, {"model": ""}, {"prepareWindow": "yes"}, {"prepareWindow": 1}],
)
def test_bad_settings_are_rejected_with_a_message(bad):
    with pytest.raises(SettingsError) as err:
        ServerSettings().merged(bad)
    assert str(err.value)


# ------------------------------------------------------------------------------ positions


def test_positions_outside_the_document_are_errors():
    doc = TextDocument("file:///x.py", "ab\ncd\n")
    assert offset_at(doc, types.Position(line=1, character=2)) == 5
    assert offset_at(doc, types.Position(line=2, character=0)) == 6  # the end of the document
    for line, char in ((2, 1), (3, 0), (0, 3)):
        with pytest.raises(BadRequest):
            offset_at(doc, types.Position(line=line, character=char))
    assert position_at(doc, 5) == types.Position(line=1, character=2)
    no_eol = TextDocument("file:///y.py", "ab")
    with pytest.raises(BadRequest):
        offset_at(no_eol, types.Position(line=1, character=0))
    emoji = TextDocument("file:///z.py", "s = '😀'\n")
    assert offset_at(emoji, types.Position(line=0, character=7)) == 6  # utf-16 units


def test_suffix_cap(tiny_tokenizer):
    fim = detect_fim(tiny_tokenizer)
    cursor = len("".join(LINES[:100]))
    ctx = CursorContext(TEXT[:cursor], TEXT[cursor:])
    p = build_prompt(tiny_tokenizer, fim, ctx, 2048, max_suffix_tokens=64)
    assert 0 < p.suffix_tokens <= 64 and ctx.suffix[: p.suffix_end].endswith("\n")
    assert len(p.ids) <= 2048


def test_a_multi_line_output_cut_by_a_limit_keeps_whole_lines():
    from lsp_server.postprocess import cut_at_limit

    assert cut_at_limit("x = 1\n    y = fo") == "x = 1"
    # one line: without the word it ends in, which the limit may have cut in two
    assert cut_at_limit("0x00, 0x00, 0") == "0x00, 0x00,"
    assert cut_at_limit("x = fo") == "x ="
    assert cut_at_limit("\n    y = fo") == "\n    y ="
    assert cut_at_limit("x = f(") == "x = f("  # ends in no word: as it is
    assert cut_at_limit("result") == "result"  # a word and nothing else: as it is
    assert cut_at_limit("x = 1 ") == "x = 1 "  # a space after it: the word was whole


def test_a_multi_line_output_cut_by_a_limit_leaves_no_bracket_open():
    """Cut inside a call it opened, the suggestion ends before the line that opened it
    (seen: ``.agg(`` and four argument lines, unclosed); brackets in strings do not
    count, and brackets it closes that the cursor's code opened are not its own."""
    from lsp_server.postprocess import cut_at_limit

    text = "x = 1\n    total = df.agg(\n        a=('x', 'sum'),\n        b=('y', 'me"
    assert cut_at_limit(text) == "x = 1"
    assert cut_at_limit("x = f(1)\n    y = '(('\n    z = g(") == "x = f(1)\n    y = '(('"
    assert cut_at_limit("a, b)\n    y = 2\n    z = g(") == "a, b)\n    y = 2"
    # nothing closes before the cut: the whole lines, as without brackets
    assert cut_at_limit("total = df.agg(\n    a=1,\n    b=") == "total = df.agg(\n    a=1,"


def test_a_docstring_between_auto_closed_triple_quotes_may_take_lines():
    """At ``\"\"\"|\"\"\"`` (Pylance closes the triple quote in VS Code; the thirty-ninth
    session's probe: 4 of 10 such cursors in short files showed nothing, the model laying
    the docstring out on lines of their own and the line rule cutting it at its first line
    break): the stop rule runs to the closer the model writes and ends before it; the
    suggestion is one line when the model wrote one, else its lines, ending at the
    cursor line's indentation so that the closer already there goes below them."""
    from lsp_server.postprocess import docstring_body

    c = ctx_at('def mean(xs):\n    """|"""\n    return sum(xs) / len(xs)\n')
    assert c.mode == "line" and c.docstring == '"""' and c.opened == ""
    stop = make_stop_fn(c.mode, c.line_prefix, c.following_lines, docstring=c.docstring)
    one = 'Return the mean."""\n    return 0\n'
    assert one[: stop(one)] == "Return the mean."
    assert finalize(one[: stop(one)], c) == "Return the mean."
    out = '\n    Return the mean.\n\n    Args:\n        xs: numbers.\n    """\n    return sum(xs)\n'
    cut = out[: stop(out)]
    assert cut == "\n    Return the mean.\n\n    Args:\n        xs: numbers.\n    "
    whole = "\n    Return the mean.\n    \n    Args:\n        xs: numbers.\n    "  # the blank line indented
    assert finalize(cut, c, indent_unit="    ") == whole
    # what is answered early (the lines so far) is the start of it: taking it, the rest follows
    assert whole.startswith(finalize("\n    Return the mean.\n", c, indent_unit="    "))
    # text, then the closer on the same line: the closer goes on a line of its own (PEP 257)
    assert docstring_body("Return the mean.\n\n    Of xs.", c) == "Return the mean.\n    \n    Of xs.\n    "
    # a limit cut it: whole lines, without a section header whose text was cut
    assert docstring_body("\n    Return the mean.\n\n    Returns:", c) == "\n    Return the mean.\n    "
    assert docstring_body("\n    ", c) == "" and docstring_body("", c) == ""
    # ... and a limit that cut it mid-sentence: back to the last line that ends one
    from lsp_server.postprocess import whole_sentences

    assert whole_sentences("\n    Encode it.\n\n    If skipkeys is false, it is a TypeError to") == "\n    Encode it."
    assert whole_sentences("Encode it.\n    Then send") == "Encode it."
    assert whole_sentences("\n    Encode it\n    and send") == "\n    Encode it\n    and send"  # no sentence ends: all
    assert stop("\n    Return the mean.\nx = 1\n") == len("\n    Return the mean.")  # a dedent ends it
    # a module docstring the model indented: back to the cursor line's indentation
    top = ctx_at('"""|"""\nimport sys\n')
    assert top.docstring == '"""'
    assert finalize("\n    Print the arguments.\n      Indented.\n", top) == "\nPrint the arguments.\n  Indented.\n"
    # the opener typed with text after it, single quotes, a call's argument, Enter at the opener
    assert ctx_at('    """Return the |"""\n').docstring == '"""'
    assert ctx_at("    '''|'''\n").docstring == "'''"
    assert ctx_at('    text = dedent("""|""")\n').docstring == '"""'
    assert ctx_at('def f():\n    """\n    |"""\n').docstring == '"""'
    assert ctx_at('def f():\n    """Sum.\n\n    More.\n    |"""\n').docstring == '"""'  # lines accepted above
    assert ctx_at('    x = """a""" + """|"""\n').docstring == '"""'  # the second string's
    for text in ('x = "|"', '    # """|"""\n', '    """|"""  + x\n', 'def f():\n    x = 1\n    |"""\n', 'def f():\n    """Sum."""\n    |"""\n'):
        assert ctx_at(text).docstring == "", text
    # between the quotes on lines of their own (Enter after the opener): block mode, and
    # at a limit the same prose cut
    inside = ctx_at('def f():\n    """\n    |\n    """\n    return 1\n')
    assert inside.mode == "block" and inside.docstring == "" and inside.in_docstring == '"""'
    template = ctx_at('def add(a, b):\n    """\n    |\n\n    Args:\n        a (int): \n    """\n    return a + b\n')
    assert template.in_docstring == '"""'  # the closer further down (autoDocstring's template)
    stop = make_stop_fn(template.mode, template.line_prefix, template.following_lines, docstring=template.in_docstring)
    assert stop('Add two numbers."""\n') == len("Add two numbers.")  # a closer it writes ends it
    between = 'def f():\n    """\n    Doc.\n    """\n    |\n\ndef g():\n    """\n    Doc g.\n    """\n'
    for text in ('def f():\n    x = 1\n    |\n    """\n', 'def f():\n    """Sum."""\n    |\n    """\n', 'def f():\n    """\n    |\n    x = 1\n', between):
        assert ctx_at(text).in_docstring == "", text  # code between two docstrings is not in one
    assert whole_sentences("Sum of xs.\n\n    Examples:") == "Sum of xs."
    # doc comment lines a limit cut inside a code fence they opened (a Rust ``/// |``)
    from lsp_server.postprocess import comment_lines

    rs = ctx_at("/// |\npub fn parse_port(s: &str) -> Option<u16> {\n")
    cut = 'Parses a port.\n///\n/// # Examples\n///\n/// ```\n/// assert_eq!(parse_port("80"), Some(80));'
    assert comment_lines(cut, rs) and whole_sentences(cut) == "Parses a port."
    closed = cut + "\n/// ```\n///\n/// Returns None when it is not a port."
    assert whole_sentences(closed) == closed
    py = ctx_at("def f(xs):\n    # |\n    return 1\n")
    assert not comment_lines("the total.\n    total = sum(xs)", py)  # code after the comment: not prose
    # ``/** | */`` (an editor closes ``/**`` on its line): the model's `` * `` lines, the
    # editor's `` */`` below them one column in
    js = ctx_at("/** | */\nfunction add(a, b) {}\n")
    assert js.docstring == "*/" and js.mode == "line"
    stop = make_stop_fn(js.mode, js.line_prefix, js.following_lines, docstring=js.docstring)
    out = "\n * Adds two numbers.\n * @param {number} a\n */\nfunction"
    assert finalize(out[: stop(out)], js) == "\n * Adds two numbers.\n * @param {number} a\n"  # + the editor's " */"
    assert finalize("Adds two numbers. ", js) == "Adds two numbers."
    assert ctx_at("  /**|*/\n").docstring == "*/" and finalize("\n   * Sum.\n   ", ctx_at("  /**|*/\n")) == "\n   * Sum.\n   "
    assert ctx_at("x = a /* b */ + c; /* done */ |*/\n").docstring == ""  # no comment opened here
    # without it, as before: the first line break ends a line suggestion
    assert make_stop_fn("line", '    """')(out) == 0


def test_docstring_rules_read_strings_and_comments():
    """Inside a triple-quoted string or not is read as a lexer reads it: a ``\"\"\"`` in a
    comment, a ``'''`` docstring or a one-line string neither opens nor closes one (the
    count of quotes took them for openers, and every block below a multi-line docstring
    was then taken for docstring text, its suggestion stopped at ``\"\"\"``)."""
    from lsp_server.strings import open_triple_quote

    assert open_triple_quote('x = 1\ndoc = """Sum') == '"""'
    assert open_triple_quote("doc = '''Sum") == "'''"
    assert open_triple_quote('doc = """Sum"""\n') == ""
    for code in ('# a """ in a comment\n', "'''Use \"\"\" here.'''\n", "Q = '\"\"\"'\n", 'Q = "\\"\"\""\n',
                 'r"a\\\\" + """x"""\n', 's = "open\n', '"""a \\""" b"""\n'):
        assert open_triple_quote(code) == "", code  # ends in code
    assert open_triple_quote("x = 1  # note") == "" and open_triple_quote('x = "abc') == ""  # a comment, a one-line string
    assert open_triple_quote('s = "a\\\nb" + """') == '"""'  # a one-line string continued by a backslash, then an opener
    # by language: ``//`` and ``/* */`` are comments in Kotlin, ``#`` is not; in Python ``//`` divides
    assert open_triple_quote('// a """ here\nval s = """', "kotlin") == '"""'
    assert open_triple_quote('/* """ */ val s = 1\n', "kotlin") == ""
    assert open_triple_quote('n = len(s) // 2; doc = """', "python") == '"""'
    # code below a multi-line docstring, after such a line: not in a docstring
    below = ('\n    return total\n\n\ndef c():\n    """Docstring of c.\n\n    More.\n    """\n    return 2\n')
    for before in ("def a():\n    '''Use \"\"\" here.'''\n", 'x = 1  # a """ in a comment\n', "QUOTE = '\"\"\"'\n"):
        ctx = ctx_at(before + "\n\ndef b(xs):\n    total = 0\n    |" + below)
        assert ctx.mode == "block" and ctx.in_docstring == "" and ctx.docstring == "", before
        # ... and a real docstring after it still is one
        assert ctx_at(before + 'def b(xs):\n    """|"""\n').docstring == '"""', before
        assert ctx_at(before + 'def b(xs):\n    """\n    |\n    """\n').in_docstring == '"""', before
    kotlin = ctx_at('// a """ quote\nval doc = """\n    |\n    """\n', language="kotlin")
    assert kotlin.in_docstring == '"""' and ctx_at('// a """ quote\nval doc = """\n    |\n    """\n').in_docstring == ""


def test_an_empty_line_below_an_exit_at_its_indentation_is_dead():
    from lsp_server.postprocess import after_exit

    assert after_exit(ctx_at("def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n        |\n    return min(x, hi)\n"))
    assert after_exit(ctx_at("for x in xs:\n    if x:\n        continue\n        # skip\n\n        |\n"))
    assert after_exit(ctx_at("  if (!ok) {\n    throw new Error(\"no\");\n    |\n  }\n", language="javascript"))
    # an exit whose brackets close on a line of their own, read from its first line
    assert after_exit(ctx_at("def f(a, b):\n    return (\n        a  # first\n\n        + b\n    )\n    |\n"))
    assert after_exit(ctx_at("function f() {\n  return {\n    a: 1,\n  };\n  |\n}\n", language="javascript"))
    for text, lang in (("def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    |\n", ""),  # one level out
                       ("def f():\n    return foo(\n        |\n", ""),  # inside the return's call
                       ("def f():\n    total = sum(\n        xs\n    )\n    |\n", ""),  # a call's own closer
                       ("  if (ok) {\n    return 1;\n  }\n  |\n", "javascript"),  # a block's closer
                       ("  xs.forEach(x => {\n    return x;\n  });\n  |\n", "javascript"),  # a callback's exit
                       ("def f():\n        return (\n    )\n    |\n", ""),  # opened at another indentation
                       ('def f():\n    """Doc.\n\n    return the thing\n    |\n    """\n', ""),  # a docstring's words
                       ("- return it\n|", "markdown"),  # prose
                       ("def f():\n    return 1|\n", "")):  # not an empty line
        assert not after_exit(ctx_at(text, language=lang)), text


def test_a_block_suggestion_never_leaves_a_triple_quoted_string_open():
    """A block suggestion cut in a docstring it opened ends before the opener's line: once
    accepted, everything below the cursor would be inside the string."""
    from lsp_server.postprocess import cut_open_string

    sig = ctx_at("import requests\n\n\ndef fetch(url: str, timeout: |\n")
    cut = 'int = 10) -> str:\n    """\n    Fetches a webpage from the given URL with a specified timeout.'
    assert cut_open_string(cut, sig) == "int = 10) -> str:" and finalize(cut, sig) == "int = 10) -> str:"
    body = ctx_at("def f():\n    |\n")
    assert cut_open_string('"""Summary of it', body) == ""  # the opener on the first line: nothing
    closed = 'x = 1\n    y = """a"""\n    doc = """\n    text\n    """'
    assert cut_open_string(closed, body) == closed  # closed strings stay
    assert cut_open_string("x = 1  # a \"\"\" quote", body) == "x = 1  # a \"\"\" quote"  # in a comment
    inside = ctx_at('def f():\n    """\n    |\n    """\n')  # the cursor in a docstring: its own rules
    assert cut_open_string('text\n    """', inside) == 'text\n    """'


def test_typed_through_with_auto_closed_brackets():
    last = Suggestion(prefix="    x = ", suffix="\n", mode="block", text="foo(a, b)\n    y = 2")
    # the user typed "foo(" and the editor put ")" right of the cursor
    assert typed_through(last, CursorContext("    x = foo(", ")\n")) == "a, b"
    assert typed_through(last, CursorContext("    x = foo(a, b", ")\n")) is None  # all of the line typed
    assert typed_through(last, CursorContext("    x = foo(", "]\n")) is None  # not what the suggestion closes
    assert typed_through(last, CursorContext("    x = foo(", "zz\n")) is None  # real text appeared


def test_a_brackets_contents_may_take_lines_of_their_own():
    """Right after ``request(`` with the auto-closed ``)`` right of the cursor (the thirty-fifth
    session's user flows: 5 of 6 such cursors showed nothing, the model laying the
    arguments out on lines of their own as the document's other calls were): the stop rule
    lets a suggestion that starts with a line break run to the line that closes the bracket,
    the suggestion ends with a line break and the closer's indentation (the ``)`` lands
    there), and Enter (the editor moving the ``)`` below) keeps the rest of it."""
    c = ctx_at("class C:\n    def post(self, url):\n        return self.request(|)\n\n    def put(self):\n        pass\n")
    assert c.mode == "line" and c.opened == ")"
    out = '\n            "POST",\n            url,\n        )\n\n    def patch(self):\n'
    stop = make_stop_fn(c.mode, c.line_prefix, c.following_lines, opened=bool(c.opened))
    cut = out[: stop(out)]
    assert cut == '\n            "POST",\n            url,\n        )'
    assert finalize(cut, c, indent_unit="    ") == '\n            "POST",\n            url,\n        '
    assert finalize("url)", c) == "url"  # one line as before
    assert finalize('\n            "POST",\n            url', c) == '\n            "POST",\n            url\n        '  # no closer: the line's indentation
    assert finalize("\n            url,\n            data)", c) == "\n            url,\n            data"  # the closer after the last item
    assert finalize("\n        )", c) == ""  # nothing inside
    js = ctx_at('async function save(u) {\n  const r = await fetch("/u", {|});\n}\n')
    assert js.opened == "});"
    assert finalize('\n    method: "POST",\n    body: "}",\n  ', js, indent_unit="  ") == '\n    method: "POST",\n    body: "}",\n  '
    for text in ("x = f(a|)", "x = f(|a)", 'x = "|"', "x = f(|) + 1", "x = [|)", 'x = f"({|})"'):  # not right after the opener of what follows, or in a string
        assert ctx_at(text).opened == "", text
    assert make_stop_fn("line", "x = f(")("\n    a,\n)\n") == 0  # without ``opened``: the first newline, as before
    last = Suggestion(c.prefix, c.suffix, c.mode, '\n            "POST",\n            url,\n        ')
    split = CursorContext(c.prefix + "\n            ", "\n        " + c.suffix)
    assert typed_through(last, split) == '"POST",\n            url,'
    assert typed_through(last, CursorContext(c.prefix + "\n            ", "\n    " + c.suffix)) is None  # another indentation


def test_what_the_model_writes_in_cjk_goes_where_the_document_has_none():
    """The 0.5B model commented a new ``def main():`` body in Chinese (thirtieth session's
    user flows): comment lines in CJK are dropped, trailing ones cut, and the suggestion
    ends before CJK in code; a document that holds CJK itself keeps it."""
    c = ctx_at("import os\n\n\ndef |\n")
    generated = "main():\n    # \u83b7\u53d6\u5f53\u524d\u76ee\u5f55\n    current_dir = os.getcwd()"
    assert finalize(generated, c) == "main():\n    current_dir = os.getcwd()"
    body = ctx_at("def g():\n    |\n")
    assert finalize("x = f()  # \u8ba1\u7b97\n    y = 2", body) == "x = f()\n    y = 2"
    assert finalize("z = 1\n    print(\"\u4f60\u597d\")\n    w = 2", body) == "z = 1"  # in a string: ends there
    assert finalize('"""\u8ba1\u7b97"""\n    return 1', body) == ""  # a docstring: nothing before it
    assert finalize("\u8ba1\u7b97 the sum", ctx_at("def g():\n    # |\n")) == ""  # a comment the user began
    assert finalize("1  # \u4e00", ctx_at("x = |\n")) == "1"  # line mode: the code stays
    assert finalize("b'\u30ab'", ctx_at("x = |\n")) == ""
    mixed = ctx_at("# \u4e2d\u6587\ndef |\n")  # the document holds CJK: untouched
    assert finalize("main():\n    # \u83b7\u53d6", mixed) == "main():\n    # \u83b7\u53d6"
    assert finalize("main():\n    # caf\u00e9 \u00fcber", c) == "main():\n    # caf\u00e9 \u00fcber"  # not CJK


def test_a_block_suggestion_never_makes_the_code_below_unreachable():
    """On an empty line with code below at the same indentation, the suggestion ends before
    its own ``return`` (or raise, break, continue, throw) at that indentation (the thirtieth
    session's user flows: ``return key, value`` above the function's own return)."""
    c = ctx_at("def parse(line):\n    key, _, value = line.partition('=')\n    |\n    return key.strip(), value.strip()\n")
    assert finalize("key = key.lower()\n    return key, value", c) == "key = key.lower()"
    assert finalize("return key, value", c) == ""
    assert finalize("if not key:\n        return None\n    key = key.lower()", c) == "if not key:\n        return None\n    key = key.lower()"
    inner = ctx_at("def f(x):\n    if x:\n        |\n    return 1\n")  # the code below is outside the block
    assert finalize("y = 2\n        return y", inner) == "y = 2\n        return y"
    last = ctx_at("def f(x):\n    |\n")  # nothing below
    assert finalize("y = 2\n    return y", last) == "y = 2\n    return y"
    loop = ctx_at("for x in xs:\n    if x:\n        |\n        log(x)\n")
    assert finalize("continue", loop) == ""
    assert finalize("raise ValueError(x)", loop) == ""
    named = ctx_at("def f():\n    |\n    returned = 1\n")  # a name that starts with "return"
    assert finalize("x = 1\n    returned_value = 2", named) == "x = 1\n    returned_value = 2"
    js = ctx_at("function f(a) {\n  |\n  return a;\n}\n")
    assert finalize("a += 1;\n  return a + 1;", js) == "a += 1;"
    # after a comment being typed (the thirty-ninth session: ``# |`` above a loop got the
    # comment's words and then ``raise Exception(...)``); the comment's own words may say "return"
    comment = ctx_at("def retry(fn, attempts=3):\n    # |\n    for i in range(attempts):\n        fn()\n")
    assert finalize('Base case: raise it\n    raise Exception("An error occurred")', comment) == "Base case: raise it"
    assert finalize("return early when done", comment) == "return early when done"
    assert finalize("try each attempt\n    attempts = max(attempts, 1)", comment) == "try each attempt\n    attempts = max(attempts, 1)"
    cjs = ctx_at("function f(a) {\n  // |\n  return a;\n}\n")
    assert finalize("double it\n  return a * 2;", cjs) == "double it"


def test_a_block_suggestion_never_ends_with_a_header_without_its_body():
    """A suggestion cut after a line that opens a block (the thirty-second session's user
    flows: a dataclass field's suggestion ending in ``def distance_to(...) -> float:``)
    loses that line and the decorators and comments above it; kept when the document's
    next line is the body, or when the header is all there is."""
    field = ctx_at("@dataclass\nclass Point:\n    x: float\n    |\n")
    cut = "y: float\n\n    def __str__(self):\n        return 'p'\n\n    def distance_to(self, other) -> float:"
    assert finalize(cut, field) == "y: float\n\n    def __str__(self):\n        return 'p'"
    assert finalize("y: float\n\n    @property\n    # the norm\n    def norm(self):", field) == "y: float"
    assert finalize("y: float\n    for p in ps:  # each", field) == "y: float"
    assert finalize("def norm(self):", field) == "def norm(self):"  # the header alone: the user writes the body
    assert finalize("@property\n    def norm(self):", field) == "@property\n    def norm(self):"  # nothing else
    body_below = ctx_at("class A:\n    |\n        return 1\n")  # the document's next line is its body
    assert finalize("x = 1\n    def f(self):", body_below) == "x = 1\n    def f(self):"
    js = ctx_at("function f(a) {\n  |\n}\n")
    assert finalize("const b = a;\n  if (b) {", js) == "const b = a;"
    assert finalize("const b = {\n    x: 1,\n  };", js) == "const b = {\n    x: 1,\n  };"  # closed: kept
    assert finalize("y = 1\n    z = y", field) == "y = 1\n    z = y"  # no header: unchanged
    body = ctx_at("def load(path):\n    |\n")
    # a handler cut off: the try goes with it (a try without a handler is no better)
    assert finalize("data = None\n    try:\n        data = read(path)\n    except OSError:", body) == "data = None"
    assert finalize("if path:\n        x = 1\n    else:", body) == "if path:\n        x = 1"  # an if stands alone
    tried = "try:\n        data = read(path)\n    except OSError:"
    assert finalize(tried, body) == tried  # the try is the first line: nothing else would be left


def test_a_json_suggestion_never_leaves_a_trailing_comma_before_the_closer():
    """In a JSON document a block suggestion's last line loses its comma when the
    document's next line closes the object or array; not when more entries follow, and
    not in other languages (a trailing comma is valid in Python or JavaScript)."""
    ctx = ctx_at('{\n  "name": "app",\n  |\n}\n')
    text = '"license": "MIT",\n  "dependencies": {\n    "express": "^4.17.1"\n  },'
    assert finalize(text, ctx, language="json") == text[:-1]
    assert finalize('"license": "MIT",', ctx, language="json") == '"license": "MIT"'
    assert finalize(text, ctx, language="javascript") == text
    more = ctx_at('{\n  "name": "app",\n  |\n  "version": "1.0.0"\n}\n')
    assert finalize('"license": "MIT",', more, language="json") == '"license": "MIT",'
    array = ctx_at('[\n  1,\n  |\n]\n')
    assert finalize("2,\n  3,", array, language="json") == "2,\n  3"


def test_a_completion_items_documentation_fences_what_it_holds():
    from lsp_server.server import _code_block

    assert _code_block("x = 1\ny = 2", "python").value == "```python\nx = 1\ny = 2\n```"
    md = "Install it:\n\n```bash\npip install x\n```"  # a suggestion in a Markdown file
    assert _code_block(md, "markdown").value == "````markdown\n" + md + "\n````"
    assert _code_block("a\nb", None).value == "```\na\nb\n```"


def test_a_range_moves_with_the_edits_around_it():
    from lsp_server.documents import moved_range

    before = "import os\n\ndef f():\n    pass\n\nx = 1\n"
    start = before.index("    pass")
    end = start + len("    pass")
    assert moved_range(before, before, start, end) == (start, end)
    now = "import sys\n" + before  # a line above: it moved down
    assert now[slice(*moved_range(before, now, start, end))] == "    pass"
    now = before.replace("x = 1", "x = 12345")  # below: it stayed
    assert moved_range(before, now, start, end) == (start, end)
    now = before.replace("import os", "import o")  # a deletion above
    assert now[slice(*moved_range(before, now, start, end))] == "    pass"
    assert moved_range(before, before.replace("pass", "pas"), start, end) is None  # in it
    assert moved_range(before, "#\n" + before + "#\n", start, end) is None  # on both sides
