"""Thirtieth session: the suggest widget's selected item and a notebook cell through the real server
over stdio (qwen2.5-coder-0.5b, default settings): what the model writes, with and without the new
handling, side by side in one server::

    python docs/bench/probes-s30/editor_flows.py

1. A name half typed with the suggest widget open, another extension's item selected
   (``selectedCompletionInfo``): the answer with the item (over its range), and the plain answer at the
   cursor the server gave before (VS Code hides it unless it starts with the item).
2. A notebook (notebook sync, as VS Code sends a Jupyter notebook): the suggestion in a cell, and the
   same cell opened alone as a file (what a cell amounted to before: no other cells in the prompt).
"""
import json
import tempfile
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

ws = Path(tempfile.mkdtemp(prefix="fastcoder-flows-"))
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws / "server.log")
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False},
              capabilities={"notebookDocument": {"synchronization": {}}})
cl.wait_status("ready", 300)


def inline(uri, line, character, selected=None):
    context = {"triggerKind": 1}
    if selected is not None:
        context["selectedCompletionInfo"] = selected
    answer = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {"line": line, "character": character},
                                                       "context": context}, timeout=120)  # fmt: skip
    items = (answer.get("result") or {}).get("items") or []
    return [(i["insertText"], i["range"]) for i in items]


print("== 1. the suggest widget's selected item")
cases = [
    ("paths.py", "import os\n\n\ndef config_path(home):\n    return os.path.jo", "join"),
    ("words.py", "def shout(text: str) -> str:\n    \"\"\"Return text in capitals.\"\"\"\n    return text.up", "upper"),
    ("sizes.py", "import math\n\n\ndef area(radius):\n    return math.p", "pi"),
]
for name, text, item in cases:
    uri = (ws / name).as_uri()
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
    lines = text.split("\n")
    line, col = len(lines) - 1, len(lines[-1])
    word = len(lines[-1]) - len(lines[-1].rstrip("abcdefghijklmnopqrstuvwxyz_"))
    rng = {"start": {"line": line, "character": col - word}, "end": {"line": line, "character": col}}
    plain = inline(uri, line, col)
    with_item = inline(uri, line, col, {"range": rng, "text": item})
    print(f"{name}: {lines[-1].strip()!r}, item {item!r}")
    print(f"  before (at the cursor; VS Code shows it only if it starts with {item[word:]!r}): {json.dumps(plain[0][0] if plain else None)}")
    print(f"  now (over the item's range): {json.dumps(with_item[0][0] if with_item else None)}")

print("== 2. a notebook cell")
nb = (ws / "analysis.ipynb").as_uri()
cells = [
    (1, "markdown", "# Sales by region\nLoad the CSV and total the sales per region."),
    (2, "python", "import pandas as pd\n\nsales = pd.read_csv(\"sales.csv\")"),
    (2, "python", "totals = sales.groupby("),
    (2, "python", "totals.plot(kind=\"bar\")"),
]
uris = [f"vscode-notebook-cell:{nb[len('file:'):]}#W{i}sZmlsZQ%3D%3D" for i in range(len(cells))]
cl.notify("notebookDocument/didOpen", {
    "notebookDocument": {"uri": nb, "notebookType": "jupyter-notebook", "version": 1,
                         "cells": [{"kind": k, "document": u} for (k, _, _), u in zip(cells, uris)]},
    "cellTextDocuments": [{"uri": u, "languageId": lang, "version": 1, "text": t} for (_, lang, t), u in zip(cells, uris)],
})
in_nb = inline(uris[2], 0, len(cells[2][2]))
alone_uri = (ws / "cell_alone.py").as_uri()
cl.notify("textDocument/didOpen", {"textDocument": {"uri": alone_uri, "languageId": "python", "version": 1, "text": cells[2][2]}})
alone = inline(alone_uri, 0, len(cells[2][2]))
print(f"cell {cells[2][2]!r}")
print(f"  within its notebook: {json.dumps(in_nb[0][0] if in_nb else None)}")
print(f"  the cell alone (before): {json.dumps(alone[0][0] if alone else None)}")
print("exit", cl.shutdown())
