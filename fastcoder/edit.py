"""Edit a piece of code following an instruction, reusing the original as the draft.

The shared logic of ``fastcoder edit`` (CLI), the server's ``fastcoder.editSelection``
and the edit benchmark. EfficientEdit's lossless part:

1. the prompt asks an instruct model for the edited code only, in one fenced block,
   and primes the assistant turn with the opening fence, so the first generated
   tokens are the code itself;
2. decoding uses the ``reuse`` method with the original code (plus the closing
   fence) as the reference: the remaining original is a long linear draft verified
   in one forward, the first rejected token marks the edit, retrieval drafts the new
   content, and the drafter re-syncs to the original after it. Verification is
   greedy, so the text is exactly what plain greedy decoding (AR) would produce;
3. generation stops at the closing fence; the fences are stripped and the original's
   line endings (CRLF or LF) and trailing line breaks are kept. An answer that did not
   end (the token cap, or a loop: lines written again and again that the original does
   not repeat so) is marked ``finished=False``: it is a cut piece of an edit, and the
   server never applies one.

Typical use::

    result = edit_code(engine, code, "add type hints")
    result.text          # the replacement for ``code``
    result.generation    # tokens, stats (accepted_by_source["reuse"], ...), cancelled
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from fastcoder.config import DecodeConfig
from fastcoder.decode import Generation, StepCallback
from fastcoder.errors import FastCoderError
from fastcoder.stops import MatcherRule, StopMatcher, StopRule, StopStrings, any_of, loop
from fastcoder.tokens import encode

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You are a code editor. Apply the user's instruction to the given code and change "
    "nothing else: keep the rest of the code exactly as it is. Reply with the complete "
    "edited code only, in a single fenced code block, without explanations."
)

# LSP language ids (and common names) -> markdown fence info strings
_FENCE_TAGS = {
    "python": "python", "py": "python", "javascript": "javascript", "js": "javascript",
    "typescript": "typescript", "ts": "typescript", "javascriptreact": "jsx", "typescriptreact": "tsx",
    "rust": "rust", "go": "go", "c": "c", "cpp": "cpp", "c++": "cpp", "java": "java", "lua": "lua",
    "shellscript": "bash", "sh": "bash", "bash": "bash", "ruby": "ruby", "csharp": "csharp",
    "php": "php", "kotlin": "kotlin", "swift": "swift", "scala": "scala",
}  # fmt: skip

# Edit reuse defaults: the fallback FastCoder tree (mid-edit) gets a fixed 16-node
# budget, the best tree size measured on this CPU; the reuse chain itself is
# ``reuse_max_tokens`` long regardless (ReuseDrafter takes max(reuse_max_tokens, budget)).
EDIT_FALLBACK_TREE = 16


def fence_tag(language: str | None) -> str:
    """The fence info string for a language name or LSP language id ("" when unknown)."""
    name = (language or "").strip().lower()
    tag = _FENCE_TAGS.get(name, name)
    return tag if re.fullmatch(r"[\w+#.-]*", tag) else ""


def choose_fence(code: str) -> str:
    """Backticks that fence ``code`` safely: one more than its longest backtick run (>= 3)."""
    runs = [len(m) for m in re.findall(r"`+", code)]
    return "`" * max(3, max(runs, default=0) + 1)


def _normalize(code: str) -> str:
    return code.replace("\r\n", "\n").replace("\r", "\n")


def _split_trailing(code: str) -> tuple[str, str]:
    """(body, trailing line breaks) of normalised code."""
    body = code.rstrip("\n")
    return body, code[len(body) :]


def _validate(code: str, instruction: str) -> None:
    if not isinstance(code, str) or not code.strip():
        raise FastCoderError("nothing to edit: the code to edit is empty (select some code)")
    if not isinstance(instruction, str) or not instruction.strip():
        raise FastCoderError("no edit instruction given: say what to change")


@dataclass
class EditPrompt:
    """The prompt text pieces (for inspection; :func:`build_edit_prompt` returns the ids)."""

    head: str  # everything before the primed opening fence
    opening: str  # the primed start of the answer: fence + tag + newline
    fence: str  # the backticks that close the answer
    chat: bool  # built with the tokenizer's chat template


def edit_prompt_text(tokenizer: Any, code: str, instruction: str, language: str = "python", *, prefill: bool = True) -> EditPrompt:
    """The prompt as text: a chat (system + user turn, generation prompt) when the
    tokenizer has a chat template, a plain instruction format otherwise."""
    _validate(code, instruction)
    body, _ = _split_trailing(_normalize(code))
    tag = fence_tag(language)
    fence = choose_fence(body)
    # the code first, the instruction last: with the instruction first, small models
    # (Qwen2.5-Coder-0.5B) tend to copy the code unchanged once the answer is primed
    user = (
        f"{fence}{tag}\n{body}\n{fence}\n\n{instruction.strip()} "
        f"Reply with the complete edited code only, in one {fence}{tag} fenced block."
    )
    opening = f"{fence}{tag}\n" if prefill else ""
    template = getattr(tokenizer, "chat_template", None)
    if template:
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
        try:
            head = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return EditPrompt(head, opening, fence, True)
        except Exception as exc:  # e.g. a template without a system role
            try:
                merged = [{"role": "user", "content": f"{SYSTEM_PROMPT}\n\n{user}"}]
                head = tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=True)
                log.info("chat template rejected a system turn (%s); system prompt merged into the user turn", exc)
                return EditPrompt(head, opening, fence, True)
            except Exception as exc2:
                log.info("chat template failed (%s); using a plain edit prompt format", exc2)
    else:
        log.info("tokenizer has no chat template; using a plain edit prompt format")
    head = f"{SYSTEM_PROMPT}\n\n### Instruction\n{user}\n\n### Edited code\n"
    return EditPrompt(head, opening, fence, False)


def build_edit_prompt(tokenizer: Any, code: str, instruction: str, language: str = "python", *, prefill: bool = True) -> list[int]:
    """Token ids of the edit prompt.

    The tokenizer's chat template with a system turn (a code editor) and a user turn
    (the code in a fenced block, then the instruction and a request for the edited
    code only, in one fenced block), ``add_generation_prompt=True``; with ``prefill`` the
    assistant turn is primed with the opening fence (e.g. "```python\\n"), so the
    output starts with the code and aligns with the reference from its first token.
    Without a chat template (``tokenizer.chat_template`` is None) a plain
    instruction format is used, and a log line says so.
    """
    p = edit_prompt_text(tokenizer, code, instruction, language, prefill=prefill)
    # encoded in two pieces so the template's last token is never merged with the fence
    return encode(tokenizer, p.head, special="parse") + (encode(tokenizer, p.opening, special="parse") if p.opening else [])


def edit_reference(tokenizer: Any, code: str) -> list[int]:
    """The draft reference: the original code (trailing breaks trimmed) and the closing
    fence, tokenized as the model writes it after the primed opening fence."""
    body, _ = _split_trailing(_normalize(code))
    return encode(tokenizer, f"{body}\n{choose_fence(body)}", special="parse")


def edit_stop_fn(fence: str = "```") -> StopRule:
    """Stop rule for a primed answer: cut before the closing fence that starts a
    line. An answer that starts with a fence line either closes at once (an empty
    block: cut at 0) or re-opens the block with an info string ("```python"): then
    the cut is at that block's closing fence. Fed only the new text (incremental)."""
    return MatcherRule(lambda: _EditFenceMatcher(fence))


