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


def test_a_loop_keeps_its_first_writing():
    """Greedy decoding that writes the same line or block again and again stops: the first
    writing stays, what repeats it goes (a body seen with ``title = title.replace(...)``
    30 times, to the token cap)."""
    from fastcoder.stops import loop

    rule = loop()
    line = "    title = title.replace('a', 'b')\n"
    text = "def f(title):\n" + line * 6
    assert text[: rule(text)] == "def f(title):\n" + line.rstrip("\n")
    assert rule("def f(title):\n" + line * 3) is None  # three times: not yet
    block = "    x = foo()\n    y = bar(x)\n"
    text = "a = 1\n" + block * 3
    assert text[: rule(text)] == "a = 1\n" + block.rstrip("\n")
    assert rule("a = 1\n" + block * 2) is None
    # the body seen: 12 lines, written again (4 lines and more: twice is a loop)
    cycle = "".join(f"    title = title.replace({c!r}, '-')\n" for c in ":!?'()[]{},.")
    text = "def slugify(title):\n" + cycle * 2 + cycle[:40]
    assert text[: rule(text)] == "def slugify(title):\n" + cycle.rstrip("\n")
    assert rule("def slugify(title):\n" + cycle + cycle[: len(cycle) // 2]) is None
    # what real files repeat: rows of numbers, rules, nested #endif (three), counters
    assert rule("[0, 0, 0, 0],\n" * 6) is None
    assert rule("# " + "-" * 60 + "\n") is None
    assert rule("#endif\n" * 3) is None
    assert rule("".join(f"self.assertEqual(f({i}), {i})\n" for i in range(8))) is None
    assert rule("table = [0x00, " + "0x00, " * 12 + "\n") is None


def test_closers_are_kept_as_often_as_the_code_before_left_open():
    """Three nested ``#ifdef`` s get three ``#endif`` s (the loop rule kept one); written
    more often still, the rest goes; a count from part of the code never cuts sooner than
    the plain rule (a line four times)."""
    from fastcoder.stops import loop, open_directives

    before = "#ifndef X_H\n#define X_H\n#ifdef A\n  # if defined(B)\nint x;\n#endif\n#ifdef C\n// see #if above\n"
    assert open_directives(before) == {"#endif": 3}
    assert open_directives("#region a\n#region b\n#endregion\nint y;\n") == {"#endregion": 1}
    assert open_directives("#if A\n#endif\n#endif\n") == {}  # more closed than opened: none left
    assert open_directives("x = 1  #if not y\n") == {}
    rule = loop(open_directives("#ifdef A\n#ifdef B\n#ifdef C\nint x;\n"))
    text = "#endif\n" * 30
    assert text[: rule(text)] == "#endif\n#endif\n#endif"
    assert rule("#endif\n" * 3 + "int y;\n") is None
    assert rule("#endif // C\n#endif // B\n#endif // A\n") is None
    text = "#endif\n" * 9
    assert text[: loop({"#endif": 6})(text)] == "#endif\n" * 5 + "#endif"  # six open: six kept
    assert text[: loop({"#endif": 1})(text)] == "#endif"  # one open: cut where it always was
    assert loop({"#endif": 1})("#endif\n" * 3) is None
    assert text[: loop()(text)] == "#endif"
    # the server's completions and bodies count the document's directives before the cursor
    from lsp_server.stops import make_stop_fn

    rule = make_stop_fn("block", "", before="#ifdef A\n#ifdef B\n#ifdef C\nint x;\n")
    assert rule("#endif\n" * 3 + "#endif\n" * 5) == len("#endif\n" * 3) - 1


def test_a_line_that_loops_within_itself_goes_whole():
    from fastcoder.stops import loop

    rule = loop()
    assert rule("result = foo(" + "bar(baz(" * 6) == 0  # the first line: nothing is left
    text = "x = 1\nresult = foo(" + "bar(baz(" * 6
    assert text[: rule(text)] == "x = 1"
    assert rule("name = " + "self.name_of_it" * 3) is None  # a long piece: four times
    assert rule('token = "' + "x" * 40 + '"') is None  # a run of one character is not a loop


def test_a_control_character_ends_the_output():
    from fastcoder.stops import control_chars

    rule = control_chars()
    assert rule("x = 1\ny = \x07\x1b[2J") == len("x = 1\ny = ")
    assert rule("\x00abc") == 0
    # tab, carriage return and form feed (a page break in some sources) are text
    assert rule("\tx = 1\r\n\x0c\ny = 2") is None


def test_the_server_rules_stop_a_loop_in_every_mode():
    from lsp_server.stops import make_stop_fn

    line = "    total = total + 1\n"
    for mode, prefix in (("block", "    "), ("block", "    x = "), ("line", "    x = ")):
        rule = make_stop_fn(mode, prefix, ["    return total"], mid_line_blocks=True)
        if mode == "block":
            text = "x\n" + line * 5
            assert text[: rule(text)] == "x\n" + line.rstrip("\n")
        text = "foo(" + "bar(baz(" * 6
        assert rule(text) == 0, mode
        assert rule("a\x1b") == 1, mode
    # stopDegenerate false: the old rules alone (a generation runs on to its limits)
    rule = make_stop_fn("block", "    ", ["    return total"], mid_line_blocks=True, degenerate=False)
    assert rule("x\n" + line * 5) is None and rule("a\x1b") is None


def test_a_repetition_the_copied_code_holds_is_not_a_loop():
    """An edit copies its original: lines or pieces that the original repeats so are
    kept; a loop of lines it does not hold still ends the output."""
    from fastcoder.stops import loop

    original = "def f():\n    x.append(1)\n    x.append(1)\n    x.append(1)\n    x.append(1)\n    x.append(1)\n"
    assert loop(known=original)(original) is None
    assert loop()(original) == len("def f():\n    x.append(1)")
    looped = "def f():\n" + "    y = foo(y)\n" * 6
    assert looped[: loop(known=original)(looped)] == "def f():\n    y = foo(y)"
    row = "t = " + "ab(ab(" * 4
    assert loop(known=row + "\r\n")(row) is None and loop()(row) == 0


def test_rows_without_letters_loop_unless_the_code_before_repeats_such_rows():
    """``(10, 10, 20),`` written 7 times under distinct ``parametrize`` rows is a loop; a
    grid whose rows repeat in the code before goes on repeating them."""
    from fastcoder.stops import loop, repeats_rows

    rows = "(5, 3, 8),\n    (0, 0, 0),\n" + "    (10, 10, 20),\n" * 7
    assert rows[: loop(rows=False)(rows)] == "(5, 3, 8),\n    (0, 0, 0),\n    (10, 10, 20),"
    assert loop()(rows) is None  # rows=True: as before
    assert repeats_rows("GRID = [\n    [0, 0, 0, 0],\n    [0, 0, 0, 0],\n    ") is True
    assert repeats_rows("CASES = [\n    (1, 2, 3),\n    (2, 3, 5),\n    ") is False
    assert repeats_rows("def f():\n    pass\n\n\n\ndef g():\n    ") is False  # blank lines are not rows
    assert repeats_rows("x.append(1)\nx.append(1)\n") is False  # lines with letters are not rows
    far = "[0, 0],\n[0, 0],\n" + "".join(f"total += {i}\n" for i in range(50))
    assert repeats_rows(far) is False  # only the last lines count
    # the server's completions: a grid goes on, parametrize rows loop
    from lsp_server.stops import make_stop_fn

    cases = "CASES = [\n    (1, 2, 3),\n    (2, 3, 5),\n    "
    grid = "GRID = [\n    [0, 0, 0, 0],\n    [0, 0, 0, 0],\n    "
    assert make_stop_fn("block", "    ", before=cases)(rows) == len("(5, 3, 8),\n    (0, 0, 0),\n    (10, 10, 20),")
    assert make_stop_fn("block", "    ", before=grid)(rows) is None


def test_a_blank_line_then_a_definition_at_the_cursors_indentation_ends_a_block():
    """One method, or one group of fields, at a time: an Enum's next members came with a
    ``__str__`` below them, a dataclass field with a method, a method with the next one."""
    from lsp_server.stops import make_stop_fn, starts_definition

    members = "BLUE = 3\n    WHITE = 5\n\n    def __str__(self):\n        return self.name"
    assert members[: make_stop_fn("block", "    ")(members)] == "BLUE = 3\n    WHITE = 5"
    field = "y: float\n\n    @property\n    def norm(self):\n        return 1"
    assert field[: make_stop_fn("block", "    ")(field)] == "y: float"
    method = "def load(self):\n        return 1\n\n    def save(self):\n        pass"
    assert method[: make_stop_fn("block", "    ")(method)] == "def load(self):\n        return 1"
    java = "return name;\n    }\n\n    public int age() {\n        return 0;"
    assert java[: make_stop_fn("block", "        ")(java)] == "return name;"  # in a body: its dedent ends it first
    members = "int x;\n    int y;\n\n    public int sum() {\n        return x + y;"
    assert members[: make_stop_fn("block", "    ")(members)] == "int x;\n    int y;"
    # paragraphs of statements go on; a nested def deeper than the cursor goes on
    body = "x = 1\n\n    y = 2\n\n    return x"
    assert make_stop_fn("block", "    ")(body) is None
    nested = "def helper(v):\n        return v\n\n    return helper"
    assert make_stop_fn("block", "    ")(nested) is None
    assert make_stop_fn("block", "    ")("x = 1\n\n    async with lock:\n        y = 2") is None
    # a generated body may define a helper after a blank line
    helper = "seen = set()\n\n    def visit(node):\n        seen.add(node)\n\n    visit(root)"
    assert make_stop_fn("block", "    ", one_definition=False)(helper) is None
    # at top level a blank line ends the block anyway
    assert make_stop_fn("block", "")("x = 1\n\ndef f():\n    pass") == len("x = 1")
    for line in ("    def f(self):", "    async def f():", "    @property", "  render() {", "    fn fmt(&self) -> fmt::Result {",
                 "    public String toString() {", "    export function f() {", "    class Inner:"):
        assert starts_definition(line), line
    for line in ("    x = 1", "    if (x) {", "    return self.name", "    async with lock:", "    for x in xs:", ""):
        assert not starts_definition(line), line
    # fed as the engine feeds it: the output stops as soon as the line's first words show
    # the definition, not at the end of its signature
    from lsp_server.stops import shows_definition

    out = "def load(self):\n        return 1\n\n    def save(self, path: str, *, overwrite: bool = False) -> None:\n"
    matcher = make_stop_fn("block", "    ").matcher()
    fed = ""
    for k in range(0, len(out), 2):
        fed += out[k : k + 2]
        if (cut := matcher.feed(out[k : k + 2])) is not None:
            break
    assert out[:cut] == "def load(self):\n        return 1" and "save(" not in fed
    for start in ("    def ", "    @", "    async def ", "    class Inner", "    public int"):
        assert shows_definition(start), start
    for start in ("    de", "    def", "    async def", "    async with", "    define = 1", "    x = 1", "    render() {"):
        assert not shows_definition(start), start  # not known yet, or not by its words


def test_a_line_that_could_never_run_ends_the_output():
    """After a statement that leaves its block (``return``, ``raise``, ``break``,
    ``continue``, ``throw``), a code line at its indentation is dead: the output ends before
    it. Comments and blank lines between are neither; a ``return`` continued below, one with
    a condition after it (Ruby's ``return x if y``) or a key named ``break:`` is no exit."""
    from fastcoder.stops import exits_block, unreachable

    rule = unreachable("        ")
    out = "return lo\n        return max(x, hi)\n"
    assert out[: rule(out)] == "return lo"
    assert unreachable()("if x:\n    return 1\n# done\n\nreturn 2\n") is None  # one level out: it runs
    assert unreachable()("if x:\n    return 1\ny = 2\n") is None
    assert unreachable()("for x in xs:\n    continue\n    # skip\n\n    y = 2\n") == len("for x in xs:\n    continue\n    # skip\n")
    assert unreachable()("    return foo(\n        a,\n    )\n") is None  # continued: not a whole statement
    assert unreachable()('msg = """\nreturn to sender\nplease\n"""\nsend(msg)\n') is None  # a string's lines
    assert unreachable()("const t = `\nbreak here\nand here\n`;\nreturn t;\n") is None
    # an exit whose brackets close on a later line counts from its closer on
    out = "return (\n    a  # first\n\n    + b\n)\nprint(a)\n"
    assert out[: unreachable()(out)] == "return (\n    a  # first\n\n    + b\n)"
    out = "return {\n  a: 1,\n};\nconsole.log(a);"  # the dead line's end never comes (end of text)
    assert out[: unreachable()(out)] == "return {\n  a: 1,\n};"
    # fed as the engine feeds it: a dead line is cut at its first character, not at its end
    # (a comment's marker is waited for)
    matcher = unreachable("    ").matcher()
    assert [matcher.feed(p) for p in ("return lo", "\n", "    ", "/", "/ note", "\n", "    ")] == [None] * 7
    assert matcher.feed("r") == len("return lo\n    // note")
    for code in ("return lo", "return a if c else b", "break;", "raise ValueError(\"x\")", "throw new Error(\"a, b\");", "continue"):
        assert exits_block(code), code
    for code in ("return foo(", "return x if y", "return x unless y", "return_code = 1", "break: auto", "returned = 1"):
        assert not exits_block(code), code


def test_a_loop_inside_a_trailing_comment_keeps_the_code_before_it():
    """A piece up to 100 characters written again and again in a line is a loop; inside the
    line's trailing comment (the language's marker, outside strings) the code before the
    comment stays, elsewhere the line goes as before."""
    from fastcoder.stops import comment_at, loop

    said = "  # sys.exit(main(sys.argv)) is equivalent to sys.exit(main(sys.argv))"  # 70 characters
    out = "sys.exit(main(sys.argv))" + said * 8
    assert out[: loop(comment="#")(out)] == "sys.exit(main(sys.argv))"
    # fed as the engine feeds it, a few characters at a time: the whole line is one loop
    # first (the comment says the code again), then the comment alone
    matcher = loop(comment="#").matcher()
    cut = next(c for k in range(0, len(out), 3) if (c := matcher.feed(out[k : k + 3])) is not None)
    assert out[:cut] == "sys.exit(main(sys.argv))"
    assert loop()(out) == 0  # no marker known: the line goes
    assert loop(comment="//")(out) == 0
    js = "run();" + "  // run() runs it, and run() runs it again" * 6
    assert js[: loop(comment="//")(js)] == "run();"
    body = "x = 1\n" + "y = foo(bar(" * 10  # the loop in the code itself: its line goes
    assert body[: loop(comment="#")(body)] == "x = 1"
    assert comment_at('s = "# not" + t  # yes', "#") == len('s = "# not" + t  ')
    assert comment_at("url = 'http://x'", "//") is None


def test_the_same_lines_written_deeper_and_deeper_are_a_loop():
    """A block of lines written again, each writing moved right by the same step (a subquery
    nested in itself), is a loop: its first writing stays, unless it leaves a bracket open
    (then the output ends before the spiral). One line at changing
    indentation (``end`` or ``}`` closing nested blocks) and nested code that differs are not."""
    from fastcoder.stops import loop

    sql = "id IN (\n" + "".join(
        f"{' ' * (4 * d + 4)}SELECT id\n{' ' * (4 * d + 6)}FROM users\n{' ' * (4 * d + 6)}WHERE id IN (\n" for d in range(4))
    # its first writing leaves ``IN (`` open: the spiral goes whole
    assert sql[: loop()(sql)] == "id IN ("
    closed = "".join(f"{' ' * (2 * d)}foo(bar)\n{' ' * (2 * d)}baz(x)\n" for d in range(4))
    assert closed[: loop()(closed)] == "foo(bar)\nbaz(x)"  # a first writing that closes what it opens stays
    ruby = "if a\n  if b\n    if c\n      x = 1\n    end\n  end\nend\n"
    nested = "for x in xs:\n    for y in x:\n        for z in y:\n            print(z)\n"
    braces = "".join(f"{' ' * (4 * d)}}}\n" for d in range(6, 0, -1))
    for text in (ruby, nested, braces):
        assert loop()(text) is None, text



def test_a_line_of_symbols_written_again_and_again_is_a_loop():
    """A piece of symbols only (``.*``) written 16 times in a row ends the line in a loop (a
    Makefile target's ``*.log.*.*.*...``); rule lines, rows of zeros and short table rows
    are what files hold."""
    from fastcoder.stops import line_loop, loop

    make = "lint:\n\tpylint *.py *.log" + ".*" * 30
    assert make[: loop()(make)] == "lint:"
    for line in ("# " + "-" * 80, "x = [" + "0, " * 30 + "0]", "|---|---|---|---|---|", "# =-=-=-=-=-=-=-=-=", ")" * 40):
        assert line_loop(line) is None, line
