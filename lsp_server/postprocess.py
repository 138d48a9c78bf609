"""Post-processing of a generated completion before it is shown.

* never repeat the text right of the cursor or the lines below it:
  - ``line`` mode: an ending that equals the start of the rest of the line is trimmed
    (``foo(a, b)`` + ``)`` right of the cursor gives ``a, b``); when the rest is only
    auto-closed brackets and quotes that the suggestion closes before writing more
    (``me}!")`` at ``f"{na|}")``), it is cut where it closes them (``me``);
  - ``line`` mode: a suggestion that closes a bracket which the code right of the cursor
    closes too, more than the cursor's line leaves open (``params=params)`` at
    ``get(url, |timeout=5)``), becomes nothing;
  - ``line`` mode right after an opening bracket whose auto-closed closer starts the rest of
    the line (``request(|)``): a suggestion that starts with a line break is the bracket's
    contents on lines of their own, and ends with a line break and the indentation the
    closer goes to (the closer the model wrote, or the cursor line's), so that the rest of
    the line lands below them (:func:`opened_body`);
  - ``block`` mode: generated lines that repeat the lines below the cursor are dropped; on
    an empty line, a one-line suggestion that is the next line or its start (``return
    subtotal`` above ``return subtotal + tax_amount``) becomes nothing;
  - ``block`` mode on an empty line: the suggestion ends before a ``return`` / ``raise`` /
    ``break`` / ``continue`` / ``throw`` at the cursor's indentation when code at that
    indentation follows below (it would make that code unreachable: ``return key, value``
    above the function's own ``return``);
  - ``block`` mode: a suggestion of several lines does not end with a line that opens a
    block without its body (a ``def ...:`` or ``if ...:`` header, a line ending with ``{``,
    where the time budget cut it), unless the document's next line is that body;
* in a document with no CJK character, what the model writes in CJK goes (the 0.5B model,
  trained on much Chinese code, comments ``def main():`` bodies in Chinese): a line that is
  only such a comment is dropped, such a trailing comment is cut from its line, and the
  suggestion ends before any other line holding one (:func:`drop_foreign_script`);
* trailing whitespace and trailing blank lines go; indentation follows the document's
  style (tabs or spaces);
* a whitespace-only suggestion becomes nothing (empty string).
"""

from __future__ import annotations

import re

from fastcoder.stops import CLOSE_BRACKETS, COMMENT_LINE_STARTS, EXITS, FENCE, BracketDepth, exits_block
from lsp_server.prompt import AUTO_CLOSERS, BLOCK_COMMENT_END, LINE_SCAN_CHARS, CursorContext
from lsp_server.stops import LINE_COMMENTS, PROSE_LANGUAGES, TAB_WIDTH, indent_width
from lsp_server.strings import DOC_STRING_QUOTES, open_triple_quote_at

CLOSERS = set(")]}>\"'`;:,")

FOREIGN_SCRIPT = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff01-\uff60]")
"""CJK: kana, ideographs, hangul, full-width punctuation."""


def trim_overlap(text: str, rest: str) -> str:
    """Drop an ending of ``text`` that repeats the start of ``rest`` (the text right of
    the cursor on its line).

    The whole rest (ignoring surrounding whitespace) is always trimmed; a shorter
    overlap only when it is made of closing characters (brackets, quotes, ``:;,``), so
    that ``x = 1`` before ``1 + y`` keeps its ``1``.
    """
    rest = rest.strip()
    if not rest or not text:
        return text
    body = text.rstrip()
    if body.endswith(rest):
        return body[: len(body) - len(rest)]
    for k in range(min(len(body), len(rest)), 0, -1):
        piece = rest[:k]
        if body.endswith(piece) and all(c in CLOSERS for c in piece):
            return body[: len(body) - k]
    return text


