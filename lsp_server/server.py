"""The FastCoder language server: every feature registration, top to bottom, each on
the module-level handler it registers (pygls style; the handlers take the server's
state, :class:`lsp_server.state.FastCoderServer`, as ``ls``).

    lifecycle        initialize (settings, capabilities) -> initialized (load the model in
                     the background) -> shutdown / exit
    documents        didOpen / didChange / didClose: per-document sessions, buffers to the index
    configuration    workspace/didChangeConfiguration (settings.fastcoder)
    completion       textDocument/inlineCompletion, textDocument/completion
                     fastcoder/cursor (where the cursor rests: its suggestion is prepared)
    code actions     textDocument/codeAction + codeAction/resolve: "Generate function body"
    commands         fastcoder.stats, fastcoder.debugDocument, fastcoder.rebuildIndex,
                     fastcoder.editSelection
    status           fastcoder/status notifications and $/progress while indexing
                     (:mod:`lsp_server.state`)

The JSON-RPC hardening (malformed, mistyped and late messages; one answer per request;
handler failures) is :mod:`lsp_server.protocol`. Body generation and
``fastcoder.editSelection`` share one request flow, :func:`generate_replacement`.
"""

from __future__ import annotations

import asyncio
import dataclasses
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
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from fastcoder.edit import choose_fence, fence_tag
from fastcoder.errors import FastCoderError
from lsp_server import actions, edit, notebooks
from lsp_server.complete import Outcome
from lsp_server.documents import (
    BadRequest,
    LspDocument,
    line_index,
    moved_range,
    offset_at,
    open_document,
    position_at,
    range_offsets,
    tokenizable,
)
from lsp_server.prompt import CursorContext, encode
from lsp_server.protocol import CLIENT_ANSWER_S, Features, RequestFailed, guard, quiet, workspace_edit
from lsp_server.recall import may_still_serve, recall
from lsp_server.sessions import DocumentState
from lsp_server.settings import ServerSettings, SettingsError
from lsp_server.state import FastCoderServer
from lsp_server.workspace import IndexUnavailable

log = logging.getLogger(__name__)

KV_SAVE_S = 5.0
"""At shutdown, the open documents' KV caches are written to disk for at most this long
(an entry of a 2,000-token prompt, 24.6 MB for Qwen2.5-Coder-0.5B in bf16, took 0.085 s to
write with its digest and 0.05 s to read back and check: 2-vCPU Intel Xeon with AMX, local disk)."""
CMD_EDIT = "fastcoder.editSelection"
CMD_REBUILD = "fastcoder.rebuildIndex"
CMD_STATS = "fastcoder.stats"
CMD_DEBUG_DOCUMENT = "fastcoder.debugDocument"
NOTIFY_CURSOR = "fastcoder/cursor"
"""Client -> server: ``{textDocument: {uri}, position}``, where the cursor rests
(our editor clients send it once the cursor has stopped moving)."""
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789")

features = Features()
"""Every registration below; :func:`make_server` applies them to a new server."""


def make_server(settings: ServerSettings | None = None) -> FastCoderServer:
    server = FastCoderServer(settings or ServerSettings())
    features.register(server)
    return server


def word_before(line: str) -> str:
    """The identifier characters (``[A-Za-z_0-9]``) that end ``line``: what the client
    filters completion items with. A scan back from the end, linear in the word (a
    regex search for ``[A-Za-z_0-9]*$`` is quadratic in a long line of them)."""
    i = len(line)
    while i > 0 and line[i - 1] in _WORD_CHARS:
        i -= 1
    return line[i:]


async def complete_at(
    ls: FastCoderServer,
    uri: str,
    position: types.Position,
    kind: str,
    invoked: bool = False,
    selected: types.SelectedCompletionInfo | None = None,
) -> tuple[Outcome, CursorContext, bool]:
    """Both completion requests: the document at the cursor through the request hub
    (:meth:`lsp_server.complete.Completer.complete`); with ``selected`` (an inline
    request while the suggest widget has an item selected), the document as it would be
    with that item accepted (:func:`accepting`), unless the item is the document's own
    suggestion there (:func:`own_suggestion`). Returns the outcome, the cursor state it
    continues, and whether that state is the one with the item accepted."""
    ls.metrics.request(kind)
    doc = open_document(ls.workspace, uri)
    offset = offset_at(doc, position)
    selected_ctx = accepting(ls, doc, offset, selected) if selected is not None else None
    state = ls.registry.get(doc.uri) or ls.registry.open(doc.uri, ls.settings.engine)
    ctx = cursor_state(ls, doc, offset)
    extends = selected_ctx is not None and not own_suggestion(state, ctx, selected_ctx)
    if extends:
        ctx = selected_ctx
    outcome = await ls.completer.complete(state, ctx, invoked)
    if outcome.reason == "loading":
        ls.status(*ls.overall_status())
    return outcome, ctx, extends


