"""The FastCoder language server: every feature registration, top to bottom.

    lifecycle        initialize (settings, capabilities) -> initialized (load the model in
                     the background) -> shutdown / exit
    documents        didOpen / didChange / didClose: per-document sessions, buffers to the index
    configuration    workspace/didChangeConfiguration (settings.fastcoder)
    completion       textDocument/inlineCompletion, textDocument/completion
    code actions     textDocument/codeAction + codeAction/resolve: "Generate function body"
    commands         fastcoder.stats, fastcoder.rebuildIndex, fastcoder.editSelection
    status           fastcoder/status notifications and $/progress while indexing

Threads: pygls runs handlers on its asyncio loop; the model runs on one thread of its
own (:class:`lsp_server.model_host.ModelHost`); the workspace index builds on another.
Everything that reaches the client from another thread goes through
:meth:`FastCoderServer.call_soon` onto the loop.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote

from lsprotocol import types
from lsprotocol.types import ResponseErrorMessage
from pygls.exceptions import (
    FeatureNotificationError,
    FeatureRequestError,
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    default_converter,
)
from pygls.workspace import Workspace
from pygls.uris import to_fs_path

from fastcoder import __version__ as _fastcoder_version
from fastcoder.errors import FastCoderError
from fastcoder.stats import GenStats
from lsp_server import actions, edit
from lsp_server.complete import Completer, Outcome
from lsp_server.documents import (
    BadRequest,
    OpenDocuments,
    line_index,
    offset_at,
    open_document,
    position_at,
    range_offsets,
    tokenizable,
)
from lsp_server.metrics import ServerMetrics
from lsp_server.model_host import ModelHost
from lsp_server.postprocess import document_indent_unit, reindent
from lsp_server.prompt import CursorContext, build_prompt
from lsp_server.sessions import SessionRegistry
from lsp_server.settings import ServerSettings, SettingsError
from lsp_server.stops import make_stop_fn
from lsp_server.workspace import IndexUnavailable, WorkspaceIndex

log = logging.getLogger(__name__)

STATUS = "fastcoder/status"
CMD_EDIT = "fastcoder.editSelection"
CMD_REBUILD = "fastcoder.rebuildIndex"
CMD_STATS = "fastcoder.stats"
CMD_DEBUG_DOCUMENT = "fastcoder.debugDocument"
REQUEST_FAILED = types.LSPErrorCodes.RequestFailed.value
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789")


def word_before(line: str) -> str:
    """The identifier characters (``[A-Za-z_0-9]``) that end ``line``: what the client
    filters completion items with. A scan back from the end, linear in the word (a
    regex search for ``[A-Za-z_0-9]*$`` is quadratic in a long line of them)."""
    i = len(line)
    while i > 0 and line[i - 1] in _WORD_CHARS:
        i -= 1
    return line[i:]


class RequestFailed(JsonRpcException):
    """The request was understood but could not be done (LSP RequestFailed)."""

    CODE = REQUEST_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message=message, code=REQUEST_FAILED)


def strict_converter() -> Any:
    """pygls' converter, but a JSON value of the wrong type is an error, not coerced
    (cattrs would take ``"0"``, ``0.5`` and ``true`` as the integer 0, 0 and 1, and any
    value as a string). An integral float (``1.0``) is still the integer 1."""
    conv = default_converter()

    def strict_int(value: Any, _type: Any) -> int:
        if type(value) is int:
            return value
        if type(value) is float and value.is_integer():
            return int(value)
        raise TypeError(f"expected an integer, got {_show(value)}")

    def strict_float(value: Any, _type: Any) -> float:
        if type(value) in (int, float):
            return float(value)
        raise TypeError(f"expected a number, got {_show(value)}")

    def strict_bool(value: Any, _type: Any) -> bool:
        if type(value) is bool:
            return value
        raise TypeError(f"expected true or false, got {_show(value)}")

    def strict_str(value: Any, _type: Any) -> str:
        if type(value) is str:
            return value
        raise TypeError(f"expected a string, got {_show(value)}")

    conv.register_structure_hook(int, strict_int)
    conv.register_structure_hook(float, strict_float)
    conv.register_structure_hook(bool, strict_bool)
    conv.register_structure_hook(str, strict_str)
    return conv


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


class FastCoderProtocol(LanguageServerProtocol):
    """pygls' protocol with three changes:

    * a message is structured once, as a whole, in :meth:`handle_message`. pygls
      structures it in the ``object_hook`` of ``json.loads``, which also sees every
      nested object: a ``params`` or command argument that looks like a message was
      answered under its own id, and the real request then went unanswered.
    * every request gets exactly one answer: one whose params do not fit the LSP types
      gets InvalidParams with the reason; one that is not JSON-RPC 2.0, or that comes
      after ``shutdown``, gets InvalidRequest. Rejections are logged in one line at INFO
      or WARNING (no tracebacks: they are the client's mistakes, not the server's).
    * documents are :class:`lsp_server.documents.LspDocument` (LSP line breaks, one
      position codec) and a change to a document that is not open is ignored quietly.
    """

    def structure_message(self, data: dict[str, Any]) -> dict[str, Any]:
        return data  # the object_hook: nested objects stay plain; see handle_message

    def handle_message(self, message: Any) -> None:
        if not isinstance(message, dict):
            log.warning("ignored a message that is not a JSON object: %s", _show(message))
            return
        msg_id = message.get("id")
        answerable = "method" in message and type(msg_id) in (int, str)  # a request
        method = message.get("method")
        if message.get("jsonrpc") != self.VERSION or (method is not None and type(method) is not str):
            log.warning("ignored a message that is not JSON-RPC 2.0 (method %s)", _show(method))
            if answerable:
                self._reject(msg_id, JsonRpcInvalidRequest(message="not a JSON-RPC 2.0 request"))
            return
        if self._shutdown and method != types.EXIT:
            if answerable:
                log.info("request %s %s after shutdown: rejected", msg_id, method)
                self._reject(msg_id, JsonRpcInvalidRequest(message="the server is shutting down"))
            return
        try:
            structured = self._structure(message)
        except Exception as exc:  # params (or the message) do not fit the LSP types
            detail = _structure_error(exc)
            if answerable:
                log.info("invalid %s request %s: %s", method, msg_id, detail)
                self._reject(msg_id, JsonRpcInvalidParams(message=f"invalid {method} request: {detail}"))
            else:
                log.warning("ignored an invalid %s message: %s", method or "response", detail)
            return
        super().handle_message(structured)

    def _structure(self, data: dict[str, Any]) -> Any:
        """pygls' JsonRPCProtocol.structure_message, for the top-level message only."""
        conv = self._converter
        if "id" in data:
            if "error" in data:
                return conv.structure(data, ResponseErrorMessage)
            if "method" in data:
                return conv.structure(data, self.get_message_type(data["method"]) or JsonRPCRequestMessage)
            return conv.structure(data, self._result_types.pop(data["id"], None) or JsonRPCResponseMessage)
        return conv.structure(data, self.get_message_type(data.get("method", "")) or JsonRPCNotification)

    def _reject(self, msg_id: Any, exc: JsonRpcException) -> None:
        self._send_response(msg_id, error=exc.to_response_error())

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        # pygls logs every error answer with a traceback at ERROR level and reports it as
        # a server error; an expected rejection (InvalidParams, RequestFailed) is one line
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, JsonRpcException):
            self._request_futures.pop(msg_id, None)
            log.info("request %s answered with an error: %s", msg_id, exc.message)
            self._send_response(msg_id, error=exc.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    @property
    def workspace(self) -> Workspace:
        ws = super().workspace
        if not isinstance(ws, OpenDocuments):  # pygls makes its own at initialize
            ws = self._workspace = OpenDocuments.like(ws)
        return ws


class _NoJsonTraceback(logging.Filter):
    """pygls' read loop logs a body that is not JSON (not UTF-8, or nested too deep to
    parse) with a traceback at ERROR ("Unable to handle message");
    FastCoderServer.report_server_error logs it in one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (record.msg == "Unable to handle message" and isinstance(exc, (ValueError, RecursionError)))


_pygls_log = logging.getLogger("pygls.server")
if not any(isinstance(f, _NoJsonTraceback) for f in _pygls_log.filters):
    _pygls_log.addFilter(_NoJsonTraceback())


def _structure_error(exc: BaseException) -> str:
    try:
        import cattrs

        return "; ".join(cattrs.transform_error(exc))[:500]
    except Exception:
        return f"{type(exc).__name__}: {exc}"[:500]


class FastCoderServer(LanguageServer):
    def __init__(self, settings: ServerSettings) -> None:
        super().__init__(
            "fastcoder",
            _fastcoder_version,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=FastCoderProtocol,
            converter_factory=strict_converter,
        )
        self.settings = settings
        self.registry = SessionRegistry(max_kv_bytes=settings.kv_cache_mb * 2**20)  # the one registry of per-document state
        self.metrics = ServerMetrics()
        self.host = ModelHost(on_status=self._model_status, on_loaded=self._model_loaded)
        self.index: WorkspaceIndex | None = None
        self.completer = Completer(
            self.host, self.registry, self.metrics, lambda: self.settings, lambda: self.index,
            documents=lambda: {u: (d.version, d.source) for u, d in list(self.workspace.text_documents.items())},
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
        self.status(state, message)

    def _model_loaded(self, loaded: Any) -> None:
        """Model thread -> loop: sessions start again; the index is opened for this tokenizer."""
        self.call_soon(self._after_load, loaded)

    def _after_load(self, loaded: Any) -> None:
        self.registry.reset_all(self.settings.engine)
        self.open_index(loaded.tokenizer, loaded.fingerprint)
        self.status(*self.overall_status())
        for doc in list(self.workspace.text_documents.values()):
            state = self.registry.get(doc.uri)
            if state is not None:
                self.completer.warm(state, doc.source)

    def open_index(self, tokenizer: Any, fingerprint: str, force: bool = False) -> None:
        """(Re)open D_r / D_c for ``tokenizer`` unless the current index already fits."""
        old = self.index
        if old is not None and old.fingerprint == fingerprint and not force:
            old.tokenizer = tokenizer
            return
        if old is not None:
            threading.Thread(target=old.close, name="fastcoder-index-close", daemon=True).start()
        s = self.settings
        self.index = WorkspaceIndex(
            tokenizer, self.roots, self._index_progress, self._index_status,
            fingerprint=fingerprint, use_common=s.common_index, use_workspace=s.workspace_index,
            use_deps=s.dependency_index, python=s.python_path or None,
        )  # fmt: skip
        self.index.start()
        for doc in list(self.workspace.text_documents.values()):
            self._schedule_buffer(doc.uri, 0.0)

    def _index_status(self, state: str, message: str) -> None:
        self.call_soon(lambda: self.status(*self.overall_status()))

    def _index_progress(self, kind: str, percentage: int | None, message: str) -> None:
        self.call_soon(self._progress_event, kind, percentage, message)

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
                await self.work_done_progress.create_async(token)
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

    def _schedule_buffer(self, uri: str, delay: float = 0.3) -> None:
        """Give the index the text of an open buffer, at most every ``delay`` seconds."""
        if self.loop is None:
            return
        old = self._buffer_timers.pop(uri, None)
        if old is not None:
            old.cancel()
        self._buffer_timers[uri] = self.loop.call_later(delay, self._flush_buffer, uri)

    def _flush_buffer(self, uri: str) -> None:
        self._buffer_timers.pop(uri, None)
        doc = self.workspace.text_documents.get(uri)
        if doc is None or self.index is None or self.index.workspace is None:
            return
        self.index.update_buffer(to_fs_path(uri) or uri, tokenizable(doc.source))  # cheap: the indexer queues it

    def report_server_error(self, error: Exception, source: Any) -> None:
        if isinstance(error, JsonRpcException):  # a rejected message: the client's mistake
            if source is not FeatureRequestError:  # a request's rejection is logged where it is answered
                log.warning("%s: %s", getattr(source, "__name__", source), error)
            return
        if source is JsonRpcException and isinstance(error, (ValueError, RecursionError)):  # pygls' read loop
            log.warning("ignored a message body that is not JSON: %s", error)
            return
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)
        if source is FeatureNotificationError:
            super().report_server_error(error, source)

    # ------------------------------------------------------------------ completion
    async def complete_at(self, uri: str, position: types.Position, kind: str, invoked: bool = False) -> tuple[Outcome, CursorContext]:
        self.metrics.request(kind)
        doc = open_document(self.workspace, uri)
        offset = offset_at(doc, position)
        state = self.registry.get(doc.uri) or self.registry.open(doc.uri, self.settings.engine)
        source = doc.source
        ctx = CursorContext(source[:offset], source[offset:])
        outcome = await self.completer.complete(state, ctx, invoked)
        if outcome.reason == "loading":
            self.status(*self.overall_status())
        return outcome, ctx

    # ------------------------------------------------------------------ generation helpers
    def require_model(self) -> None:
        if not self.host.ready:
            state, message = self.overall_status()
            raise RequestFailed(f"the model is not ready ({state}: {message})")

    def stats_json(self) -> dict[str, Any]:
        out = self.metrics.to_json()
        out.update(
            server={"version": _fastcoder_version, "uptimeSeconds": time.monotonic() - self.started,
                    "openDocuments": len(self.registry),
                    "kvCacheMb": round(self.registry.kv_bytes() / 2**20, 1), "status": dict(zip(("state", "message"), self.overall_status()))},
            model=self.host.describe(),
            index=self.index.stats() if self.index is not None else {"state": "not started"},
            settings=self.settings.to_json(),
        )  # fmt: skip
        return json.loads(json.dumps(out, default=str))


def _guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Request handlers: expected errors pass as they are (BadRequest -> InvalidParams,
    RequestFailed); anything else is logged and answered as an InternalError with a
    clear message. The server never dies because of one request."""

    def convert(exc: Exception) -> Exception:
        if isinstance(exc, JsonRpcException):
            return exc
        log.exception("%s failed", fn.__name__)
        return JsonRpcInternalError(message=f"fastcoder: {fn.__name__} failed: {type(exc).__name__}: {exc}")

    if asyncio.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise convert(exc) from exc

        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise convert(exc) from exc

    return wrapper


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Notification handlers: log failures, never raise."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception:
            log.exception("%s failed", fn.__name__)

    return wrapper


def make_server(settings: ServerSettings | None = None) -> FastCoderServer:
    server = FastCoderServer(settings or ServerSettings())
    conv = server.protocol._converter

    # ========================================================================= lifecycle

    @server.feature(types.INITIALIZE)
    def initialize(ls: FastCoderServer, params: types.InitializeParams) -> None:
        ls.loop = asyncio.get_running_loop()
        try:
            ls.settings = ls.settings.merged(params.initialization_options)
            ls.registry.max_kv_bytes = ls.settings.kv_cache_mb * 2**20
        except SettingsError as exc:
            log.error("initializationOptions: %s (using defaults)", exc)
            ls.call_soon(ls.window_show_message, types.ShowMessageParams(types.MessageType.Error, f"FastCoder: {exc}"))
        folders = [f.uri for f in (params.workspace_folders or [])] or ([params.root_uri] if params.root_uri else [])
        ls.roots = [Path(p) for p in (to_fs_path(u) for u in folders) if p]

    @server.feature(types.INITIALIZED)
    def initialized(ls: FastCoderServer, params: types.InitializedParams) -> None:
        s = ls.settings
        ls.host.load(s.model, s.dtype, s.device)

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: FastCoderServer, params: None) -> None:
        ls.registry.cancel_all()
        ls.host.close()
        if ls.index is not None:  # stop watching, save the index (bounded wait)
            try:
                await asyncio.wait_for(asyncio.to_thread(ls.index.close), timeout=10.0)
            except (asyncio.TimeoutError, Exception) as exc:
                log.warning("closing the index: %r", exc)

    @server.feature(types.EXIT)
    def exit_(ls: FastCoderServer, params: None) -> None:
        # pygls closes the stream and exits; should a thread hold the process (a model
        # load, TCP mode), this ends it a moment later
        code = 0 if ls.protocol._shutdown else 1
        ls.registry.cancel_all()
        timer = threading.Timer(1.0, os._exit, args=(code,))
        timer.daemon = True
        timer.start()

    # ========================================================================= documents

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    @_quiet
    def did_open(ls: FastCoderServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = open_document(ls.workspace, params.text_document.uri)
        state = ls.registry.open(doc.uri, ls.settings.engine)
        ls._schedule_buffer(doc.uri, 0.0)
        ls.completer.warm(state, doc.source)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @_quiet
    def did_change(ls: FastCoderServer, params: types.DidChangeTextDocumentParams) -> None:
        doc = ls.workspace.text_documents.get(unquote(params.text_document.uri))
        if doc is None:
            return  # not open: OpenDocuments logged it
        state = ls.registry.get(doc.uri)
        if state is not None:
            state.typing.changed()
        if state is not None and state.inflight is not None and state.inflight.waiters > 0:
            # the text moved on: the answer someone waits for would be stale; its waiters
            # are answered at once. (A block that goes on after an early answer, or a
            # suggestion prepared in the background, is left alone: the user may be typing
            # through it or accepting it; the next request supersedes it otherwise.)
            state.inflight.supersede()
        ls._schedule_buffer(doc.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @_quiet
    def did_close(ls: FastCoderServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.registry.close(uri)
        timer = ls._buffer_timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        if ls.index is not None:
            ls.index.close_buffer(to_fs_path(uri) or uri)

    # ========================================================================= configuration

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    @_quiet
    def did_change_configuration(ls: FastCoderServer, params: types.DidChangeConfigurationParams) -> None:
        data = params.settings
        if isinstance(data, dict) and isinstance(data.get("fastcoder"), dict):
            data = data["fastcoder"]
        if not isinstance(data, dict) or not data:
            return
        try:
            new = ls.settings.merged(data)
        except SettingsError as exc:
            ls.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"FastCoder settings: {exc}"))
            return
        old, ls.settings = ls.settings, new
        ls.registry.max_kv_bytes = new.kv_cache_mb * 2**20
        log.info("settings changed")
        if new.needs_reload(old):
            ls.registry.cancel_all()
            ls.host.load(new.model, new.dtype, new.device)
        elif new.needs_reindex(old) and ls.host.loaded is not None:
            ls.open_index(ls.host.loaded.tokenizer, ls.host.loaded.fingerprint, force=True)

    # ========================================================================= completion

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    @_guard
    async def inline_completion(ls: FastCoderServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
        invoked = params.context is not None and params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        outcome, _ctx = await ls.complete_at(params.text_document.uri, params.position, "inline", invoked)
        if not outcome.text:
            return types.InlineCompletionList(items=[])
        here = types.Range(start=params.position, end=params.position)
        return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=outcome.text, range=here)])

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(resolve_provider=False))
    @_guard
    async def completion(ls: FastCoderServer, params: types.CompletionParams) -> types.CompletionList:
        # an explicit request (Neovim's <C-x><C-o>, VS Code's Ctrl+Space): no debounce, and a
        # remembered empty answer is not repeated
        invoked = params.context is None or params.context.trigger_kind == types.CompletionTriggerKind.Invoked
        outcome, ctx = await ls.complete_at(params.text_document.uri, params.position, "completion", invoked)
        # incomplete: the suggestion depends on the exact cursor, so ask again as the user types
        if not outcome.text:
            return types.CompletionList(is_incomplete=True, items=[])
        text = outcome.text
        label = next((ln.strip() for ln in text.split("\n") if ln.strip()), text.strip())
        word_prefix = word_before(ctx.line_prefix)  # what the client filters with
        item = types.CompletionItem(
            label=label if len(label) <= 80 else label[:77] + "...",
            kind=types.CompletionItemKind.Snippet,
            detail="FastCoder",
            documentation=types.MarkupContent(kind=types.MarkupKind.Markdown, value=f"```\n{text}\n```") if "\n" in text else None,
            text_edit=types.TextEdit(range=types.Range(start=params.position, end=params.position), new_text=text),
            insert_text_format=types.InsertTextFormat.PlainText,
            filter_text=word_prefix,
            sort_text="0",
            preselect=True,
        )
        return types.CompletionList(is_incomplete=True, items=[item])

    # ========================================================================= code actions

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.RefactorRewrite], resolve_provider=True),
    )
    @_guard
    def code_action(ls: FastCoderServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        """Cheap: finds a stub function at the cursor; the model runs at resolve."""
        ls.metrics.request("codeAction")
        doc = open_document(ls.workspace, params.text_document.uri)
        offset = offset_at(doc, params.range.start)  # validates the position
        only = params.context.only
        if only and not any(actions.KIND == k or actions.KIND.startswith(f"{k}.") for k in only):
            return []  # the client asked for other kinds (e.g. quickfix)
        source = doc.source
        line = source.count("\n", 0, offset)  # actions count "\n" lines (as ast does)
        stub = actions.find_stub(source, line, doc.language_id)
        if stub is None:
            return []
        data = {"uri": doc.uri, "version": doc.version, "defLine": stub.def_line, "name": stub.name}
        return [types.CodeAction(title=actions.TITLE, kind=actions.KIND, data=data)]

    @server.feature(types.CODE_ACTION_RESOLVE)
    @_guard
    async def resolve_code_action(ls: FastCoderServer, action: types.CodeAction) -> types.CodeAction:
        ls.metrics.request("codeActionResolve")
        data = action.data if isinstance(action.data, dict) else {}
        uri, def_line = data.get("uri"), data.get("defLine")
        if not isinstance(uri, str) or not isinstance(def_line, int):
            raise BadRequest("this code action has no FastCoder data (uri, defLine); ask for code actions again")
        doc = open_document(ls.workspace, uri)
        text, version = doc.source, doc.version
        stub = actions.find_stub(text, def_line, doc.language_id)
        if stub is None or stub.def_line != def_line:
            raise RequestFailed(f"no stub function at line {def_line + 1} any more; ask for code actions again")
        ls.require_model()
        settings = ls.settings
        prefix, suffix = actions.body_prompt_context(text, stub)
        ctx = CursorContext(prefix, suffix)
        cancel = threading.Event()

        def work() -> tuple[str, GenStats | None]:
            engine, loaded = ls.host.engine, ls.host.loaded
            if engine is None or loaded is None:
                return "", None
            prompt = build_prompt(engine.tokenizer, loaded.fim, ctx, settings.max_prompt_tokens,
                                  suffix_share=settings.suffix_share if loaded.fim else 0.0)  # fmt: skip
            from fastcoder.session import Session

            gen = engine.generate(
                prompt.ids,
                settings.decode_config(
                    max_new_tokens=settings.max_body_tokens,
                    time_budget_s=None if settings.body_time_budget_ms is None else settings.body_time_budget_ms / 1000,
                ),
                session=Session(settings.engine),
                sources=ls.index.sources() if ls.index is not None else None,
                stop_fn=make_stop_fn("block", ctx.line_prefix, ctx.following_lines),
                cancel=cancel,
            )
            ls.metrics.generation(gen.stats, "body")
            if gen.cancelled:
                return "", gen.stats
            truncated = gen.stats.stop_reason in ("max_new_tokens", "time_budget")
            body = reindent(gen.text, document_indent_unit(text))
            return actions.finish_body(body, stub, truncated), gen.stats

        replacement, _stats = await ls.host.run(work, cancel, label=f"body {uri}")
        if not replacement:
            raise RequestFailed(f"the model proposed no body for {stub.name}()")
        if doc.version != version:
            raise RequestFailed("the document changed while the body was generated; try again")
        rng = types.Range(start=position_at(doc, stub.start), end=position_at(doc, stub.end))
        action.edit = _workspace_edit(ls, doc.uri, doc.version, [types.TextEdit(range=rng, new_text=replacement)])
        return action

    # ========================================================================= commands

    @server.command(CMD_STATS)
    @_guard
    def stats_command(ls: FastCoderServer, *args: Any) -> dict[str, Any]:
        return ls.stats_json()

    @server.command(CMD_DEBUG_DOCUMENT)
    @_guard
    def debug_document(ls: FastCoderServer, *args: Any) -> dict[str, Any]:
        """The server's copy of a document, for tests and bug reports: its version,
        length in UTF-16 code units, line count and the SHA-256 of its UTF-16-LE bytes
        (what an editor holds); the text itself too with ``{"uri": ..., "text": true}``."""
        arg = args[0] if args else None
        if not isinstance(arg, dict) or not isinstance(arg.get("uri"), str):
            raise BadRequest(f"{CMD_DEBUG_DOCUMENT} takes one argument: {{uri, text?}}")
        doc = open_document(ls.workspace, arg["uri"])
        source = doc.source
        data = source.encode("utf-16-le", "surrogatepass")
        out = {"uri": doc.uri, "version": doc.version, "utf16Length": len(data) // 2,
               "lines": len(line_index(doc)), "sha256": hashlib.sha256(data).hexdigest()}  # fmt: skip
        if arg.get("text") is True:
            out["text"] = source
        return out

    @server.command(CMD_REBUILD)
    @_guard
    async def rebuild_index(ls: FastCoderServer, *args: Any) -> dict[str, Any]:
        if ls.index is None:
            raise RequestFailed("the workspace index starts once the model is loaded; try again then")
        try:
            stats = await asyncio.to_thread(ls.index.rebuild)
        except IndexUnavailable as exc:
            raise RequestFailed(str(exc)) from exc
        return json.loads(json.dumps(stats, default=str))

    @server.command(CMD_EDIT)
    @_guard
    async def edit_selection(ls: FastCoderServer, *args: Any) -> dict[str, Any]:
        ls.metrics.request("editSelection")
        arg = args[0] if args else None
        if not isinstance(arg, dict):
            raise BadRequest("fastcoder.editSelection takes one argument: {uri, range, instruction}")
        instruction = arg.get("instruction")
        if not isinstance(instruction, str) or not instruction.strip():
            raise BadRequest("fastcoder.editSelection: instruction must be a non-empty string")
        try:
            rng = conv.structure(arg.get("range"), types.Range)
        except Exception as exc:
            raise BadRequest(f"fastcoder.editSelection: range is not an LSP range: {exc}") from exc
        doc = open_document(ls.workspace, arg.get("uri", ""))
        start, end = range_offsets(doc, rng)
        text, version = doc.source, doc.version
        code = text[start:end]
        if not code.strip():
            raise BadRequest("fastcoder.editSelection: the selection is empty")
        ls.require_model()
        settings = ls.settings
        cancel = threading.Event()

        def work() -> str:
            engine = ls.host.engine
            if engine is None:
                return ""
            new_code, gen = edit.run_edit(
                engine, tokenizable(code), tokenizable(instruction), doc.language_id, config=settings.engine,
                sources=ls.index.sources() if ls.index is not None else None, cancel=cancel,
            )  # fmt: skip
            ls.metrics.generation(gen.stats, "edit")
            return new_code

        try:
            new_code = await ls.host.run(work, cancel, label=f"edit {doc.uri}")
        except FastCoderError as exc:
            raise BadRequest(f"fastcoder.editSelection: {exc}") from exc
        if not new_code.strip():
            raise RequestFailed("the model proposed no edit")
        if doc.version != version:
            raise RequestFailed("the document changed while the edit was generated; try again")
        rng = types.Range(start=position_at(doc, start), end=position_at(doc, end))
        wedit = _workspace_edit(ls, doc.uri, doc.version, [types.TextEdit(range=rng, new_text=new_code)])
        applied = False
        try:
            result = await ls.workspace_apply_edit_async(
                types.ApplyWorkspaceEditParams(edit=wedit, label="FastCoder: edit selection")
            )
            applied = bool(getattr(result, "applied", False))
        except Exception as exc:  # a client without workspace/applyEdit: it still gets the edit
            log.info("workspace/applyEdit failed: %s", exc)
        return {"edit": conv.unstructure(wedit), "applied": applied}

    return server


def _workspace_edit(ls: FastCoderServer, uri: str, version: int | None, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    """A versioned edit when the client supports documentChanges, else plain changes."""
    caps = ls.client_capabilities
    versioned = bool(caps and caps.workspace and caps.workspace.workspace_edit and caps.workspace.workspace_edit.document_changes)
    if versioned:
        ident = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=ident, edits=edits)])
    return types.WorkspaceEdit(changes={uri: edits})