def cut_before_closers(text: str, rest: str) -> str:
    """``text`` up to where it closes what the closers right of the cursor (``rest``:
    closing brackets, quotes and ``;:,``, starting with a bracket or quote, e.g. ``}")``
    in ``f"{na|}")`` or ``}`;`` in ``${na|}`;``) already close, when it writes them all
    and more after the first (``me}!")``: inserted whole, the line would read
    ``{name}!")}")``; cut, ``{name}")``). The place is the first closing bracket of
    ``rest[0]``'s kind that the text did not open itself (or, for a quote, its first
    occurrence); ``text`` as it is when there is none or the closers do not all follow."""
    if not rest or not text or rest[0] not in AUTO_CLOSERS or any(c not in CLOSERS for c in rest):
        return text
    first = rest[0]
    depth = 0
    for i, c in enumerate(text):
        if first in CLOSE_BRACKETS:
            if c == CLOSE_BRACKETS[first]:
                depth += 1
            elif c == first:
                if depth == 0:
                    return text[:i] if _in_order(rest, text[i:]) else text
                depth -= 1
        elif c == first:
            return text[:i] if _in_order(rest, text[i:]) else text
    return text


def opened_body(text: str, ctx: CursorContext) -> str | None:
    """At a cursor right after an opener (:attr:`CursorContext.opened`), the suggestion
    for ``text`` when it starts with a line break: its lines up to the one that closes the
    opener (:class:`fastcoder.stops.BracketDepth`), then a line break and what that line
    holds before its closer (the model's indentation for the closer; the cursor line's
    indentation when the model wrote no closer, as when the closers stayed in the prompt's
    suffix). The rest of the cursor's line (``)``) then follows on that last line. None when
    ``text`` does not start with a line break; "" when it has no code before the closer."""
    first, nl, after = text.partition("\n")
    if not nl or first.strip():
        return None
    lines = after.split("\n")
    depth = BracketDepth()
    tail = ctx.indent
    for i, line in enumerate(lines):
        start = depth.read
        at = depth.feed(line + "\n")
        if at is not None:
            closing = line[: at - start]
            lines = lines[:i]
            if closing.strip():  # ``    b)``: the closer right after its last item
                lines.append(closing)
                tail = None
            else:
                tail = closing
            break
    lines = [ln.rstrip() for ln in lines]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return ""
    return "\n" + "\n".join(lines) + ("" if tail is None else "\n" + tail)


def docstring_body(text: str, ctx: CursorContext) -> str:
    """In a triple-quoted string the cursor's line opened, its closer right of the cursor
    (:attr:`CursorContext.docstring`), the suggestion for ``text``: the string's text up
    to the closer the model wrote (the stop rule ends the output before it), or its whole
    lines when a limit cut it first (without a last section header, ``Returns:``, whose
    text it cut). One line stays one line (``Return the mean.``). Over
    several lines it ends with a line break and the cursor line's indentation, so that the
    closer already there lands on a line of its own (PEP 257; the model's own layout,
    ``\n    Parse a duration...\n    ``), and lines indented past the cursor line all
    alike (a module docstring written at 4 spaces) come back to its indentation; a blank
    line inside has that indentation too. At ``/** | */`` the lines are the model's (`` *
    ...``) and the ``*/`` goes one column in. "" when there is no text."""
    lines = [ln.rstrip() for ln in text.split("\n")]
    while len(lines) > 1 and (not lines[-1].strip() or lines[-1].endswith(":")):
        lines.pop()  # the closer's line, blank lines before it; a section a limit cut (``Returns:``)
    if len(lines) == 1:
        return lines[0]
    if not any(ln.strip() for ln in lines):
        return ""
    if ctx.docstring == BLOCK_COMMENT_END:  # `` * `` lines: `` */`` one column in, as the model writes it
        gap = len(ctx.line_suffix) - len(ctx.line_suffix.lstrip(" \t"))  # (the editor's `` */`` has its space)
        return "\n".join(lines + [ctx.indent + " " * max(0, 1 - gap)])
    widths = [indent_width(ln) for ln in lines[1:] if ln.strip()]
    extra = min(widths) - indent_width(ctx.indent) if widths else 0
    if extra > 0:  # (in spaces: finalize reindents in the document's unit)
        lines[1:] = [" " * (indent_width(ln) - extra) + ln.lstrip(" \t") if ln.strip() else "" for ln in lines[1:]]
    # a blank line inside keeps the indentation (as the model writes it): the lines answered
    # early end with it too, and must stay the start of the whole answer
    return "\n".join([lines[0]] + [ln or ctx.indent for ln in lines[1:]] + [ctx.indent])


