"""``fastcoder.editSelection``: rewrite the selected code following an instruction.

A chat prompt (the tokenizer's chat template; a plain instruction format when it has
none) asks for the edited code only. The assistant's answer is primed with the opening
code fence, so its first tokens are the code itself, and decoding uses the ``reuse``
method with the selected code as the reference: most of an edit repeats the original,
which is then verified in long drafts (EfficientEdit). The answer ends at the closing
fence; any fences left are stripped.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

log = logging.getLogger(__name__)

SYSTEM = (
    "You are a careful code editor. Apply the user's instruction to the code and reply "
    "with the complete edited code only, in a single fenced code block, without explanations."
)

_LANG_TAGS = {
    "python": "python", "javascript": "javascript", "typescript": "typescript", "javascriptreact": "jsx",
    "typescriptreact": "tsx", "rust": "rust", "go": "go", "c": "c", "cpp": "cpp", "java": "java",
    "lua": "lua", "shellscript": "bash", "ruby": "ruby", "csharp": "csharp", "php": "php",
}  # fmt: skip


def fence_tag(language_id: str | None) -> str:
    return _LANG_TAGS.get((language_id or "").lower(), (language_id or "").lower())


def build_edit_prompt(tokenizer: Any, instruction: str, code: str, language_id: str | None) -> tuple[str, str]:
    """(prompt text, fence opening the answer). The prompt ends with the fence."""
    tag = fence_tag(language_id)
    fence = f"```{tag}\n"
    user = f"{instruction.strip()}\n\n```{tag}\n{code}\n```"
    template = getattr(tokenizer, "chat_template", None)
    if template:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
        try:
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return text + fence, fence
        except Exception:
            pass  # a template that rejects a system turn, etc.: fall back to plain text
    text = f"{SYSTEM}\n\n### Instruction\n{user}\n\n### Edited code\n"
    return text + fence, fence


def edit_stop_fn(text: str) -> int | None:
    """End of the answer: the closing fence (at the start of a line)."""
    if text.startswith("```"):
        return 0
    i = text.find("\n```")
    return i + 1 if i >= 0 else None


_FENCE_OPEN = re.compile(r"^\s*```[\w+#.-]*[^\S\n]*\n")
_FENCE_CLOSE = re.compile(r"\n?```\s*$")


def strip_fences(text: str) -> str:
    """The code inside a markdown fence (the text itself when there is none)."""
    out = _FENCE_OPEN.sub("", text, count=1)
    out = _FENCE_CLOSE.sub("", out)
    if "```" in out:  # an answer with prose around a block: take the first block
        m = re.search(r"```[\w+#.-]*\n(.*?)(\n```|$)", text, re.S)
        if m:
            out = m.group(1)
    return out


def finish_edit(generated: str, original: str) -> str:
    """The replacement for the selection: fences stripped, the selection's trailing
    line break kept as it was."""
    code = strip_fences(generated).rstrip("\n")
    if original.endswith("\n"):
        code += "\n"
    return code


def run_edit(
    engine: Any,
    code: str,
    instruction: str,
    language_id: str | None,
    *,
    config: Any,
    sources: Any = None,
    cancel: threading.Event | None = None,
) -> tuple[str, Any]:
    """(replacement for ``code``, the Generation). Runs in the model thread.

    One edit path: the shared :func:`fastcoder.edit.edit_code` (code first, instruction
    last, the assistant turn primed with the fence, the ``reuse`` method). Its
    FastCoderError (empty code or instruction) is a bad request.
    """
    from fastcoder.edit import edit_code

    result = edit_code(engine, code, instruction, language=language_id or "", sources=sources, cancel=cancel, config=config)
    return ("" if result.cancelled else result.text), result.generation
