"""Prompt building: what the model sees for a completion at the cursor.

Two layouts (the ``promptLayout`` setting), both with FIM tokens (a model without
them gets the prefix alone, which typing only extends anyway):

* ``anchored`` (the default): ``<|fim_prefix|>{prefix up to the anchor}<|fim_suffix|>
  {suffix}<|fim_middle|>{typed since the anchor}``. The anchor is the start of the
  cursor's line when it is first set, and stays where it is while the user types,
  deletes or pastes after it (the text before it and the suffix unchanged, at most
  ``typed reserve`` tokens typed since): the prompt then only grows or shrinks at its
  end, so the document's KV cache covers all but the few new tokens. An edit above the
  anchor, in the suffix, or the cursor moving before it sets a new anchor (one full
  re-prefill). **Token healing**: the last typed token is taken back from the prompt
  and the first generated token must start with its text (``Prompt.heal``,
  ``Prompt.allowed``), so the model never has to continue from the middle of a word
  it would have tokenized differently (a probe with Qwen2.5-Coder-0.5B: line-anchored
  without healing matched 12 of 110 lines where PSM matched 24; with healing 41); the
  token before it too (up to 3) while a vocabulary token starts with all of that text
  (``.j`` + ``o`` back to ``.jo``, so ``.join`` can come: :func:`heal_split`).
  A whitespace-only last token (indentation) gives back only its last character, so
  the natural split ``"       " + " return"`` stays reachable. Auto-closed brackets
  and quotes: when the rest of the cursor's line is only closers the editor inserted,
  it is left out of the suffix (typing ``(``, or stepping over its ``)``, then changes
  nothing in the prompt but its end, and keeps the anchor); the model writes the closer
  and post-processing trims it against the text right of the cursor.
* ``psm``: ``<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>``, the layout
  Qwen2.5-Coder documents: every typed character lands before the suffix, so the
  suffix is prefilled again on every keystroke.

Budgets:
* The context window is budgeted in tokens: ``maxPromptTokens`` split into a prefix
  share and a suffix share (by default 75% / 25%, the suffix capped at
  ``maxSuffixTokens``; a short suffix leaves its unused share to the prefix). Both are
  cut on line boundaries: the prefix keeps its last whole lines, the suffix its first
  whole lines. The suffix follows the cursor in the prompt, so every keystroke
  prefills it again: that is why it is capped.
* The prefix start is *sticky*: while the previous start still fits the budget it is
  kept, and when it must move it moves with some headroom. Consecutive keystrokes then
  give prompts with a long common token prefix, which the engine keeps in its KV cache
  (only the changed tail is prefilled). The server's first prompt in a document longer
  than the budget leaves the same headroom (``headroom``): filled to the budget, the
  next anchor had to move the start, and a moved start prefills the whole prompt again
  (~1,650 tokens, 3-4 s on a 2-core CPU with the 0.5B model).
* The next move is *planned* (:func:`plan_start`): once little room is left, the start
  the window will move to is chosen ahead (a line start leaving room for the typing
  until the move), and the move goes there when it fits (``planned``). The server
  (``prepareWindow``) prefills that window's start in idle time into the document's
  spare KV cache, so the move prefills only what was typed since, not the whole prompt.
* Windows are *remembered* (:class:`WindowMark`): the starts of the document's last two
  windows, found again after edits above them. When the sticky start does not fit (the
  cursor jumped), a remembered start that fits with most of the budget is taken before
  a fresh cut: back from a jump (to the imports, say), the prompt starts where it
  started before, and the session's other KV cache still holds that window
  (:meth:`fastcoder.session.Session.take_longest`), so only what changed since is
  prefilled, not the whole prompt.
* Mode: ``line`` (single-line suggestion) when text sits right of the cursor, else
  ``block`` (multi-line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Sequence

from fastcoder.models import FimTokens
from fastcoder import tokens
from fastcoder.stops import CLOSE_BRACKETS, BracketDepth
from fastcoder.tokens import TokenInfo
from lsp_server.documents import tokenizable
from lsp_server.strings import DOC_STRING_QUOTES, open_triple_quote

LAYOUTS = ("anchored", "psm")
DEFAULT_LAYOUT = "anchored"
AUTO_CLOSERS = set(")]}\"'`")
"""What an editor puts right of the cursor by itself after an opener (auto-closed brackets and
quotes); the prompt, the remembered answers and post-processing all go by it."""
BLOCK_COMMENT_END = "*/"
"""The closer of a block comment (``/** | */``: :attr:`CursorContext.docstring`)."""
DOCSTRING_LINES = 50
"""How far down :attr:`CursorContext.in_docstring` looks for the closer of the string the cursor is in."""

LINE_SCAN_CHARS = 4000
"""How much of the cursor's line, each side of the cursor, the bracket scans read (a
minified line may run to hundreds of kilobytes)."""

# characters per token is rarely above this; used to avoid tokenizing a whole huge file
_MAX_CHARS_PER_TOKEN = 12
# when the prefix start must move, leave this share of the prefix budget free
_HEADROOM = 0.15
WINDOW_MARK_CHARS = 256
"""Characters after a window's start that find it again (:class:`WindowMark`)."""
_RELOCATE_CHARS = 20_000
"""How far from its old offset a window's start is looked for after edits above it."""