def cursor_state(ls: FastCoderServer, doc: TextDocument, offset: int, end: int | None = None, insert: str = "") -> CursorContext:
    """The cursor state at ``offset`` of an open document (``insert`` put over
    ``offset..end`` first, the cursor after it): the document's text around the cursor,
    and for a notebook cell its notebook's other cells (:func:`notebooks.surroundings`)."""
    head, tail = notebooks.surroundings(ls.workspace, doc.uri)
    source = doc.source
    return CursorContext(head + source[:offset] + insert, source[offset if end is None else end :] + tail,
                         doc.language_id or "")


def accepting(ls: FastCoderServer, doc: TextDocument, offset: int, selected: types.SelectedCompletionInfo) -> CursorContext:
    """The cursor state after accepting the completion item ``selected`` (its text over
    its range, the cursor after it); BadRequest when the range lies outside the document
    or does not hold the cursor at ``offset``."""
    start, end = range_offsets(doc, selected.range)
    if not start <= offset <= end:
        raise BadRequest("selectedCompletionInfo.range must contain the position")
    return cursor_state(ls, doc, start, end, selected.text)


def own_suggestion(state: DocumentState, ctx: CursorContext, selected: CursorContext) -> bool:
    """Whether accepting the selected item at ``ctx`` gives ``selected`` because the item is
    this document's own suggestion there, whole (our ``textDocument/completion`` item):
    then the ghost text is that suggestion itself, as before the widget opened (VS Code
    shows it: it starts with the item), not what would follow it."""
    hit = recall(state.answers, ctx)
    return hit is not None and bool(hit[0]) and selected == CursorContext(ctx.prefix + hit[0], ctx.suffix)


async def generate_replacement(
    ls: FastCoderServer,
    doc: LspDocument,
    start: int,
    end: int,
    *,
    kind: str,
    nothing: str,
    produce: Callable[[Any, Any, threading.Event, Callable[..., None]], tuple[Any, ...]],
) -> types.WorkspaceEdit:
    """The request flow of body generation and ``fastcoder.editSelection``: the model
    must be ready; ``produce(engine, loaded_model, cancel, between) -> (text, Generation[,
    why])`` runs on the model thread (its stats are counted under ``kind``), with ``between`` as
    its generation's ``on_step``: the completions asked meanwhile run between two of its
    steps, not after it (:meth:`lsp_server.model_host.ModelHost.run_waiting`); no text fails the
    request with ``why`` or else ``nothing``, and so does a document that changed meanwhile where the
    text goes (:func:`lsp_server.documents.moved_range`); else the edit that puts the
    text over ``start..end`` (character offsets) of ``doc``, moved by the edits before it."""
    ls.require_model()
    version, before = doc.version, doc.source
    cancel = threading.Event()

    def between(_committed: list[int], stats: Any) -> None:
        stats.yielded_s += ls.host.run_waiting()

    def work() -> tuple[str, str | None]:
        engine, loaded = ls.host.engine, ls.host.loaded
        if engine is None or loaded is None:
            return "", None
        text, gen, *why = produce(engine, loaded, cancel, between)
        ls.metrics.generation(gen.stats, kind)
        return text, (why[0] if why else None)

    text, why = await ls.host.run(work, cancel, label=f"{kind} {doc.uri}")
    if not text.strip():
        raise RequestFailed(why or nothing)
    if doc.version != version:  # edits elsewhere move the range; edits in it void the text
        moved = moved_range(before, doc.source, start, end)
        if moved is None:
            raise RequestFailed(f"the document changed where the {kind} goes while it was generated; try again")
        start, end = moved
    rng = types.Range(start=position_at(doc, start), end=position_at(doc, end))
    return workspace_edit(ls, doc.uri, doc.version, [types.TextEdit(range=rng, new_text=text)])


# ========================================================================= lifecycle

@features.feature(types.INITIALIZE)
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


