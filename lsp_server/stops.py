"""Stop rules of a completion: which of the engine's rules end a suggestion at a cursor.

The engine feeds the rule the text of every committed token (the output starts at
the cursor) and cuts the output where it says, so every decoding method stops at the
very same token. The rules themselves live in the engine (:mod:`fastcoder.stops`);
this module picks them for a cursor. Rules:

* ``line`` mode (text right of the cursor): the first line break ends the suggestion;
  right after an opening bracket whose auto-closed closer starts the rest of the line
  (``request(|)``), a suggestion that starts with a line break runs on to the line that
  closes the bracket (:func:`fastcoder.stops.opened_lines`), or to a dedent below the
  cursor's line;
* ``block`` mode: the shared block-end rule of :func:`fastcoder.stops.block_end` (the
  benchmark and the CLIs use it too):
  - a non-empty line indented less than the cursor's line ends the block,
  - at top level (the cursor's line is not indented) a blank line after some code;
* ``block`` mode, in addition: the output runs into the code below the cursor (a
  generated line equal to the next non-blank line of the document; a line of at most one
  word, such as ``}`` or ``end``, at its indentation too: :func:`fastcoder.stops.runs_into`);
* ``block`` mode, indented (a completion, not a body): a blank line followed by a definition at the cursor's
  indentation (:func:`starts_definition`) ends the suggestion before the blank line: one
  method, or one group of fields, at a time (:func:`fastcoder.stops.next_definition`);
* ``block`` mode and a bracket's contents, in a document without a Markdown code fence: a
  generated line that starts with one (:func:`fastcoder.stops.fence_line`);
* every mode, unless turned off (``stopDegenerate``): a loop (a line written 4 times in a row, a block of 2-3 lines 3 times, of 4-16
  lines twice: the first writing stays; a line ending in a piece written again and again goes:
  :func:`fastcoder.stops.loop`; ``#endif`` is kept as often as the code before left an
  ``#if`` open; a row without letters, ``(1, 2, 3),``, loops too unless the code before
  repeats such rows), and a control character (cut before it:
  :func:`fastcoder.stops.control_chars`).

``max_new_tokens`` and the time budget are the engine's own limits
(:class:`fastcoder.config.DecodeConfig`).
"""

from __future__ import annotations

from typing import Sequence

from fastcoder.stops import (StopRule, StopStrings, any_of, block_end, control_chars, fence_line, first_line_unless_opener, indent_of,
                             loop, next_definition, open_directives, opened_lines, repeats_rows, runs_into, unreachable)
from lsp_server.signatures import brace_signature
from lsp_server.strings import DOC_STRING_QUOTES, line_comment

TAB_WIDTH = 4
LINE_COMMENTS = ("#", "//", "--", ";")
"""Line comment markers of the languages served (a line starting with one is a comment)."""
DOC_QUOTES = (*DOC_STRING_QUOTES, "/*")
PROSE_LANGUAGES = frozenset({"markdown", "plaintext", "restructuredtext", "latex", "tex", "asciidoc", "git-commit", "org"})
"""Language ids (the editor's) of prose, where a line starting with ``return`` or ``break`` is
words, not a statement (:func:`fastcoder.stops.unreachable` is code's rule)."""


def indent_width(line: str) -> int:
    """Width of the leading whitespace (tabs expanded to multiples of 4)."""
    return indent_of(line, TAB_WIDTH)


DEFINITION_WORDS = frozenset((
    "def", "defp", "async", "class", "function", "func", "fn", "fun", "impl", "struct", "enum", "interface", "trait",
    "public", "private", "protected", "internal", "static", "override", "export", "local",
))
"""First words of a line that starts a definition (Python, JavaScript, Go, Rust, Kotlin,
Swift, Java, C#, Elixir, Lua), besides a decorator or annotation (``@``) and a brace
language's method (``name(...) {``)."""


def starts_definition(line: str) -> bool:
    """Whether ``line`` starts a definition: its first word is one of
    :data:`DEFINITION_WORDS`, it is a decorator or annotation, or a method's signature that
    opens its body (:func:`lsp_server.signatures.brace_signature`)."""
    words = line.split(None, 2)
    word = words[0].split("(", 1)[0] if words else ""
    if word == "async":  # ``async def`` / ``async function``, not Python's ``async with`` / ``async for``
        return len(words) > 1 and words[1] in ("def", "function", "fn")
    return word.startswith("@") or word in DEFINITION_WORDS or brace_signature(line) is not None


