"""Function signatures in a line of code, by string operations only (linear in the line):
a one-line Python ``def`` (:func:`py_def`) and a brace language's ``name(...) {``
(:func:`brace_signature`). Shared by "Generate function body" (finding stubs,
:mod:`lsp_server.actions`) and the completion stop rules (a new definition,
:mod:`lsp_server.stops`)."""

from __future__ import annotations

_BLOCK_KEYWORDS = frozenset(("if", "for", "while", "switch", "catch", "else", "do", "try", "return"))
MAX_SIGNATURE_CHARS = 1000
"""Longer lines are not taken for a function signature (the scans below are linear, and
the heuristics look at up to 200 lines per request, on the server's event loop)."""


def _is_word(ch: str) -> bool:
    return ch == "_" or ch.isalnum()


def _word_at(text: str, i: int) -> int:
    """The end of the run of word characters starting at ``i``."""
    n = len(text)
    while i < n and _is_word(text[i]):
        i += 1
    return i


def _def_tail(rest: str) -> bool:
    """Whether ``rest`` (what follows ``def name(``) matches ``.*\\)\\s*(->\\s*[^:]+)?:\\s*(#.*)?$``:
    a ``)``, an optional return annotation, a ``:``, then only a comment. One pass (the
    regex backtracks quadratically on lines with many ``)``)."""
    n = len(rest)
    tail_ok = [False] * (n + 1)  # rest[i:] is blanks and perhaps a comment
    tail_ok[n] = True
    for i in range(n - 1, -1, -1):
        ch = rest[i]
        tail_ok[i] = ch == "#" or (ch.isspace() and tail_ok[i + 1])
    arrow_end = n + 1  # the earliest ") ->" end since the last ":"
    last_solid = -1  # the last non-blank character so far
    for i, ch in enumerate(rest):
        if ch == ":":
            if tail_ok[i + 1] and ((last_solid >= 0 and rest[last_solid] == ")") or arrow_end < i):
                return True
            arrow_end = n + 1
        elif ch == ")":
            k = i + 1
            while k < n and rest[k].isspace():
                k += 1
            if rest.startswith("->", k):
                arrow_end = min(arrow_end, k + 2)
        if not ch.isspace():
            last_solid = i
    return False


def py_def(line: str) -> tuple[str, str] | None:
    """(indentation, name) when ``line`` is a one-line Python ``def`` signature ending in
    ``:`` (and perhaps a comment); else None."""
    if len(line) > MAX_SIGNATURE_CHARS:
        return None
    body = line.lstrip()
    indent = line[: len(line) - len(body)]
    if body.startswith("async") and body[5:6].isspace():
        body = body[5:].lstrip()
    if not (body.startswith("def") and body[3:4].isspace()):
        return None
    rest = body[3:].lstrip()
    end = _word_at(rest, 0)
    if end == 0:
        return None
    name, rest = rest[:end], rest[end:].lstrip()
    if not rest.startswith("(") or not _def_tail(rest[1:]):
        return None
    return indent, name


def brace_signature(line: str) -> tuple[str, str, bool] | None:
    """(indentation, name, closed) when ``line`` opens a function body in a brace
    language, ``name(...) {`` (closed: ``name(...) {}``), not a control statement
    (``if (x) {``); else None. String operations only: linear in the line."""
    if len(line) > MAX_SIGNATURE_CHARS:
        return None
    head = line.rstrip()
    closed = head.endswith("}")
    if closed:
        head = head[:-1].rstrip()
    if not head.endswith("{"):
        return None
    head = head[:-1]
    if ";" in head or "{" in head or "}" in head:
        return None
    paren = head.find("(")
    if paren < 0 or ")" in head[:paren] or head.rfind(")") < paren:
        return None
    k = paren
    while k > 0 and head[k - 1].isspace():
        k -= 1
    j = k
    while j > 0 and _is_word(head[j - 1]):
        j -= 1
    if j == k:
        return None
    body = head.lstrip()
    indent = head[: len(head) - len(body)]
    if body[: _word_at(body, 0)] in _BLOCK_KEYWORDS:
        return None
    return indent, head[j:k], closed