SENTENCE_ENDS = tuple(".!?")
COMMENT_MARKS = "#/*!-; \t"
"""What a comment line starts with before its words (``///``, ``//!``, `` * ``, ``#``, ``--``)."""


def whole_sentences(text: str) -> str:
    """Prose that a limit cut (:func:`cut_at_limit`'s whole lines: a docstring, doc comment
    lines): not inside a Markdown code fence it opened (``/// ```\n/// assert_eq!(...``),
    and up to the last line that ends a sentence, so that it does not stop mid-sentence
    (``it is a TypeError to attempt``) or at a header without its text (``# Examples``,
    ``Returns:``); all of it when no line ends one."""
    lines = text.split("\n")
    fences = [i for i, ln in enumerate(lines) if ln.lstrip(COMMENT_MARKS).startswith(FENCE)]
    if len(fences) % 2:
        lines = lines[: fences[-1]]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].rstrip().endswith(SENTENCE_ENDS):
            return "\n".join(lines[: i + 1])
    return "\n".join(lines) if lines and "\n".join(lines).strip() else text


def comment_lines(text: str, ctx: CursorContext) -> bool:
    """Whether a block ``text`` at ``ctx`` is comment lines only: the cursor's line is a
    comment being typed and every line after its first starts with a comment marker."""
    if not ctx.line_prefix.lstrip().startswith(LINE_COMMENTS + ("*",)):
        return False
    return all(ln.lstrip().startswith(LINE_COMMENTS + ("*",)) for ln in text.split("\n")[1:] if ln.strip())


def bracket_balance(code: str) -> tuple[int, int, bool]:
    """(closers, openers, in a string): how many closing brackets of ``code`` close what it
    did not open itself, how many of its opening brackets it leaves open (brackets in
    strings do not count), and whether it ends inside a string literal."""
    depth = BracketDepth()
    depth.feed(code)
    return -depth.least, depth.depth - depth.least, bool(depth.quote)


def closes_twice(text: str, ctx: CursorContext) -> bool:
    """Whether a one-line suggestion ``text`` closes a bracket that the code right of the
    cursor closes too, more than the cursor's line leaves open: ``params=params)`` at
    ``requests.get(url, |timeout=5)`` (the thirty-fifth session's user flows) would leave
    ``params=params)timeout=5)``, while ``a), `` at ``f(g(|x)`` gives ``f(g(a), x)``. What
    overlaps the rest's start was trimmed before (``a, b)`` at ``f(|b)`` is ``a, ``)."""
    closes = bracket_balance(text)[0]
    if not text.strip() or not closes:
        return False
    _, opened, in_string = bracket_balance(ctx.line_prefix[-LINE_SCAN_CHARS:])
    if in_string:  # inside a literal (an f-string's ``{|}``): its brackets are not the line's
        return False
    rest_closes = bracket_balance(ctx.line_suffix[:LINE_SCAN_CHARS])[0]
    return rest_closes > 0 and closes + rest_closes > opened


def _in_order(needle: str, hay: str) -> bool:
    """Whether ``needle``'s characters occur in ``hay`` in order (a subsequence)."""
    it = iter(hay)
    return all(c in it for c in needle)


def starts_line(line: str, piece: str) -> bool:
    """Whether ``piece`` is ``line`` or its start up to a token boundary (``return total``
    starts ``return total + tax``; ``x = 1`` does not start ``x = 10``)."""
    if not line.startswith(piece):
        return False
    rest = line[len(piece) :]
    word = lambda c: c.isalnum() or c == "_"  # noqa: E731
    return not rest or not piece or not (word(piece[-1]) and word(rest[0]))


