"""Stops: where a generation ends, checked by the decode loop token by token.

Two kinds, both in the engine, so every method stops at exactly the same token:

- *stop ids*: the model's end-of-sequence ids and the ids the caller gives
  (``generate(stop_ids=...)``, e.g. the FIM end tokens): the output ends before them;
- *stop rules* on the decoded text (:class:`StopRule`). The loop decodes only the new
  tokens (:class:`IncrementalDecoder`) and feeds each rule's matcher the new text only,
  so stop detection is linear in the output. A matcher returns the index at which to
  cut the whole output text, or None to go on.

Rules shared by the editor, the CLIs and the benchmark: :class:`StopStrings`,
:func:`block_end` (a block at some indentation ends), :func:`runs_into` (the output
repeats the code that follows), :func:`any_of`, and ``rule.after(n)`` (judge the text
after its first ``n`` characters). Any rule is also a predicate on a whole text:
``rule(text) -> cut | None``; a plain predicate ``fn(text)`` is accepted by the loop too
(:class:`Predicate`, which re-reads the whole text each time: for ad-hoc use only).
"""

from __future__ import annotations

import copy
import re
from typing import Callable, Mapping, Sequence, Union

StopFn = Callable[[str], "int | None"]


def indent_of(line: str, tab_size: int = 4) -> int:
    expanded = line.expandtabs(tab_size)
    return len(expanded) - len(expanded.lstrip(" "))


# --------------------------------------------------------------------------------------
# decoding only what is new
# --------------------------------------------------------------------------------------


class IncrementalDecoder:
    """The text of a growing list of token ids, decoding only a short window per token.

    As streaming servers do (a prefix window and a read offset): each new token decodes
    the window from the token before the last emitted text, and what extends the
    window's earlier text is the new text. A token ending in an incomplete UTF-8
    character emits nothing until the character is complete (at most ``MAX_WINDOW``
    tokens are held back); meanwhile :attr:`pending` is the held text as a whole-text
    decode shows it (ending in U+FFFD), which the loop lets the rules peek at, so they
    stop where they would on the whole decoded output. ``decoded_chars`` counts the
    characters decoded."""

    MAX_WINDOW = 64

    def __init__(self, tokenizer, skip_special_tokens: bool = True) -> None:
        self.tokenizer = tokenizer
        self.skip = skip_special_tokens
        self.ids: list[int] = []
        self.prefix = 0  # window start
        self.read = 0  # tokens whose text was emitted
        self.decoded_chars = 0
        self.pending = ""

    def _decode(self, ids: Sequence[int]) -> str:
        text = self.tokenizer.decode(list(ids), skip_special_tokens=self.skip)
        self.decoded_chars += len(text)
        return text

    def add(self, token: int) -> str:
        """Append ``token``; the text it completes (may be empty)."""
        self.ids.append(int(token))
        before = self._decode(self.ids[self.prefix : self.read]) if self.read > self.prefix else ""
        now = self._decode(self.ids[self.prefix :])
        held = len(self.ids) - self.prefix > self.MAX_WINDOW
        if (len(now) > len(before) and not now.endswith("\ufffd")) or held:
            piece = now[len(before) :]
            self.prefix, self.read = self.read, len(self.ids)
            if held:
                self.prefix = self.read
            self.pending = ""
            return piece
        self.pending = now[len(before) :]
        return ""


# --------------------------------------------------------------------------------------
# rules
# --------------------------------------------------------------------------------------


class StopMatcher:
    """One generation's state of a rule: fed the output's text piece by piece."""

    def feed(self, piece: str) -> int | None:
        """``piece`` extends the output text; the index at which to cut the whole
        output, or None. Called once per committed token (``piece`` may be empty)."""
        raise NotImplementedError

    def peek(self, piece: str) -> int | None:
        """The cut if ``piece`` were fed, without feeding it (text that may still
        change: an incomplete character shown as U+FFFD)."""
        return copy.deepcopy(self).feed(piece)

    def newline_ends(self) -> bool:
        """Whether a newline in the text fed next certainly ends the output (the cut
        falls at or before it): the decode loop then drafts nothing below a token that
        holds one. False when unsure (only drafting is affected, never the output)."""
        return False


class StopRule:
    """A stop rule: makes a fresh :class:`StopMatcher` for each generation."""

    def matcher(self) -> StopMatcher:
        raise NotImplementedError

    def __call__(self, text: str) -> int | None:
        """The cut in a whole text (the same as feeding it in pieces)."""
        return self.matcher().feed(text)

    def after(self, n: int) -> "StopRule":
        """This rule on the text after its first ``n`` characters (cuts still index the
        whole text)."""
        return _After(self, n) if n else self


class MatcherRule(StopRule):
    def __init__(self, make: Callable[[], StopMatcher]) -> None:
        self.make = make

    def matcher(self) -> StopMatcher:
        return self.make()


