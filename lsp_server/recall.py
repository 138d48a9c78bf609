"""Answers from remembered states: a request whose document state a recent suggestion
already covers (the same state again, or its start typed, accepted, undone) is
answered from it without the model (``lsp_server.complete``, step 1)."""

from __future__ import annotations

from dataclasses import replace

from lsp_server.prompt import AUTO_CLOSERS, CursorContext
from lsp_server.sessions import Answers, Suggestion


def typed_through(last: Suggestion | None, ctx: CursorContext) -> str | None:
    """The rest of ``last`` when, since it was shown, the user only typed its start.

    Editors auto-close brackets and quotes: when what appeared right of the cursor is
    just such closers, and the rest of the suggestion's line ends with them, the rest
    of that line without them is returned (a single-line suggestion now). When Enter split
    an opener from its closer (``request(|)`` -> the ``)`` on a line below), the suggestion
    of the bracket's contents is returned without its closing line break and indentation."""
    if last is None or not ctx.prefix.startswith(last.prefix):
        return None
    typed = ctx.prefix[len(last.prefix) :]
    if not typed and ctx.suffix == last.suffix:
        return last.text  # the very same state (undo, backspace): its answer, even empty
    if not last.text.startswith(typed):
        return None
    rest = last.text[len(typed) :]
    if ctx.suffix == last.suffix:
        return rest if rest.strip() else None
    if not ctx.suffix.endswith(last.suffix):
        return None
    added = ctx.suffix[: len(ctx.suffix) - len(last.suffix)]
    if added.startswith("\n") and not added.strip() and added.count("\n") == 1:
        # Enter between an opener and its auto-closed closer: the editor moved the closer to
        # a line of its own at the opener line's indentation, which the suggestion (laying
        # out the bracket's contents, :func:`lsp_server.postprocess.opened_body`) ends with
        kept = rest[: len(rest) - len(added)]
        return kept if rest.endswith(added) and kept.strip() else None
    if not added or len(added) > 8 or any(c not in AUTO_CLOSERS for c in added):
        return None
    line = rest.split("\n")[0].rstrip()
    if not line.endswith(added):
        return None
    line = line[: len(line) - len(added)]
    return line if line.strip() else None


def continues(ctx: CursorContext, start: CursorContext, text: str) -> bool:
    """Whether ``ctx`` is ``start`` with text typed (or accepted) at its cursor that
    agrees with ``text`` as far as both go: some or all of ``text``, or past it (a
    generation still running may produce the rest); the text after the cursor as it was."""
    if ctx.suffix != start.suffix or not ctx.prefix.startswith(start.prefix):
        return False
    typed = ctx.prefix[len(start.prefix) :]
    return text.startswith(typed) or typed.startswith(text)


def may_still_serve(text: str, start: CursorContext, output: str) -> bool:
    """Whether the document ``text`` may still be ``start`` with the start of ``output``
    typed (or accepted) at its cursor, auto-closed brackets and quotes right of it: the
    text between ``start``'s prefix and suffix, without at most 8 closers at its end,
    agrees with ``output`` as far as both go (the user may type on past what the
    generation has produced so far). False once the text left that path."""
    prefix, suffix = start.prefix, start.suffix
    if len(text) < len(prefix) + len(suffix) or not text.startswith(prefix) or not text.endswith(suffix):
        return False
    typed = text[len(prefix) : len(text) - len(suffix)]
    closers = len(typed) - len(typed.rstrip("".join(AUTO_CLOSERS)))
    if 0 < closers <= 8:
        typed = typed[: len(typed) - closers]
    return output.startswith(typed) or typed.startswith(output)


def recall(answers: Answers, ctx: CursorContext) -> tuple[str, Suggestion] | None:
    """The answer for ``ctx`` from a recent state's suggestion (newest first), if any."""
    for s in answers:
        rest = typed_through(s, ctx)
        if rest is not None:
            return rest, s
    return None


def state_key(ctx: CursorContext) -> tuple:
    """What identifies a cursor state (the document's text around the cursor)."""
    return (len(ctx.prefix), len(ctx.suffix), hash(ctx.prefix), hash(ctx.suffix), ctx.mode)


def after_accept(ctx: CursorContext, text: str) -> list[CursorContext]:
    """The states a user reaches by accepting ``text`` at ``ctx``: all of it, then (for
    a multi-line suggestion) its first line."""
    out = [replace(ctx, prefix=ctx.prefix + text)]
    nl = text.find("\n")
    if 0 < nl < len(text.rstrip()) and text[:nl].strip():
        out.append(replace(ctx, prefix=ctx.prefix + text[:nl]))
    return out