@dataclass(frozen=True)
class CursorContext:
    """The document split at the cursor."""

    prefix: str
    """All text before the cursor."""
    suffix: str
    """All text after the cursor."""
    language: str = field(default="", compare=False)
    """The document's language id (the editor's; "" unknown): what starts a comment for
    the docstring rules (:func:`lsp_server.strings.open_triple_quote`). Not part of the
    state's identity."""

    @property
    def line_prefix(self) -> str:
        """Text of the cursor's line before the cursor."""
        return self.prefix[self.prefix.rfind("\n") + 1 :]

    @property
    def line_suffix(self) -> str:
        """Text of the cursor's line after the cursor (no line break)."""
        end = self.suffix.find("\n")
        line = self.suffix if end < 0 else self.suffix[:end]
        return line.rstrip("\r")

    @property
    def mode(self) -> str:
        """``line`` when text sits right of the cursor, else ``block``."""
        return "line" if self.line_suffix.strip() else "block"

    @property
    def opened(self) -> str:
        """The rest of the cursor's line when the cursor sits right after an opening
        bracket whose closer starts that rest, and the rest is only closers and ``;:,``
        (``request(|)``, ``fetch(url, {|});``): what an editor leaves right of the cursor
        after the user typed the opener. Else "". A suggestion here may lay the bracket's
        contents out on lines of their own (:func:`fastcoder.stops.opened_lines`)."""
        rest = self.line_suffix.strip()
        if not rest or rest[0] not in CLOSE_BRACKETS or any(c not in AUTO_CLOSERS and c not in ";:," for c in rest):
            return ""
        if not self.line_prefix.rstrip().endswith(CLOSE_BRACKETS[rest[0]]):
            return ""
        line = BracketDepth()
        line.feed(self.line_prefix[-LINE_SCAN_CHARS:])
        return "" if line.quote else rest  # not an f-string's ``{|}``: that stays one line

    @property
    def docstring(self) -> str:
        '''The triple quote of a triple-quoted string the cursor is in, whose closer starts
        the rest of the cursor's line (only closers and ``;:,`` after it), and which the
        text before the cursor left open (an odd number of them): ``"""|"""`` as Pylance leaves it in
        VS Code, ``"""Return the |"""``, ``dedent("""|""")``, the closer moved down by
        Enter or by an accepted line, or the same with single quotes; also ``*/`` at
        ``/** | */`` (an editor closes ``/**`` on its line), a comment opened on the
        cursor's line. Else "". The
        suggestion there is the string's text up to the closer the model writes, on lines
        of their own when the model lays it out so
        (:func:`lsp_server.postprocess.docstring_body`), not its first line alone (a
        docstring the model laid out on lines was no suggestion at all).'''
        rest = self.line_suffix.strip()
        head = self.line_prefix[-LINE_SCAN_CHARS:]
        for quote in DOC_STRING_QUOTES:
            if rest.startswith(quote) and all(c in AUTO_CLOSERS or c in ";:, \t" for c in rest[3:]):
                return quote if self._opened_above(quote) else ""
        if rest == BLOCK_COMMENT_END and head.count("/*") > head.count(BLOCK_COMMENT_END):
            return BLOCK_COMMENT_END  # ``/** | */``: the editor closed the doc comment on its line
        return ""

    @property
    def in_docstring(self) -> str:
        """The triple quote of the string the cursor is in when its closer is below (nothing
        right of the cursor): the text before the cursor leaves one open, and the nearest
        line below that holds one holds it once, the closer (``\"\"\"``
        then Enter, as Pylance leaves it; a docstring template's ``Args:`` below). Else ""."""
        if self.line_suffix.strip():
            return ""
        near = self.suffix[: DOCSTRING_LINES * 120]  # (not the whole suffix: a long file's)
        for quote in DOC_STRING_QUOTES:
            at = near.find(quote)
            if at < 0 or near.count("\n", 0, at) > DOCSTRING_LINES:
                continue
            end = near.find("\n", at)
            line = near[near.rfind("\n", 0, at) + 1 : end if end >= 0 else len(near)]
            if line.count(quote) == 1 and self._opened_above(quote):
                return quote
        return ""

    def _opened_above(self, quote: str) -> bool:
        """Whether the text before the cursor leaves a ``quote`` string open (:attr:`open_quote`)."""
        return self.open_quote == quote

    @cached_property
    def open_quote(self) -> str:
        """The triple quote of the string the text before the cursor leaves open, or "" (read
        from the file's start, comments and other strings skipped: a line with a lone
        ``\"\"\"`` may open a docstring or close one, and a ``\"\"\"`` in a comment or a
        ``'\'\'`` string does neither). Scanned once per cursor state (~1 ms per 100 KB),
        whichever rule asks first."""
        return open_triple_quote(self.prefix, self.language)

    @property
    def indent(self) -> str:
        """Leading whitespace of the cursor's line (up to the cursor)."""
        line = self.line_prefix
        return line[: len(line) - len(line.lstrip(" \t"))]

    @property
    def at_indentation(self) -> bool:
        """Whether only whitespace precedes the cursor on its line."""
        return not self.line_prefix.strip()

    @property
    def following_lines(self) -> list[str]:
        """The lines below the cursor's line."""
        end = self.suffix.find("\n")
        if end < 0:
            return []
        return self.suffix[end + 1 :].split("\n")


