"""Completion at the cursor: shared by ``textDocument/inlineCompletion`` and
``textDocument/completion``.

One request, in order:

1. disabled, or the model still loading -> nothing;
2. *answered from a recent state* (:class:`lsp_server.sessions.Answers`): the very
   same state as a recent suggestion (undo, backspace), or the user typed exactly the
   start of one ("typed-through") -> it, or the rest of it, at once, no model call.
   That includes the suggestion computed in the background for the state after
   accepting the shown one (outcome ``ready``);
3. a generation for the very same cursor state already queued or running (an inline
   completion and a completion of one keystroke, or the background one) -> share it;
4. otherwise the debounce (``debounceMs``: until the document has been still 50 ms)
   waits, if at all, and a newer request supersedes the document's older one (its
   cancel event is set, its waiters are answered at once) and a generation is queued
   on the model thread: the prompt
   in the document's layout (:mod:`lsp_server.prompt`: anchored + token healing by
   default), the engine with the document's session (KV prefix reuse, chunked
   prefill that stops when superseded, CACHE), stop rules (:mod:`lsp_server.stops`),
   post-processing (:mod:`lsp_server.postprocess`);
5. when a suggestion has been shown and the model thread is idle, the suggestion for
   the state after accepting it (then after accepting its first line) is computed at
   the lowest priority (``prefetch``); any real request cancels it at once;
6. after that, in a document longer than the prompt window whose window's start must
   move soon, the start it will move to is prefilled into the session's spare KV cache
   (``prepareWindow``, same priority, small chunks), so the move costs what was typed
   since, not a whole prefill. By default only with ``prefetch`` off: in live typing
   the background suggestion of step 5 already prefilled the moved window in the
   user's pauses.

What FastCoder drafts from, besides the workspace's datastores: the prompt and the
output so far (live context); the document's session CACHE, which holds this
document's recent outputs (every suggestion's tokens go in when it ends, so the next
keystroke's generation can draft where the last suggestion was heading); the text
after the cursor that the FIM prompt had no room for (the ``reference``, up to
``REFERENCE_TOKENS``); and the other open documents (``buffers``,
:mod:`lsp_server.buffers`). All of them only propose drafts: the text is greedy AR's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from fastcoder.kv_disk import KVDisk
from fastcoder.sources import weight_of
from fastcoder.stats import GenStats
from fastcoder.stops import FENCE, StopMatcher, StopRule
from fastcoder.tokens import TokenInfo
from fastcoder.verifier import KVState
from indexer.scan import is_secret_name
from lsp_server.buffers import OpenBuffers
from lsp_server.context import ContextBuilder, ContextState, fs_path
from lsp_server.fallback import ArPace
from lsp_server.metrics import ServerMetrics
from lsp_server.model_host import ModelHost
from lsp_server.postprocess import after_exit, comment_lines, cut_at_limit, document_indent_unit, finalize, leaves_open, whole_sentences
from lsp_server.prompt import (
    CursorContext, Prompt, build_prompt, encode, fim_special_ids, place_context, plan_start, remember_window,
)  # fmt: skip
from lsp_server.recall import after_accept, continues, recall, state_key, typed_through
from lsp_server.sessions import DocumentState, Inflight, SessionRegistry, Suggestion
from lsp_server.settings import ServerSettings
from lsp_server.stops import make_stop_fn
from lsp_server.workspace import IndexAdapter

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    text: str
    mode: str
    reason: str
    """ok | early | empty | typed | ready | disabled | loading | superseded"""
    stats: GenStats | None = None
    seconds: float = 0.0


PREFETCH_AFTER_S = 0.15
"""A background suggestion starts once the document has been still this long."""
AUTO_DEBOUNCE_S = 0.05
"""``debounceMs: auto``: a request runs the model once the document has been still this
long: VS Code's own inline-completion debounce, so a request from VS Code starts at once,
and a client that asks at every keystroke gets the same wait. Measured in live typing
(``fastcoder bench live``, real keystroke times, 4 files, 150 keys each): the former
``auto`` (1.5 typing intervals less the recent model-run latency) delayed every model
run by what the model saved, so FastCoder's suggestions showed no sooner than AR's
(felt latency at pauses where the model ran, p50: FastCoder 310 ms, AR 346); starting at
once: FastCoder 199 ms, AR 326, for 2-11% more model-thread time (cancelled runs stop
within a forward pass). docs/bench/live-s18-debounce."""
REST_WAIT_S = 30.0
"""How long a resting cursor's background suggestion waits for a busy model thread."""
WINDOW_CHUNK = 32
"""Tokens per forward when the next prompt window is prefilled in idle time: a request
that arrives meanwhile waits for at most one such forward. Qwen2.5-Coder-0.5B, bf16
packed, 1,500 cached rows, 2-vCPU AMD EPYC with AVX512-BF16 (2026-11-26, median of 6):
16 / 32 / 64 / 128 tokens 57 / 83 / 155 / 271 ms (3.5 / 2.6 / 2.4 / 2.1 ms a token):
32 keeps the wait under ~0.1 s for ~25% more idle work than a request's own 128."""
REFERENCE_TOKENS = 4096
"""Tokens of the reference: the text after the cursor beyond the FIM prompt's suffix,
given to ``Engine.generate(reference=...)`` (the drafter's ``reference`` source)."""


def keeps_kv(uri: str) -> bool:
    """Whether a document's KV cache may go to disk (:mod:`fastcoder.kv_disk`): a file
    (not an unsaved buffer, not a notebook cell: those never open again under the same
    name) whose name is not a secret's as the workspace index judges names
    (:func:`indexer.scan.is_secret_name`: ``.env*``, ``*.pem`` ...): an entry holds the
    document's token ids."""
    path = fs_path(uri) if uri.startswith("file:") else None
    return path is not None and not is_secret_name(Path(path).name)


def _log_failure(fut: "asyncio.Future[Any] | Future[Any]") -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.warning("background job failed: %r", fut.exception())


