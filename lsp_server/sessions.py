"""Per-document state: the server's one registry of mutable state.

Each open document owns a :class:`fastcoder.session.Session` (the FastCoder CACHE,
missing table and the KV cache of its last prompt) shared by all its completions, so a
keystroke prefills only the tokens that changed. It also remembers:

* the generation in flight (a newer request for the document supersedes it: its cancel
  event is set and the engine stops within one forward pass);
* the last suggestion shown, to answer at once while the user types exactly what it
  proposed ("typed-through");
* where its prompt's prefix started last time (sticky prompt start, for KV reuse).

KV caches are memory, so only the most recently used documents keep theirs: at most
``max_kv_documents`` of them and at most ``max_kv_bytes`` together (the document in use
always keeps its own); an evicted document's static cache is freed and its next request
prefills in full. A static cache (:class:`fastcoder.verifier.StaticKV`) is preallocated
for prompt + new tokens + the largest tree bucket (128), in multiples of 512 rows: with
the default settings (2,048-token prompts, 128 new tokens; a warm-up prefill reserves
512) at most 3,072 rows. Qwen2.5-Coder-0.5B in bf16 takes 12,288 bytes per row (24
layers x K,V x 2 KV heads x 64 x 2 bytes; SmolLM2-135M in fp32 46,080), so 37.7 MB per
document: the 256 MiB default holds 6 documents' caches
(``fastcoder.verifier.kv_bytes_per_token`` gives the figure for any model).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from fastcoder.config import DecodeConfig
from fastcoder.session import Session

MAX_KV_DOCUMENTS = 8
MAX_KV_BYTES = 256 * 2**20


def kv_bytes(kv: Any) -> int:
    """Bytes held by the key/value tensors of a :class:`fastcoder.verifier.KVState`."""
    cache = getattr(kv, "cache", None)
    if cache is None:
        return 0
    layers = getattr(cache, "layers", None)
    if layers is not None:
        tensors = [getattr(layer, name, None) for layer in layers for name in ("keys", "values")]
    else:  # older transformers
        tensors = [*getattr(cache, "key_cache", []), *getattr(cache, "value_cache", [])]
    return sum(int(getattr(t, "nbytes", 0) or 0) for t in tensors if t is not None)


@dataclass
class Suggestion:
    """A suggestion shown at a cursor: the text around the cursor and what was proposed."""

    prefix: str
    suffix: str
    mode: str
    text: str


@dataclass
class Inflight:
    """A generation queued or running for one document; requests for the very same
    cursor share it (e.g. an inline completion and a completion of one keystroke)."""

    key: tuple
    cancel: threading.Event = field(default_factory=threading.Event)
    future: "asyncio.Future[Any] | None" = None
    early: "asyncio.Future[Any] | None" = None  # the first lines of a block, before the rest
    waiters: int = 0
    superseded: bool = False


@dataclass
class DocumentState:
    uri: str
    session: Session
    inflight: Inflight | None = None
    last: Suggestion | None = None
    sticky_start: int | None = None
    used: float = field(default_factory=time.monotonic)


class SessionRegistry:
    """uri -> :class:`DocumentState` for the open documents."""

    def __init__(self, max_kv_documents: int = MAX_KV_DOCUMENTS, max_kv_bytes: int = MAX_KV_BYTES) -> None:
        self._docs: OrderedDict[str, DocumentState] = OrderedDict()
        self.max_kv_documents = max_kv_documents
        self.max_kv_bytes = max_kv_bytes

    def open(self, uri: str, config: DecodeConfig) -> DocumentState:
        state = self._docs.get(uri)
        if state is None:
            state = self._docs[uri] = DocumentState(uri, Session(config))
        self.touch(uri)
        return state

    def close(self, uri: str) -> None:
        state = self._docs.pop(uri, None)
        if state is not None and state.inflight is not None:
            state.inflight.superseded = True
            state.inflight.cancel.set()

    def get(self, uri: str) -> DocumentState | None:
        return self._docs.get(uri)

    def touch(self, uri: str) -> None:
        """Mark ``uri`` as used now; documents beyond the KV limits (count, bytes) drop
        their KV cache, least recently used first."""
        state = self._docs.get(uri)
        if state is None:
            return
        state.used = time.monotonic()
        self._docs.move_to_end(uri)
        used = 0
        for rank, doc in enumerate(reversed(list(self._docs.values()))):
            size = kv_bytes(doc.session.kv)
            if rank == 0 or doc.inflight is not None:  # in use: keeps its KV
                used += size
            elif size and (rank >= self.max_kv_documents or used + size > self.max_kv_bytes):
                doc.session.kv.release()  # frees the static cache
            else:
                used += size

    def kv_bytes(self) -> int:
        """Bytes of KV cache held by all documents."""
        return sum(kv_bytes(doc.session.kv) for doc in self._docs.values())

    def reset_all(self, config: DecodeConfig) -> None:
        """After a model change: every session starts again (KV and CACHE are per model)."""
        for state in self._docs.values():
            state.session = Session(config)
            state.last = None
            state.sticky_start = None

    def cancel_all(self) -> None:
        for state in self._docs.values():
            if state.inflight is not None:
                state.inflight.superseded = True
                state.inflight.cancel.set()

    def __len__(self) -> int:
        return len(self._docs)

    def __iter__(self):
        return iter(list(self._docs.values()))
