"""Thirty-eighth session: ``fastcoder.editSelection`` where the answer is much longer than
the selection (docstrings and comments for several short functions), through the real server
over stdio (qwen2.5-coder-0.5b, dtype auto). An edit that runs to its token cap (2 x the
selection's tokens + 64) is a cut piece: applied, it deleted the selection's end. Each line:
the instruction, how the request ended, and for an applied edit which of the selection's
functions survive it::

    python docs/bench/probes-s38/edit_long.py
"""
import re
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

DOC = '''def add(a, b): return a + b
def sub(a, b): return a - b
def mul(a, b): return a * b
def div(a, b): return a / b
def neg(a): return -a
def sq(a): return a * a
'''
NAMES = re.findall(r"def (\w+)", DOC)
CASES = [
    "add a Google-style docstring with Args and Returns to every function",
    "put each function on three lines, with a docstring and type hints",
    "add a comment line above every function explaining it",
    "add type hints",
]

ws = Path(tempfile.mkdtemp(prefix="fastcoder-edit-")) / "project"
ws.mkdir()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws.parent / "server.log")
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False})
cl.wait_status("ready", 300)
end = {"line": DOC.count("\n"), "character": 0}
for i, instruction in enumerate(CASES):
    uri = (ws / f"ops{i}.py").as_uri()
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": DOC}})
    t0 = time.perf_counter()
    res = cl.command("fastcoder.editSelection", {"uri": uri, "range": {"start": {"line": 0, "character": 0}, "end": end},
                                                 "instruction": instruction}, timeout=600)
    ms = (time.perf_counter() - t0) * 1000
    if "error" in res:
        print(f"== {instruction!r} ({ms:.0f} ms): error: {res['error'].get('message')}")
        continue
    edit = res["result"]["edit"]
    (e,) = (edit.get("changes") or {}).get(uri) or [x for dc in edit.get("documentChanges") or [] for x in dc.get("edits", [])]
    kept = [n for n in NAMES if f"def {n}(" in e["newText"]]
    print(f"== {instruction!r} ({ms:.0f} ms): applied, {e['newText'].count(chr(10)) + 1} lines, "
          f"functions kept {len(kept)}/{len(NAMES)}" + ("" if len(kept) == len(NAMES) else f" (lost: {sorted(set(NAMES) - set(kept))})"))
print("exit", cl.shutdown())
