"""``fastcoder.editSelection``: rewrite the selected code following an instruction.

One edit path, shared with ``fastcoder edit``: :func:`fastcoder.edit.edit_code` builds
the chat prompt (the code first, the instruction last, the assistant's answer primed
with the opening code fence), decodes with the ``reuse`` method and the selected code
as the reference (most of an edit repeats the original, which is then verified in long
drafts: EfficientEdit), stops at the closing fence and strips what fences are left.
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
) -> tuple[str, Any]:
    """(replacement for ``code``, the Generation). Runs in the model thread.

    Its FastCoderError (empty code or instruction) is a bad request. ``on_step``: called
    between two steps (the engine's ``on_step``).
    """
    from fastcoder.edit import edit_code

    result = edit_code(engine, code, instruction, language=language_id or "", sources=sources, cancel=cancel, config=config,
                       on_step=on_step)
    return ("" if result.cancelled else result.text), result.generation