def shows_definition(start: str) -> bool:
    """Whether the start of a line, as far as it is written, already shows a definition by
    its first words alone (:func:`starts_definition` without the signature case): a
    decorator's ``@``, or a first word of :data:`DEFINITION_WORDS` followed by a space or a
    bracket (``async`` with its second word). False: not known yet, or not by its words."""
    text = start.lstrip()
    if text.startswith("@"):
        return True
    words = text.replace("(", " (").split(" ")
    if len(words) < 2 or not words[0]:
        return False  # the first word is not complete yet
    if words[0] == "async":
        return len(words) > 2 and words[1] in ("def", "function", "fn")
    return words[0] in DEFINITION_WORDS


def first_nonblank(lines: Sequence[str]) -> str | None:
    for line in lines:
        if line.strip():
            return line.rstrip("\r")
    return None


def make_stop_fn(mode: str, line_prefix: str, following_lines: Sequence[str] = (), mid_line_blocks: bool = False,
                 opened: bool = False, fences: bool = False, degenerate: bool = True,
                 before: str = "", one_definition: bool = True, docstring: str = "", language: str = "") -> StopRule:
    """The stop rule for a completion whose cursor line starts with ``line_prefix``
    (a :class:`fastcoder.stops.StopRule`: the engine feeds it only the new text; called
    on a whole text it returns that text's cut).

    ``following_lines``: the document lines below the cursor's line.
    ``mid_line_blocks`` False (the server's default, ``midLineBlocks``): in block mode
    with code before the cursor (completing a statement being typed), the suggestion ends
    at its first line unless that line opens a block
    (:func:`fastcoder.stops.first_line_unless_opener`); True: the block rules alone. A
    comment or a docstring being typed (the line starts with a comment marker or holds
    an opening triple quote or ``/*``) is not a statement: what follows it is the code
    it describes, and the block rules alone apply.
    ``opened`` (line mode): the cursor sits right after an opening bracket whose closer
    starts the rest of its line (:attr:`lsp_server.prompt.CursorContext.opened`).
    ``fences``: the document holds a Markdown code fence (`````), so a generated one may
    be the document's own; without one, a generated fence line ends the suggestion.
    ``degenerate`` (the server's ``stopDegenerate``): loops and control characters end it.
    ``before``: the document's text before the cursor, which the loop rule reads: the
    directives it left open (:func:`fastcoder.stops.open_directives`: three nested
    ``#ifdef`` s may get three ``#endif`` s, not be cut to one as a loop), and whether it
    repeats rows without letters itself (:func:`fastcoder.stops.repeats_rows`: else such
    rows written again are a loop). ``one_definition``: a blank line and a
    definition at the cursor's indentation end the block (a suggestion; a generated body
    may hold a nested function after a blank line, and goes on). ``docstring`` (line
    mode): the triple quote of the string the cursor's line opened, whose closer starts
    the rest of the line (:attr:`lsp_server.prompt.CursorContext.docstring`): the output
    runs on over lines to the closer it writes, and ends before it; in block mode, the
    triple quote of the string the cursor is in, whose closer is below
    (:attr:`lsp_server.prompt.CursorContext.in_docstring`): the output ends before a
    closer it writes (the one below closes the string).
    """
    base = indent_width(line_prefix)
    fence = None if fences else fence_line(check_first_line=not line_prefix.strip())
    code = language not in PROSE_LANGUAGES
    comment = line_comment(language) if code else ""
    garbage = (loop(open_directives(before), rows=repeats_rows(before), comment=comment), control_chars()) if degenerate else ()
    if mode == "line":
        if opened:
            return any_of(opened_lines(), block_end(base), fence, *garbage)
        if docstring:  # (at top level a blank line is a paragraph's end, not the block's)
            return any_of(StopStrings([docstring]), block_end(base) if base else None, fence, *garbage)
        return any_of(block_end(base, single_line=True), *garbage)
    # when only indentation precedes the cursor, the first line is a whole line too
    into = runs_into(first_nonblank(following_lines), check_first_line=not line_prefix.strip(), first_indent=base)
    stripped = line_prefix.strip()
    statement = stripped and not stripped.startswith(LINE_COMMENTS) and not any(q in stripped for q in DOC_QUOTES)
    one_line = first_line_unless_opener(line_prefix) if statement and not mid_line_blocks else None
    # at top level a blank line ends the block already
    definition = next_definition(base, starts_definition, shows_definition) if base and one_definition else None
    closer = StopStrings([docstring]) if docstring else None
    dead = unreachable(line_prefix) if code and not docstring else None
    return any_of(block_end(base), into, one_line, fence, definition, closer, dead, *garbage)
