"""Code action "Generate function body".

Offered when the cursor is in a function whose body is a stub: empty, ``pass``,
``...``, ``raise NotImplementedError``, or only a docstring. Python files are read
with :mod:`ast`; other languages (and Python that does not parse, e.g. while typing)
use an indentation / brace heuristic. Finding the stub is cheap (no model call);
the body is generated when the client resolves the action.

Generation: the prompt is the file up to the body (signature and docstring included,
plus the body's indentation), with the rest of the file as the FIM suffix when the
model has FIM tokens; it stops when the output dedents below the body's indentation.
"""

from __future__ import annotations

import ast
import re
import threading
from bisect import bisect_right
from dataclasses import asdict, dataclass
from typing import Any

from fastcoder.stops import FENCE
from fastcoder.tokens import TokenInfo
from lsp_server.postprocess import cut_at_limit, document_indent_unit, reindent
from lsp_server.prompt import CursorContext, build_prompt
from lsp_server.signatures import brace_signature, py_def
from lsp_server.stops import indent_width, make_stop_fn

TITLE = "Generate function body (FastCoder)"
KIND = "refactor.rewrite.fastcoder.generateBody"


@dataclass(frozen=True)
class Stub:
    """A stub function body and the text range that a generated body replaces.

    Offsets are character offsets in the document text. ``start == end`` means an
    insertion (a function with only a docstring). The replacement text is
    ``lead + body + tail``.
    """

    name: str
    def_line: int  # 0-based line of the `def` / signature
    last_line: int  # 0-based last line of the function
    start: int
    end: int
    indent: str  # indentation of the body lines
    lead: str  # text put before the first body line (e.g. "\n" + indent)
    tail: str  # text put after the body (e.g. "\n" + the closing brace's indent)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------- helpers


def _line_starts(text: str) -> list[int]:
    """Offsets where the ``\\n``-separated lines of ``text`` start."""
    starts = [0]
    i = text.find("\n")
    while i >= 0:
        starts.append(i + 1)
        i = text.find("\n", i + 1)
    return starts


def _char_col(line: str, byte_col: int) -> int:
    """ast's UTF-8 byte column -> a character column."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_placeholder(node: ast.stmt) -> bool:
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node.value.value is Ellipsis:
        return True
    if isinstance(node, ast.Raise) and node.exc is not None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def _leading_ws(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


# ---------------------------------------------------------------------------- python


def python_stub(text: str, line: int) -> Stub | None:
    """The stub function around 0-based ``line``; None if there is none.
    Raises SyntaxError when the text does not parse."""
    tree = ast.parse(text)
    lines = text.split("\n")
    starts = _line_starts(text)
    best: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            last = (node.end_lineno or node.lineno) - 1
            if first <= line <= last and (best is None or node.lineno > best.lineno):
                best = node  # the innermost function containing the line
    if best is None:
        return None
    body = list(best.body)
    doc = body[0] if body and _is_docstring(body[0]) else None
    rest = body[1:] if doc is not None else body
    if not all(_is_placeholder(s) for s in rest):
        return None
    def_line = best.lineno - 1
    last_line = (best.end_lineno or best.lineno) - 1
    def_indent = _leading_ws(lines[def_line])
    first_stmt = body[0]
    if first_stmt.lineno - 1 > def_line:
        indent = _leading_ws(lines[first_stmt.lineno - 1])
    else:
        indent = def_indent + document_indent_unit(text)
    if rest:
        a, b = rest[0], rest[-1]
        a_line, b_line = a.lineno - 1, (b.end_lineno or b.lineno) - 1
        a_col = _char_col(lines[a_line], a.col_offset)
        b_col = _char_col(lines[b_line], b.end_col_offset or 0)
        inline = a_line == def_line or (doc is not None and a_line == (doc.end_lineno or doc.lineno) - 1)
        if inline:
            start = starts[a_line] + a_col
            while start > 0 and text[start - 1] in " \t":
                start -= 1  # "def f(): pass" -> "def f():" + new lines
            lead = "\n" + indent
        else:
            start = starts[a_line]  # replace whole lines, indentation included
            lead = indent
        end = starts[b_line] + b_col
        # a trailing comment on the stub line goes too ("pass  # TODO")
        end = starts[b_line] + len(lines[b_line].rstrip("\r")) if lines[b_line][b_col:].strip().startswith("#") else end
        return Stub(best.name, def_line, last_line, start, end, indent, lead, "")
    # only a docstring: insert after it
    assert doc is not None
    d_line = (doc.end_lineno or doc.lineno) - 1
    pos = starts[d_line] + _char_col(lines[d_line], doc.end_col_offset or 0)
    return Stub(best.name, def_line, last_line, pos, pos, indent, "\n" + indent, "")


# ---------------------------------------------------------------------------- heuristics

_PY_STUB_LINE = re.compile(r"^\s*(pass|\.\.\.|raise\s+NotImplementedError(\(.*\))?)\s*(#.*)?$")
_COMMENT = re.compile(r"^\s*(//.*|/\*.*\*/|#.*|--.*)?$")


def indentation_stub(text: str, line: int) -> Stub | None:
    """Python-shaped stubs found by indentation (for text that does not parse)."""
    lines = text.split("\n")
    starts = _line_starts(text)
    for d in range(min(line, len(lines) - 1), max(-1, line - 200), -1):
        m = py_def(lines[d].rstrip("\r"))
        if m is None:
            continue
        def_w = indent_width(lines[d])
        body: list[int] = []
        i = d + 1
        while i < len(lines) and (not lines[i].strip() or indent_width(lines[i]) > def_w):
            body.append(i)
            i += 1
        while body and not lines[body[-1]].strip():
            body.pop()
        last = body[-1] if body else d
        if not (d <= line <= max(last, d + 1)):
            return None
        real = [b for b in body if lines[b].strip()]
        stub_lines = [b for b in real if _PY_STUB_LINE.match(lines[b])]
        doc_lines = [b for b in real if b not in stub_lines]
        if doc_lines:
            joined = "\n".join(lines[b] for b in doc_lines).strip()
            if not (joined.startswith(('"""', "'''")) and joined.endswith(('"""', "'''")) and len(joined) >= 6):
                return None
            if stub_lines and min(stub_lines) < max(doc_lines):
                return None
        indent = _leading_ws(lines[real[0]]) if real else _leading_ws(lines[d]) + document_indent_unit(text)
        if stub_lines:
            a, b = stub_lines[0], stub_lines[-1]
            return Stub(m[1], d, last, starts[a], starts[b] + len(lines[b].rstrip("\r")), indent, indent, "")
        anchor = doc_lines[-1] if doc_lines else d
        pos = starts[anchor] + len(lines[anchor].rstrip("\r"))
        return Stub(m[1], d, last, pos, pos, indent, "\n" + indent, "")
    return None


