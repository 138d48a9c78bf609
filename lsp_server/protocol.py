"""JSON-RPC and pygls hardening: what the server does with malformed, mistyped or
late messages, and how handler errors become answers. Nothing here knows FastCoder's
features; :mod:`lsp_server.state` builds the server on :class:`HardenedServer`.

* :class:`FastCoderProtocol`: a message is structured once, as a whole; every request
  gets exactly one answer (InvalidParams with the reason, InvalidRequest for what is not
  JSON-RPC 2.0 or comes after ``shutdown``); rejections are one log line.
* :func:`strict_converter`: a JSON value of the wrong type is an error, not coerced.
* :func:`guard` (requests) and :func:`quiet` (notifications): a handler's failure never
  takes the server down.
* :class:`Features`: registrations written beside module-level handlers (pygls style)
  and applied to a server by :func:`lsp_server.server.make_server`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from typing import Any, Callable

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

from lsp_server.documents import OpenDocuments

log = logging.getLogger(__name__)

CLIENT_ANSWER_S = 10.0
"""How long the server waits for the client's answer to a request of its own
(``workspace/applyEdit``, ``window/workDoneProgress/create``) before going on without it."""

REQUEST_FAILED = types.LSPErrorCodes.RequestFailed.value


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
    * an answer of the client's to a request of ours that does not fit its type fails
      that request (pygls dropped it, and the handler awaiting it never finished), and a
      late answer to one given up on (:data:`CLIENT_ANSWER_S`) is ignored.
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
            elif method is None and type(msg_id) in (int, str) and msg_id in self._request_futures:
                # the client's answer to a request of ours does not fit its type (``null`` for
                # workspace/applyEdit): what awaits it fails now instead of waiting for ever
                log.warning("the client's answer to request %s does not fit: %s", msg_id, detail)
                self._handle_response(msg_id, error=JsonRpcInvalidParams(message=f"invalid answer: {detail}").to_response_error())
            else:
                log.warning("ignored an invalid %s message: %s", method or "response", detail)
            return
        super().handle_message(structured)

    def _handle_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        future = self._request_futures.get(msg_id)
        if future is not None and future.done():  # given up on (a timeout): a late answer
            self._request_futures.pop(msg_id, None)
            log.info("a late answer to request %s ignored", msg_id)
            return
        super()._handle_response(msg_id, result, error)

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
    HardenedServer.report_server_error logs it in one line instead."""

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


class HardenedServer(LanguageServer):
    """pygls' LanguageServer on :class:`FastCoderProtocol` and :func:`strict_converter`,
    reporting the client's mistakes in one line."""

    def __init__(self, name: str, version: str, **kwargs: Any) -> None:
        super().__init__(name, version, protocol_cls=FastCoderProtocol, converter_factory=strict_converter, **kwargs)

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



def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
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


def quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Notification handlers: log failures, never raise."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception:
            log.exception("%s failed", fn.__name__)

    return wrapper


class Features:
    """Feature registrations written beside their module-level handlers, as in pygls'
    examples (``@features.feature(types.TEXT_DOCUMENT_DID_OPEN)``), and applied to a
    server by :meth:`register`. The handlers take the server as their first argument
    (``ls``), so each can be imported, tested and read on its own."""

    def __init__(self) -> None:
        self._entries: list[tuple[str, str, Any, Callable[..., Any]]] = []

    def feature(self, method: str, options: Any = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def add(fn: Callable[..., Any]) -> Callable[..., Any]:
            self._entries.append(("feature", method, options, fn))
            return fn

        return add

    def command(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def add(fn: Callable[..., Any]) -> Callable[..., Any]:
            self._entries.append(("command", name, None, fn))
            return fn

        return add

    def register(self, server: LanguageServer) -> None:
        for kind, name, options, fn in self._entries:
            if kind == "feature":
                server.feature(name, options)(fn)
            else:
                server.command(name)(fn)


def workspace_edit(ls: LanguageServer, uri: str, version: int | None, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
    """A versioned edit when the client supports documentChanges, else plain changes."""
    caps = ls.client_capabilities
    versioned = bool(caps and caps.workspace and caps.workspace.workspace_edit and caps.workspace.workspace_edit.document_changes)
    if versioned:
        ident = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
        return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=ident, edits=edits)])
    return types.WorkspaceEdit(changes={uri: edits})