class EarlyLines(StopRule):
    """``rule``, plus: once ``due()``, each time the output (after its first ``skip``
    characters) has more whole lines, ``publish`` gets them (the text up to its last
    newline). Fed only the new text, like every stop rule."""

    def __init__(self, rule: StopRule, skip: int, due: Callable[[], bool], publish: Callable[[str], None]) -> None:
        self.rule, self.skip, self.due, self.publish = rule, skip, due, publish

    def matcher(self) -> StopMatcher:
        return _EarlyLinesMatcher(self)


class _EarlyLinesMatcher(StopMatcher):
    def __init__(self, spec: EarlyLines) -> None:
        self.spec = spec
        self.inner = spec.rule.matcher()
        self.parts: list[str] = []
        self.length = 0  # characters of the output fed
        self.last_nl = -1  # index of the last newline after the skipped characters
        self.whole = 0  # where the last published whole line ended

    def feed(self, piece: str) -> int | None:
        cut = self.inner.feed(piece)
        if cut is not None:
            return cut
        if piece:
            self.parts.append(piece)
            nl = piece.rfind("\n")
            if nl >= 0 and self.length + nl >= self.spec.skip:
                self.last_nl = self.length + nl - self.spec.skip
            self.length += len(piece)
        nl = self.last_nl
        if nl > 0 and nl != self.whole and self.spec.due():
            self.parts = ["".join(self.parts)]
            text = self.parts[0][self.spec.skip : self.spec.skip + nl]
            if text.strip():  # whole lines so far
                self.whole = nl
                self.spec.publish(text)
        return None

    def peek(self, piece: str) -> int | None:
        return self.inner.peek(piece)  # no early answer from text that may still change


BORROW_MIN_TOKENS = 64
"""A sibling cell's KV cache is taken over only when it holds at least this many more
tokens of the prompt (:meth:`Completer.borrow_cache`)."""


