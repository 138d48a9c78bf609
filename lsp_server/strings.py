"""Which triple-quoted string, if any, the end of some code leaves open.

:func:`open_triple_quote` reads code from its start as a lexer would: comments (``#`` or
``//`` and ``/* */``, by language: :func:`comment_style`), one-line strings (``"..."``,
``'...'``, ending at their quote or at the line's end) and triple-quoted strings
(``\"\"\"...\"\"\"``, ``'''...'''``), a backslash escaping the next character in every
string. The cursor's docstring rules (:attr:`lsp_server.prompt.CursorContext.docstring`,
``in_docstring``) ask it whether the text before the cursor is inside a triple-quoted
string.

Why: counting the ``\"\"\"`` before the cursor (odd: inside one) took a ``\"\"\"`` inside a
``'''`` docstring, a comment or a one-line string for an opener, and from there on every
block below a function's multi-line docstring was taken for docstring text (its closer
the nearest quote below): such a file's code suggestions stopped at ``\"\"\"`` and a limit
cut ended them at a line ending in ``.``.

Scanning costs ~1 ms per 100 KB of code (2-vCPU AMD EPYC); past :data:`MAX_SCAN_CHARS`
the count of quotes decides, as before.
"""

from __future__ import annotations

import re

DOC_STRING_QUOTES = ('"""', "'''")
"""The triple quotes of docstrings (:attr:`lsp_server.prompt.CursorContext.docstring`), and
of multi-line strings in Python, Julia, Kotlin, Scala, Swift, Groovy, Java (text blocks),
TOML, Elixir."""

SLASH_COMMENT_LANGUAGES = frozenset({
    "c", "cpp", "csharp", "cuda-cpp", "dart", "go", "groovy", "java", "javascript", "javascriptreact",
    "jsonc", "kotlin", "objective-c", "objective-cpp", "php", "rust", "scala", "swift", "typescript",
    "typescriptreact", "zig",
})  # fmt: skip
"""Language ids (the editor's) whose comments are ``//`` and ``/* */``; every other
language is read with ``#`` comments (Python's, and Julia's, TOML's, Elixir's, shell's)."""

MAX_SCAN_CHARS = 4_000_000
"""Code longer than this is not scanned (~40 ms at the ~1 ms per 100 KB measured): the
parity of its quotes decides."""

_SPECIAL = {
    "hash": re.compile(r"\"\"\"|'''|[\"'#]"),
    "slash": re.compile(r"\"\"\"|'''|[\"']|//|/\*"),
}
_ONE_LINE_END = {q: re.compile(r"\\.|[" + q + r"\n]", re.S) for q in "\"'"}
_TRIPLE_END = {q: re.compile(r"\\.|" + q, re.S) for q in DOC_STRING_QUOTES}


def comment_style(language: str | None) -> str:
    """``"slash"`` for the languages of :data:`SLASH_COMMENT_LANGUAGES`, else ``"hash"``."""
    return "slash" if language in SLASH_COMMENT_LANGUAGES else "hash"


def line_comment(language: str | None) -> str:
    """What starts a line comment in ``language`` (:func:`comment_style`): ``//`` or ``#``."""
    return "//" if comment_style(language) == "slash" else "#"


def open_triple_quote(code: str, language: str | None = None) -> str:
    '''The triple quote (``"""`` or ``\'\'\'``) of the string that ``code`` ends inside, or ""
    (it ends in code, a comment or a one-line string). ``language``: the editor's language
    id, which says what starts a comment (:func:`comment_style`).'''
    return open_triple_quote_at(code, language)[0]


def open_triple_quote_at(code: str, language: str | None = None) -> tuple[str, int]:
    """:func:`open_triple_quote` and where in ``code`` that string opens (-1: none, or past
    :data:`MAX_SCAN_CHARS`, where only the count of quotes decides)."""
    if len(code) > MAX_SCAN_CHARS:
        odd = [q for q in DOC_STRING_QUOTES if code.count(q) % 2]
        return (odd[0] if len(odd) == 1 else ""), -1
    special = _SPECIAL[comment_style(language)]
    pos = 0
    while (m := special.search(code, pos)) is not None:
        token, pos = m.group(), m.end()
        if token in ("#", "//"):
            pos = code.find("\n", pos) + 1
            if pos == 0:
                return "", -1  # in a line comment
        elif token == "/*":
            pos = code.find("*/", pos) + 2
            if pos == 1:
                return "", -1  # in a block comment
        else:
            end = (_TRIPLE_END if len(token) == 3 else _ONE_LINE_END)[token]
            while True:
                e = end.search(code, pos)
                if e is None:
                    return (token, m.start()) if len(token) == 3 else ("", -1)
                pos = e.end()
                if not e.group().startswith("\\"):
                    break
    return "", -1