def drop_repeated_lines(text: str, following: list[str]) -> str:
    """Cut ``text`` before the first of its lines (after the first) from which the
    rest of it repeats the document lines below the cursor (blank lines skipped;
    the last generated line may be a cut-off start of the document line)."""
    doc = [ln.rstrip("\r").rstrip() for ln in following if ln.strip()]
    if not doc:
        return text
    lines = text.split("\n")
    for i in range(1, len(lines)):
        gen = [ln.rstrip() for ln in lines[i:] if ln.strip()]
        if not gen:
            break
        if len(gen) > len(doc):
            continue
        head, last = gen[:-1], gen[-1]
        if head == doc[: len(head)] and doc[len(head)].startswith(last) and last.strip():
            return "\n".join(lines[:i])
    return text


HEADER = re.compile(r"(async\s+)?(def|class|if|elif|else|for|while|with|try|except|finally|match|case)\b.*:\s*(#.*)?$")
"""A Python compound statement's header (its body follows on deeper-indented lines)."""


def cut_open_string(text: str, ctx: CursorContext) -> str:
    '''``text`` (a block suggestion) up to the line where it opens a triple-quoted string it
    does not close: a suggestion cut by its limit in a docstring (``def fetch(url, timeout:
    |`` got ``int = 10) -> str:`` and a docstring's first words) would leave everything below
    the cursor inside that string once accepted. The whole line of the opener goes; "" when
    it is the first. Not when the cursor is in such a string already (the docstring rules').'''
    if not any(q in text for q in DOC_STRING_QUOTES):
        return text
    head = ctx.line_prefix  # the cursor line's code before the output: a comment, a quote
    quote, at = open_triple_quote_at(head + text, ctx.language)
    if not quote or at < len(head) or ctx.open_quote:
        return text
    start = text.rfind("\n", 0, at - len(head))
    return text[:start] if start > 0 else ""


def drop_open_header(text: str, ctx: CursorContext) -> str:
    """``text`` (a block suggestion of several lines) without a last line that opens a
    block whose body is not there: a Python header (``def ...:``, ``if ...:``) or a line
    ending with ``{``, with the decorators, comments and blank lines right above it. A
    suggestion cut by its time budget after such a line (a dataclass field's suggestion
    ended in ``def distance_to(self, other) -> float:``) would leave a syntax error once
    accepted. Kept when the document's next line is indented deeper (it is the body) or
    when nothing else would be left."""
    lines = text.split("\n")
    if len(lines) < 2:
        return text
    last = lines[-1].strip()
    if not (HEADER.match(last) or last.endswith("{")):
        return text
    nxt = next((ln.rstrip("\r") for ln in ctx.following_lines if ln.strip()), None)
    if nxt is not None and indent_width(nxt) > indent_width(lines[-1]):
        return text
    keep = lines[:-1]
    if re.match(r"(except|finally)\b", last):  # a try without its handler is no better: from the try on
        width = indent_width(lines[-1])
        own = lambda i: indent_width(ctx.line_prefix if i == 0 else keep[i])  # noqa: E731 (line 0 starts at the cursor)
        tries = [i for i, ln in enumerate(keep) if own(i) == width and re.match(r"try\s*:", ln.strip())]
        keep = keep[: tries[-1]] if tries else keep
    while keep and (not keep[-1].strip() or keep[-1].lstrip().startswith(("@", *LINE_COMMENTS))):
        keep.pop()
    return "\n".join(keep) if "".join(keep).strip() else text