@features.feature(types.INITIALIZED)
def initialized(ls: FastCoderServer, params: types.InitializedParams) -> None:
    s = ls.settings
    ls.host.load(s.model, s.dtype, s.device, s.pack_weights, s.explicit_attention)


@features.feature(types.SHUTDOWN)
async def shutdown(ls: FastCoderServer, params: None) -> None:
    ls.registry.cancel_all()
    # the open documents' KV caches go to disk (most recently used first, none begun after
    # KV_SAVE_S): a restart reopens them with their prompts prefilled
    saving = ls.completer.save_kv(list(reversed(list(ls.registry))), deadline=time.monotonic() + KV_SAVE_S)
    if saving is not None:
        try:
            await asyncio.wait_for(asyncio.shield(saving), timeout=KV_SAVE_S + 5.0)
        except (asyncio.TimeoutError, Exception) as exc:
            log.warning("saving the KV caches: %r", exc)
    ls.host.close()
    if ls.index is not None:  # stop watching, save the index (bounded wait)
        try:
            await asyncio.wait_for(asyncio.to_thread(ls.index.close), timeout=10.0)
        except (asyncio.TimeoutError, Exception) as exc:
            log.warning("closing the index: %r", exc)


@features.feature(types.EXIT)
def exit_(ls: FastCoderServer, params: None) -> None:
    # pygls closes the stream and exits; should a thread hold the process (a model
    # load, TCP mode), this ends it a moment later
    code = 0 if ls.protocol._shutdown else 1
    ls.registry.cancel_all()
    timer = threading.Timer(1.0, os._exit, args=(code,))
    timer.daemon = True
    timer.start()


# ========================================================================= documents

@features.feature(types.TEXT_DOCUMENT_DID_OPEN)
@quiet
def did_open(ls: FastCoderServer, params: types.DidOpenTextDocumentParams) -> None:
    doc = open_document(ls.workspace, params.text_document.uri)
    state = ls.registry.open(doc.uri, ls.settings.engine)
    state.language_id = params.text_document.language_id
    ls.schedule_buffer(doc.uri, 0.0)
    ls.completer.warm(state, doc.source)


@features.feature(types.TEXT_DOCUMENT_DID_CHANGE)
@quiet
def did_change(ls: FastCoderServer, params: types.DidChangeTextDocumentParams) -> None:
    doc = ls.workspace.text_documents.get(unquote(params.text_document.uri))
    if doc is None:
        return  # not open: OpenDocuments logged it
    text_moved(ls, doc)


def text_moved(ls: FastCoderServer, doc: TextDocument) -> None:
    """After an edit of an open document (or notebook cell): typing is timed, and what
    runs for an older state stops unless the new text may still take it."""
    state = ls.registry.get(doc.uri)
    if state is not None:
        state.typing.changed()
    inflight = state.inflight if state is not None else None
    if inflight is not None and not inflight.superseded:
        # the text moved on: the answer someone waits for would be stale; its waiters
        # are answered at once. A block that goes on after its early answer stays while
        # the user types along what it has generated (its lines may answer the next
        # request; the requests that joined it for an earlier state are answered at
        # once) and stops the moment the text leaves that path, so its last forward
        # ends before the next request comes. (A suggestion prepared in the background
        # is left alone: the user may be accepting it; any request stops it.)
        if inflight.shown is not None:
            head, tail = notebooks.surroundings(ls.workspace, doc.uri)
            if may_still_serve(head + doc.source + tail, inflight.ctx, inflight.partial or inflight.shown):
                inflight.release_joiners()
            else:
                inflight.supersede()
        elif inflight.waiters > 0:
            inflight.supersede()
    ls.schedule_buffer(doc.uri)


