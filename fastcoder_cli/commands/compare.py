"""Comparing a method's output with AR's: the first differing token and whether it is a bf16 tie.

Shared by ``fastcoder generate --compare-ar`` and ``fastcoder demo``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

TIE_MARGIN = 0.25
"""A top-2 logit margin up to this counts as a bf16 tie: bf16 keeps 8 significant bits,
so logits of 16-32 are rounded to steps of 0.125, and sums of rounded terms differ by
a few such steps depending on the order of the arithmetic (a tree pass vs one token)."""


@dataclass
class Difference:
    """The first position where a method's tokens differ from AR's."""

    index: int
    ar_token: str  # decoded token text, or "<end>" when that output ended there
    method_token: str
    ar_margin: float | None  # AR's top-2 logit margin at that position

    def describe(self, dtype: str, exact: bool = False) -> str:
        """``exact``: the steps give AR's bits (float32, or the CPU's batch-invariant
        steps in bf16), so any difference is a bug."""
        margin = "unknown" if self.ar_margin is None else f"{self.ar_margin:.3f}"
        where = f"differs at token {self.index}: AR {self.ar_token!r} vs FastCoder {self.method_token!r}, AR's top-2 logit margin there {margin}"
        if exact or "float32" in dtype:
            return where + f" -- the steps are exact here ({dtype}{', batch-invariant' if exact else ''}): this is a bug, not a tie"
        if self.ar_margin is not None and self.ar_margin <= TIE_MARGIN:
            return where + f" (a {dtype} tie)"
        return where + f" (not within {dtype} rounding: look into it)"


def first_difference(tokenizer: Any, ar_tokens: Sequence[int], tokens: Sequence[int], ar_margins: Sequence[float]) -> Difference | None:
    """None when the token sequences are equal."""
    n = min(len(ar_tokens), len(tokens))
    i = next((j for j in range(n) if ar_tokens[j] != tokens[j]), n)
    if i == len(ar_tokens) == len(tokens):
        return None

    def text(seq: Sequence[int]) -> str:
        return tokenizer.decode([seq[i]]) if i < len(seq) else "<end>"

    return Difference(i, text(ar_tokens), text(tokens), ar_margins[i] if i < len(ar_margins) else None)


BF16_NOTE = ("bf16 ties can flip a token where the steps are not batch-invariant (CUDA): where AR's two best "
             "logits are equal up to bf16 rounding, a tree verification pass and a one-token step may break the "
             "tie differently; with --dtype float32, or on the CPU, the outputs are byte-identical.")
