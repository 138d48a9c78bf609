"""The language server's state: :class:`FastCoderServer`, the ``ls`` every handler of
:mod:`lsp_server.server` receives."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable

from lsprotocol import types
from pygls.uris import to_fs_path

from fastcoder import __version__ as _fastcoder_version
from lsp_server import notebooks
from lsp_server.complete import Completer
from lsp_server.documents import tokenizable
from lsp_server.fallback import ArPace
from lsp_server.metrics import ServerMetrics
from lsp_server.model_host import ModelHost
from lsp_server.protocol import CLIENT_ANSWER_S, HardenedServer, RequestFailed
from lsp_server.sessions import SessionRegistry
from lsp_server.settings import ServerSettings
from lsp_server.workspace import IndexAdapter

log = logging.getLogger(__name__)

STATUS = "fastcoder/status"
BUFFER_RETRY_S = 0.25
"""While the index is being opened, an open buffer's text is offered again this often."""


class FastCoderServer(HardenedServer):
    """The server's state, shared by every handler (their ``ls``): the settings, the
    per-document sessions, the model host, the workspace index, the completer and the
    metrics; and what the server tells the client on its own (status, progress).

    Threads: pygls runs handlers on its asyncio loop; the model runs on one thread of
    its own (:class:`lsp_server.model_host.ModelHost`); the workspace index builds on
    another. Everything that reaches the client from another thread goes through
    :meth:`call_soon` onto the loop.
    """

    def __init__(self, settings: ServerSettings) -> None:
        super().__init__("fastcoder", _fastcoder_version, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=notebooks.SYNC)  # fmt: skip
        self.settings = settings
        self.registry = SessionRegistry(max_kv_bytes=settings.kv_cache_mb * 2**20)  # the one registry of per-document state
        self.metrics = ServerMetrics()
        self.host = ModelHost(on_status=self._model_status, on_loaded=self._model_loaded,
                              quiet=lambda: self.index is None or self.index.state != "indexing")  # fmt: skip
        self.index: IndexAdapter | None = None
        self.completer = Completer(
            self.host, self.registry, self.metrics, lambda: self.settings, lambda: self.index,
            documents=lambda: {u: (d.version, d.source) for u, d in list(self.workspace.text_documents.items())},
            cells=lambda uri: notebooks.sibling_cells(self.workspace, uri),
        )  # fmt: skip
        self.loop: asyncio.AbstractEventLoop | None = None
        self.roots: list[Path] = []
        self.started = time.monotonic()
        self._status: tuple[str, str] = ("", "")  # the last one sent
        self._progress_chain: asyncio.Future | None = None
        self._progress_token: str | None = None
        self._progress_n = 0
        self._buffer_timers: dict[str, asyncio.TimerHandle] = {}

    # ------------------------------------------------------------------ plumbing
    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the server's loop (from any thread)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    def status(self, state: str, message: str) -> None:
        """Send ``fastcoder/status`` when it changed (thread-safe)."""
        self.call_soon(self._send_status, state, message)

    def _send_status(self, state: str, message: str) -> None:
        if (state, message) != self._status:
            self._status = (state, message)
            self.protocol.notify(STATUS, {"state": state, "message": message})

    def overall_status(self) -> tuple[str, str]:
        if self.host.state in ("loading", "idle"):
            return "loading", self.host.message
        if self.host.state == "error":
            return "error", self.host.message
        if self.index is not None and self.index.state == "indexing":
            return "indexing", "indexing the workspace"
        extra = f"; {self.index.summary()}" if self.index is not None else ""
        return "ready", self.host.message + extra

    def _model_status(self, state: str, message: str) -> None:
        if state == "ready":  # the model's message changed once ready (its cost curve measured)
            self.call_soon(lambda: self.status(*self.overall_status()))
        else:
            self.status(state, message)

    def _model_loaded(self, loaded: Any) -> None:
        """Model thread -> loop: sessions start again; the index is opened for this tokenizer."""
        self.call_soon(self._after_load, loaded)

    def _after_load(self, loaded: Any) -> None:
        self.registry.reset_all(self.settings.engine)
        self.completer.ar_pace = ArPace()  # AR's step cost is the new model's to measure
        self.completer.open_kv_disk(loaded)  # before the documents are warmed: they restore from it
        self.open_index(loaded.tokenizer, loaded.fingerprint)
        self.status(*self.overall_status())
        for doc in list(self.workspace.text_documents.values()):
            state = self.registry.get(doc.uri)
            if state is not None:
                self.completer.warm(state, doc.source)
                self.completer.resume_rest(state, doc.source)

    def open_index(self, tokenizer: Any, fingerprint: str, force: bool = False) -> None:
        """(Re)open D_r / D_c for ``tokenizer`` unless the current index already fits."""
        old = self.index
        if old is not None and old.fingerprint == fingerprint and not force:
            old.tokenizer = tokenizer
            return
        if old is not None:
            threading.Thread(target=old.close, name="fastcoder-index-close", daemon=True).start()
        s = self.settings
        self.index = IndexAdapter(
            tokenizer, self.roots, self._index_progress, self._index_status,
            fingerprint=fingerprint, use_common=s.common_index, use_workspace=s.workspace_index,
            use_deps=s.dependency_index, python=s.python_path or None,
        )  # fmt: skip
        if s.cross_file_context:
            self.index.use_symbols()  # read now, not at the first request that needs it
        self.index.start()
        for doc in list(self.workspace.text_documents.values()):
            self.schedule_buffer(doc.uri, 0.0)

    def _index_status(self, state: str, message: str) -> None:
        self.call_soon(lambda: self.status(*self.overall_status()))
        if state != "indexing":  # quiet again: a deferred cost curve may be measured now
            self.host.measure_when_idle()

    def _index_progress(self, kind: str, percentage: int | None, message: str) -> None:
        self.call_soon(self._progress_event, kind, percentage, message)
        if kind == "end":  # quiet again (also when no index was built at all)
            self.host.measure_when_idle()

    def _progress_event(self, kind: str, percentage: int | None, message: str) -> None:
        """$/progress while indexing (tokens created first when the client supports it);
        events are chained so begin/report/end arrive in order."""
        if kind == "begin":
            self.status("indexing", message)
        elif kind == "end":
            self.status(*self.overall_status())
        prev = self._progress_chain
        self._progress_chain = asyncio.ensure_future(self._send_progress(prev, kind, percentage, message))

    async def _send_progress(self, prev: asyncio.Future | None, kind: str, pct: int | None, message: str) -> None:
        if prev is not None:
            await asyncio.gather(prev, return_exceptions=True)
        caps = self.client_capabilities
        if not (caps and caps.window and caps.window.work_done_progress):
            return
        try:
            if kind == "begin":
                self._progress_n += 1
                token = f"fastcoder-index-{self._progress_n}"
                await asyncio.wait_for(self.work_done_progress.create_async(token), CLIENT_ANSWER_S)
                self._progress_token = token
                self.work_done_progress.begin(
                    token, types.WorkDoneProgressBegin(title="FastCoder", message=message, percentage=0, cancellable=False)
                )
            elif self._progress_token is not None:
                if kind == "report":
                    self.work_done_progress.report(
                        self._progress_token, types.WorkDoneProgressReport(message=message or None, percentage=pct)
                    )
                else:
                    self.work_done_progress.end(self._progress_token, types.WorkDoneProgressEnd(message=message))
                    self._progress_token = None
        except Exception as exc:  # a client that refuses the token: status notifications still work
            log.info("$/progress not sent: %s", exc)

    def schedule_buffer(self, uri: str, delay: float = 0.3) -> None:
        """Give the index the text of an open buffer, at most every ``delay`` seconds."""
        if self.loop is None:
            return
        old = self._buffer_timers.pop(uri, None)
        if old is not None:
            old.cancel()
        self._buffer_timers[uri] = self.loop.call_later(delay, self._flush_buffer, uri)

    def close_buffer(self, uri: str) -> None:
        """A document closed: no pending update for it, and the index reads the disk again."""
        timer = self._buffer_timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        if self.index is not None:
            self.index.close_buffer(to_fs_path(uri) or uri)

    def _flush_buffer(self, uri: str) -> None:
        self._buffer_timers.pop(uri, None)
        doc = self.workspace.text_documents.get(uri)
        if doc is None or self.index is None:
            return
        if self.index.workspace is None:
            # the index is still being opened (D_c comes first): the buffer goes in once D_r
            # exists. Dropping it lost every open buffer, unsaved files and unsaved edits,
            # from D_r whenever the index was reopened (a folder added, a new tokenizer)
            # until the document changed again.
            if self.index.state == "indexing":
                self.schedule_buffer(uri, BUFFER_RETRY_S)
            return
        self.index.update_buffer(to_fs_path(uri) or uri, tokenizable(doc.source))  # cheap: the indexer queues it

    # ------------------------------------------------------------------ for handlers
    def require_model(self) -> None:
        if not self.host.ready:
            state, message = self.overall_status()
            raise RequestFailed(f"the model is not ready ({state}: {message})")

    def _kv_disk_stats(self) -> dict[str, Any]:
        disk = self.completer.kv_disk
        if disk is None:
            return {"state": "off"}
        return {"state": "on", "dir": str(disk.dir), "mb": round(disk.size_bytes() / 2**20, 1), **disk.stats}

    def stats_json(self) -> dict[str, Any]:
        out = self.metrics.to_json()
        out.update(
            server={"version": _fastcoder_version, "uptimeSeconds": time.monotonic() - self.started,
                    "openDocuments": len(self.registry),
                    "kvCacheMb": round(self.registry.kv_bytes() / 2**20, 1),
                    "kvDisk": self._kv_disk_stats(), "status": dict(zip(("state", "message"), self.overall_status())),
                    "arFallback": {"arStepMs": None if self.completer.ar_pace.step_s is None else round(self.completer.ar_pace.step_s * 1e3, 2),
                                   "probes": self.completer.ar_pace.probes,
                                   # drafter generations weighed against AR, and of them those weighed up to an early answer
                                   "judged": sum(d.fallback.judged for d in self.registry),
                                   "judgedAtAnswer": sum(d.fallback.at_answer for d in self.registry),
                                   "documents": {d.uri: d.fallback.state() for d in self.registry if d.fallback.fallbacks}},
                    # the datastores whose search does not pay on this device (the documents' gates start from it)
                    "sourceGate": self.registry.gate.snapshot()},
            model=self.host.describe(),
            index=self.index.stats() if self.index is not None else {"state": "not started"},
            settings=self.settings.to_json(),
        )  # fmt: skip
        return json.loads(json.dumps(out, default=str))
