"""Prompt building: what the model sees for a completion at the cursor.

* With FIM tokens: ``<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>``;
  without: the prefix alone.
* The context window is budgeted in tokens: ``maxPromptTokens`` split into a prefix
  share and a suffix share (by default 75% / 25%, the suffix capped at
  ``maxSuffixTokens``; a short suffix leaves its unused share to the prefix). Both are
  cut on line boundaries: the prefix keeps its last whole lines, the suffix its first
  whole lines. The suffix follows the cursor in the prompt, so every keystroke
  prefills it again: that is why it is capped.
* The prefix start is *sticky*: while the previous start still fits the budget it is
  kept, and when it must move it moves with some headroom. Consecutive keystrokes then
  give prompts with a long common token prefix, which the engine keeps in its KV cache
  (only the changed tail is prefilled).
* Mode: ``line`` (single-line suggestion) when text sits right of the cursor, else
  ``block`` (multi-line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastcoder.models import FimTokens
from lsp_server.documents import tokenizable

# characters per token is rarely above this; used to avoid tokenizing a whole huge file
_MAX_CHARS_PER_TOKEN = 12
# when the prefix start must move, leave this share of the prefix budget free
_HEADROOM = 0.15


@dataclass(frozen=True)
class CursorContext:
    """The document split at the cursor."""

    prefix: str
    """All text before the cursor."""
    suffix: str
    """All text after the cursor."""

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
class Prompt:
    ids: list[int]
    fim: bool
    prefix_start: int
    """Offset (in the prefix) where the kept prefix starts."""
    suffix_end: int
    """Length of the suffix kept."""
    prefix_tokens: int
    suffix_tokens: int


def _encode(tokenizer: Any, text: str, offsets: bool = False) -> Any:
    kwargs: dict[str, Any] = {"add_special_tokens": False}
    if offsets:
        kwargs["return_offsets_mapping"] = True
    text = tokenizable(text)  # lone surrogates -> U+FFFD, one for one (offsets stay valid)
    try:
        # text that merely looks like a special token must not become one
        return tokenizer(text, split_special_tokens=True, **kwargs)
    except TypeError:
        return tokenizer(text, **kwargs)


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of plain text (no special tokens added, none parsed from the text)."""
    return list(_encode(tokenizer, text)["input_ids"])


def _line_start_at_or_after(text: str, pos: int) -> int:
    """The first line start at or after ``pos`` (``pos`` itself when it is one)."""
    if pos <= 0 or text[pos - 1] == "\n":
        return max(pos, 0)
    nl = text.find("\n", pos)
    return pos if nl < 0 else nl + 1


def cut_prefix(tokenizer: Any, prefix: str, budget: int, sticky: int | None = None) -> tuple[int, list[int]]:
    """Where the kept prefix starts (a line start where possible) and its ids.

    ``sticky``: the previous start; kept when it is a line start and what follows fits.
    """
    if budget <= 0:
        return len(prefix), []
    if sticky is not None and 0 <= sticky <= len(prefix) and (sticky == 0 or prefix[sticky - 1] == "\n"):
        # cheap pre-check: a start further back than budget * max chars/token cannot fit
        if len(prefix) - sticky <= budget * _MAX_CHARS_PER_TOKEN:
            ids = encode(tokenizer, prefix[sticky:])
            if len(ids) <= budget:
                return sticky, ids
    window = max(0, len(prefix) - budget * _MAX_CHARS_PER_TOKEN)
    tail = prefix[window:]
    enc = _encode(tokenizer, tail, offsets=True)
    ids = list(enc["input_ids"])
    if window == 0 and len(ids) <= budget:
        return 0, ids
    target = budget if sticky is None else int(budget * (1 - _HEADROOM))
    first = max(0, len(ids) - max(target, 1))
    start = window + enc["offset_mapping"][first][0] if ids else len(prefix)
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


def cut_suffix(tokenizer: Any, suffix: str, budget: int) -> tuple[int, list[int]]:
    """How much of the suffix is kept (whole lines where possible) and its ids."""
    if budget <= 0 or not suffix:
        return 0, []
    head = suffix[: budget * _MAX_CHARS_PER_TOKEN]
    enc = _encode(tokenizer, head, offsets=True)
    ids = list(enc["input_ids"])
    if len(head) == len(suffix) and len(ids) <= budget:
        return len(suffix), ids
    if len(ids) <= budget:
        end = len(head)
    else:
        end = enc["offset_mapping"][budget][0]
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
) -> Prompt:
    """Token ids of the completion prompt for ``ctx`` within ``max_prompt_tokens``.

    The suffix gets ``suffix_share`` of the budget, at most ``max_suffix_tokens``."""
    if fim is None:
        start, pids = cut_prefix(tokenizer, ctx.prefix, max_prompt_tokens, sticky_start)
        if not pids:  # an empty document: give the model something to start from
            pids = encode(tokenizer, "\n")
        return Prompt(pids, False, start, 0, len(pids), 0)
    special = [tokenizer.convert_tokens_to_ids(t) for t in (fim.prefix, fim.suffix, fim.middle)]
    budget = max(2, max_prompt_tokens - len(special))
    suffix_budget = int(budget * suffix_share)
    if max_suffix_tokens is not None:
        suffix_budget = min(suffix_budget, max_suffix_tokens)
    end, sids = cut_suffix(tokenizer, ctx.suffix, suffix_budget)
    prefix_budget = budget - len(sids)  # an unused suffix share goes to the prefix
    start, pids = cut_prefix(tokenizer, ctx.prefix, prefix_budget, sticky_start)
    ids = [special[0], *pids, special[1], *sids, special[2]]
    return Prompt(ids, True, start, end, len(pids), len(sids))


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
