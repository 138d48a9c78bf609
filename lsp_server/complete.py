"""Completion at the cursor: shared by ``textDocument/inlineCompletion`` and
``textDocument/completion``.

One request, in order:

1. disabled, or the model still loading -> nothing;
2. *typed-through*: the user typed exactly the start of the last suggestion at this
   place (nothing else changed) -> the rest of it, at once, no model call;
3. a generation for the very same cursor state already queued or running (an inline
   completion and a completion of one keystroke) -> share it;
4. otherwise a newer request supersedes the document's older one (its cancel event
   is set) and a generation is queued on the model thread: FIM prompt
   (:mod:`lsp_server.prompt`), the engine with the document's session (KV prefix
   reuse, CACHE), stop rules (:mod:`lsp_server.stops`), post-processing
   (:mod:`lsp_server.postprocess`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from fastcoder.stats import GenStats
from lsp_server.metrics import ServerMetrics
from lsp_server.model_host import ModelHost
from lsp_server.postprocess import document_indent_unit, finalize
from lsp_server.prompt import CursorContext, build_prompt, fim_special_ids
from lsp_server.sessions import DocumentState, Inflight, SessionRegistry, Suggestion
from lsp_server.settings import ServerSettings
from lsp_server.stops import make_stop_fn
from lsp_server.workspace import WorkspaceIndex

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    text: str
    mode: str
    reason: str
    """ok | empty | typed | disabled | loading | superseded"""
    stats: GenStats | None = None
    seconds: float = 0.0


def typed_through(last: Suggestion | None, ctx: CursorContext) -> str | None:
    """The rest of ``last`` when, since it was shown, the user only typed its start."""
    if last is None or ctx.suffix != last.suffix or not ctx.prefix.startswith(last.prefix):
        return None
    typed = ctx.prefix[len(last.prefix) :]
    if not last.text.startswith(typed):
        return None
    rest = last.text[len(typed) :]
    return rest if rest.strip() else None


def drop_partial_line(text: str) -> str:
    """A multi-line output cut by a limit ends mid-line: keep its whole lines."""
    body = text.rstrip()
    cut = body.rfind("\n")
    return body[:cut] if cut > 0 and body[:cut].strip() else text


class Completer:
    def __init__(
        self,
        host: ModelHost,
        registry: SessionRegistry,
        metrics: ServerMetrics,
        settings: Callable[[], ServerSettings],
        index: Callable[[], WorkspaceIndex | None],
    ) -> None:
        self.host = host
        self.registry = registry
        self.metrics = metrics
        self.settings = settings
        self.index = index
        self._special: dict[int, set[int]] = {}

    async def complete(self, doc: DocumentState, version: Any, ctx: CursorContext) -> Outcome:
        t0 = time.perf_counter()
        settings = self.settings()
        if not settings.enabled:
            return Outcome("", ctx.mode, "disabled")
        if not self.host.ready:
            return Outcome("", ctx.mode, "loading")
        self.registry.touch(doc.uri)
        if settings.reuse_suggestions and (rest := typed_through(doc.last, ctx)) is not None:
            self.metrics.outcome("typed_through")
            return Outcome(rest, ctx.mode, "typed", seconds=time.perf_counter() - t0)

        key = (version, len(ctx.prefix), len(ctx.suffix), ctx.mode, self.host.generation, id(settings))
        inflight = doc.inflight
        if inflight is None or inflight.key != key or inflight.cancel.is_set() or inflight.future is None:
            if inflight is not None:
                inflight.superseded = True
                inflight.cancel.set()
                self.metrics.outcome("superseded")
            inflight = Inflight(key)
            inflight.future = self.host.submit(
                self._generate, inflight, doc, ctx, settings, self.host.generation, label=f"completion {doc.uri}"
            )
            doc.inflight = inflight
        else:
            self.metrics.outcome("shared")
        inflight.waiters += 1
        try:
            text, stats = await asyncio.shield(inflight.future)
        except asyncio.CancelledError:
            inflight.waiters -= 1
            if inflight.waiters <= 0:
                inflight.cancel.set()  # nobody waits any more: stop the engine
                if doc.inflight is inflight:
                    doc.inflight = None
            self.metrics.outcome("cancelled")
            raise
        inflight.waiters -= 1
        if doc.inflight is inflight and inflight.future.done():
            doc.inflight = None
        seconds = time.perf_counter() - t0
        if text is None:
            reason = "loading" if not self.host.ready else "superseded"
            return Outcome("", ctx.mode, reason, stats, seconds)
        if text:
            doc.last = Suggestion(ctx.prefix, ctx.suffix, ctx.mode, text)
        self.metrics.latency(seconds)
        self.metrics.outcome("suggestion" if text else "empty")
        return Outcome(text, ctx.mode, "ok" if text else "empty", stats, seconds)

    # ------------------------------------------------------------------ model thread
    def special_ids(self, tokenizer: Any) -> set[int]:
        key = id(tokenizer)
        if key not in self._special:
            self._special[key] = fim_special_ids(tokenizer)
        return self._special[key]

    def _generate(
        self, inflight: Inflight, doc: DocumentState, ctx: CursorContext, settings: ServerSettings, generation: int
    ) -> tuple[str | None, GenStats | None]:
        """Runs in the model thread. (None, stats) when cancelled or superseded."""
        engine, loaded = self.host.engine, self.host.loaded
        if inflight.cancel.is_set() or engine is None or loaded is None or self.host.generation != generation:
            return None, None
        tok = engine.tokenizer
        prompt = build_prompt(
            tok, loaded.fim, ctx, settings.max_prompt_tokens,
            suffix_share=settings.suffix_share if loaded.fim else 0.0,
            max_suffix_tokens=settings.max_suffix_tokens,
            sticky_start=doc.sticky_start,
        )  # fmt: skip
        doc.sticky_start = prompt.prefix_start
        stop_fn = make_stop_fn(ctx.mode, ctx.line_prefix, ctx.following_lines)
        special = self.special_ids(tok)
        hit_special = threading.Event()

        def on_step(committed: list[int], _stats: GenStats) -> None:
            if special and any(t in special for t in committed):
                hit_special.set()
                inflight.cancel.set()  # end of the middle: stop now (not a user cancel)

        index = self.index()
        gen = engine.generate(
            prompt.ids,
            settings.decode_config(),
            session=doc.session,
            sources=index.sources() if index is not None else None,
            stop_fn=stop_fn,
            cancel=inflight.cancel,
            on_step=on_step,
        )
        self.metrics.generation(gen.stats, "completion")
        if gen.cancelled and not hit_special.is_set():
            return None, gen.stats
        text = gen.text
        cut = next((i for i, t in enumerate(gen.tokens) if t in special), None)
        if cut is not None:
            text = tok.decode(gen.tokens[:cut], skip_special_tokens=True)
            stop = stop_fn(text)
            if stop is not None:
                text = text[:stop]
            gen.stats.stop_reason = "special_token"
        if gen.stats.stop_reason in ("time_budget", "max_new_tokens") and ctx.mode == "block":
            text = drop_partial_line(text)
        unit = document_indent_unit(ctx.prefix[-20000:] + ctx.suffix[:5000])
        return finalize(text, ctx, indent_unit=unit, keep_whitespace=settings.keep_whitespace), gen.stats
