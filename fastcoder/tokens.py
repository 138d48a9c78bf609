"""Per-tokenizer facts the engine needs: which ids contain a newline and which are
pure whitespace (for skip tokens and position-in-line statistics).

Computed once per tokenizer from its decoded vocabulary and kept in memory.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

_LOCK = threading.Lock()
_CACHE: dict[int, "TokenInfo"] = {}


@dataclass
class TokenInfo:
    has_newline: np.ndarray  # bool[vocab]
    is_space: np.ndarray  # bool[vocab]: only whitespace (newline included)

    @classmethod
    def for_tokenizer(cls, tokenizer) -> "TokenInfo":
        key = id(tokenizer)
        with _LOCK:
            info = _CACHE.get(key)
            if info is None:
                info = _CACHE[key] = cls._build(tokenizer)
            return info

    @classmethod
    def _build(cls, tokenizer) -> "TokenInfo":
        size = len(tokenizer)
        texts = tokenizer.batch_decode([[i] for i in range(size)], skip_special_tokens=False)
        nl = np.fromiter(("\n" in t for t in texts), dtype=bool, count=size)
        sp = np.fromiter(((t != "" and t.isspace()) for t in texts), dtype=bool, count=size)
        return cls(has_newline=nl, is_space=sp)

    def line_position(self, ids: list[int]) -> int:
        """Non-whitespace tokens since the last newline at the end of ``ids``
        (0 means the next token is a skip token: the first non-whitespace of a line)."""
        n = 0
        for t in reversed(ids):
            if t < self.has_newline.size and self.has_newline[t]:
                # a token like "x\n" ends the line; "\n    " starts an indent
                return n
            if t < self.is_space.size and not self.is_space[t]:
                n += 1
        return n
