"""Stop rules on decoded text, shared by the editor, the CLIs and the benchmark.

A stop rule is a predicate ``fn(text) -> int | None`` over the output decoded so far;
it returns the index at which to cut the text, or None to go on. The decode loop
checks it after every token, so every method stops at exactly the same token.
"""

from __future__ import annotations

from fastcoder.decode import StopFn


def indent_of(line: str, tab_size: int = 4) -> int:
    expanded = line.expandtabs(tab_size)
    return len(expanded) - len(expanded.lstrip(" "))


def block_end(start_indent: int, *, check_first_line: bool = False, single_line: bool = False) -> StopFn:
    """Stop when the block that starts at ``start_indent`` ends.

    - a non-empty line indented less than ``start_indent`` (a dedent) ends it; the text
      is cut before the newline that precedes that line;
    - at top level (``start_indent == 0``), a blank line after some content ends it;
    - ``single_line``: the first newline ends it.
    ``check_first_line``: the output starts at the beginning of a line (a body after a
    signature), so its first line is judged too; otherwise it continues a line.
    """

    def fn(text: str) -> int | None:
        if single_line:
            i = text.find("\n")
            return i if i >= 0 else None
        pos = 0
        seen_content = False
        lines = text.split("\n")
        for i, line in enumerate(lines):
            complete = i < len(lines) - 1
            if line.strip():
                if (i > 0 or check_first_line) and indent_of(line) < start_indent:
                    return max(pos - 1, 0)
                seen_content = True
            elif start_indent == 0 and complete and seen_content and i > 0:
                return max(pos - 1, 0)
            pos += len(line) + 1
        return None

    return fn
