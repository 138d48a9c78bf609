"""Per-document state: the server's one registry of mutable state.

Each open document owns a :class:`fastcoder.session.Session` (the FastCoder CACHE,
missing table and the KV cache of its last prompt) shared by all its completions, so a
keystroke prefills only the tokens that changed. It also remembers:

* the generation in flight (a newer request for the document supersedes it: its cancel
  event is set and the engine stops within one forward pass);
* the suggestions of its recent states (:class:`Answers`, a small LRU): the very same
  state again (undo, backspace) or a state the user reached by typing exactly the start
  of one ("typed-through") is answered at once, without the model. Suggestions the
  server computed in the background (the state after accepting the shown one) live
  there too;
* where its prompt's prefix started last time (sticky prompt start, for KV reuse), where
  it is planned to start after the window's next move (its spare KV cache is prefilled
  for it in idle time: :func:`lsp_server.prompt.plan_start`), where its last two windows
  started (:class:`lsp_server.prompt.WindowMark`: back from a jump, the prompt starts
  there again and the session's other KV cache still holds it) and the anchor of its last
  anchored prompt (:class:`lsp_server.prompt.Anchor`);
* when it last changed (:class:`TypingClock`, for the debounce).

KV caches are memory, so only the most recently used documents keep theirs: at most
``max_kv_documents`` of them and at most ``max_kv_bytes`` together (the document in use
always keeps its own); an evicted document's static cache is freed and its next request
prefills in full. A static cache (:class:`fastcoder.verifier.StaticKV`) is preallocated
for prompt + new tokens + the largest tree bucket (128), in multiples of 512 rows: with
the default settings (2,048-token prompts, 128 new tokens; a warm-up prefill reserves
512) at most 3,072 rows. Qwen2.5-Coder-0.5B in bf16 takes 12,288 bytes per row (24
layers x K,V x 2 KV heads x 64 x 2 bytes; SmolLM2-135M in fp32 46,080), so 37.7 MB per
document: the 256 MiB default holds 6 documents' caches
(``fastcoder.verifier.kv_bytes_per_token`` gives the figure for any model). A session's
second cache (the window before a jump to another part of a long document, or its next
window prefilled ahead with ``prepareWindow``) counts against the same limits and is
freed with the first: a document that jumped holds up to twice that.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastcoder.config import DecodeConfig
from fastcoder.session import Session
from fastcoder.source_weights import SourceGate
from lsp_server.fallback import ArFallback

MAX_KV_DOCUMENTS = 8
MAX_KV_BYTES = 256 * 2**20


def session_kv_bytes(session: Any) -> int:
    """Bytes held by both KV caches of a :class:`fastcoder.session.Session`."""
    return sum(kv_bytes(kv) for kv in session.kv_states())


def kv_bytes(kv: Any) -> int:
    """Bytes held by the key/value tensors of a :class:`fastcoder.verifier.KVState`."""
    parked = getattr(kv, "parked", None)  # rows parked while another session holds the CUDA work area
    own = int(getattr(parked, "nbytes", 0) or 0)
    cache = getattr(kv, "cache", None)
    if cache is None or getattr(cache, "shared", False):  # the verifier's work area: no session's own
        return own
    layers = getattr(cache, "layers", None)
    if layers is not None:
        tensors = [getattr(layer, name, None) for layer in layers for name in ("keys", "values")]
    else:  # older transformers
        tensors = [*getattr(cache, "key_cache", []), *getattr(cache, "value_cache", [])]
    return own + sum(int(getattr(t, "nbytes", 0) or 0) for t in tensors if t is not None)


@dataclass
class Suggestion:
    """A suggestion for a cursor state: the text around the cursor and what was proposed."""

    prefix: str
    suffix: str
    mode: str
    text: str
    background: bool = False
    """Computed ahead of any request (the state after accepting a shown suggestion)."""


ANSWERS_PER_DOCUMENT = 16


class Answers:
    """A document's recent suggestions, newest first (an LRU of at most ``size``)."""

    def __init__(self, size: int = ANSWERS_PER_DOCUMENT) -> None:
        self.size = size
        self._items: list[Suggestion] = []

    def add(self, s: Suggestion) -> None:
        self._items = [x for x in self._items if not (x.prefix == s.prefix and x.suffix == s.suffix)]
        self._items.insert(0, s)
        del self._items[self.size :]

    def use(self, s: Suggestion) -> None:
        """Mark ``s`` as just used (it moves to the front)."""
        if s in self._items:
            self._items.remove(s)
            self._items.insert(0, s)

    def has_state(self, prefix: str, suffix: str) -> bool:
        return any(x.prefix == prefix and x.suffix == suffix for x in self._items)

    def clear(self) -> None:
        self._items.clear()

    def __iter__(self):
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)


class TypingClock:
    """When a document last changed (the debounce counts from it)."""

    def __init__(self) -> None:
        self.changed_at = 0.0

    def changed(self, now: float | None = None) -> None:
        self.changed_at = time.monotonic() if now is None else now