def brace_stub(text: str, line: int, language: str | None = None) -> Stub | None:
    """``name(...) {`` followed by an empty body (blank lines / comments) and ``}``
    (``language``: the document's, for the indentation of a body in a file with none yet)."""
    lines = text.split("\n")
    starts = _line_starts(text)
    for d in range(min(line, len(lines) - 1), max(-1, line - 50), -1):
        raw = lines[d].rstrip("\r")
        m = brace_signature(raw)
        if m is None:
            continue
        sig_indent, name, closed = m
        indent = sig_indent + document_indent_unit(text, language)
        open_col = raw.rindex("{")
        if closed:  # "f() {}" on one line
            if line != d:
                return None
            pos = starts[d] + open_col + 1
            return Stub(name, d, d, pos, pos, indent, "\n" + indent, "\n" + sig_indent)
        i = d + 1
        while i < len(lines) and _COMMENT.match(lines[i].rstrip("\r")) and lines[i].strip() != "}":
            i += 1
        if i >= len(lines) or lines[i].strip() != "}" or not (d <= line <= i):
            return None
        start = starts[d] + open_col + 1
        end = starts[i] + len(lines[i]) - len(lines[i].lstrip(" \t"))
        if any(lines[j].strip() for j in range(d + 1, i)):
            return None  # comments in the body: leave them alone
        return Stub(name, d, i, start, end, indent, "\n" + indent, "\n" + _leading_ws(lines[i]))
    return None


def find_stub(text: str, line: int, language_id: str | None) -> Stub | None:
    """The stub function at 0-based ``line``, or None."""
    lang = (language_id or "").lower()
    if lang in ("python", "py", "") or lang.startswith("python"):
        try:
            return python_stub(text, line)
        except (SyntaxError, ValueError, RecursionError):
            return indentation_stub(text, line)
    if lang in ("cython", "starlark", "mojo"):
        return indentation_stub(text, line)
    return brace_stub(text, line, lang)


FIND_NAMED_TRIES = 8
"""How many lines naming a stub :func:`find_stub_named` tries (nearest first)."""


def find_stub_named(text: str, name: str, near: int, language_id: str | None) -> Stub | None:
    """The stub function called ``name`` whose signature line is nearest to 0-based line
    ``near``, or None: a code action's stub after the user inserted or deleted lines above
    it between listing the action and resolving it. Tries the :data:`FIND_NAMED_TRIES`
    lines nearest ``near`` that hold ``name`` as a word."""
    if not name:
        return None
    word = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")
    starts = _line_starts(text)
    hits = sorted({bisect_right(starts, m.start()) - 1 for m in word.finditer(text)}, key=lambda ln: (abs(ln - near), ln))
    for line in hits[:FIND_NAMED_TRIES]:
        stub = find_stub(text, line, language_id)
        if stub is not None and stub.name == name and stub.def_line == line:
            return stub
    return None