class StopStrings(StopRule):
    """The output contains one of ``strings``: cut before the earliest."""

    def __init__(self, strings: Sequence[str]) -> None:
        self.strings = tuple(s for s in strings if s)

    def matcher(self) -> StopMatcher:
        return _StringsMatcher(self.strings)


class _StringsMatcher(StopMatcher):
    def __init__(self, strings: tuple[str, ...]) -> None:
        self.strings = strings
        self.keep = max((len(s) for s in strings), default=1) - 1
        self.tail = ""  # the last `keep` characters fed
        self.length = 0

    def feed(self, piece: str) -> int | None:
        if not piece or not self.strings:
            return None
        buf = self.tail + piece
        start = self.length - len(self.tail)  # index of buf[0] in the output
        cuts = [i for i in (buf.find(s) for s in self.strings) if i >= 0]
        self.length += len(piece)
        self.tail = buf[-self.keep :] if self.keep else ""
        return start + min(cuts) if cuts else None

    def newline_ends(self) -> bool:
        return "\n" in self.strings


class _LineMatcher(StopMatcher):
    """Splits the fed text into lines; subclasses judge them as they come."""

    def __init__(self) -> None:
        self.length = 0  # characters fed
        self.line_start = 0  # index of the current line's first character
        self.index = 0  # number of the current line
        self.parts: list[str] = []  # the current line so far

    def feed(self, piece: str) -> int | None:
        chunks = piece.split("\n")
        for j, chunk in enumerate(chunks):
            if j > 0:
                cut = self.line_done("".join(self.parts))
                if cut is not None:
                    return cut
                self.line_start = self.length + 1
                self.length += 1
                self.index += 1
                self.parts = []
                self.new_line()
            if chunk:
                self.parts.append(chunk)
                self.length += len(chunk)
                cut = self.line_grew(chunk)
                if cut is not None:
                    return cut
        return None

    def new_line(self) -> None:
        pass

    def line_grew(self, chunk: str) -> int | None:
        """The current (incomplete) line got ``chunk``."""
        return None

    def line_done(self, line: str) -> int | None:
        """The current line is complete (a newline follows it)."""
        return None


class _BlockEnd(_LineMatcher):
    def __init__(self, start_indent: int, check_first_line: bool) -> None:
        super().__init__()
        self.start_indent = start_indent
        self.check_first_line = check_first_line
        self.judged = False  # the current line has content and was judged
        self.seen_content = False

    def new_line(self) -> None:
        self.judged = False

    def line_grew(self, chunk: str) -> int | None:
        if self.judged or not chunk.strip():
            return None
        self.judged = True
        if (self.index > 0 or self.check_first_line) and indent_of("".join(self.parts)) < self.start_indent:
            return max(self.line_start - 1, 0)
        self.seen_content = True
        return None

    def line_done(self, line: str) -> int | None:
        if not self.judged and self.start_indent == 0 and self.seen_content and self.index > 0:
            return max(self.line_start - 1, 0)  # a blank line after some code, at top level
        return None

    def feed(self, piece: str) -> int | None:
        if self.judged:  # nothing of the current line is needed any more
            self.parts = self.parts[:1]
        return super().feed(piece)


class _FirstNewline(StopMatcher):
    def __init__(self) -> None:
        self.length = 0

    def feed(self, piece: str) -> int | None:
        i = piece.find("\n")
        if i >= 0:
            return self.length + i
        self.length += len(piece)
        return None

    def newline_ends(self) -> bool:
        return True


def block_end(start_indent: int, *, check_first_line: bool = False, single_line: bool = False) -> StopRule:
    """Stop when the block that starts at ``start_indent`` ends.

    - a non-empty line indented less than ``start_indent`` (a dedent) ends it; the text
      is cut before the newline that precedes that line;
    - at top level (``start_indent == 0``), a blank line after some content ends it;
    - ``single_line``: the first newline ends it.
    ``check_first_line``: the output starts at the beginning of a line (a body after a
    signature), so its first line is judged too; otherwise it continues a line.
    """
    if single_line:
        return MatcherRule(_FirstNewline)
    return MatcherRule(lambda: _BlockEnd(start_indent, check_first_line))


BLOCK_OPENERS = (":", "{", "[", "(")
"""Line endings after which the next lines belong to the line (a body, a literal's items)."""


def opens_block(line: str) -> bool:
    """Whether ``line`` ends (before a trailing ``#`` / ``//`` comment) with a
    :data:`BLOCK_OPENERS` character: a Python header, a brace, an open bracket."""
    code = line.rstrip()
    for mark in (" #", "\t#", " //"):
        i = code.find(mark)
        if i >= 0:
            code = code[:i].rstrip()
    return code.endswith(BLOCK_OPENERS)


