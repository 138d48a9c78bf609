"""Open documents and positions in them, with clear errors for bad input."""

from __future__ import annotations

from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.workspace import TextDocument, Workspace


class BadRequest(JsonRpcInvalidParams):
    """The request names something that does not exist (answered as InvalidParams)."""

    def __init__(self, message: str) -> None:
        super().__init__(message=message)


def open_document(workspace: Workspace, uri: str) -> TextDocument:
    """The open document ``uri``; BadRequest when the client never opened it."""
    if not isinstance(uri, str) or not uri:
        raise BadRequest("no document URI given")
    doc = workspace.text_documents.get(unquote(uri))
    if doc is None:
        raise BadRequest(f"unknown document {uri}: it is not open (send textDocument/didOpen first)")
    return doc


def line_text(doc: TextDocument, line: int) -> str:
    lines = doc.lines
    if line >= len(lines):
        return ""
    return lines[line].rstrip("\r\n")


def offset_at(doc: TextDocument, position: types.Position) -> int:
    """Character offset of ``position`` in ``doc.source``; BadRequest when it lies
    outside the document (pygls itself would silently clamp it)."""
    lines = doc.lines
    line, character = position.line, position.character
    if line < 0 or character < 0:
        raise BadRequest(f"position {line}:{character} is negative")
    n = len(lines)
    ends_with_break = n == 0 or lines[-1].endswith(("\n", "\r"))
    if line > n or (line == n and not ends_with_break):
        raise BadRequest(f"position line {line} is outside the document ({n} lines)")
    if line == n:
        if character != 0:
            raise BadRequest(f"position {line}:{character} is past the end of the document")
        return len(doc.source)
    text = lines[line].rstrip("\r\n")
    width = doc.position_codec.client_num_units(text)
    if character > width:
        raise BadRequest(f"position {line}:{character} is past the end of line {line} ({width} characters)")
    return doc.offset_at_position(types.Position(line=line, character=character))


def position_at(doc: TextDocument, offset: int) -> types.Position:
    """Client position of a character offset (the end of the document included)."""
    source = doc.source
    offset = max(0, min(offset, len(source)))
    line = source.count("\n", 0, offset)
    # pygls splits lines with str.splitlines; for the usual \n / \r\n files this agrees
    start = source.rfind("\n", 0, offset) + 1
    col_text = source[start:offset]
    return types.Position(line=line, character=doc.position_codec.client_num_units(col_text))


def range_offsets(doc: TextDocument, rng: types.Range) -> tuple[int, int]:
    start, end = offset_at(doc, rng.start), offset_at(doc, rng.end)
    if end < start:
        raise BadRequest("range end lies before its start")
    return start, end