def body_prompt_context(text: str, stub: Stub) -> tuple[str, str]:
    """(prefix, suffix) around the body: the prefix ends with the body's indentation."""
    prefix = text[: stub.start] + stub.lead
    suffix = stub.tail + text[stub.end :]
    if not suffix.startswith("\n"):
        suffix = "\n" + suffix.lstrip(" \t") if suffix.strip() else "\n"
    return prefix, suffix


def finish_body(generated: str, stub: Stub, truncated: bool) -> str:
    """The replacement text for the stub range, or "" when there is no body."""
    body = generated.replace("\r\n", "\n")
    if truncated:
        body = cut_at_limit(body)  # whole lines, no bracket left open
    lines = [ln.rstrip() for ln in body.split("\n")]
    if len(lines) > 1 and not lines[0].strip() and stub.indent:
        # the prompt ends at the body's indentation but the model began with a line break:
        # start the body on that line, without leaving it behind as trailing whitespace
        while len(lines) > 1 and not lines[0].strip():
            lines.pop(0)
        if lines[0].startswith(stub.indent):
            lines[0] = lines[0][len(stub.indent) :]
    while lines and not lines[-1].strip():
        lines.pop()
    body = "\n".join(lines)
    if not body.strip():
        return ""
    return stub.lead + body + stub.tail


BODY_LIMITS = {"max_new_tokens": "maxBodyTokens", "time_budget": "bodyTimeBudgetMs"}
"""The stop reasons of a body that a limit cut, and the setting each comes from."""


def cut_body_message(name: str, reason: str, settings: Any) -> str:
    """What the user is told when a limit cut the body of ``name()`` (:data:`BODY_LIMITS`):
    the body was written up to its last whole line, the rest is missing."""
    if reason == "max_new_tokens":
        what = f"{settings.max_body_tokens} tokens (maxBodyTokens)"
    else:
        what = f"{(settings.body_time_budget_ms or 0) / 1000:g} s (bodyTimeBudgetMs)"
    return f"FastCoder: the body of {name}() was cut at {what}: its whole lines so far were inserted; it may be incomplete"


def generate_body(
    engine: Any,
    fim: Any,
    text: str,
    stub: Stub,
    settings: Any,
    *,
    sources: Any = None,
    cancel: threading.Event | None = None,
    gate_parent: Any = None,
    language: str | None = None,
    on_step: Any = None,
) -> tuple[str, Any]:
    """(replacement for the stub's range, the Generation). Runs in the model thread.

    ``fim``: the model's FIM tokens (None: a prefix-only prompt); ``settings``: the
    server's :class:`lsp_server.settings.ServerSettings`; ``gate_parent``: the server's
    :class:`fastcoder.source_weights.SourceGate` (which datastores pay their search here);
    ``language``: the document's language id (its indentation when it has none yet);
    ``on_step``: called between two steps (the engine's ``on_step``).
    """
    from fastcoder.session import Session

    ctx = CursorContext(*body_prompt_context(text, stub), language or "")
    # the prompt ends with the body's indentation, healed as a completion's is (its last
    # space taken back, the first token starting with it): unhealed, the model wrote a
    # second indentation after Python's, and no indentation at all after a line break in C
    prompt = build_prompt(engine.tokenizer, fim, ctx, settings.max_prompt_tokens,
                          suffix_share=settings.suffix_share if fim else 0.0, max_suffix_tokens=None,
                          layout="anchored", info=TokenInfo.for_tokenizer(engine.tokenizer) if fim else None)  # fmt: skip
    heal = prompt.heal  # the output starts with it; the body is what follows
    gen = engine.generate(
        prompt.ids,
        settings.decode_config(
            max_new_tokens=settings.max_body_tokens,
            time_budget_s=None if settings.body_time_budget_ms is None else settings.body_time_budget_ms / 1000,
        ),
        session=Session(settings.engine, gate_parent),
        sources=sources,
        # a whole body: the typing-time rule that ends a statement at its line does not apply
        stop_fn=make_stop_fn("block", ctx.line_prefix, ctx.following_lines, mid_line_blocks=True,
                             fences=FENCE in text, degenerate=settings.stop_degenerate,
                             before=ctx.prefix, one_definition=False, language=language or "").after(len(heal)),
        cancel=cancel,
        first_allowed=prompt.allowed,
        on_step=on_step,
    )
    if gen.cancelled:
        return "", gen
    truncated = gen.stats.stop_reason in ("max_new_tokens", "time_budget")
    body = reindent(gen.text[len(heal) :], document_indent_unit(text, language))
    return finish_body(body, stub, truncated), gen
