"""Thirtieth session: moving down a notebook cell by cell, through two real servers over stdio
(qwen2.5-coder-0.5b, dtype auto): OLD_TREE (a checkout whose cells each prefill the notebook
again) and the working tree (a cell takes over the KV cache of the sibling holding most of its
prompt). The notebook: a real file of a pinned project cut into cells at its top-level blank
lines; the user asks at the end of cells 3, 4, 5, ... in turn (a new cell each time)::

    python docs/bench/probes-s30/notebook_cells.py OLD_TREE [CELLS]

Prints per request: the time to the answer and the tokens prefilled, for both servers.
"""
import os
import sys
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command
from fastcoder_bench.suite.projects import fetch_project, load_projects

OLD = Path(sys.argv[1]).resolve()
N = int(sys.argv[2]) if len(sys.argv) > 2 else 8
pinned, _ = load_projects(None)
root = Path(fetch_project([p for p in pinned if p.name == "requests"][0]))
text = (root / "src/requests/structures.py").read_text()
cells, cur = [], []
for line in text.split("\n"):
    if not line.strip() and cur and len("\n".join(cur)) > 200:
        cells.append("\n".join(cur).strip("\n"))
        cur = []
    else:
        cur.append(line)
if cur:
    cells.append("\n".join(cur).strip("\n"))
cells = [c for c in cells if c.strip()][: N + 3]

ws = Path(tempfile.mkdtemp(prefix="fastcoder-nb-"))
os.chdir(ws)  # the servers run `python -m`: the current folder would come before PYTHONPATH
opts = {"debounceMs": 0, "prefetch": False, "warmAtCursor": False, "earlyAnswerMs": None, "maxNewTokens": 16}
servers = {}
for name, tree in (("old", OLD), ("new", Path(__file__).resolve().parents[3])):
    cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws / f"{name}.log", env={"PYTHONPATH": str(tree)})
    cl.initialize(ws, opts, capabilities={"notebookDocument": {"synchronization": {}}})
    servers[name] = cl
for cl in servers.values():
    cl.wait_status("ready", 600)
for name, cl in servers.items():
    nb = (ws / f"{name}.ipynb").as_uri()
    uris = [f"vscode-notebook-cell:{nb[len('file:'):]}#W{i}" for i in range(len(cells))]
    cl.notify("notebookDocument/didOpen", {
        "notebookDocument": {"uri": nb, "notebookType": "jupyter-notebook", "version": 1,
                             "cells": [{"kind": 2, "document": u} for u in uris]},
        "cellTextDocuments": [{"uri": u, "languageId": "python", "version": 1, "text": t} for t, u in zip(cells, uris)],
    })
    servers[name] = (cl, uris)
print(f"{len(cells)} cells of requests/structures.py; a request at the end of cells 3..{len(cells) - 1}, old and new in turn")
rows = []
for i in range(3, len(cells)):
    line = cells[i].count("\n")
    col = len(cells[i].split("\n")[-1])
    got = {}
    for name in (("old", "new") if i % 2 else ("new", "old")):
        cl, uris = servers[name]
        t0 = time.perf_counter()
        cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uris[i]}, "position": {"line": line, "character": col},
                                                  "context": {"triggerKind": 1}}, timeout=300)  # fmt: skip
        ms = 1000 * (time.perf_counter() - t0)
        last = cl.command("fastcoder.stats")["result"]["last"]
        got[name] = (ms, last["prefillTokens"], last["promptTokens"])
    rows.append(got)
    print(f"cell {i}: old {got['old'][0]:6.0f} ms, {got['old'][1]:5d} of {got['old'][2]} tokens prefilled | "
          f"new {got['new'][0]:6.0f} ms, {got['new'][1]:5d} of {got['new'][2]} tokens prefilled")
for name in ("old", "new"):
    ms = sorted(r[name][0] for r in rows)
    pre = sorted(r[name][1] for r in rows)
    print(f"{name}: median {ms[len(ms) // 2]:.0f} ms, {pre[len(pre) // 2]} tokens prefilled")
for cl, _ in servers.values():
    cl.shutdown()