class _EditFenceMatcher(StopMatcher):
    def __init__(self, fence: str) -> None:
        self.fence = fence
        self.closing = StopStrings(["\n" + fence]).matcher()  # the first "\n```" anywhere
        self.first: list[str] = []  # the first line, until it is complete
        self.first_done = False

    def feed(self, piece: str) -> int | None:
        cut = self.closing.feed(piece)
        if not self.first_done:
            nl = piece.find("\n")
            self.first.append(piece if nl < 0 else piece[:nl])
            self.first_done = nl >= 0
        head = "".join(self.first)
        self.first = [head]
        if not head.startswith(self.fence):
            return cut
        if not self.first_done:
            return None  # the fence line is not finished yet
        if head[len(self.fence) :].strip():
            return cut  # a re-opened block: its closing fence (after the first line's newline)
        return 0


_OPEN_FENCE = re.compile(r"\A[ \t]*(`{3,})[\w+#.-]*[ \t]*(\n|\Z)")
_CLOSE_FENCE = re.compile(r"(\A|\n)[ \t]*`{3,}[ \t]*\n*\Z")


def strip_fences(text: str) -> str:
    """The code inside a markdown fence: a leading fence line and everything from its
    closing fence on are dropped, and a trailing lone fence line; the text itself
    when it has no fence."""
    m = _OPEN_FENCE.match(text)
    if m:
        text = text[m.end() :]
        close = re.search(r"(\A|\n)[ \t]*" + m.group(1) + r"[ \t]*(\n|\Z)", text)
        if close:
            text = text[: close.start()]
        return text
    return _CLOSE_FENCE.sub("", text)