@dataclass
class Inflight:
    """A generation queued or running for one document; requests for the very same
    cursor share it (e.g. an inline completion and a completion of one keystroke)."""

    key: tuple
    cancel: threading.Event = field(default_factory=threading.Event)
    future: "asyncio.Future[Any] | None" = None
    early: "asyncio.Future[Any] | None" = None  # the first lines of a block, before the rest
    # resolved the moment the generation is superseded: its waiters answer at once
    gone: "asyncio.Future[Any] | None" = None
    waiters: int = 0
    superseded: bool = False
    background: bool = False  # computed ahead of any request (lowest priority)
    ctx: Any = None  # the lsp_server.prompt.CursorContext it generates for
    shown: str | None = None  # the first lines answered early (the generation goes on)
    partial: str | None = None  # all whole lines generated so far (after the early answer)
    submitted: float = 0.0  # perf_counter when it was queued on the model thread
    # resolved when the text moves on along the block's path: the requests that joined
    # the block so far are stale and answered at once; the block goes on (a fresh one
    # takes its place for later joiners)
    moved: "asyncio.Future[Any] | None" = None

    def supersede(self) -> None:
        """Loop thread: a newer state replaces this one; stop the engine, free the waiters."""
        self.superseded = True
        self.cancel.set()
        if self.gone is not None and not self.gone.done():
            self.gone.set_result(None)

    def release_joiners(self) -> None:
        """Loop thread: the text moved on along the path of this block's lines: answer
        the requests waiting on it (for a state the user has left) at once, and keep the
        block for the next request. (Nobody waiting: nothing to do, the future stays.)"""
        if self.moved is None or self.waiters == 0:
            return
        old, self.moved = self.moved, self.moved.get_loop().create_future()
        old.set_result(None)


@dataclass
class DocumentState:
    uri: str
    session: Session
    inflight: Inflight | None = None
    answers: Answers = field(default_factory=Answers)
    sticky_start: int | None = None
    planned_start: int | None = None  # where the window's start will move (lsp_server.prompt.plan_start)
    # lsp_server.prompt.WindowMark of its last prompt windows, most recent first: at most
    # two, as the session holds two KV caches (Session.kv, Session.spare)
    windows: list = field(default_factory=list)
    anchor: Any = None  # lsp_server.prompt.Anchor of the last anchored prompt
    context: Any = None  # lsp_server.context.ContextState: the cross-file context in its prompts
    language_id: str | None = None  # the client's languageId (the header names an untitled document by it)
    typing: TypingClock = field(default_factory=TypingClock)
    cursor_seq: int = 0  # fastcoder/cursor notifications so far: the latest one's number
    rest_while_loading: Any = None  # lsp_server.prompt.CursorContext: where the cursor rested before the model was ready
    fallback: ArFallback = field(default_factory=ArFallback)  # plain AR while the drafter is slower (arFallback)
    used: float = field(default_factory=time.monotonic)


class SessionRegistry:
    """uri -> :class:`DocumentState` for the open documents."""

    def __init__(self, max_kv_documents: int = MAX_KV_DOCUMENTS, max_kv_bytes: int = MAX_KV_BYTES) -> None:
        self._docs: OrderedDict[str, DocumentState] = OrderedDict()
        self.gate = SourceGate()  # which datastores pay their search on this device: each document's gate starts from it
        self.max_kv_documents = max_kv_documents
        self.max_kv_bytes = max_kv_bytes
        # called (loop thread, the document's session lock held) with a document whose main
        # KV cache eviction takes and what that cache held (``KVState.detach``): the server
        # stores it on disk (``kvDiskMb``) before the rows go
        self.on_evict: Callable[[DocumentState, Any], None] | None = None

    def open(self, uri: str, config: DecodeConfig) -> DocumentState:
        state = self._docs.get(uri)
        if state is None:
            state = self._docs[uri] = DocumentState(uri, Session(config, self.gate))
        self.touch(uri)
        return state

    def close(self, uri: str) -> None:
        state = self._docs.pop(uri, None)
        if state is not None and state.inflight is not None:
            state.inflight.supersede()

    def get(self, uri: str) -> DocumentState | None:
        return self._docs.get(uri)

    def touch(self, uri: str) -> None:
        """Mark ``uri`` as used now, then :meth:`enforce` the KV limits."""
        state = self._docs.get(uri)
        if state is None:
            return
        state.used = time.monotonic()
        self._docs.move_to_end(uri)
        self.enforce()

    def enforce(self) -> int:
        """Documents beyond the KV limits (count, bytes) drop their KV caches, least
        recently used first; returns the bytes freed. Kept whatever the limits: the most
        recently used document's, a document's with a request in flight, and one whose
        session is running a generation or a prefill right now (its lock is held: a
        background warm-up, a window prefill). Called when a request starts
        (:meth:`touch`) and when a generation ends: a document whose request was in
        flight at the last check, or whose cache has grown since, is trimmed then, so
        the limits hold once the requests stop."""
        used = freed = 0
        for rank, doc in enumerate(reversed(list(self._docs.values()))):
            size = session_kv_bytes(doc.session)
            over = rank >= self.max_kv_documents or used + size > self.max_kv_bytes
            if not size or rank == 0 or doc.inflight is not None or not over:
                used += size
            elif doc.session.lock.acquire(blocking=False):
                try:
                    for kv in doc.session.kv_states():
                        if kv is doc.session.kv and kv.ids and self.on_evict is not None:
                            self.on_evict(doc, kv.detach())
                        kv.release()  # frees the static caches
                finally:
                    doc.session.lock.release()
                freed += size
            else:  # in use on the model thread: it keeps its caches until the next check
                used += size
        return freed

    def kv_bytes(self) -> int:
        """Bytes of KV cache held by all documents."""
        return sum(session_kv_bytes(doc.session) for doc in self._docs.values())

    def reset_all(self, config: DecodeConfig) -> None:
        """After a model change: every session starts again (KV and CACHE are per model; the
        step cost, and so which datastores pay, per model and device)."""
        self.gate = SourceGate()
        for state in self._docs.values():
            state.session = Session(config, self.gate)
            state.answers.clear()
            state.sticky_start = None
            state.planned_start = None
            state.windows = []
            state.anchor = None
            state.fallback = ArFallback()

    def cancel_all(self) -> None:
        for state in self._docs.values():
            if state.inflight is not None:
                state.inflight.supersede()

    def __len__(self) -> int:
        return len(self._docs)

    def __iter__(self):
        return iter(list(self._docs.values()))