@features.feature(types.TEXT_DOCUMENT_DID_CLOSE)
@quiet
def did_close(ls: FastCoderServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    state = ls.registry.get(uri)
    if state is not None:
        ls.completer.save_kv([state], background=True)  # its KV cache to disk, for when it is opened again
    ls.registry.close(uri)
    ls.close_buffer(uri)


# notebooks (lsp_server/notebooks.py): pygls keeps the notebook and its cells (each an open
# text document) before these run; a cell is then a document like any other

def cell_opened(ls: FastCoderServer, cell: types.TextDocumentItem) -> None:
    state = ls.registry.open(cell.uri, ls.settings.engine)
    state.language_id = cell.language_id
    ls.schedule_buffer(cell.uri, 0.0)


def cell_closed(ls: FastCoderServer, uri: str) -> None:
    ls.registry.close(uri)
    ls.close_buffer(uri)


@features.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
@quiet
def notebook_did_open(ls: FastCoderServer, params: types.DidOpenNotebookDocumentParams) -> None:
    for cell in params.cell_text_documents:
        cell_opened(ls, cell)


@features.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
@quiet
def notebook_did_change(ls: FastCoderServer, params: types.DidChangeNotebookDocumentParams) -> None:
    cells = params.change.cells
    if cells is None:
        return
    structure = cells.structure
    for cell in (structure.did_open or []) if structure else []:
        cell_opened(ls, cell)
    for cell_id in (structure.did_close or []) if structure else []:
        cell_closed(ls, cell_id.uri)
    for content in cells.text_content or []:
        doc = ls.workspace.text_documents.get(unquote(content.document.uri))
        if doc is not None:
            text_moved(ls, doc)


@features.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
@quiet
def notebook_did_close(ls: FastCoderServer, params: types.DidCloseNotebookDocumentParams) -> None:
    for cell_id in params.cell_text_documents:
        cell_closed(ls, cell_id.uri)


# ========================================================================= configuration

@features.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
@quiet
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
    if new.kv_disk_mb != old.kv_disk_mb and ls.host.loaded is not None and not new.needs_reload(old):
        ls.completer.open_kv_disk(ls.host.loaded)  # its size (or off); a reload opens it anyway
    if new.needs_reload(old):
        ls.registry.cancel_all()
        ls.host.load(new.model, new.dtype, new.device, new.pack_weights, new.explicit_attention)
    elif new.needs_reindex(old) and ls.host.loaded is not None:
        ls.open_index(ls.host.loaded.tokenizer, ls.host.loaded.fingerprint, force=True)
    elif new.cross_file_context and ls.index is not None:
        ls.index.use_symbols()  # the context's symbol table, read now (not at the first request)


@features.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
@quiet
def did_change_workspace_folders(ls: FastCoderServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    """Folders added to or removed from the workspace (pygls' workspace has taken them):
    the workspace index is reopened over the new set of folders (each folder's D_r is
    persisted, so the ones it had load from disk)."""
    removed = {Path(p) for p in (to_fs_path(f.uri) for f in params.event.removed or []) if p}
    roots = [r for r in ls.roots if r not in removed]
    for path in (to_fs_path(f.uri) for f in params.event.added or []):
        if path and Path(path) not in roots:
            roots.append(Path(path))
    if roots == ls.roots:
        return
    log.info("workspace folders: %s", ", ".join(map(str, roots)) or "none")
    ls.roots = roots
    loaded = ls.host.loaded
    if loaded is not None:
        ls.open_index(loaded.tokenizer, loaded.fingerprint, force=True)


# ========================================================================= completion

@features.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
@guard
async def inline_completion(ls: FastCoderServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    """The suggestion at the cursor, as ghost text. While the editor's suggest widget is
    open with an item selected (``context.selectedCompletionInfo``), the suggestion
    continues the document as if that item were accepted, and the answer is the item's
    text and the continuation over the item's range: VS Code shows ghost text then only
    if it extends the selected item that way (no continuation: no item). The item that is
    this suggestion itself (FastCoder's own completion item) is answered as without it."""
    context = params.context
    invoked = context is not None and context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
    selected = context.selected_completion_info if context is not None else None
    outcome, _ctx, extends = await complete_at(ls, params.text_document.uri, params.position, "inline", invoked, selected)
    if not outcome.text:
        return types.InlineCompletionList(items=[])
    if extends:
        ls.metrics.outcome("extends_selected_item")
        return types.InlineCompletionList(
            items=[types.InlineCompletionItem(insert_text=selected.text + outcome.text, range=selected.range)]
        )
    here = types.Range(start=params.position, end=params.position)
    return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=outcome.text, range=here)])


