"""Tokenizing files for the datastores: the tokenizer of a ``--model`` spec, and texts
grouped into batches of about :data:`BATCH_CHARS` characters for
:func:`fastcoder.tokens.encode_batch` (the one text-to-ids path).

Only the tokenizer is loaded for indexing (no weights), through
:func:`fastcoder.models.load_tokenizer`, so every ``--model`` spec the engine accepts
works here too.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")

BATCH_CHARS = 1 << 18
"""Characters per tokenizer call: large enough for the Rust tokenizer's parallelism,
small enough to report progress often and to bound the memory of one call."""


def load_tokenizer(spec: str, *, progress: bool = True) -> Any:
    """The fast (Rust) tokenizer of a model spec, without loading the weights.

    Delegates to :func:`fastcoder.models.load_tokenizer` (the one tokenizer path), so
    every ``--model`` spec the engine accepts works here too. Raises
    :class:`fastcoder.errors.ModelError` when it cannot be loaded.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    from fastcoder.models import load_tokenizer as _load

    return _load(spec, progress=progress)


def batched(items: Iterable[T], size_of: Callable[[T], int], budget: int = BATCH_CHARS) -> Iterator[list[T]]:
    """Group ``items`` into lists whose summed ``size_of`` stays near ``budget``
    (a single larger item forms its own batch)."""
    batch: list[T] = []
    total = 0
    for item in items:
        n = size_of(item)
        if batch and total + n > budget:
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += n
    if batch:
        yield batch