class Completer:
    def __init__(
        self,
        host: ModelHost,
        registry: SessionRegistry,
        metrics: ServerMetrics,
        settings: Callable[[], ServerSettings],
        index: Callable[[], IndexAdapter | None],
        documents: Callable[[], Mapping[str, tuple[Any, str]]] | None = None,
        cells: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.host = host
        self.registry = registry
        self.metrics = metrics
        self.settings = settings
        self.index = index
        self.documents = documents  # uri -> (version, text) of the open documents
        self.cells = cells  # uri -> the other cells of its notebook (lsp_server/notebooks.py)
        self.buffers = OpenBuffers()
        self.context = ContextBuilder()
        self.ar_pace = ArPace()  # what an AR step costs here (lsp_server/fallback.py)
        self._special: dict[int, set[int]] = {}
        self._reference: dict[str, tuple[str, list[int]]] = {}  # uri -> (reference text, ids)
        self.kv_disk: KVDisk | None = None  # documents' KV caches between runs (open_kv_disk)
        registry.on_evict = self._evicted  # an evicted cache goes to disk before its rows go
        self._disk_writer: ThreadPoolExecutor | None = None  # (_evicted)

    async def complete(self, doc: DocumentState, ctx: CursorContext, invoked: bool = False) -> Outcome:
        """The suggestion at ``ctx``. ``invoked``: the user asked explicitly (no debounce,
        and an empty answer remembered for this state is not repeated: the model runs again)."""
        t0 = time.perf_counter()
        settings = self.settings()
        if not settings.enabled:
            return Outcome("", ctx.mode, "disabled")
        if not self.host.ready:
            return Outcome("", ctx.mode, "loading")
        self.registry.touch(doc.uri)
        self.context.places.visit(doc.uri, ctx.prefix.count("\n"))
        if after_exit(ctx):  # below a ``return`` at the cursor's indentation: nothing there could run
            self.metrics.outcome("unreachable")
            return Outcome("", ctx.mode, "unreachable", seconds=time.perf_counter() - t0)
        hit = recall(doc.answers, ctx) if settings.reuse_suggestions else None
        if hit is not None and not (invoked and not hit[0].strip()):
            text, source = hit
            doc.answers.use(source)
            # "ready": the very state prepared in the background (after an accept, or where
            # the cursor rested); typing on through it is typed-through like any suggestion
            prepared = source.background and source.prefix == ctx.prefix and source.suffix == ctx.suffix
            reason = "ready" if prepared else "typed"
            self.metrics.outcome("ready" if prepared else "typed_through")
            if text.strip():  # shown again: prepare what follows accepting it
                self._prefetch(doc, after_accept(ctx, text), settings)
            return Outcome(text, ctx.mode, reason, seconds=time.perf_counter() - t0)

        key = (*state_key(ctx), self.host.load_epoch, id(settings))
        inflight = doc.inflight
        if (
            settings.reuse_suggestions and inflight is not None and inflight.shown and inflight.future is not None
            and not inflight.cancel.is_set() and inflight.key[-2:] == key[-2:]
            and continues(ctx, inflight.ctx, inflight.partial or inflight.shown)
        ):  # fmt: skip
            # the user took (part of) the first lines answered early, or typed on along the
            # lines generated since (or past them), while the block goes on: its next lines
            # or its end answer this state too, so wait for them instead of starting over
            joined = await self._join(inflight, ctx, t0, settings.early_answer_s)
            if joined is not None:
                if joined.reason == "early" and joined.text.strip():
                    # the block's lines so far, for this state: typing on along them is
                    # answered from here (typed-through), the block goes on for what follows
                    doc.answers.add(Suggestion(ctx.prefix, ctx.suffix, ctx.mode, joined.text))
                return joined
            inflight = doc.inflight
        if inflight is None or inflight.key != key or inflight.cancel.is_set() or inflight.future is None:
            # the model will run for this state unless the user types on, and then for a
            # newer one: what runs now for an older state (and background work) stops at
            # once, so its last forward ends during the debounce, not after it
            if inflight is not None and not inflight.cancel.is_set():
                inflight.supersede()
                self.metrics.outcome("superseded")
            self.host.preempt_background()
            wait = 0.0 if invoked else self.debounce_s(doc, settings)  # asked explicitly: at once
            if wait > 0:
                asked = time.monotonic()
                await asyncio.sleep(wait)
                if doc.typing.changed_at > asked:  # typed on: a newer request will come
                    self.metrics.outcome("debounced")
                    return Outcome("", ctx.mode, "superseded", seconds=time.perf_counter() - t0)
                inflight = doc.inflight
        if inflight is None or inflight.key != key or inflight.cancel.is_set() or inflight.future is None:
            if inflight is not None and not inflight.superseded:
                inflight.supersede()
                self.metrics.outcome("superseded")
            inflight = self._start(doc, ctx, settings, key)
        else:
            if inflight.background:  # the state being prepared in the background was asked for
                inflight.background = False
                self.host.promote(inflight.cancel)
                self.metrics.outcome("prefetch_joined")
            else:
                self.metrics.outcome("shared")
        inflight.waiters += 1
        try:
            # the whole answer, or (block mode, slow model) its first lines while the rest
            # is still being generated, or nothing at once when a newer state supersedes it
            await asyncio.wait({inflight.future, inflight.early, inflight.gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            inflight.waiters -= 1
            if inflight.waiters <= 0:
                inflight.cancel.set()  # nobody waits any more: stop the engine
            self.metrics.outcome("cancelled")
            raise
        inflight.waiters -= 1
        seconds = time.perf_counter() - t0
        if inflight.future.done() and not inflight.future.cancelled() and inflight.future.exception() is None:
            text, stats = inflight.future.result()
            early = False
        elif inflight.early.done():
            (text, stats), early = inflight.early.result(), True
        elif inflight.future.done():
            text, stats, early = inflight.future.result()[0], None, False  # raises its exception
        else:  # superseded before it finished
            return Outcome("", ctx.mode, "superseded", None, seconds)
        if text is None:
            reason = "loading" if not self.host.ready else "superseded"
            return Outcome("", ctx.mode, reason, stats, seconds)
        self.metrics.latency(seconds)
        self.metrics.outcome("early" if early else ("suggestion" if text else "empty"))
        return Outcome(text, ctx.mode, ("early" if early else "ok") if text else "empty", stats, seconds)

    async def _join(self, inflight: Inflight, ctx: CursorContext, t0: float, early_s: float | None) -> Outcome | None:
        """Wait for a running block whose lines ``ctx`` continues (its early answer, the
        whole lines generated since, or typed on past them); its rest for ``ctx``, or
        None (it was superseded, its new lines left what was typed, or it has nothing
        more: start a new one). After ``early_s`` the whole lines it has generated beyond
        ``ctx`` answer at once (the block goes on for the next request). When the user
        types on along the block meanwhile (``Inflight.moved``), this state is stale: an
        empty answer at once, and the block goes on for the new state's request."""
        start = inflight.ctx
        inflight.waiters += 1
        try:
            moved = inflight.moved  # resolved when the text moves on along the block's path
            pending = {inflight.future, inflight.gone} | ({moved} if moved is not None else set())
            deadline = time.perf_counter() + (early_s or 0.0)
            while True:
                left = deadline - time.perf_counter() if early_s is not None else None
                if left is not None and left <= 0 and inflight.partial:  # its lines so far, at once
                    rest = typed_through(Suggestion(start.prefix, start.suffix, start.mode, inflight.partial), ctx)
                    if rest is not None:
                        self.metrics.outcome("joined_block")
                        return Outcome(rest, ctx.mode, "early", None, time.perf_counter() - t0)
                    if not continues(ctx, start, inflight.partial):
                        return None  # the block's new lines left what was typed: start over
                done, _ = await asyncio.wait(pending, timeout=left if left is None or left > 0 else 0.05,
                                             return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
                if moved is not None and moved in done and not inflight.future.done():
                    # the user typed on (along the block's lines): this state is stale, the
                    # block goes on for the request of the new one
                    self.metrics.outcome("joined_stale")
                    return Outcome("", ctx.mode, "superseded", None, time.perf_counter() - t0)
                if done:
                    break
        finally:
            inflight.waiters -= 1
        fut = inflight.future
        if not fut.done() or fut.cancelled() or fut.exception() is not None:
            return None
        text, stats = fut.result()
        if text is None:
            return None
        rest = typed_through(Suggestion(inflight.ctx.prefix, inflight.ctx.suffix, inflight.ctx.mode, text), ctx)
        if rest is None:
            return None
        self.metrics.outcome("joined_block")
        return Outcome(rest, ctx.mode, "typed", stats, time.perf_counter() - t0)

    def _start(self, doc: DocumentState, ctx: CursorContext, settings: ServerSettings, key: tuple,
               background: bool = False) -> Inflight:  # fmt: skip
        """Loop thread: queue a generation for ``ctx`` on the model thread."""
        loop = asyncio.get_running_loop()
        inflight = Inflight(key, early=loop.create_future(), gone=loop.create_future(), background=background, ctx=ctx,
                            moved=loop.create_future())  # fmt: skip
        inflight.submitted = time.perf_counter()
        docs = self._open_documents()
        inflight.future = self.host.submit(
            self._generate, inflight, doc, ctx, settings, self.host.load_epoch, loop, docs,
            label=f"{'prefetch' if background else 'completion'} {doc.uri}", background=background,
            cancel=inflight.cancel, interleave=not background, owner=doc.uri,
        )  # fmt: skip
        inflight.future.add_done_callback(functools.partial(self._finished, inflight, doc, ctx, settings))
        doc.inflight = inflight
        return inflight

    @staticmethod
    def debounce_s(doc: DocumentState, settings: ServerSettings) -> float:
        """How long to wait before running the model for a request (``debounceMs``):
        until that long has passed since the document last changed. ``auto``:
        :data:`AUTO_DEBOUNCE_S`."""
        value = settings.debounce_ms
        target = AUTO_DEBOUNCE_S if value == "auto" else float(value) / 1000.0
        if target <= 0:
            return 0.0
        return max(0.0, target - (time.monotonic() - doc.typing.changed_at))

    def _finished(self, inflight: Inflight, doc: DocumentState, ctx: CursorContext, settings: ServerSettings,
                  fut: "asyncio.Future[Any]") -> None:  # fmt: skip
        """Loop thread, when a generation ends: remember its suggestion for this state,
        then prepare the next one in the background."""
        if doc.inflight is inflight:
            doc.inflight = None
            self.registry.enforce()  # the KV limits, now that this document's cache may go
        if fut.cancelled():
            return
        if fut.exception() is not None:  # (its request may be answered already, by a cancel: said here)
            log.warning("generation for %s failed: %r", doc.uri, fut.exception())
            return
        text, _stats = fut.result()
        if text is None:
            if inflight.background:
                self.metrics.outcome("prefetch_cancelled")
            return
        doc.answers.add(Suggestion(ctx.prefix, ctx.suffix, ctx.mode, text, background=inflight.background))
        if inflight.background:
            self.metrics.outcome("prefetched")  # one step ahead only: no prefetch of a prefetch
        elif text.strip():
            self._prefetch(doc, after_accept(ctx, text), settings)
        self._prepare_window(doc, ctx, settings)  # after the prefetch (it starts first, if any)

    def _prepare_window(self, doc: DocumentState, ctx: CursorContext, settings: ServerSettings,
                        still: float | None = None) -> None:  # fmt: skip
        """Loop thread: when the document's window start is planned to move
        (``doc.planned_start``), prefill the planned window in the background into the
        session's spare KV cache once the document has been still for
        :data:`PREFETCH_AFTER_S` and the model thread is idle (it waits for a prefetch:
        that one's end comes back here). Any request cancels it; the chunks done stay."""
        if not (settings.plans_window and settings.enabled and self.host.ready) or doc.planned_start is None:
            return
        if still is None:
            stamp = doc.typing.changed_at
            asyncio.get_running_loop().call_later(
                PREFETCH_AFTER_S,
                lambda: self._prepare_window(doc, ctx, settings, stamp) if doc.typing.changed_at == stamp else None,
            )
            return
        if doc.inflight is not None or doc.typing.changed_at != still or self.registry.get(doc.uri) is not doc:
            return
        if self.host.waiting() or self.host.busy is not None:
            return
        cancel = threading.Event()
        job = self.host.submit(self._fill_window, doc, ctx, doc.planned_start, settings, self.host.load_epoch, cancel,
                               label=f"window {doc.uri}", background=True, cancel=cancel)  # fmt: skip
        job.add_done_callback(_log_failure)

    def _prefetch(self, doc: DocumentState, states: list[CursorContext], settings: ServerSettings,
                  still: float | None = None, enabled: bool | None = None) -> None:  # fmt: skip
        """Loop thread: compute the first of ``states`` not answered yet in the background
        (lowest priority: only when the model thread is idle); the next ones follow it.

        It starts only once the document has been still for :data:`PREFETCH_AFTER_S`
        (the user reads the suggestion): while the user types on it would be cancelled
        anyway, and the forward it is in the middle of would delay the next request
        (measured: 70-180 ms of queueing on a third of the model runs). ``enabled``:
        the setting that allows it (``prefetch`` unless given: :meth:`rest` gives its own)."""
        if not ((settings.prefetch if enabled is None else enabled) and settings.enabled and self.host.ready):
            return
        if still is None:  # look again once the document has been still for a moment
            stamp = doc.typing.changed_at
            asyncio.get_running_loop().call_later(
                PREFETCH_AFTER_S, lambda: self._prefetch(doc, states, settings, stamp) if doc.typing.changed_at == stamp else None
            )
            return
        if doc.inflight is not None or doc.typing.changed_at != still:
            return
        if self.host.waiting() or self.host.busy is not None or self.registry.get(doc.uri) is not doc:
            return
        for i, nxt in enumerate(states):
            if doc.answers.has_state(nxt.prefix, nxt.suffix):
                continue
            inflight = self._start(doc, nxt, settings, (*state_key(nxt), self.host.load_epoch, id(settings)), True)
            rest = states[i + 1 :]
            if rest:
                inflight.future.add_done_callback(lambda _f: self._prefetch(doc, rest, self.settings(), still))
            return

    def rest(self, doc: DocumentState, ctx: CursorContext, waited: float = 0.0, seq: int | None = None) -> None:
        """Loop thread: the client says the cursor rests at ``ctx`` (``fastcoder/cursor``,
        sent by our editor clients when the cursor has stopped moving). Once it has stayed
        there, and the text unchanged, for :data:`PREFETCH_AFTER_S`, the suggestion for
        ``ctx`` is computed in the background, as a prefetch (``warmAtCursor``): the
        prompt there is prefilled before the first keystroke, which then prefills only
        what was typed (anchored layout), and a request for ``ctx`` itself joins it.

        Why: in a document longer than the prompt the prefix window follows the cursor,
        so the first request after a jump (or after opening it) prefilled ~2,000 tokens,
        ~3-4 s on a 2-core CPU. A place whose suggestion is known (shown, or typed
        through) needs nothing and cancels nothing. A background job for a place the
        cursor has left is superseded (what it prefilled stays in the KV cache; counted as
        ``prefetch_cancelled``); a busy model thread is waited for (looked at again every
        :data:`PREFETCH_AFTER_S`, up to :data:`REST_WAIT_S`), and so is the document's
        generation for another place (the editor cancels it when the cursor leaves); a
        state already answered or in flight is left alone."""
        settings = self.settings()
        if not (settings.warm_at_cursor and settings.enabled):
            return
        if seq is None:  # a new notification
            doc.cursor_seq += 1
            seq = doc.cursor_seq
            if not self.host.ready:  # loading: kept, and looked at once the model is ready
                doc.rest_while_loading = ctx
                return
            doc.rest_while_loading = None
            if recall(doc.answers, ctx) is not None:
                # its suggestion is known (the user reads it, or types through it): nothing
                # to prepare, and the one prepared for accepting it goes on
                return
            running = doc.inflight
            if (running is not None and running.background and running.waiters == 0
                    and running.ctx is not None and state_key(running.ctx) != state_key(ctx)):  # fmt: skip
                running.supersede()  # prepared for a place the cursor has left
            waited = -PREFETCH_AFTER_S  # the first look comes after the rest delay
        elif seq != doc.cursor_seq or self.registry.get(doc.uri) is not doc or not self.host.ready:
            return  # moved on, closed, or the model is being replaced
        elif recall(doc.answers, ctx) is not None:
            return  # answered already (that state, or typed through a suggestion)
        elif (doc.inflight is not None and doc.inflight.ctx is not None and not doc.inflight.cancel.is_set()
              and state_key(doc.inflight.ctx) == state_key(ctx)):  # fmt: skip
            return  # already being computed
        elif doc.inflight is None and not (self.host.waiting() or self.host.busy is not None):
            self.metrics.outcome("warm_at_cursor")
            self._prefetch(doc, [ctx], settings, still=doc.typing.changed_at, enabled=True)
            return
        if waited < REST_WAIT_S:  # look (again) once it has rested, or the model thread is free
            changed = doc.typing.changed_at
            asyncio.get_running_loop().call_later(
                PREFETCH_AFTER_S,
                lambda: self.rest(doc, ctx, waited + PREFETCH_AFTER_S, seq) if doc.typing.changed_at == changed else None,
            )

    def resume_rest(self, doc: DocumentState, text: str) -> None:
        """Loop thread, once the model is ready: a cursor that came to rest while it
        loaded (the last place per document) is treated as resting now, if the text is
        still what it was then."""
        ctx, doc.rest_while_loading = doc.rest_while_loading, None
        if ctx is not None and ctx.prefix + ctx.suffix == text:
            self.rest(doc, ctx)

    def _publish_early(self, inflight: Inflight, doc: DocumentState, ctx: CursorContext, text: str) -> None:
        """Loop thread: the first lines of a block are ready; the generation goes on."""
        if inflight.early is None or inflight.early.done() or inflight.cancel.is_set():
            return
        inflight.early.set_result((text, None))
        inflight.shown = text
        if inflight.future is None or not inflight.future.done():
            doc.answers.add(Suggestion(ctx.prefix, ctx.suffix, ctx.mode, text, background=inflight.background))

    def _open_documents(self) -> dict[str, tuple[Any, str]]:
        """Loop thread: a snapshot of the open documents (texts are immutable strings)."""
        if self.documents is None:
            return {}
        try:
            return dict(self.documents())
        except Exception as exc:  # a draft source is never worth failing a request
            log.warning("open documents unavailable: %r", exc)
            return {}

    def draft_sources(self, doc: DocumentState, docs: Mapping[str, tuple[Any, str]], tokenizer: Any, key_len: int):
        """Model thread: the workspace's datastores plus the other open documents."""
        index = self.index()
        sources = index.sources() if index is not None else None
        others = self.buffers.source(tokenizer, docs, exclude=doc.uri, key_len=key_len) if docs else None
        if others is not None:
            from fastcoder.sources import Sources

            sources = Sources(sources or (), buffers=others)
        return sources

    def reference(self, uri: str, ctx: CursorContext, kept: int, tokenizer: Any) -> list[int]:
        """Model thread: the reference, ids of the text after the cursor beyond the
        ``kept`` chars that the prompt holds (cached while that text does not change)."""
        text = ctx.suffix[kept : kept + REFERENCE_TOKENS * 12]
        if not text.strip():
            return []
        cached = self._reference.get(uri)
        if cached is not None and cached[0] == text:
            return cached[1]
        ids = encode(tokenizer, text)[:REFERENCE_TOKENS]
        if len(self._reference) > 32:
            self._reference.clear()
        self._reference[uri] = (text, ids)
        return ids

    # ------------------------------------------------------------------ KV caches on disk
    def open_kv_disk(self, loaded: Any) -> None:
        """Loop thread, after a model load: the store of documents' KV caches kept between
        runs for this model (:mod:`fastcoder.kv_disk`), on a CPU with ``kvDiskMb`` > 0
        (on a GPU a prefill takes milliseconds)."""
        self.kv_disk = None
        settings, engine = self.settings(), self.host.engine
        if settings.kv_disk_mb <= 0 or engine is None or loaded.device.type != "cpu":
            return
        try:
            from fastcoder.kv_disk import model_identity
            from fastcoder.models.cache import cache_root

            self.kv_disk = KVDisk(cache_root() / "kv", model_identity(loaded, engine.verifier), settings.kv_disk_mb * 2**20)
        except Exception:  # an unreadable model folder, a read-only cache: completions go on without it
            log.exception("no KV cache on disk")

    def _restore_kv(self, doc: DocumentState) -> int:
        """Model thread: a document whose session cache is empty takes the rows stored for
        it (a later prefill keeps what its prompt shares with them); returns the tokens."""
        disk, engine = self.kv_disk, self.host.engine
        if disk is None or engine is None or doc.session.kv.ids:
            return 0
        got = disk.load(doc.uri)
        if got is None:
            return 0
        with doc.session.lock:
            n = engine.verifier.import_rows(doc.session.kv, *got, reserve=self.settings().max_new_tokens)
        if n:
            disk.stats["restored"] += 1
            disk.stats["restored_tokens"] += n
            self.metrics.outcome("kv_restored")
        return n

    def save_kv(self, docs: list[DocumentState], deadline: float | None = None, background: bool = False
                ) -> "asyncio.Future[Any] | None":  # fmt: skip
        """Loop thread: store the documents' KV caches (a model-thread job, in the order
        given, none begun after ``deadline``, a ``time.monotonic()``); ``background``: with
        the lowest priority (a request that comes stops it between two documents). None
        without a store."""
        return self._submit_save([(d.uri, d.session.kv, d.session.lock) for d in docs], deadline, background)

    def _evicted(self, doc: DocumentState, held: KVState) -> None:
        """Loop thread (the registry's eviction): the rows the document's main cache held
        go to disk, so its next request reads them back (:meth:`_restore_kv`) instead of
        prefilling its whole prompt. Written by a thread of its own, not the model thread:
        eviction comes with another document's request, which a model-thread job would
        delay by the write (~0.1 s), or, as a background job, cancel; the rows' memory is
        freed once written."""
        disk = self.kv_disk
        if disk is None or self.host.engine is None or not keeps_kv(doc.uri):
            return
        if self._disk_writer is None:
            self._disk_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fastcoder-kv-disk")
        job = self._disk_writer.submit(self._save_kv, [(doc.uri, held, contextlib.nullcontext())], disk, None, threading.Event())
        job.add_done_callback(_log_failure)

    def _submit_save(self, entries: list[tuple[str, KVState, Any]], deadline: float | None, background: bool
                     ) -> "asyncio.Future[Any] | None":  # fmt: skip
        """Loop thread: :meth:`_save_kv` as a model-thread job."""
        disk = self.kv_disk
        entries = [e for e in entries if keeps_kv(e[0])]
        if disk is None or not entries or self.host.engine is None:
            return None
        cancel = threading.Event()
        job = self.host.submit(self._save_kv, entries, disk, deadline, cancel, label="save KV caches", background=background,
                               cancel=cancel if background else None)  # fmt: skip
        job.add_done_callback(_log_failure)
        return job

    def _save_kv(self, entries: list[tuple[str, KVState, Any]], disk: KVDisk, deadline: float | None,
                 cancel: threading.Event) -> int:  # fmt: skip
        """Model thread (or the eviction's writer): each (uri, cache, the lock it is read
        under) to disk, in order."""
        engine, saved = self.host.engine, 0
        for uri, kv, lock in entries:
            if engine is None or disk is not self.kv_disk or cancel.is_set() or (deadline is not None and time.monotonic() > deadline):
                break
            with lock:
                got = engine.verifier.export_rows(kv)
            if got is not None and disk.save(uri, *got):
                saved += 1
        return saved

    # ------------------------------------------------------------------ warm-up
    def warm(self, doc: DocumentState, text: str) -> None:
        """Prefill a just-opened document in the background (model thread, when idle), so
        the first completion in it prefills only what follows the cursor. Only for a
        document whose start stays in the prompt (it fits the prefix budget). First, an
        empty session cache takes what the store on disk kept of the document."""
        settings = self.settings()
        if self.host.ready and settings.enabled and (settings.warm_on_open or self.kv_disk is not None):
            job = self.host.submit(self._warm, doc, text, self.host.load_epoch, label=f"warm {doc.uri}")
            job.add_done_callback(_log_failure)

    def _warm(self, doc: DocumentState, text: str, epoch: int) -> None:
        engine, loaded = self.host.engine, self.host.loaded
        settings = self.settings()
        if engine is None or loaded is None or self.host.load_epoch != epoch or doc.session.kv.ids:
            return
        if self.registry.get(doc.uri) is not doc:
            return  # closed since
        self._restore_kv(doc)
        if not settings.warm_on_open:
            return
        tok = engine.tokenizer
        # the context as the first completion will most likely see it (cursor unknown: the end)
        doc.context = self.document_context(doc, CursorContext(text, ""), settings, tok, self._open_documents())
        context_ids = doc.context.ids if doc.context is not None else []
        budget = settings.max_prompt_tokens - 3 - settings.max_suffix_tokens - len(context_ids)
        head = [tok.convert_tokens_to_ids(loaded.fim.prefix)] if loaded.fim else []
        ids = head + encode(tok, text[: (budget + 1) * 12])
        if len(ids) > budget or len(ids) < 2:
            return
        if doc.context is not None and doc.context.placement == "first":
            ids = context_ids + ids
        held = doc.session.kv.common(ids)  # restored from disk: those rows stay (a shorter prefill would cut them)
        prefilled = 0
        for k in range(256, len(ids) + 256, 256):
            if min(k, len(ids)) <= held:
                continue
            if self.host.waiting():
                return  # a request is waiting: give way (what is prefilled so far stays)
            with doc.session.lock:  # (the registry never evicts a cache being filled)
                prefilled += engine.verifier.prefill(doc.session.kv, ids[: min(k, len(ids))])[1]
        self.metrics.outcome("warmed")
        self.metrics.warm_prefill(prefilled)

    def _fill_window(self, doc: DocumentState, ctx: CursorContext, start: int, settings: ServerSettings, epoch: int,
                     cancel: threading.Event) -> None:  # fmt: skip
        """Model thread: prefill the start of the window planned at ``start`` (the FIM
        prefix token and the text from ``start`` to the cursor's line, after the
        cross-file context when it goes first) into the session's spare KV cache, in
        :data:`WINDOW_CHUNK`-token forwards, until done or ``cancel`` (what is done
        stays: the next idle time goes on from there)."""
        engine, loaded = self.host.engine, self.host.loaded
        if cancel.is_set() or engine is None or loaded is None or self.host.load_epoch != epoch:
            return
        if doc.planned_start != start or self.registry.get(doc.uri) is not doc:
            return  # planned elsewhere since, or closed
        tok = engine.tokenizer
        head = ctx.prefix[: ctx.prefix.rfind("\n") + 1]
        if not 0 < start < len(head):
            return
        ids = ([tok.convert_tokens_to_ids(loaded.fim.prefix)] if loaded.fim else []) + encode(tok, head[start:])
        if doc.context is not None and doc.context.placement == "first":
            ids = doc.context.ids + ids
        session = doc.session
        if len(ids) < 2 or max(session.spare.common(ids), session.kv.common(ids)) >= len(ids) - 1:
            return  # ready (in the spare, or the window has moved there already)
        reserve = settings.max_prompt_tokens + settings.max_new_tokens - len(ids)  # room for the prompt it starts
        t0 = time.perf_counter()
        with session.lock:
            first, done, _m = engine.verifier.prefill(session.spare, ids, reserve=max(0, reserve), cancel=cancel,
                                                      chunk=WINDOW_CHUNK)  # fmt: skip
        self.metrics.window_prefill(done, time.perf_counter() - t0)
        self.metrics.outcome("window_prepared" if first is not None else "window_paused")

    # ------------------------------------------------------------------ model thread
    def document_context(self, doc: DocumentState, ctx: CursorContext, settings: ServerSettings, tokenizer: Any,
                         docs: Mapping[str, tuple[Any, str]], refresh: bool = False) -> ContextState | None:  # fmt: skip
        """The cross-file context for ``doc`` at ``ctx`` (:mod:`lsp_server.context`):
        the document's current one while it holds. Never fails a request."""
        try:
            return self.context.context_for(
                doc.context, settings=settings, tokenizer=tokenizer, index=self.index(), uri=doc.uri,
                path=fs_path(doc.uri), ctx=ctx, docs=docs, refresh=refresh, language_id=doc.language_id,
            )  # fmt: skip
        except Exception:
            log.exception("cross-file context failed for %s; completing without it", doc.uri)
            return None

    def document_prompt(self, doc: DocumentState, ctx: CursorContext, settings: ServerSettings, loaded: Any,
                        tokenizer: Any, context: ContextState | None) -> Prompt:  # fmt: skip
        """The document's prompt after ``context`` (a new context drops the anchor: the
        prompt's budget changed and it is prefilled from its start anyway)."""
        old = doc.context.ids if doc.context is not None else []
        new = context.ids if context is not None else []
        anchor = doc.anchor if old == new else None
        layout = settings.prompt_layout
        return build_prompt(
            tokenizer, loaded.fim, ctx, settings.max_prompt_tokens - len(new),
            suffix_share=settings.suffix_share if loaded.fim else 0.0,
            max_suffix_tokens=settings.max_suffix_tokens,
            sticky_start=doc.sticky_start, layout=layout, anchor=anchor,
            info=TokenInfo.for_tokenizer(tokenizer) if layout == "anchored" and loaded.fim else None, headroom=True,
            planned_start=doc.planned_start if settings.plans_window else None,
            recent_starts=[s for s in (m.locate(ctx.prefix) for m in doc.windows) if s is not None],
        )  # fmt: skip

    def special_ids(self, tokenizer: Any) -> set[int]:
        key = id(tokenizer)
        if key not in self._special:
            self._special[key] = fim_special_ids(tokenizer)
        return self._special[key]

    def borrow_cache(self, doc: DocumentState, ids: list[int]) -> None:
        """Model thread, before a generation: a notebook cell whose KV caches hold less of
        its prompt ``ids`` than a sibling cell's (by :data:`BORROW_MIN_TOKENS`) swaps its
        spare cache for the sibling's (their prompts share the cells above). Nothing runs
        on the sibling meanwhile (one model thread); its lock is taken all the same, as
        the registry's eviction takes it."""
        siblings = [s for s in map(self.registry.get, self.cells(doc.uri)) if s is not None and s is not doc] if self.cells else []
        if not siblings:  # not a notebook cell (the usual case: nothing more to do)
            return
        session = doc.session
        have = max(session.kv.common(ids), session.spare.common(ids))
        best: tuple[Any, str] | None = None
        best_n = have + BORROW_MIN_TOKENS - 1
        for other in siblings:
            for name in ("kv", "spare"):
                n = getattr(other.session, name).common(ids)
                if n > best_n:
                    best, best_n = (other.session, name), n
        if best is None:
            return
        owner, name = best
        if not owner.lock.acquire(blocking=False):
            return
        try:
            theirs = getattr(owner, name)
            setattr(owner, name, session.spare)
            session.spare = theirs  # Session.take_longest swaps it in for the prompt
        finally:
            owner.lock.release()
        self.metrics.outcome("kv_from_cell")

    def _generate(
        self,
        inflight: Inflight,
        doc: DocumentState,
        ctx: CursorContext,
        settings: ServerSettings,
        epoch: int,
        loop: asyncio.AbstractEventLoop,
        docs: Mapping[str, tuple[Any, str]] | None = None,
    ) -> tuple[str | None, GenStats | None]:
        """Runs in the model thread. (None, stats) when cancelled or superseded."""
        t_begin = time.perf_counter()
        engine, loaded = self.host.engine, self.host.loaded
        if inflight.cancel.is_set() or engine is None or loaded is None or self.host.load_epoch != epoch:
            return None, None
        tok = engine.tokenizer
        context = self.document_context(doc, ctx, settings, tok, docs or {})
        prompt = self.document_prompt(doc, ctx, settings, loaded, tok, context)
        if (doc.sticky_start is not None and prompt.prefix_start not in (doc.sticky_start, doc.planned_start)
                and context is doc.context):  # fmt: skip
            # the prompt is prefilled from its start anyway: the context may follow the cursor
            fresh = self.document_context(doc, ctx, settings, tok, docs or {}, refresh=True)
            if fresh is not context and (fresh.ids if fresh else []) != (context.ids if context else []):
                context = fresh
                prompt = self.document_prompt(doc, ctx, settings, loaded, tok, context)
        doc.context = context
        doc.sticky_start = prompt.prefix_start
        doc.anchor = prompt.anchor
        doc.planned_start = plan_start(tok, ctx.prefix, prompt, doc.planned_start) if settings.plans_window else None
        doc.windows = remember_window(doc.windows, ctx.prefix, prompt.prefix_start)
        context_ids = context.ids if context is not None else []
        heal = prompt.heal  # the output starts with it; the suggestion is what follows
        opened = bool(ctx.opened)  # line mode at ``request(|)``: its contents may take lines
        quote = ctx.docstring or ctx.in_docstring  # in a docstring: its closer
        multi_line = opened or (ctx.mode == "line" and bool(quote))  # ... and at ``"""|"""``
        fences = FENCE in ctx.prefix or FENCE in ctx.suffix  # a Markdown document's, or a docstring's
        rules = make_stop_fn(ctx.mode, ctx.line_prefix, ctx.following_lines, settings.mid_line_blocks, opened, fences,
                             settings.stop_degenerate, ctx.prefix, docstring=quote,
                             language=doc.language_id or "")
        unit = document_indent_unit(ctx.prefix[-20000:] + ctx.suffix[:5000], doc.language_id)
        early_s = settings.early_answer_s if ctx.mode == "block" or multi_line else None
        t_start = time.perf_counter()
        published = False
        answered_at: list[float] = []  # when the early answer went out
        answered: list[tuple[float, int]] = []  # then: (decode seconds, tokens the steps produced)

        def early(text: str) -> None:
            """Block mode (and a bracket's contents), after ``earlyAnswerMs``: answer with the
            whole lines so far."""
            nonlocal published
            lines = finalize(text, ctx, indent_unit=unit, keep_whitespace=settings.keep_whitespace, language=doc.language_id)
            if lines and not published:  # answer with them now
                published = True
                answered_at.append(time.perf_counter())
                loop.call_soon_threadsafe(self._publish_early, inflight, doc, ctx, lines)
            if lines:
                inflight.partial = lines  # for a request that takes them (see _join)

        stop_rule = rules.after(len(heal))
        if early_s is not None:
            stop_rule = EarlyLines(stop_rule, len(heal), lambda: time.perf_counter() - t_start >= early_s, early)

        config = settings.decode_config()
        judged = settings.ar_fallback and config.method != "ar"  # lsp_server/fallback.py
        timed = False  # an AR generation run in the drafter's place: it prices AR steps
        if judged and (doc.fallback.use_ar() or self.ar_pace.probe_due()):
            config, judged, timed = settings.decode_config(method="ar"), False, True
            self.metrics.outcome("ar_fallback")
        reference = None
        if config.method == "fastcoder" and config.use_context and weight_of(config, "reference"):
            reference = self.reference(doc.uri, ctx, prompt.suffix_end, tok)
        sources = self.draft_sources(doc, docs or {}, tok, config.n_min) if weight_of(config, "buffers") else None
        if sources is None:
            index = self.index()
            sources = index.sources() if index is not None else None
        t_engine = time.perf_counter()

        def on_step(_committed: list[int], stats: GenStats) -> None:
            """After the step that answered early: what the user waited for (the fallback's
            measure, and ``fastcoder.stats``' ``lastEarly``). From then on the rest of the
            block is ahead of the user, so the completions asked meanwhile in other
            documents run between its steps, not after it (another file, the next notebook
            cell: they waited 1.5-1.9 s for the block's end; this document's own wait for
            it or stop it)."""
            if answered_at and not answered:
                answered.append((answered_at[0] - t_engine - stats.prefill_s, sum(stats.accept_lengths) + stats.forward_steps))
                if not inflight.background:
                    self.metrics.early_answer(stats, answered_at[0] - t_engine, t_engine - t_begin)
            if answered_at:
                stats.yielded_s += self.host.run_waiting(exclude=doc.uri)

        ids = place_context(context_ids, prompt.ids, context.placement if context is not None else "first", loaded.fim, tok)
        self._restore_kv(doc)  # evicted from memory (kvCacheMb) since: what the disk kept of it
        self.borrow_cache(doc, ids)
        gen = engine.generate(
            ids,
            config,
            session=doc.session,
            sources=sources,
            reference=reference,
            stop_fn=stop_rule,
            stop_ids=self.special_ids(tok),  # the end of the middle
            cancel=inflight.cancel,
            preempt=self.host.awaited,
            first_allowed=prompt.allowed,
            on_step=on_step if early_s is not None else None,
        )
        if gen.stats.curve_pending:  # ran as AR while the cost curve is measured: not the drafter's
            judged = False
            self.metrics.outcome("ar_until_curve")
        gen.stats.setup_s = t_engine - t_begin  # prompt + draft sources, before the engine
        gen.stats.queue_s = max(0.0, t_begin - inflight.submitted)  # waiting for the model thread
        self.metrics.generation(gen.stats, "prefetch" if inflight.background else "completion", len(context_ids))
        # a superseded generation counts for the steps it ran (it stops between forwards);
        # in block mode most are, after their early answer
        if timed:
            self.ar_pace.observe(gen.stats, engine.measured_curve())
        elif judged:
            doc.fallback.observe(gen.stats, self.ar_pace.step_for(gen.stats, engine.measured_curve()),
                                 answered[0] if answered else None)  # fmt: skip
        if gen.cancelled:
            return None, gen.stats
        text = gen.text[len(heal) :]
        if gen.stats.stop_reason in ("time_budget", "max_new_tokens") and (ctx.mode == "block" or multi_line):
            text = cut_at_limit(text)
            if quote or comment_lines(text, ctx):  # prose: not mid-sentence
                text = whole_sentences(text)
        elif ctx.mode == "line" and not multi_line and gen.stats.stop_reason == "stop" and leaves_open(text):
            # cut at its line break, the model meant to go on: ``(`` at ``return |;`` in TSX
            # with the JSX to follow on lines of their own; a lone ``(`` is no suggestion
            return "", gen.stats
        return finalize(text, ctx, indent_unit=unit, keep_whitespace=settings.keep_whitespace, language=doc.language_id), gen.stats