def drop_trailing_comma(text: str, ctx: CursorContext) -> str:
    """``text`` (a block suggestion in a JSON document) without a comma ending its last
    line when the document's next line closes the object or array (``}`` / ``]``): JSON
    allows no trailing comma (a ``package.json`` suggestion ended in ``},`` right above the
    document's ``}``)."""
    nxt = next((ln.strip() for ln in ctx.following_lines if ln.strip()), None)
    body = text.rstrip()
    if nxt is None or not nxt.startswith(("}", "]")) or not body.endswith(","):
        return text
    return body[:-1]


def cut_before_exit(text: str, ctx: CursorContext) -> str:
    """``text`` (a block suggestion on an empty line, or after a comment being typed) up to
    its first line that leaves the block (``return``, ``raise``, ...) at the cursor's
    indentation, when the next code line below is at that indentation too: the suggestion
    must not make it unreachable (``# |`` above a loop got a comment's words and then
    ``raise Exception(...)``). A comment's own first line is its words, not code."""
    comment = ctx.line_prefix.lstrip().startswith(LINE_COMMENTS)
    if not ctx.at_indentation and not comment:
        return text
    nxt = next((ln.rstrip("\r") for ln in ctx.following_lines if ln.strip()), None)
    width = indent_width(ctx.line_prefix)
    if nxt is None or indent_width(nxt) != width:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if i == 0 and comment:
            continue
        code = line.lstrip(" \t")
        own = width if i == 0 else indent_width(line)
        if own == width and EXITS.match(code):
            return "\n".join(lines[:i])
        if own < width and code:  # the suggestion left the cursor's block
            break
    return text


EXIT_LOOKBACK = 50
"""How many lines above the cursor :func:`after_exit` reads for the last code line."""


def after_exit(ctx: CursorContext) -> bool:
    """Whether nothing written at the cursor could run: an empty line (block mode) whose
    last statement above, at the cursor's indentation, leaves the block
    (:func:`fastcoder.stops.exits_block`; blank and comment lines between): the line below
    ``return lo`` in an ``if``, where the editor kept the indentation after Enter. A
    statement whose brackets close on a line of their own (``return (`` ... ``)``, ``return
    {`` ... ``};``) is read from its first line: the line that opened what the last line
    closes. A suggestion there would be dead code (the model wrote ``return max(x, hi)``),
    and an inline suggestion cannot take the indentation back, so there is none (the model
    does not run). Not in prose (:data:`lsp_server.stops.PROSE_LANGUAGES`) or in a
    triple-quoted string."""
    if ctx.mode != "block" or not ctx.at_indentation or ctx.language in PROSE_LANGUAGES:
        return False
    width = indent_width(ctx.line_prefix)
    statement: list[str] = []  # the code lines of the statement above, last first
    least = 0  # the lowest bracket depth of those lines read top-down (BracketDepth's term)
    end = len(ctx.prefix) - len(ctx.line_prefix) - 1  # the line break before the cursor's line
    for _ in range(EXIT_LOOKBACK):
        if end < 0:
            return False
        start = ctx.prefix.rfind("\n", 0, end) + 1
        line = ctx.prefix[start:end].rstrip("\r")
        end = start - 1
        code = line.strip()
        if not code or code.startswith(COMMENT_LINE_STARTS):
            continue
        if not statement and indent_width(line) != width:
            return False
        brackets = BracketDepth()
        brackets.feed(code)
        least = min(brackets.least, brackets.depth + least)  # this line read before those below
        statement.append(code)
        if least >= 0:  # this line opened everything below it closes: the statement's first
            return (indent_width(line) == width and exits_block("\n".join(reversed(statement)))
                    and not ctx.open_quote)  # fmt: skip
    return False


TAB_LANGUAGES = frozenset({"go", "makefile"})
"""Languages indented with tabs by their own tools (gofmt; make requires them)."""