def finish_edit(generated: str, original: str) -> str:
    """The replacement for ``original``: fences stripped, its line-ending style (CRLF
    or LF) and its trailing line breaks kept as they were."""
    code = _normalize(strip_fences(generated)).rstrip("\n")
    _, trailing = _split_trailing(_normalize(original))
    out = code + trailing
    if "\r\n" in original:
        out = out.replace("\n", "\r\n")
    return out


@dataclass
class EditResult:
    text: str
    """The edited code: the replacement for the original (fences stripped, the
    original's trailing line breaks and CRLF/LF convention kept)."""
    generation: Generation
    """The raw generation: tokens, text (before post-processing), stats, cancelled."""
    prompt_ids: list[int]
    reference: list[int]
    """The draft reference (original code + closing fence); used by method "reuse"."""
    max_new_tokens: int
    finished: bool = True
    """The answer ended: its closing fence, or the model's end of turn. False when the
    token cap or a loop (:func:`fastcoder.stops.loop`) cut it, or it was cancelled:
    ``text`` is then a cut piece of an edit, whose rest (the original's end) is missing."""

    @property
    def cancelled(self) -> bool:
        return self.generation.cancelled


def edit_config(
    method: str = "reuse",
    *,
    max_new_tokens: int,
    base: DecodeConfig | None = None,
) -> DecodeConfig:
    """The decode configuration of an edit: ``base`` (e.g. the server's settings) with
    the method and the token cap; for ``reuse`` with no explicit tree size the fallback
    tree gets a fixed :data:`EDIT_FALLBACK_TREE` nodes (the reuse drafter opts out of
    the cost-curve budget, which would otherwise leave its fallback trees at 64 nodes)."""
    try:
        cfg = (base or DecodeConfig()).replace(method=method, max_new_tokens=max_new_tokens, stop_strings=(), time_budget_s=None)
    except ValueError as exc:  # an unknown method
        raise FastCoderError(str(exc)) from exc
    if method == "reuse" and cfg.max_draft_tokens is None:
        cfg = cfg.replace(max_draft_tokens=EDIT_FALLBACK_TREE)
    return cfg


def edit_code(
    engine: Any,
    code: str,
    instruction: str,
    *,
    language: str = "python",
    method: str = "reuse",
    sources: Any = None,
    session: Any = None,
    cancel: threading.Event | None = None,
    max_new_tokens: int | None = None,
    config: DecodeConfig | None = None,
    on_step: StepCallback | None = None,
) -> EditResult:
    """Edit ``code`` following ``instruction`` with ``engine`` (a :class:`fastcoder.engine.Engine`).

    ``method``: "reuse" (the original as the draft; the default), or any other
    decoding method for comparison ("ar", "fastcoder", ...); the output text is the
    same for every method. ``sources``: :class:`fastcoder.drafters.Sources` for the
    fallback retrieval (None: only the CACHE and the live context, which holds the
    original code through the prompt). ``session``: a :class:`fastcoder.session.Session`
    (KV prefix reuse, CACHE); a fresh one when None. ``cancel``: checked between
    forward passes; a cancelled result has ``cancelled`` set and partial text.
    ``max_new_tokens``: default :func:`edit_token_cap`. ``config``: base
    decode settings (method, token cap and stop rules are set here).

    Raises :class:`FastCoderError` for empty code or an empty instruction.
    """
    _validate(code, instruction)
    tok = engine.tokenizer
    p = edit_prompt_text(tok, code, instruction, language, prefill=True)
    prompt_ids = encode(tok, p.head, special="parse") + encode(tok, p.opening, special="parse")
    reference = edit_reference(tok, code)
    if max_new_tokens is None:
        max_new_tokens = edit_token_cap(tok, code)
    if max_new_tokens < 1:
        raise FastCoderError(f"max_new_tokens must be >= 1 (got {max_new_tokens})")
    cfg = edit_config(method, max_new_tokens=max_new_tokens, base=config)
    gen = engine.generate(
        prompt_ids,
        cfg,
        session=session,
        sources=sources,
        reference=reference if method == "reuse" else None,
        stop_fn=edit_stop_rule(p.fence, code),
        cancel=cancel,
        on_step=on_step,
    )
    return EditResult(text=finish_edit(gen.text, code), generation=gen, prompt_ids=prompt_ids, reference=reference,
                      max_new_tokens=max_new_tokens, finished=_ended(gen, edit_stop_fn(p.fence), tok))  # fmt: skip