@dataclass
class Anchor:
    """Where an anchored prompt was cut, kept per document so that the next keystroke's
    prompt shares everything but its end."""

    head: str
    """The document text before the anchor (the prompt's prefix ends here)."""
    start: int
    """Offset in ``head`` where the kept prefix starts."""
    head_ids: list[int]
    suffix_kept: str
    """The suffix text that went into the prompt."""
    suffix_ids: list[int]
    reserve: int
    """Most tokens typed since the anchor before a new anchor is set."""
    prefix_budget: int = 0
    """Most tokens the prefix could hold (``head_ids`` is at most this long)."""


@dataclass
class Prompt:
    ids: list[int]
    fim: bool
    prefix_start: int
    """Offset (in the prefix) where the kept prefix starts."""
    suffix_end: int
    """Length of the suffix kept (characters of the real suffix, closers left out included)."""
    prefix_tokens: int
    suffix_tokens: int
    prefix_budget: int = 0
    """Most tokens the prefix could hold in this prompt (its window's size)."""
    heal: str = ""
    """Text taken back from the end of the prompt: the output starts with it (the
    suggestion is the output without it)."""
    allowed: Any = None
    """Ids the first generated token is chosen from (those starting with ``heal``; an
    integer array)."""
    anchor: Anchor | None = None
    layout: str = "psm"


