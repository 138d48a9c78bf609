"""Per-tokenizer facts the engine needs: which ids contain a newline and which are
pure whitespace (for skip tokens and position-in-line statistics), and which ids'
text starts with a given string (token healing: the first generated token must start
with the text taken back from the end of the prompt).

Computed once per tokenizer from its decoded vocabulary and kept in memory.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field

import numpy as np

_LOCK = threading.Lock()
_CACHE: dict[int, "TokenInfo"] = {}


@dataclass
class TokenInfo:
    has_newline: np.ndarray  # bool[vocab]
    is_space: np.ndarray  # bool[vocab]: only whitespace (newline included)
    # (text, id) of every ordinary token (special and empty ones left out), sorted by text
    by_text: list[tuple[str, int]] = field(default_factory=list)
    ids_by_text: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # their ids, same order

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
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        for i, tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
            if getattr(tok, "special", False):
                special.add(int(i))
        by_text = sorted((t, i) for i, t in enumerate(texts) if t and i not in special and "\ufffd" not in t)
        ids = np.fromiter((i for _, i in by_text), dtype=np.int64, count=len(by_text))
        return cls(has_newline=nl, is_space=sp, by_text=by_text, ids_by_text=ids)

    def starting_with(self, prefix: str) -> np.ndarray:
        """Ids of the ordinary tokens whose text starts with ``prefix``: a binary search
        over the sorted texts gives one contiguous range (every text in
        ``[prefix, prefix + U+10FFFF)`` starts with ``prefix``), returned as a view (a
        single space matches ~50k tokens of a 151k vocabulary: no Python list)."""
        lo = bisect.bisect_left(self.by_text, (prefix, -1))
        hi = bisect.bisect_left(self.by_text, (prefix + "\U0010ffff", -1), lo)
        return self.ids_by_text[lo:hi]

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