EDIT_CAP = (8, 256)
"""(times, plus): an edit's answer may be up to ``times`` x the original's tokens +
``plus`` tokens. Google-style docstrings for six one-line functions took 372 tokens for
a 60-token selection (2x + 64 cut them at 184: the cut edit, applied, lost three of the
six functions); a loop ends sooner by its own rule."""


def edit_token_cap(tokenizer: Any, code: str) -> int:
    """The default token cap of an edit of ``code`` (:data:`EDIT_CAP`)."""
    body, _ = _split_trailing(_normalize(code))
    return EDIT_CAP[0] * len(encode(tokenizer, body, special="parse")) + EDIT_CAP[1]


def edit_stop_rule(fence: str, code: str) -> StopRule:
    """Where an edit's answer ends: its closing fence (:func:`edit_stop_fn`), or a loop
    (:func:`fastcoder.stops.loop`) that ``code``, the original it copies, does not hold:
    the edit is then unfinished (:func:`_ended`) and is not applied."""
    return any_of(edit_stop_fn(fence), loop(known=code))


def _ended(gen: Generation, fence: StopRule, tokenizer: Any) -> bool:
    """Whether the answer ended by itself: the model's end of turn, or its closing fence
    (the fence rule cuts the whole decoded output where the generation was cut, not the
    loop rule earlier)."""
    reason = gen.stats.stop_reason
    if reason in ("eos", "stop_id"):
        return True
    if reason != "stop":
        return False
    return fence(tokenizer.decode(gen.tokens, skip_special_tokens=True)) == len(gen.text)


def split_lines(text: str) -> list[str]:
    """Lines with their ends, split at "\n" only (as editors count lines: "\r\n" stays
    one break, and form feeds or U+2028 inside a line do not split it)."""
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


def select_lines(text: str, start_line: int, end_line: int) -> tuple[str, str, str]:
    """(before, selection, after) for the 1-based inclusive line range [start, end].

    Raises :class:`FastCoderError` for a range outside the text, a reversed range or a
    selection of only whitespace.
    """
    lines = split_lines(text)
    n = len(lines)
    if n == 0:
        raise FastCoderError("the file is empty: nothing to edit")
    if start_line > end_line:
        raise FastCoderError(f"empty selection: start line {start_line} is after end line {end_line}")
    if not (1 <= start_line <= n) or not (1 <= end_line <= n):
        raise FastCoderError(f"lines {start_line}-{end_line} are outside the file (it has lines 1-{n})")
    sel = "".join(lines[start_line - 1 : end_line])
    if not sel.strip():
        raise FastCoderError(f"empty selection: lines {start_line}-{end_line} hold only whitespace")
    return "".join(lines[: start_line - 1]), sel, "".join(lines[end_line:])


def accepted_share(gen: Generation, source: str = "reuse") -> float:
    """Share of the generated tokens accepted from ``source``'s drafts (``reuse``: the reference)."""
    n = gen.stats.new_tokens
    return gen.stats.accepted_by_source.get(source, 0) / n if n else 0.0


__all__: Sequence[str] = (
    "EditPrompt",
    "EditResult",
    "SYSTEM_PROMPT",
    "build_edit_prompt",
    "choose_fence",
    "edit_code",
    "edit_config",
    "edit_prompt_text",
    "edit_reference",
    "edit_stop_fn",
    "fence_tag",
    "finish_edit",
    "select_lines",
    "split_lines",
    "strip_fences",
)