class _FirstLineUnlessOpener(_LineMatcher):
    def __init__(self, line_prefix: str) -> None:
        super().__init__()
        self.line_prefix = line_prefix

    def line_done(self, line: str) -> int | None:
        # an empty first line: the cursor's line was complete, the suggestion is the lines below
        if self.index == 0 and line.strip() and not opens_block(self.line_prefix + line):
            return self.length
        return None


def first_line_unless_opener(line_prefix: str) -> StopRule:
    """Stop at the first line's end unless that line, after ``line_prefix`` (the cursor's
    line before the cursor), opens a block (:func:`opens_block`): a suggestion that
    completes a statement the user is typing ends with it, one that completes a header
    goes on into its body. A suggestion that starts with a line break (the cursor's line
    was complete: the user paused at its end) is the lines below, judged by the block
    rules alone."""
    return MatcherRule(lambda: _FirstLineUnlessOpener(line_prefix))


OPEN_BRACKETS = {"(": ")", "[": "]", "{": "}"}
CLOSE_BRACKETS = {v: k for k, v in OPEN_BRACKETS.items()}
QUOTES = "\"'`"


class BracketDepth:
    """Bracket depth of code read piece by piece, relative to where reading began: a
    closing bracket of nothing read is depth -1 (what an opener before the start opened).
    Brackets inside string literals (``"``, ``'``, `````) do not count; a literal ends at
    its line's end at the latest (the scan is per line, not a parser: a triple-quoted or
    multi-line template string is read as lines). ``closed_at``: where, in the text read,
    the depth first went below zero (None before); ``least``: the lowest depth reached."""

    def __init__(self) -> None:
        self.depth = 0
        self.least = 0
        self.quote = ""
        self.escaped = False
        self.read = 0
        self.closed_at: int | None = None

    def feed(self, text: str) -> int | None:
        """Read ``text``; the index (in all the text read) where the depth first went below
        zero, once it has."""
        for c in text:
            i, self.read = self.read, self.read + 1
            if c == "\n":
                self.quote, self.escaped = "", False
            elif self.quote:
                if self.escaped:
                    self.escaped = False
                elif c == "\\":
                    self.escaped = True
                elif c == self.quote:
                    self.quote = ""
            elif c in QUOTES:
                self.quote = c
            elif c in OPEN_BRACKETS:
                self.depth += 1
            elif c in CLOSE_BRACKETS:
                self.depth -= 1
                if self.depth < self.least:
                    self.least = self.depth
                    if self.closed_at is None:
                        self.closed_at = i
        return self.closed_at


class _OpenedLines(_LineMatcher):
    def __init__(self) -> None:
        super().__init__()
        self.first_has_code = False
        self.depth = BracketDepth()

    def line_grew(self, chunk: str) -> int | None:
        if self.index == 0:
            self.first_has_code = self.first_has_code or bool(chunk.strip())
        else:
            self.depth.feed(chunk)
        return None

    def line_done(self, line: str) -> int | None:
        if self.index == 0:
            return self.length if self.first_has_code else None
        self.depth.feed("\n")
        return self.length if self.depth.closed_at is not None else None

    def newline_ends(self) -> bool:
        return (self.index == 0 and self.first_has_code) or self.depth.closed_at is not None


def opened_lines() -> StopRule:
    """The suggestion at a cursor right after an opening bracket whose auto-closed closer
    is right of it (``request(|)``, ``{|});``): when the output starts on that line, the
    first newline ends it (a one-line suggestion); when it starts with a line break (the
    model lays the bracket's contents out on lines of their own, as black does with a long
    call), it runs on to the end of the line that closes that bracket (the closer the
    output writes itself), or to its own end (the model writes only the contents)."""
    return MatcherRule(_OpenedLines)


_WORDS = re.compile(r"\w+")


class _RunsInto(_LineMatcher):
    def __init__(self, key: str, indent: int | None, check_first_line: bool, first_indent: int) -> None:
        super().__init__()
        self.key = key
        self.indent = indent
        self.check_first_line = check_first_line
        self.first_indent = first_indent

    def line_done(self, line: str) -> int | None:
        if not (self.index > 0 or self.check_first_line) or line.strip() != self.key:
            return None
        width = indent_of(line) + (self.first_indent if self.index == 0 else 0)
        return max(self.line_start - 1, 0) if self.indent is None or width == self.indent else None


def runs_into(next_line: str | None, *, check_first_line: bool, first_indent: int = 0) -> StopRule | None:
    """Stop before a complete generated line equal to ``next_line`` (the code below). A
    line of at most one word (``}``, ``});``, ``end``, ``fi``, ``else:``, ``return``) must
    be at its indentation too: such a line that closes a block inside the output is not the
    one below (seen cutting generated bodies at their first inner ``}``); a longer line is
    the code below at any indentation (the model repeating it).
    ``first_indent``: the indentation width before the output's first line (the cursor's
    line), which ``check_first_line`` judges too."""
    key = next_line.strip() if next_line is not None else ""
    if not key:
        return None
    indent = indent_of(next_line or "") if len(_WORDS.findall(key)) <= 1 else None
    return MatcherRule(lambda: _RunsInto(key, indent, check_first_line, first_indent))


