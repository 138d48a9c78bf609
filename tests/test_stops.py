from fastcoder.stops import block_end


def test_dedent_ends_block_and_cuts_before_newline():
    fn = block_end(4, check_first_line=True)
    assert fn("    x = 1\n    return x\n") is None
    text = "    x = 1\n    return x\n\ndef g():"
    assert text[: fn(text)] == "    x = 1\n    return x\n"
    assert fn("    x = 1\n  ") is None  # indentation still unknown: no content yet
    assert fn("def g():") == 0  # an immediate dedent yields nothing


def test_first_line_continues_the_cursor_line_by_default():
    fn = block_end(8)
    assert fn("x)\n        y = 2") is None
    assert "x)\n        y = 2\n    z"[: fn("x)\n        y = 2\n    z")] == "x)\n        y = 2"


def test_blank_line_at_top_level_and_single_line():
    fn = block_end(0, check_first_line=True)
    assert fn("import os\nimport sys\n") is None
    t = "import os\n\nx = 1"
    assert t[: fn(t)] == "import os"
    one = block_end(4, single_line=True)
    assert one("abc") is None and one("abc\ndef") == 3


def test_a_rule_after_a_healed_prefix_cuts_in_the_whole_text():
    """``rule.after(n)`` (the server's token healing: the output starts with ``n``
    characters typed already) judges the text after them, fed whole or in pieces, and
    its cut indexes the whole text."""
    rule = block_end(4, check_first_line=True)
    body = "    x = 1\n    return x\n\ndef g():"
    for heal in ("", "re", "    "):
        text = heal + body
        want = rule(body)
        assert rule.after(len(heal))(text) == want + len(heal)
        m = rule.after(len(heal)).matcher()
        cuts = [m.feed(text[i : i + 3]) for i in range(0, len(text), 3)]
        assert next(c for c in cuts if c is not None) == want + len(heal)


def test_opened_lines_run_to_the_line_that_closes_the_bracket():
    """At ``request(|)``: an output that starts on the cursor's line is one line; one that
    starts with a line break runs to the end of the line closing the bracket (brackets in
    strings do not count), fed whole or in pieces."""
    from fastcoder.stops import opened_lines

    rule = opened_lines()
    assert rule('url, data\n    x = 1') == len("url, data")
    lines = '\n        "POST",\n        f(url, ")"),\n        data=[1, (2)],\n    )\n    return x\n'
    want = lines.index("    )\n") + len("    )")
    assert rule(lines) == want
    m = rule.matcher()
    cuts = [m.feed(lines[i : i + 2]) for i in range(0, len(lines), 2)]
    assert next(c for c in cuts if c is not None) == want
    assert rule('\n        "POST",\n        url,\n    ') is None  # no closer yet: goes on
    assert rule("\n    a,\n    'it''s (',\n    b)\nnext") == len("\n    a,\n    'it''s (',\n    b)")