def document_indent_unit(text: str, language: str | None = None) -> str:
    """``"\\t"`` when the document indents with tabs, else ``" " * n`` (its smallest step).
    A document with no indented code line yet goes by its indented blank lines (the
    cursor's own, ``\\t|``), then by its language (tabs in :data:`TAB_LANGUAGES`), then 4
    spaces."""
    tabs = spaces = blank_tabs = blank_spaces = 0
    steps: dict[int, int] = {}
    prev = 0
    for line in text.split("\n")[:2000]:
        if not line.strip():
            blank_tabs += line.startswith("\t")
            blank_spaces += line.startswith(" ")
            continue
        if line.startswith("\t"):
            tabs += 1
        elif line.startswith(" "):
            spaces += 1
        width = len(line) - len(line.lstrip(" "))
        if width > prev and not line.startswith("\t"):
            steps[width - prev] = steps.get(width - prev, 0) + 1
        prev = width
    if tabs > spaces:
        return "\t"
    if steps:
        common = max(steps.items(), key=lambda kv: (kv[1], -kv[0]))[0]
        if common in (2, 3, 4, 8):
            return " " * common
    if not spaces and (blank_tabs > blank_spaces or (not blank_spaces and language in TAB_LANGUAGES)):
        return "\t"
    return " " * TAB_WIDTH