EXITS = re.compile(r"(return|raise|break|continue|throw)(?![\w:=.])")
"""A line's code that starts so is a statement after which nothing in its block runs
(not ``return_code = 1``, ``break: "auto"`` or ``raise.x``)."""
_MODIFIER = re.compile(r"\s(if|unless)\s")
COMMENT_LINE_STARTS = ("#", "//", "/*", "*", "--")
"""How a comment line (or a block comment's inner line) starts, in the languages served."""


def exits_block(code: str) -> bool:
    """Whether ``code`` (one line) is a whole statement that leaves its block (:data:`EXITS`):
    on its line, every bracket it opens closed and no trailing backslash or comma (not
    ``return foo(`` continued below), and unconditional (not Ruby's or Perl's ``return x if
    y`` or ``unless``; Python's ``return a if c else b`` is)."""
    code = code.strip()
    if not EXITS.match(code) or code.endswith(("\\", ",")):
        return False
    m = _MODIFIER.search(code)
    if m is not None and not (m.group(1) == "if" and " else " in code[m.end() :]):
        return False
    depth = BracketDepth()
    depth.feed(code)
    return depth.depth == 0 and depth.least == 0 and not depth.quote


_MULTI_LINE_QUOTES = ('"""', "'''", "`")


EXIT_LINES = 50
"""The most lines an exit's open brackets are followed over (``return (`` ... ``)``)."""


class _Unreachable(_LineMatcher):
    def __init__(self, first_prefix: str) -> None:
        super().__init__()
        self.first_prefix = first_prefix
        self.exit_width: int | None = None  # the indentation of the exit just written
        self.in_string = ""  # a multi-line string the output opened and has not closed
        self.pending: list[str] = []  # an exit's lines while its brackets are open
        self.pending_width = 0
        self.judged = False  # the current line's start was judged

    def _text(self, line: str) -> str:
        return self.first_prefix + line if self.index == 0 else line

    def new_line(self) -> None:
        self.judged = False

    def line_grew(self, chunk: str) -> int | None:
        # judged from its first characters, not after its last: a dead line's tokens are
        # not worth generating
        if self.judged or self.exit_width is None or self.in_string or self.pending:
            return None
        text = self._text("".join(self.parts))
        code = text.lstrip()
        if not code or any(start.startswith(code) for start in COMMENT_LINE_STARTS):
            return None  # blank so far, or the start of a comment's marker: not known yet
        self.judged = True
        if code.startswith(COMMENT_LINE_STARTS) or indent_of(text) != self.exit_width:
            return None
        return max(self.line_start - 1, 0)

    def line_done(self, line: str) -> int | None:
        text = self._text(line)
        code = text.strip()
        was = self.in_string
        for quote in _MULTI_LINE_QUOTES:  # (a count per line: a line's words, not a lexer)
            if (not self.in_string or self.in_string == quote) and code.count(quote) % 2:
                self.in_string = "" if self.in_string else quote
        if was or self.in_string:
            self.exit_width = None  # a string's lines are words, not statements
            self.pending = []
            return None
        if not code or code.startswith(COMMENT_LINE_STARTS):
            return None  # blank lines and comments: neither code that runs nor an exit
        if self.pending:  # an exit's brackets still open: its next line
            self.pending.append(code)
            statement = "\n".join(self.pending)
            depth = BracketDepth()
            depth.feed(statement)
            if depth.depth <= 0 or len(self.pending) >= EXIT_LINES:
                self.exit_width = self.pending_width if exits_block(statement) else None
                self.pending = []
            return None
        width = indent_of(text)
        if width == self.exit_width:
            return max(self.line_start - 1, 0)
        self.exit_width = width if exits_block(code) else None
        if self.exit_width is None and EXITS.match(code):
            depth = BracketDepth()
            depth.feed(code)
            if depth.depth > 0:  # ``return (``: judged once its brackets close
                self.pending, self.pending_width = [code], width
        return None


def unreachable(first_prefix: str = "") -> StopRule:
    """Stop before a generated code line that could never run: one at the indentation of
    the statement before it when that statement leaves its block (:func:`exits_block`:
    ``return lo`` then ``return max(x, hi)`` in the same block; an exit whose brackets
    close on a later line, ``return (`` ... ``)``, as a whole). The text is cut before the
    newline that precedes that line, as soon as the line's first characters show it is
    code at that indentation; comments and blank lines between are neither.
    ``first_prefix``: the cursor's line before the output (its first line's start)."""
    return MatcherRule(lambda: _Unreachable(first_prefix))


FENCE = "```"