def _field(obj: Any, name: str) -> Any:
    """``obj.name`` of a custom notification's params (pygls gives named tuples) or dict."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


@features.feature(NOTIFY_CURSOR)
@quiet
def cursor_rests(ls: FastCoderServer, params: Any) -> None:
    """``fastcoder/cursor``: the suggestion where the cursor rests is prepared in the
    background (``warmAtCursor``; :meth:`lsp_server.complete.Completer.rest`). Malformed
    params, a document that is not open, or a position outside it: a warning, nothing
    else (a notification has no answer)."""
    text_document, position = _field(params, "textDocument"), _field(params, "position")
    uri = _field(text_document, "uri") if text_document is not None else None
    line = _field(position, "line") if position is not None else None
    character = _field(position, "character") if position is not None else None
    if not isinstance(uri, str) or not all(isinstance(v, int) and not isinstance(v, bool) for v in (line, character)):
        log.warning("%s: expected {textDocument: {uri}, position: {line, character}}, got %r", NOTIFY_CURSOR, params)
        return
    doc = ls.workspace.text_documents.get(unquote(uri))
    state = ls.registry.get(doc.uri) if doc is not None else None
    if doc is None or state is None:
        log.warning("%s: %s is not open", NOTIFY_CURSOR, uri)
        return
    try:
        offset = offset_at(doc, types.Position(line=line, character=character))
    except BadRequest as exc:
        log.warning("%s: %s", NOTIFY_CURSOR, exc.message)
        return
    ls.completer.rest(state, cursor_state(ls, doc, offset))


@features.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(resolve_provider=False))
@guard
async def completion(ls: FastCoderServer, params: types.CompletionParams) -> types.CompletionList:
    # an explicit request (Neovim's <C-x><C-o>, VS Code's Ctrl+Space): no debounce, and a
    # remembered empty answer is not repeated
    invoked = params.context is None or params.context.trigger_kind == types.CompletionTriggerKind.Invoked
    outcome, ctx, _ = await complete_at(ls, params.text_document.uri, params.position, "completion", invoked)
    # incomplete: the suggestion depends on the exact cursor, so ask again as the user types
    if not outcome.text:
        return types.CompletionList(is_incomplete=True, items=[])
    text = outcome.text
    label = next((ln.strip() for ln in text.split("\n") if ln.strip()), text.strip())
    word_prefix = word_before(ctx.line_prefix)  # what the client filters with
    language = getattr(ls.workspace.text_documents.get(unquote(params.text_document.uri)), "language_id", None)
    item = types.CompletionItem(
        label=label if len(label) <= 80 else label[:77] + "...",
        kind=types.CompletionItemKind.Snippet,
        detail="FastCoder",
        documentation=_code_block(text, language) if "\n" in text else None,
        text_edit=types.TextEdit(range=types.Range(start=params.position, end=params.position), new_text=text),
        insert_text_format=types.InsertTextFormat.PlainText,
        filter_text=word_prefix,
        sort_text="0",
        preselect=True,
    )
    return types.CompletionList(is_incomplete=True, items=[item])


def _code_block(text: str, language: str | None) -> types.MarkupContent:
    """``text`` as a Markdown code block in ``language``, fenced by more backticks than it
    holds (a suggestion in a Markdown file with a fence in it broke a fixed one)."""
    fence = choose_fence(text)
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value=f"{fence}{fence_tag(language)}\n{text}\n{fence}")


# ========================================================================= code actions

@features.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.RefactorRewrite], resolve_provider=True),
)
@guard
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


@features.feature(types.CODE_ACTION_RESOLVE)
@guard
async def resolve_code_action(ls: FastCoderServer, action: types.CodeAction) -> types.CodeAction:
    ls.metrics.request("codeActionResolve")
    data = action.data if isinstance(action.data, dict) else {}
    uri, def_line, name = data.get("uri"), data.get("defLine"), data.get("name")
    if not isinstance(uri, str) or not isinstance(def_line, int):
        raise BadRequest("this code action has no FastCoder data (uri, defLine); ask for code actions again")
    doc = open_document(ls.workspace, uri)
    text = doc.source
    stub = actions.find_stub(text, def_line, doc.language_id)
    if isinstance(name, str) and (stub is None or stub.def_line != def_line or stub.name != name):
        # lines inserted or deleted above it since the action was listed: the stub moved
        stub = actions.find_stub_named(text, name, def_line, doc.language_id)
    if stub is None or (not isinstance(name, str) and stub.def_line != def_line):
        what = f"{name}()" if isinstance(name, str) else f"function at line {def_line + 1}"
        raise RequestFailed(f"no stub {what} any more; ask for code actions again")
    settings = ls.settings
    # in a notebook cell the model sees the notebook around the cell (notebooks.py)
    head, tail = notebooks.surroundings(ls.workspace, doc.uri)
    lines = head.count("\n")
    seen = dataclasses.replace(stub, start=stub.start + len(head), end=stub.end + len(head),
                               def_line=stub.def_line + lines, last_line=stub.last_line + lines)  # fmt: skip
    limit: list[str] = []  # what cut the body, if anything did

    def produce(engine: Any, loaded: Any, cancel: threading.Event, between: Callable[..., None]) -> tuple[str, Any]:
        body, gen = actions.generate_body(
            engine, loaded.fim, head + text + tail, seen, settings, sources=ls.index.sources() if ls.index is not None else None,
            cancel=cancel, gate_parent=ls.registry.gate, language=doc.language_id, on_step=between,
        )  # fmt: skip
        if body.strip() and gen.stats.stop_reason in actions.BODY_LIMITS:
            limit.append(gen.stats.stop_reason)
        return body, gen

    action.edit = await generate_replacement(ls, doc, stub.start, stub.end, kind="body",
                                             nothing=f"the model proposed no body for {stub.name}()", produce=produce)  # fmt: skip
    if limit:  # the body is applied (whole lines, no bracket left open), and the user told it is not whole
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, actions.cut_body_message(stub.name, limit[0], settings)))
    return action


# ========================================================================= commands

@features.command(CMD_STATS)
@guard
def stats_command(ls: FastCoderServer, *args: Any) -> dict[str, Any]:
    return ls.stats_json()


@features.command(CMD_DEBUG_DOCUMENT)
@guard
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


@features.command(CMD_REBUILD)
@guard
async def rebuild_index(ls: FastCoderServer, *args: Any) -> dict[str, Any]:
    if ls.index is None:
        raise RequestFailed("the workspace index starts once the model is loaded; try again then")
    try:
        stats = await asyncio.to_thread(ls.index.rebuild)
    except IndexUnavailable as exc:
        raise RequestFailed(str(exc)) from exc
    return json.loads(json.dumps(stats, default=str))


@features.command(CMD_EDIT)
@guard
async def edit_selection(ls: FastCoderServer, *args: Any) -> dict[str, Any]:
    ls.metrics.request("editSelection")
    arg = args[0] if args else None
    if not isinstance(arg, dict):
        raise BadRequest("fastcoder.editSelection takes one argument: {uri, range, instruction}")
    instruction = arg.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise BadRequest("fastcoder.editSelection: instruction must be a non-empty string")
    try:
        rng = ls.protocol._converter.structure(arg.get("range"), types.Range)
    except Exception as exc:
        raise BadRequest(f"fastcoder.editSelection: range is not an LSP range: {exc}") from exc
    doc = open_document(ls.workspace, arg.get("uri", ""))
    start, end = range_offsets(doc, rng)
    line_start = doc.source.rfind("\n", 0, start) + 1
    if not doc.source[line_start:start].strip(" \t"):
        # selected from the first character of an indented line: the indentation goes with
        # it, so the model sees the code as it stands (without it, a method's body came
        # back one level shallower than its first line's place)
        start = line_start
    code = doc.source[start:end]
    if not code.strip():
        raise BadRequest("fastcoder.editSelection: the selection is empty")
    settings = ls.settings
    ls.require_model()
    size = len(encode(ls.host.engine.tokenizer, code))
    if size > settings.max_edit_tokens:
        raise BadRequest(f"fastcoder.editSelection: the selection is {size:,} tokens, over maxEditTokens "
                         f"({settings.max_edit_tokens:,}); select less")  # fmt: skip
    try:
        wedit = await generate_replacement(
            ls, doc, start, end, kind="edit", nothing="the model proposed no edit",
            produce=lambda engine, loaded, cancel, between: edit.run_edit(
                engine, tokenizable(code), tokenizable(instruction), doc.language_id, config=settings.engine,
                sources=ls.index.sources() if ls.index is not None else None, cancel=cancel, on_step=between,
            ),
        )  # fmt: skip
    except FastCoderError as exc:
        raise BadRequest(f"fastcoder.editSelection: {exc}") from exc
    applied = False
    try:
        result = await asyncio.wait_for(ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=wedit, label="FastCoder: edit selection")), CLIENT_ANSWER_S)
        applied = bool(getattr(result, "applied", False))
    except Exception as exc:  # a client without workspace/applyEdit (or no answer): it still gets the edit
        log.info("workspace/applyEdit failed: %s", exc or type(exc).__name__)
    return {"edit": ls.protocol._converter.unstructure(wedit), "applied": applied}