def reindent(text: str, unit: str, first_line_is_continuation: bool = True) -> str:
    """Rewrite leading indentation in the document's style (only lines after the
    first when the first continues a line that already has its indentation)."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if (i == 0 and first_line_is_continuation) or not line.strip():
            out.append(line)
            continue
        ws = line[: len(line) - len(line.lstrip(" \t"))]
        if unit == "\t" and " " in ws:
            width = indent_width(ws)
            new_ws = "\t" * (width // TAB_WIDTH) + " " * (width % TAB_WIDTH)
        elif unit != "\t" and "\t" in ws:
            new_ws = unit * (indent_width(ws) // TAB_WIDTH) + " " * (indent_width(ws) % TAB_WIDTH)
        else:
            new_ws = ws
        out.append(new_ws + line[len(ws):])
    return "\n".join(out)


def drop_foreign_script(text: str, ctx: CursorContext) -> str:
    """``text`` without what it writes in CJK where the document has none: lines that are
    only a line comment holding CJK are dropped, a trailing line comment holding CJK is cut
    from its line, and the text ends before any other line holding CJK (code, a string,
    a block comment or docstring). Unchanged when the document holds CJK itself."""
    if FOREIGN_SCRIPT.search(text) is None or FOREIGN_SCRIPT.search(ctx.prefix) or FOREIGN_SCRIPT.search(ctx.suffix):
        return text
    kept: list[str] = []
    for i, line in enumerate(text.split("\n")):
        hit = FOREIGN_SCRIPT.search(line)
        if hit is None:
            kept.append(line)
            continue
        whole = (ctx.line_prefix + line) if i == 0 else line  # the first line continues the cursor's
        if whole.lstrip().startswith(LINE_COMMENTS):
            if i == 0:  # a comment the user began: nothing to keep of it
                break
            continue
        cut = max(line.rfind(" " + mark, 0, hit.start()) for mark in LINE_COMMENTS)
        if cut >= 0 and (line[:cut].strip() or (i == 0 and ctx.line_prefix.strip())):
            kept.append(line[:cut].rstrip())  # its code, without the comment
            continue
        break
    return "\n".join(kept)


def leaves_open(line: str) -> bool:
    """Whether ``line`` leaves a bracket it opened itself unclosed (``(`` at ``return |;``
    in TSX, where the model went on to lay JSX out on the lines below): a one-line
    suggestion cut at its line break would leave that bracket open."""
    depth = BracketDepth()
    depth.feed(line)
    return depth.depth > 0


def cut_at_limit(text: str) -> str:
    """A multi-line output that a limit cut (``maxNewTokens``, the time budget) ends
    mid-line, and maybe inside brackets it opened: its whole lines, back to the last line
    end where every bracket it opened is closed again (``total = df.agg(`` and two argument
    lines: the lines before it), or all its whole lines when no line end closes them. A
    single line loses the word or number it ends in, which the limit may have cut in two
    (``0x00, 0x00, 0`` -> ``0x00, 0x00,``), unless that is all of it."""
    body = text.rstrip()
    cut = body.rfind("\n")
    if cut <= 0 or not body[:cut].strip():
        start = len(body)
        while start and (body[start - 1].isalnum() or body[start - 1] == "_"):
            start -= 1
        if body == text and start < len(body) and body[:start].strip():  # the limit fell after a word's character
            return body[:start].rstrip()
        return text
    whole = body[:cut]
    depth = BracketDepth()
    closed = None  # the last line end with nothing left open
    end = -1
    for line in whole.split("\n"):
        end += 1 + len(line)
        depth.feed(line + "\n")
        if depth.depth == depth.least and whole[:end].strip():
            closed = end
    return whole if closed is None else whole[:closed]


def finalize(text: str, ctx: CursorContext, *, indent_unit: str | None = None, keep_whitespace: bool = False,
             language: str | None = None) -> str:
    """The suggestion to show for generated ``text`` at ``ctx`` ("" for none); ``language``:
    the document's language id (the editor's)."""
    raw = text = text.replace("\r\n", "\n")
    lead = text.lstrip(" \t\n")
    if ctx.at_indentation and "\n" in text[: len(text) - len(lead)] and text.lstrip("\n").startswith(ctx.line_prefix):
        # the cursor is on a blank line the editor already indented (Enter): a leading line
        # break would leave that line behind as trailing whitespace and show the suggestion
        # one line too low (line mode: nothing at all); start it at the cursor instead
        text = text.lstrip("\n")[len(ctx.line_prefix) :]
    text = drop_foreign_script(text, ctx)
    body = opened_body(text, ctx) if ctx.mode == "line" and ctx.opened else None
    if body is None and ctx.mode == "line" and ctx.docstring:
        body = docstring_body(text, ctx)
    if body is not None:
        text = reindent(body, indent_unit) if indent_unit is not None and body else body
    elif ctx.mode == "line":
        nl = text.find("\n")
        if nl >= 0:
            text = text[:nl]
        rest = ctx.line_suffix
        trimmed = trim_overlap(text.rstrip(), rest)
        if trimmed == text.rstrip():
            trimmed = cut_before_closers(trimmed, rest.strip())
        code_follows = bool(rest[:1]) and not rest[:1].isspace() and rest[:1] not in CLOSERS
        if not code_follows:
            text = trimmed.rstrip()
        elif trimmed != text.rstrip():
            text = trimmed  # "a, " of "a, b)" at "f(|b)": the space before "b" stays
        # else ("return |x"): keep a trailing space, it separates the suggestion from "x"
        if closes_twice(text, ctx):
            text = ""
    else:
        lines = [ln.rstrip() for ln in text.split("\n")]
        while len(lines) > 1 and not lines[-1].strip():
            lines.pop()
        text = "\n".join(lines)
        text = drop_repeated_lines(text, ctx.following_lines)
        text = cut_before_exit(text, ctx)
        text = cut_open_string(text, ctx)
        text = drop_open_header(text, ctx)
        if language == "json":
            text = drop_trailing_comma(text, ctx)
        lead = ctx.line_prefix.strip()
        if not lead.strip(COMMENT_MARKS):  # at the indentation, or after a comment's marker (`` * |``)
            nxt = next((ln for ln in ctx.following_lines if ln.strip()), None)
            if nxt is not None and "\n" not in text.strip() and starts_line(nxt.strip(), f"{lead} {text.strip()}".strip()):
                text = ""  # the suggestion is the next line again, or its start (`` * @param a`` above `` * @param a``)
        text = text.rstrip()
        if indent_unit is not None:
            text = reindent(text, indent_unit)
    if not text.strip():
        if not keep_whitespace:
            return ""
        text = raw  # debug: show what the model wrote, whitespace and all
    if "\r\n" in ctx.prefix[-2000:] or "\r\n" in ctx.suffix[:2000]:
        text = text.replace("\n", "\r\n")
    return text