class _FenceLine(_LineMatcher):
    def __init__(self, check_first_line: bool) -> None:
        super().__init__()
        self.check_first_line = check_first_line
        self.judged = False

    def new_line(self) -> None:
        self.judged = False

    def line_grew(self, chunk: str) -> int | None:
        if self.judged or not (self.index > 0 or self.check_first_line):
            return None
        line = "".join(self.parts).lstrip()
        if len(line) < len(FENCE) and FENCE.startswith(line):
            return None  # not known yet
        self.judged = True
        return max(self.line_start - 1, 0) if line.startswith(FENCE) else None


def fence_line(*, check_first_line: bool) -> StopRule:
    """Stop before a generated line that starts with a Markdown code fence (`````): in a
    document that has none, the model has left the file for a chat answer's end (seen
    after a Dockerfile's and a ``.gitignore``'s lines). The text is cut before the
    newline that precedes the fence. ``check_first_line``: the output starts at the
    beginning of a line, so its first line is judged too."""
    return MatcherRule(lambda: _FenceLine(check_first_line))


class _NextDefinition(_LineMatcher):
    def __init__(self, start_indent: int, is_definition: Callable[[str], bool],
                 shows_definition: Callable[[str], bool] | None = None) -> None:  # fmt: skip
        super().__init__()
        self.start_indent = start_indent
        self.is_definition = is_definition
        self.shows_definition = shows_definition
        self.content_end: int | None = None  # where the last non-blank line ends
        self.blank = False  # a blank line follows that line

    def line_grew(self, chunk: str) -> int | None:
        if not self.blank or self.shows_definition is None:
            return None
        line = "".join(self.parts)
        if line.strip() and indent_of(line) == self.start_indent and self.shows_definition(line):
            return self.content_end  # its first words show it: the rest of the line need not be written
        return None

    def line_done(self, line: str) -> int | None:
        if not line.strip():
            self.blank = self.content_end is not None
            return None
        if self.blank and indent_of(line) == self.start_indent and self.is_definition(line):
            return self.content_end
        self.content_end, self.blank = self.length, False
        return None


def next_definition(start_indent: int, is_definition: Callable[[str], bool],
                    shows_definition: Callable[[str], bool] | None = None) -> StopRule:  # fmt: skip
    """Stop before a blank line that is followed by a definition at ``start_indent`` (the
    cursor's indentation), after some code: one definition, or one group of fields, at a
    time (an Enum's next members came with a ``__str__`` method below them, a dataclass
    field with a method). ``is_definition(line)`` says whether a whole line starts a
    definition (the caller knows the languages); ``shows_definition(start)``, whether the
    start of a line, as far as it is written, already does (``    def ``, ``    @``): then
    the output stops there, without the tokens of the rest of that line (3 to 17 for the
    signatures counted with Qwen's tokenizer, each an AR step). The text is cut at the end of the last line before
    the blank one."""
    return MatcherRule(lambda: _NextDefinition(start_indent, is_definition, shows_definition))


LOOP_LINES = 16
"""The longest block of lines :func:`loop` looks for written again and again."""
LOOP_REPEATS = ((1, 4), (2, 3), (4, 2))
"""(block size, times): a block of at least that many lines written that many times in a
row is a loop. One line 4 times (``#endif`` three times is not), 2-3 lines 3 times, 4 lines
or more twice (greedy decoding that wrote 4 lines again goes on writing them: seen with 12
``title = title.replace(...)`` lines, again and again to the token cap)."""


def _loop_repeats(size: int) -> int:
    return next(times for least, times in reversed(LOOP_REPEATS) if size >= least)


LOOP_PIECES = ((3, 6), (10, 4))
"""Within a line: a piece of at least 3 characters written 6 times in a row, or of at
least 10 written 4 times, ends the line in a loop (Tabby's thresholds)."""
LOOP_SYMBOLS = (8, 16)
"""Within a line: a piece of up to 8 characters, none a letter or a digit and not all the same
(``.*``, ``)(``), written 16 times in a row ends the line in a loop (a Makefile target's
``*.log.*.*.*.*...``); a Markdown table's separator row of 16 columns would be one too, a
rule line of one character (``-----``) is not."""
LOOP_PIECE_MAX = 100
"""The longest piece looked for within a line (a 70-character comment, ``# sys.exit(main(sys.argv))
is equivalent to sys.exit(main(sys.argv))``, written again and again after the code it
describes, was missed at 40)."""
_LETTERS = re.compile(r"[A-Za-z_]{2}")


def _repeats(piece: str, times: int, text: str) -> bool:
    return len(text) >= len(piece) * times and text.endswith(piece * times)


