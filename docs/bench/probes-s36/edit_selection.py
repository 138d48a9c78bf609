"""Thirty-sixth session: ``fastcoder.editSelection`` on real selections, through the real
server over stdio (qwen2.5-coder-0.5b, dtype auto): a top-level function, a method inside a
class (selected from its line's start, and from its first character), a loop body, one
line. Each: the instruction and the document's lines around the selection after the edit::

    python docs/bench/probes-s36/edit_selection.py
"""
import json
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

DOC = '''import json


def average(values):
    total = 0
    for v in values:
        total += v
    return total / len(values)


class Store:
    def __init__(self, path):
        self.path = path

    def load(self):
        with open(self.path) as fh:
            return json.load(fh)

    def save(self, data):
        with open(self.path, "w") as fh:
            json.dump(data, fh)
'''


def span(first: str, last: str, from_line_start: bool = True) -> tuple[int, int]:
    a = DOC.index(first)
    if from_line_start:
        a = DOC.rfind("\n", 0, a) + 1
    b = DOC.index(last, a) + len(last)
    return a, b


CASES = [
    ("average, whole lines", span("def average", "len(values)"), "handle an empty list by returning 0.0"),
    ("average, whole lines", span("def average", "len(values)"), "add type hints"),
    ("load, from the line start", span("def load", "json.load(fh)"), "return an empty dict when the file does not exist"),
    ("save, from its first character", span("def save", "json.dump(data, fh)", False), "write the JSON with indent=2"),
    ("loop body line", span("total += v", "total += v", False), "skip None values"),
]

ws = Path(tempfile.mkdtemp(prefix="fastcoder-edit-")) / "project"
ws.mkdir()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws.parent / "server.log")
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False})
cl.wait_status("ready", 300)


def pos(text: str, offset: int) -> dict:
    before = text[:offset]
    return {"line": before.count("\n"), "character": len(before[before.rfind("\n") + 1 :].encode("utf-16-le")) // 2}


for i, (label, (a, b), instruction) in enumerate(CASES):
    uri = (ws / f"store{i}.py").as_uri()
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": DOC}})
    t0 = time.perf_counter()
    res = cl.command("fastcoder.editSelection", {"uri": uri, "range": {"start": pos(DOC, a), "end": pos(DOC, b)},
                                                 "instruction": instruction}, timeout=600)
    ms = (time.perf_counter() - t0) * 1000
    print(f"== {label}: {instruction!r} ({ms:.0f} ms)")
    if "error" in res:
        print("   error:", res["error"].get("message"))
        continue
    edit = res["result"]["edit"]
    edits = (edit.get("changes") or {}).get(uri) or [e for dc in edit.get("documentChanges") or [] for e in dc.get("edits", [])]
    (e,) = edits
    lines = DOC.split("\n")
    s, t = e["range"]["start"], e["range"]["end"]
    new = "\n".join(lines[: s["line"]] + [lines[s["line"]][: s["character"]]]) + e["newText"] + lines[t["line"]][t["character"] :] + "\n" + "\n".join(lines[t["line"] + 1 :])
    first = max(0, s["line"] - 1)
    shown = new.split("\n")[first : first + e["newText"].count("\n") + 4]
    print("   " + "\n   ".join(shown))
print("exit", cl.shutdown())
