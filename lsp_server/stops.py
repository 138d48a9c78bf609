"""Stop rules of a completion, as one predicate on the decoded output.

The engine calls the predicate after every committed token with the text generated
so far (starting at the cursor) and cuts the output where it says, so every decoding
method stops at the very same token. Rules:

* ``line`` mode (text right of the cursor): the first line break ends the suggestion;
* ``block`` mode: the shared block-end rule of :func:`fastcoder.stops.block_end` (the
  benchmark and the CLIs use it too):
  - a non-empty line indented less than the cursor's line ends the block,
  - at top level (the cursor's line is not indented) a blank line after some code;
* ``block`` mode, in addition: the output runs into the code below the cursor (a
  generated line equal to the next non-blank line of the document).

``max_new_tokens`` and the time budget are the engine's own limits
(:class:`fastcoder.config.DecodeConfig`).
"""

from __future__ import annotations

from typing import Callable, Sequence

from fastcoder.stops import block_end, indent_of

StopFn = Callable[[str], "int | None"]

TAB_WIDTH = 4


def indent_width(line: str) -> int:
    """Width of the leading whitespace (tabs expanded to multiples of 4)."""
    return indent_of(line, TAB_WIDTH)


def first_nonblank(lines: Sequence[str]) -> str | None:
    for line in lines:
        if line.strip():
            return line.rstrip("\r")
    return None


def runs_into(next_line: str | None, *, check_first_line: bool) -> StopFn | None:
    """Stop before a complete generated line equal to ``next_line`` (the code below)."""
    key = next_line.strip() if next_line is not None else ""
    if not key:
        return None

    def fn(text: str) -> int | None:
        pos = 0
        lines = text.split("\n")
        for i, line in enumerate(lines[:-1]):  # complete lines only
            if (i > 0 or check_first_line) and line.strip() == key:
                return max(pos - 1, 0)
            pos += len(line) + 1
        return None

    return fn


def make_stop_fn(mode: str, line_prefix: str, following_lines: Sequence[str] = ()) -> StopFn:
    """The stop predicate for a completion whose cursor line starts with ``line_prefix``.

    ``following_lines``: the document lines below the cursor's line.
    """
    base = indent_width(line_prefix)
    if mode == "line":
        return block_end(base, single_line=True)
    block = block_end(base)
    # when only indentation precedes the cursor, the first line is a whole line too
    into = runs_into(first_nonblank(following_lines), check_first_line=not line_prefix.strip())
    if into is None:
        return block

    def stop(text: str) -> int | None:
        cuts = [c for c in (block(text), into(text)) if c is not None]
        return min(cuts) if cuts else None

    return stop