def _spans(tokenizer: Any, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """:func:`encode`, and each token's (start, end) in ``text``."""
    return tokens.encode_with_offsets(tokenizer, tokenizable(text), special="plain")


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a document's text: no special tokens added, none parsed from the
    text (it is ``"plain"``), lone surrogates made U+FFFD one for one (offsets stay valid)."""
    return tokens.encode(tokenizer, tokenizable(text), special="plain")


def _line_start_at_or_after(text: str, pos: int) -> int:
    """The first line start at or after ``pos`` (``pos`` itself when it is one)."""
    if pos <= 0 or text[pos - 1] == "\n":
        return max(pos, 0)
    nl = text.find("\n", pos)
    return pos if nl < 0 else nl + 1


def _fits(tokenizer: Any, prefix: str, start: int | None, budget: int) -> list[int] | None:
    """The ids of ``prefix[start:]`` when ``start`` is a line start of ``prefix`` and
    they fit ``budget``; else None."""
    if start is None or not (0 <= start <= len(prefix)) or (start > 0 and prefix[start - 1] != "\n"):
        return None
    # cheap pre-check: a start further back than budget * max chars/token cannot fit
    if len(prefix) - start > budget * _MAX_CHARS_PER_TOKEN:
        return None
    ids = encode(tokenizer, prefix[start:])
    return ids if len(ids) <= budget else None


def cut_prefix(
    tokenizer: Any, prefix: str, budget: int, sticky: int | None = None, headroom: bool = False,
    planned: int | None = None, recent: Sequence[int] = (),
) -> tuple[int, list[int]]:
    """Where the kept prefix starts (a line start where possible) and its ids.

    ``sticky``: the previous start; kept when it is a line start and what follows fits.
    ``planned``: where the start was planned to move (:func:`plan_start`); taken when
    the sticky start no longer fits and it does (a line start after ``sticky``).
    ``recent``: starts of the document's recent windows (:class:`WindowMark`), in order
    of preference; taken next when one fits and holds at least ``1 - 2 *``
    :data:`_HEADROOM` of the budget (never a sliver of context).
    When the start must move (or, with ``headroom``, when there is no previous start and
    the prefix does not fit whole), it leaves :data:`_HEADROOM` of the budget free, so
    that the prefix can grow by that much before the start moves again (every move
    prefills the whole prompt again). ``headroom`` is for prompts of a document being
    typed in; a one-shot prompt fills the budget.
    """
    if budget <= 0:
        return len(prefix), []
    ids = _fits(tokenizer, prefix, sticky, budget)
    if ids is not None:
        return sticky, ids
    if sticky is not None and planned is not None and planned > sticky:
        ids = _fits(tokenizer, prefix, planned, budget)
        if ids is not None:
            return planned, ids
    for start in recent:
        if start in (sticky, planned):  # tried above
            continue
        ids = _fits(tokenizer, prefix, start, budget)
        if ids is not None and len(ids) >= (1 - 2 * _HEADROOM) * budget:
            return start, ids
    window = max(0, len(prefix) - budget * _MAX_CHARS_PER_TOKEN)
    tail = prefix[window:]
    ids, spans = _spans(tokenizer, tail)
    if window == 0 and len(ids) <= budget:
        return 0, ids
    target = budget if sticky is None and not headroom else int(budget * (1 - _HEADROOM))
    first = max(0, len(ids) - max(target, 1))
    start = window + spans[first][0] if ids else len(prefix)
    line_start = _line_start_at_or_after(prefix, start)
    if line_start < len(prefix):
        start = line_start
    # else: the cursor's own line is longer than the budget; cut inside it
    ids = encode(tokenizer, prefix[start:])
    while len(ids) > budget:  # re-tokenizing can merge differently; trim from the front
        nl = prefix.find("\n", start)
        start = nl + 1 if 0 <= nl < len(prefix) - 1 else start + max(1, (len(prefix) - start) // 8)
        ids = encode(tokenizer, prefix[start:])
    return start, ids


@dataclass(frozen=True)
class WindowMark:
    """Where a prompt window started: its offset in the document and the text after it,
    so that it is found again after edits above it."""

    offset: int
    text: str

    @classmethod
    def at(cls, prefix: str, start: int) -> "WindowMark":
        return cls(start, prefix[start : start + WINDOW_MARK_CHARS])

    def locate(self, prefix: str) -> int | None:
        """The window's start in ``prefix`` now (the nearest occurrence of its text
        within :data:`_RELOCATE_CHARS` of where it was), or None."""
        if not self.text:
            return None
        if prefix.startswith(self.text, self.offset):
            return self.offset
        at = min(self.offset, len(prefix))
        before = prefix.rfind(self.text, max(0, at - _RELOCATE_CHARS), at + len(self.text) - 1)
        after = prefix.find(self.text, at + 1, at + _RELOCATE_CHARS + len(self.text))
        found = [i for i in (before, after) if i >= 0]
        return min(found, key=lambda i: abs(i - self.offset)) if found else None


def remember_window(marks: list[WindowMark], prefix: str, start: int, keep: int = 2) -> list[WindowMark]:
    """``marks`` (most recent first) after a prompt whose window starts at ``start``:
    its mark first, a mark of the same start dropped, at most ``keep``."""
    new = WindowMark.at(prefix, start)
    return [new, *(m for m in marks if m.locate(prefix) != start)][:keep]


def plan_start(tokenizer: Any, prefix: str, prompt: "Prompt", planned: int | None = None) -> int | None:
    """Where the prefix window of a document being typed in will start after its next
    move, or None while the move is not near (the window has more room left than
    :func:`plan_horizon` says).

    The plan is a line start whose text up to the cursor's line leaves the horizon and
    one anchor's typing free in the prefix budget: the move comes when the prefix
    outgrows the budget, at most that much later, so the planned start still fits then
    (``cut_prefix(planned=...)``). ``planned``: the plan made for an earlier prompt,
    kept while it still lies inside this prompt's prefix, so that what was prefilled
    for it stays useful."""
    budget = prompt.prefix_budget
    horizon, step = plan_horizon(prompt)
    if budget <= 0 or budget - prompt.prefix_tokens >= horizon:
        return None
    head = prefix[: prefix.rfind("\n") + 1]
    if planned is not None and prompt.prefix_start < planned < len(head) and prefix[planned - 1] == "\n":
        return planned
    target = budget - horizon - step
    if target <= 0:
        return None
    start, _ids = cut_prefix(tokenizer, head, target)
    return start if prompt.prefix_start < start < len(head) else None


def plan_horizon(prompt: "Prompt") -> tuple[int, int]:
    """(horizon, step) in tokens for :func:`plan_start`: ``step`` is how much the prefix
    can grow at once (an anchored prompt's reserve: a new anchor takes in up to that
    many typed tokens; 0 otherwise), and the next start is planned once the prefix
    budget has less room left than the horizon: :data:`_HEADROOM` of the budget or two
    steps, whichever is more (time to prefill it in idle time before the move)."""
    step = prompt.anchor.reserve if prompt.anchor is not None else 0
    return max(int(_HEADROOM * prompt.prefix_budget), 2 * step), step


def cut_suffix(tokenizer: Any, suffix: str, budget: int) -> tuple[int, list[int]]:
    """How much of the suffix is kept (whole lines where possible) and its ids."""
    if budget <= 0 or not suffix:
        return 0, []
    head = suffix[: budget * _MAX_CHARS_PER_TOKEN]
    ids, spans = _spans(tokenizer, head)
    if len(head) == len(suffix) and len(ids) <= budget:
        return len(suffix), ids
    if len(ids) <= budget:
        end = len(head)
    else:
        end = spans[budget][0]
    # keep whole lines: cut after the last line break before `end`
    nl = suffix.rfind("\n", 0, end)
    if nl >= 0:
        end = nl + 1
    ids = encode(tokenizer, suffix[:end])
    while len(ids) > budget and end > 0:
        nl = suffix.rfind("\n", 0, end - 1)
        end = nl + 1 if nl >= 0 else end - max(1, end // 8)
        ids = encode(tokenizer, suffix[:end])
    return end, ids


def build_prompt(
    tokenizer: Any,
    fim: FimTokens | None,
    ctx: CursorContext,
    max_prompt_tokens: int,
    *,
    suffix_share: float = 0.25,
    max_suffix_tokens: int | None = None,
    sticky_start: int | None = None,
    layout: str = "psm",
    anchor: Anchor | None = None,
    info: TokenInfo | None = None,
    headroom: bool = False,
    planned_start: int | None = None,
    recent_starts: Sequence[int] = (),
) -> Prompt:
    """Token ids of the completion prompt for ``ctx`` within ``max_prompt_tokens``.

    The suffix gets ``suffix_share`` of the budget, at most ``max_suffix_tokens``.
    ``layout``: ``psm`` or ``anchored`` (``anchor``: the document's previous one;
    ``info``: the tokenizer's :class:`TokenInfo`, for token healing). ``headroom``: a
    prompt of a document being typed in; ``planned_start``: where its window's start
    was planned to move (:func:`cut_prefix`, :func:`plan_start`); ``recent_starts``:
    the starts of its recent windows (:func:`cut_prefix`, :class:`WindowMark`)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown prompt layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    if fim is not None and layout == "anchored":
        return build_anchored(
            tokenizer, fim, ctx, max_prompt_tokens, suffix_share=suffix_share,
            max_suffix_tokens=max_suffix_tokens, previous=anchor, info=info, headroom=headroom,
            planned=planned_start, recent=recent_starts,
        )  # fmt: skip
    if fim is None:
        start, pids = cut_prefix(tokenizer, ctx.prefix, max_prompt_tokens, sticky_start, headroom, planned_start,
                                 recent_starts)  # fmt: skip
        if not pids:  # an empty document: give the model something to start from
            pids = encode(tokenizer, "\n")
        return Prompt(pids, False, start, 0, len(pids), 0, prefix_budget=max_prompt_tokens)
    special = [tokenizer.convert_tokens_to_ids(t) for t in (fim.prefix, fim.suffix, fim.middle)]
    budget = max(2, max_prompt_tokens - len(special))
    suffix_budget = int(budget * suffix_share)
    if max_suffix_tokens is not None:
        suffix_budget = min(suffix_budget, max_suffix_tokens)
    end, sids = cut_suffix(tokenizer, ctx.suffix, suffix_budget)
    prefix_budget = budget - len(sids)  # an unused suffix share goes to the prefix
    start, pids = cut_prefix(tokenizer, ctx.prefix, prefix_budget, sticky_start, headroom, planned_start, recent_starts)
    ids = [special[0], *pids, special[1], *sids, special[2]]
    return Prompt(ids, True, start, end, len(pids), len(sids), prefix_budget=prefix_budget)


def prompt_suffix(ctx: CursorContext) -> tuple[int, str]:
    """(characters skipped, suffix text) for an anchored prompt: the rest of the cursor's
    line is left out when it is only closers the editor auto-inserted (with blanks)."""
    end = ctx.suffix.find("\n")
    rest = ctx.suffix if end < 0 else ctx.suffix[:end]
    if rest.strip() and all(c in AUTO_CLOSERS or c in " \t\r" for c in rest):
        return len(rest), ctx.suffix[len(rest) :]
    return 0, ctx.suffix


MAX_HEAL_TOKENS = 3
"""Most typed tokens one healing takes back (:func:`heal_split`)."""


def heal_split(tokenizer: Any, typed: str, info: TokenInfo | None = None) -> tuple[str, str]:
    """(kept, heal): ``typed`` minus the text of its last token(s), and that text. A
    whitespace-only last token gives back its last character only; a text that is not
    plain ASCII is not healed (byte-level tokens of one character could not be forced).

    With ``info``, more tokens are taken back (up to :data:`MAX_HEAL_TOKENS`) while some
    vocabulary token still starts with all the text taken back: a name typed half way
    can end in two tokens that the whole name does not start with. Qwen2.5-Coder splits
    ``os.path.jo`` as ``.j`` + ``o`` and ``os.path.join`` as ``.join``: taking back ``o``
    alone, the first token had to start with ``o``, and the 0.5B model wrote
    ``os.path.jo(home, ...)``; taking back ``.jo``, ``.join`` is allowed again."""
    if not typed:
        return typed, ""
    offsets = _spans(tokenizer, typed)[1] or []
    if not offsets:
        return typed, ""
    start = int(offsets[-1][0])
    heal = typed[start:]
    if heal.isspace() and len(heal) > 1:
        start = len(typed) - 1
        heal = typed[start:]
        return (typed[:start], heal) if heal.isascii() else (typed, "")
    if not heal or not heal.isascii():
        return typed, ""
    if info is not None:
        for k in range(2, min(MAX_HEAL_TOKENS, len(offsets)) + 1):
            back = int(offsets[-k][0])
            text = typed[back:]
            if not text.isascii() or len(info.starting_with(text)) == 0:
                break
            start, heal = back, text
    return typed[:start], heal


def build_anchored(
    tokenizer: Any,
    fim: FimTokens,
    ctx: CursorContext,
    max_prompt_tokens: int,
    *,
    suffix_share: float = 0.25,
    max_suffix_tokens: int | None = None,
    previous: Anchor | None = None,
    info: TokenInfo | None = None,
    typed_reserve: int = 128,
    headroom: bool = False,
    planned: int | None = None,
    recent: Sequence[int] = (),
) -> Prompt:
    """The anchored layout (module docstring): reuses ``previous`` when it still holds."""
    special = [tokenizer.convert_tokens_to_ids(t) for t in (fim.prefix, fim.suffix, fim.middle)]
    budget = max(2, max_prompt_tokens - len(special))
    skip, suffix_text = prompt_suffix(ctx)
    anchor = previous
    typed_ids: list[int] | None = None
    if anchor is not None:
        if not (
            len(ctx.prefix) >= len(anchor.head)
            and suffix_text.startswith(anchor.suffix_kept)  # closers at the cursor may come and go
            and ctx.prefix.startswith(anchor.head)
        ):
            anchor = None
        else:
            typed_ids = encode(tokenizer, ctx.prefix[len(anchor.head) :])
            if len(typed_ids) > anchor.reserve:
                anchor = None
    if anchor is None:
        reserve = max(1, min(typed_reserve, budget // 4))
        line_start = ctx.prefix.rfind("\n") + 1
        cut = line_start
        line_typed = ctx.prefix[line_start:]
        if line_typed:
            typed_ids = encode(tokenizer, line_typed)
            if len(typed_ids) > reserve // 2:  # a long line: anchor inside it
                cut += cut_prefix(tokenizer, line_typed, reserve // 2)[0]
        head = ctx.prefix[:cut]
        suffix_budget = int(budget * suffix_share)
        if max_suffix_tokens is not None:
            suffix_budget = min(suffix_budget, max_suffix_tokens)
        end, sids = cut_suffix(tokenizer, suffix_text, suffix_budget)
        sticky = previous.start if previous is not None and ctx.prefix.startswith(previous.head[: previous.start]) else None
        prefix_budget = max(0, budget - len(sids) - reserve)
        start, pids = cut_prefix(tokenizer, head, prefix_budget, sticky, headroom, planned, recent)
        anchor = Anchor(head, start, pids, suffix_text[:end], sids, reserve, prefix_budget)
    typed = ctx.prefix[len(anchor.head) :]
    heal, allowed = "", None
    if info is not None:
        kept, heal = heal_split(tokenizer, typed, info)
        allowed = info.starting_with(heal) if heal else None
        if heal and (allowed is None or len(allowed) == 0):
            kept, heal, allowed = typed, "", None
        typed = kept
    mids = encode(tokenizer, typed) if typed else []
    ids = [special[0], *anchor.head_ids, special[1], *anchor.suffix_ids, special[2], *mids]
    return Prompt(
        ids, True, anchor.start, skip + len(anchor.suffix_kept), len(anchor.head_ids),
        len(anchor.suffix_ids), prefix_budget=anchor.prefix_budget, heal=heal, allowed=allowed, anchor=anchor,
        layout="anchored",
    )  # fmt: skip


def fim_special_ids(tokenizer: Any) -> set[int]:
    """Ids of FIM/repository special tokens: the model writing one of them means the
    middle is over (they are skipped when decoding, so a text stop rule cannot see them)."""
    names = (
        "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>",
        "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>", "<file_sep>", "<repo_name>",
        "<|im_start|>", "<|im_end|>",
    )  # fmt: skip
    vocab = tokenizer.get_vocab()
    return {vocab[n] for n in names if n in vocab}


def place_context(context_ids: list[int], prompt_ids: list[int], placement: str, fim: Any, tokenizer: Any) -> list[int]:
    """The model's input: the document's prompt with the cross-file context in it.
    ``first``: the context before the prompt (it stays cached across every keystroke and
    every line). ``before-middle``: after the suffix, right before the FIM middle token
    (where Qwen2.5-Coder's CrossCodeEval harness puts it); without FIM tokens, first."""
    if not context_ids:
        return list(prompt_ids)
    if placement == "before-middle" and fim is not None:
        middle = tokenizer.convert_tokens_to_ids(fim.middle)
        if middle in prompt_ids:
            at = prompt_ids.index(middle)
            return prompt_ids[:at] + context_ids + prompt_ids[at:]
    return context_ids + prompt_ids
