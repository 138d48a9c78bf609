"""``fastcoder.editSelection``: rewrite the selected code following an instruction.

One edit path, shared with ``fastcoder edit``: :func:`fastcoder.edit.edit_code` builds
the chat prompt (the code first, the instruction last, the assistant's answer primed
with the opening code fence), decodes with the ``reuse`` method and the selected code
as the reference (most of an edit repeats the original, which is then verified in long
drafts: EfficientEdit), stops at the closing fence and strips what fences are left.
An edit that did not end (its token cap, a loop) is not applied: its text is a cut piece
whose rest, the original's end, is missing, so applying it would delete code.
"""

from __future__ import annotations

import threading
from typing import Any


def run_edit(
    engine: Any,
    code: str,
    instruction: str,
    language_id: str | None,
    *,
    config: Any,
    sources: Any = None,
    cancel: threading.Event | None = None,
    on_step: Any = None,
) -> tuple[str, Any, str | None]:
    """(replacement for ``code``, the Generation, why there is none). Runs in the model
    thread. An edit that did not end has no replacement: why says so.

    Its FastCoderError (empty code or instruction) is a bad request. ``on_step``: called
    between two steps (the engine's ``on_step``).
    """
    from fastcoder.edit import edit_code

    result = edit_code(engine, code, instruction, language=language_id or "", sources=sources, cancel=cancel, config=config,
                       on_step=on_step)
    gen = result.generation
    if result.cancelled:
        return "", gen, None
    if not result.finished:
        how = (f"did not end within {result.max_new_tokens} tokens" if gen.stats.stop_reason == "max_new_tokens"
               else f"went into a loop after {gen.stats.new_tokens} tokens")  # fmt: skip
        return "", gen, f"the model's edit {how}; nothing was changed (try a smaller selection or another instruction)"
    return result.text, gen, None