def line_loop(line: str) -> str | None:
    """The piece ``line`` ends with, written again and again (:data:`LOOP_PIECES`), as it
    stands there (the piece times its count), or None: a piece that holds two letters in
    a row and more than one character: ``bar(baz(bar(baz(...``, not ``# ------``,
    ``0x00, 0x00, ...`` or ``"xxxxxxxxxxxxxxxxxx"``, which are what some files hold; or a
    piece of symbols only written more often still (:data:`LOOP_SYMBOLS`: ``.*.*.*...``)."""
    n = len(line)
    for size in range(LOOP_PIECES[0][0], LOOP_PIECE_MAX + 1):
        times = LOOP_PIECES[0][1] if size < LOOP_PIECES[1][0] else LOOP_PIECES[1][1]
        if size * times > n:
            if size >= LOOP_PIECES[1][0]:
                break
            continue
        piece = line[n - size :]
        if _repeats(piece, times, line) and _LETTERS.search(piece) and len(set(piece)) > 1:
            return piece * times
    size_max, times = LOOP_SYMBOLS
    for size in range(2, min(size_max, n // times) + 1):
        piece = line[n - size :]
        if len(set(piece)) > 1 and not any(c.isalnum() for c in piece) and _repeats(piece, times, line):
            return piece * times
    return None


def comment_at(line: str, marker: str) -> int | None:
    """Where a line comment starting with ``marker`` (``#``, ``//``) begins in ``line``,
    outside quoted strings (``"``, ``'``, `````, a backslash escaping), or None."""
    quote, escaped = "", False
    for i, c in enumerate(line):
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
        elif c in QUOTES:
            quote = c
        elif line.startswith(marker, i):
            return i
    return None


class _Loop(_LineMatcher):
    def __init__(self, closers: Mapping[str, int], known: str, rows: bool, comment: str = "") -> None:
        super().__init__()
        self.comment = comment
        self.lines: list[tuple[str, int]] = []  # the last complete lines: (text, start)
        self.closers = {k: n for k, n in closers.items() if n > 0}
        self.closer_run = 0  # the same closer line written this many times in a row
        self.known = known
        self.rows = rows  # letterless lines written again are not a loop

    def line_grew(self, chunk: str) -> int | None:
        line = "".join(self.parts)
        repeated = line_loop(line)
        if repeated is None or repeated in self.known:
            return None
        if self.comment:  # a loop in the line's trailing comment: the code before it stays
            at = comment_at(line, self.comment)
            code = line[:at].rstrip() if at is not None else ""
            if code.strip() and line_loop(code) is None:
                if line_loop(line[at:]) is not None:
                    return self.line_start + len(code)
                # the loop reaches back into the code (the comment says the code again and
                # again): the comment alone shows it within one more writing of the piece
                return None
        return max(self.line_start - 1, 0)

    def line_done(self, line: str) -> int | None:
        text = line.rstrip()
        same = bool(self.lines) and self.lines[-1][0] == text
        self.lines.append((text, self.line_start))
        del self.lines[: -2 * LOOP_LINES]
        allowed = self.closers.get(text.strip(), 0)
        if allowed:  # ``#endif`` closing what the code before opened: as often as it is open
            self.closer_run = self.closer_run + 1 if same else 1
            if self.closer_run <= max(allowed, _loop_repeats(1) - 1):
                return None
            extra = self.lines[len(self.lines) - self.closer_run + allowed]  # its first writing too many
            return max(extra[1] - 1, 0)
        texts = [t for t, _ in self.lines]
        for size in range(1, LOOP_LINES + 1):
            times = _loop_repeats(size)
            if size * times > len(texts):
                continue
            block = texts[len(texts) - size :]
            if texts[len(texts) - size * times :] == block * times and (not self.rows or any(_LETTERS.search(t) for t in block)):
                if self.known and "\n".join(block * times) in self.known:
                    continue  # the code it copies repeats so
                second = self.lines[len(texts) - size * (times - 1)][1]  # where the block starts again
                return max(second - 1, 0)
        for size in range(2, LOOP_LINES + 1):  # the same lines, each writing deeper: a spiral
            if size * SPIRAL_REPEATS > len(texts):
                break
            tail = texts[len(texts) - size * SPIRAL_REPEATS :]
            writings = [tail[i * size : (i + 1) * size] for i in range(SPIRAL_REPEATS)]
            if _spiral(writings) and any(_LETTERS.search(t) for t in writings[0]):
                if self.known and "\n".join(tail) in self.known:
                    continue
                first = len(texts) - size * SPIRAL_REPEATS
                depth = BracketDepth()
                depth.feed("\n".join(writings[0]))
                # its first writing stays, unless it leaves a bracket open (``WHERE id IN (``):
                # the spiral goes whole then
                keep = first + (size if depth.depth <= 0 else 0)
                return max(self.lines[keep][1] - 1, 0)
        return None


SPIRAL_REPEATS = 3
"""A block of 2 or more lines written this many times in a row, each writing the one
before moved right by the same indentation, is a loop too (:func:`loop`)."""


def _spiral(writings: list[list[str]]) -> bool:
    """Whether the writings (lists of lines, equal lengths) are the same lines, each
    writing indented deeper than the one before by one constant step, every line alike."""
    stripped = [[line.strip() for line in w] for w in writings]
    if any(st != stripped[0] for st in stripped) or not all(stripped[0]):
        return False
    indents = [[indent_of(line) for line in w] for w in writings]
    step = indents[1][0] - indents[0][0]
    return step > 0 and all(b[k] - a[k] == step for a, b in zip(indents, indents[1:]) for k in range(len(a)))


def loop(closers: Mapping[str, int] | None = None, known: str = "", rows: bool = True, comment: str = "") -> StopRule:
    """Stop where greedy decoding has fallen into a loop, which it never leaves (seen in
    "Generate function body": a 12-line cycle of ``title = title.replace(...)`` to the
    token cap): a block of up to :data:`LOOP_LINES` lines written again as often as
    :data:`LOOP_REPEATS` says keeps its first writing (the text is cut before the newline
    where it starts again); a line that ends in a piece written again and again
    (:func:`line_loop`) is dropped whole (cut before the newline that precedes it; the
    first line: everything). Lines are compared whole, indentation included, and a
    repeated block must hold two letters in a row (rows of zeros and ``#`` lines repeat in
    real files).

    ``closers``: lines (stripped) that close something the code before the output left
    open, and how often: ``{"#endif": 3}`` after three nested ``#ifdef`` s
    (:func:`open_directives`). Such a line written again and again in a row is kept as
    often as that (it was kept once: three nested blocks got one ``#endif``); it is cut
    where it always was (written 4 times) or at its first writing past that count,
    whichever comes later, so a count from only part of the code never cuts sooner.

    ``known``: code the output may copy (an edit's original): a repetition written in it
    (lines compared without their trailing blanks) is not a loop.

    ``rows``: a block without two letters in a row (``[0, 0, 0, 0],``) written again is
    not a loop (grids and tables of zeros are); False when the code before shows no such
    row written twice in a row (:func:`repeats_rows`), so ``(10, 10, 20),`` written 7
    times under distinct ``parametrize`` rows is one.

    A block of 2 or more lines written :data:`SPIRAL_REPEATS` times, each writing deeper
    than the one before by the same step (a subquery nested in itself: ``SELECT id`` /
    ``FROM users`` / ``WHERE id IN (`` again and again, further right each time), is one
    too; a single line is not (``end`` closing nested blocks at falling indentation). Its
    first writing is kept unless it leaves a bracket open (the subquery's ``IN (``): then
    the output ends before the spiral.

    ``comment``: the language's line comment marker (``#``, ``//``; "" none known): a loop
    that lies wholly inside a line's trailing comment (:func:`comment_at`) cuts the line
    before that comment, keeping the code before it (``sys.exit(main(sys.argv))`` then a
    comment saying the same thing again and again), instead of dropping the line."""
    lines = "\n".join(line.rstrip() for line in known.replace("\r\n", "\n").split("\n")) if known else ""
    return MatcherRule(lambda: _Loop(closers or {}, lines, rows, comment))


ROWS_LOOKBACK = 40
"""How many lines before the output :func:`repeats_rows` reads."""


def repeats_rows(text: str) -> bool:
    """Whether the last :data:`ROWS_LOOKBACK` lines of ``text`` (the code before the
    output) hold a non-blank line without two letters in a row written twice in a row
    (``[0, 0, 0, 0],`` twice: a grid, a table), i.e. whether such rows repeat in this
    code (:func:`loop`'s ``rows``)."""
    start = len(text)
    for _ in range(ROWS_LOOKBACK + 1):
        start = text.rfind("\n", 0, start)
        if start < 0:
            break
    lines = [line.strip() for line in text[start + 1 :].split("\n")]
    return any(a and a == b and not _LETTERS.search(a) for a, b in zip(lines, lines[1:]))


DIRECTIVES = re.compile(r"#[ \t]*(if|ifdef|ifndef|endif|region|endregion)\b")
DIRECTIVE_CLOSERS = {"if": "#endif", "ifdef": "#endif", "ifndef": "#endif", "endif": "#endif",
                     "region": "#endregion", "endregion": "#endregion"}
"""The directives that nest and whose closer is the same line at every level: the
preprocessor's conditionals (C, C++, C#, Objective-C) and C#'s regions."""


def open_directives(text: str) -> dict[str, int]:
    """How many of each :data:`DIRECTIVE_CLOSERS` closer ``text`` (the code before the
    output) leaves to write: ``#ifdef A`` / ``#ifdef B`` / ``#ifdef C`` -> ``{"#endif": 3}``.
    A directive starts its line (after blanks); those in block comments or strings count
    too: a count, not a preprocessor. ~3 ms per MB of C."""
    count: dict[str, int] = {}
    for m in DIRECTIVES.finditer(text):
        start = m.start()
        if text[text.rfind("\n", 0, start) + 1 : start].strip(" \t"):
            continue  # not at a line's start (a comment's "#if", a URL's anchor)
        word = m.group(1)
        closer = DIRECTIVE_CLOSERS[word]
        count[closer] = count.get(closer, 0) + (-1 if word.startswith("end") else 1)
    return {k: n for k, n in count.items() if n > 0}


CONTROL_CHARS = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")
"""C0 and C1 control characters, but tab, line feed, form feed (a page break in some
sources) and carriage return."""


class _ControlChars(StopMatcher):
    def __init__(self) -> None:
        self.length = 0

    def feed(self, piece: str) -> int | None:
        m = CONTROL_CHARS.search(piece)
        if m is not None:
            return self.length + m.start()
        self.length += len(piece)
        return None


def control_chars() -> StopRule:
    """Stop before a control character (:data:`CONTROL_CHARS`: a bell, an escape, a NUL):
    source code spells them as escapes, never as raw bytes, and in an editor or a
    terminal they are not text (seen from a small model's body). The output is cut right
    before it."""
    return MatcherRule(_ControlChars)


class _AnyOf(StopRule):
    def __init__(self, rules: Sequence[StopRule]) -> None:
        self.rules = tuple(rules)

    def matcher(self) -> StopMatcher:
        return _AnyOfMatcher([r.matcher() for r in self.rules])


class _AnyOfMatcher(StopMatcher):
    def __init__(self, matchers: list[StopMatcher]) -> None:
        self.matchers = matchers

    def feed(self, piece: str) -> int | None:
        cuts = [c for c in (m.feed(piece) for m in self.matchers) if c is not None]
        return min(cuts) if cuts else None

    def peek(self, piece: str) -> int | None:
        cuts = [c for c in (m.peek(piece) for m in self.matchers) if c is not None]
        return min(cuts) if cuts else None

    def newline_ends(self) -> bool:
        return any(m.newline_ends() for m in self.matchers)


def any_of(*rules: "StopRule | None") -> StopRule | None:
    """The earliest cut of several rules (None entries are left out)."""
    kept = [r for r in rules if r is not None]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else _AnyOf(kept)


class _After(StopRule):
    def __init__(self, rule: StopRule, n: int) -> None:
        self.rule = rule
        self.n = n

    def matcher(self) -> StopMatcher:
        return _AfterMatcher(self.rule.matcher(), self.n)


class _AfterMatcher(StopMatcher):
    def __init__(self, inner: StopMatcher, n: int) -> None:
        self.inner = inner
        self.n = n  # characters the inner rule never sees (its cuts are offset by them)
        self.skip = n

    def feed(self, piece: str) -> int | None:
        if self.skip:
            dropped = min(self.skip, len(piece))
            piece = piece[dropped:]
            self.skip -= dropped
            if self.skip:
                return None
        cut = self.inner.feed(piece)
        return cut + self.n if cut is not None else None

    def peek(self, piece: str) -> int | None:
        rest = piece[min(self.skip, len(piece)) :]
        if self.skip >= len(piece) and self.skip:
            return None
        cut = self.inner.peek(rest)
        return cut + self.n if cut is not None else None

    def newline_ends(self) -> bool:  # not while the first n characters are still to come
        return not self.skip and self.inner.newline_ends()


def Predicate(fn: StopFn) -> StopRule:  # noqa: N802 (reads as the rule it makes)
    """A plain predicate ``fn(text) -> cut | None`` on the whole output so far, as a
    rule. It re-reads the whole text at every token: quadratic in the output, for
    ad-hoc callers; the rules above are incremental."""
    return MatcherRule(lambda: _PredicateMatcher(fn))


class _PredicateMatcher(StopMatcher):
    def __init__(self, fn: StopFn) -> None:
        self.fn = fn
        self.parts: list[str] = []

    def feed(self, piece: str) -> int | None:
        if piece:
            self.parts = ["".join(self.parts) + piece]
        return self.fn(self.parts[0] if self.parts else "")

    def peek(self, piece: str) -> int | None:
        return self.fn("".join(self.parts) + piece)


StopLike = Union[StopRule, StopFn]


def as_rule(stop: "StopLike | None") -> StopRule | None:
    """A rule from a rule or a plain predicate."""
    if stop is None or isinstance(stop, StopRule):
        return stop
    if callable(stop):
        return Predicate(stop)
    raise TypeError(f"not a stop rule: {stop!r}")


def body_end(indent: int) -> StopRule:
    """Where a function body generated from the line after its signature ends, as the CLIs
    (``fastcoder generate``, ``fastcoder demo``) judge it: the block at ``indent`` ends
    (:func:`block_end`, its first line judged too), or greedy decoding falls into a loop
    (:func:`loop`) or writes a control character (:func:`control_chars`), where the
    server's "Generate function body" stops as well. (Without the loop rule the demo timed
    a body in which the model wrote one ``if``/``return`` pair over and over, 256 tokens drafted
    from its own output: a 4.7x "speedup" no user would take.)"""
    return any_of(block_end(indent, check_first_line=True), loop(), control_chars())

