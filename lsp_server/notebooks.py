"""Notebook cells: a cell is completed as part of its notebook.

With LSP notebook document sync (``notebookDocument/didOpen`` and ``didChange``, what
VS Code sends for Jupyter notebooks), every cell is an open text document of its own
(pygls' workspace keeps them, :class:`lsp_server.documents.OpenDocuments` makes them).
Completed alone, a cell would hide from the model the imports and definitions of the
cells above it. So the model sees the notebook as one script in jupytext's percent
format, the cursor in the cell's place:

    # %%
    import pandas as pd

    # %% [markdown]
    # Load the data

    # %%
    df = pd.read_csv(|            <- the cell being edited

    # %%
    df.describe()

Code cells of the cell's language come as they are, markdown cells as comment lines
(languages whose line comment is ``#`` only); cells of other languages are left out.
The text around the cell goes into the cursor state (:func:`surroundings`), so
everything downstream (the prompt window, the KV cache reuse, remembered answers, the
stop rules) works on it as on a file.

The prompts of a notebook's cells start alike (the cells above): the first request in a
cell takes over the KV cache of a sibling cell that holds more of its prompt
(:meth:`lsp_server.complete.Completer.borrow_cache`, :func:`sibling_cells`), so moving to
the next cell prefills that cell, not the notebook again.
"""

from __future__ import annotations

from urllib.parse import unquote

from lsprotocol import types
from pygls.workspace import Workspace

CELL_MARK = "# %%"
"""jupytext's percent-format cell marker."""

HASH_COMMENT_LANGUAGES = frozenset({"python", "r", "julia", "shellscript", "powershell", "perl", "ruby", "coffeescript"})
"""Cell languages whose line comment is ``#``: their notebooks' markdown cells are shown
to the model as comment lines, the cell markers are comments."""

SYNC = types.NotebookDocumentSyncOptions(notebook_selector=[types.NotebookDocumentFilterWithNotebook(notebook="*")])
"""The server's notebook sync capability: every cell of every notebook type."""


def surroundings(workspace: Workspace, uri: str) -> tuple[str, str]:
    """The text the model sees before and after the open document ``uri``'s own text:
    for a cell of a notebook whose language comments with ``#``, the notebook's other
    cells in the percent format (see the module docstring); ``("", "")`` otherwise."""
    notebook = workspace.get_notebook_document(cell_uri=uri)
    if notebook is None:
        return "", ""
    me = unquote(uri)
    docs = workspace.text_documents
    doc = docs.get(me)
    language = getattr(doc, "language_id", None)
    if doc is None or language not in HASH_COMMENT_LANGUAGES:
        return "", ""
    before: list[str] = []
    after: list[str] = []
    found = False
    for cell in notebook.cells:
        cell_uri = unquote(cell.document)
        if cell_uri == me:
            found = True
            continue
        other = docs.get(cell_uri)
        if other is None:
            continue
        text = _render(cell.kind, getattr(other, "language_id", None), other.source, language)
        if text is not None:
            (after if found else before).append(text)
    if not found:
        return "", ""
    head = "".join(part + "\n\n" for part in before) + CELL_MARK + "\n"
    tail = "".join("\n\n" + part for part in after)
    return head, tail


def sibling_cells(workspace: Workspace, uri: str) -> list[str]:
    """The URIs of the other cells of the notebook holding the cell ``uri`` (as the client
    names them), in order; ``[]`` for a document that is no cell. Safe from another thread
    (pygls replaces the cell list on a change; the old one is read whole)."""
    notebook = workspace.get_notebook_document(cell_uri=uri)
    if notebook is None:
        return []
    me = unquote(uri)
    return [cell.document for cell in list(notebook.cells) if unquote(cell.document) != me]


def _render(kind: types.NotebookCellKind, language: str | None, text: str, notebook_language: str) -> str | None:
    """One other cell as the percent format writes it; None: left out."""
    text = text.rstrip()
    if kind == types.NotebookCellKind.Markup:
        if not text:
            return None
        lines = ("# " + line if line.strip() else "#" for line in text.splitlines())
        return CELL_MARK + " [markdown]\n" + "\n".join(lines)
    if language != notebook_language:
        return None
    return CELL_MARK + "\n" + text
