"""Thirty-sixth session: what a typo and its correction cost, through the real server over
stdio (qwen2.5-coder-0.5b, dtype auto, default settings but no debounce and no prefetch, so
every keystroke's request runs the model). A real file of this repository is opened with the
cursor inside a function; then keys are typed one by one, a request after each: characters,
a wrong character and its Backspace, a word deleted at once (Ctrl+Backspace), a line
deleted. Each line: the key, the request's wall time, what the editor would show::

    python docs/bench/probes-s36/typo.py [FILE] [LINE]
"""
import json
import sys
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

src = Path(sys.argv[1] if len(sys.argv) > 1 else "lsp_server/recall.py")
line_no = int(sys.argv[2]) if len(sys.argv) > 2 else 60
lines = src.read_text().split("\n")
# the cursor: a new line after line_no, at that line's indentation
indent = lines[line_no - 1][: len(lines[line_no - 1]) - len(lines[line_no - 1].lstrip())]
text = "\n".join(lines[:line_no]) + "\n" + indent + "\n" + "\n".join(lines[line_no:])
cursor = len("\n".join(lines[:line_no])) + 1 + len(indent)

ws = Path(tempfile.mkdtemp(prefix="fastcoder-typo-")) / "project"
ws.mkdir()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws.parent / "server.log")
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False})
cl.wait_status("ready", 300)
uri = (ws / src.name).as_uri()
version = 1
cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})


def pos(offset: int) -> dict:
    before = text[:offset]
    return {"line": before.count("\n"), "character": len(before[before.rfind("\n") + 1 :].encode("utf-16-le")) // 2}


def edit(start: int, end: int, new: str) -> None:
    global text, version, cursor
    version += 1
    cl.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                         "contentChanges": [{"range": {"start": pos(start), "end": pos(end)}, "text": new}]})
    text = text[:start] + new + text[end:]
    cursor = start + len(new)


def ask(label: str) -> None:
    t0 = time.perf_counter()
    a = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": pos(cursor),
                                                  "context": {"triggerKind": 2}}, timeout=120)
    ms = (time.perf_counter() - t0) * 1000
    items = (a.get("result") or {}).get("items") or []
    shown = items[0]["insertText"] if items else None
    line = text[text.rfind("\n", 0, cursor) + 1 : cursor]
    print(f"{label:<18} {ms:7.0f} ms  {json.dumps(line + '|')[:40]:<40} -> {json.dumps(shown)[:70]}", flush=True)


ask("opened")
ask("again")
for c in "result = se":
    edit(cursor, cursor, c)
    ask(f"type {c!r}")
edit(cursor, cursor, "k")
ask("typo 'k'")
edit(cursor - 1, cursor, "")
ask("Backspace")
for c in "lf.":
    edit(cursor, cursor, c)
    ask(f"type {c!r}")
word = len("self.")
edit(cursor - word, cursor, "")
ask("Ctrl+Backspace")
for c in "None":
    edit(cursor, cursor, c)
    ask(f"type {c!r}")
start = text.rfind("\n", 0, cursor)
edit(start, cursor, "")
ask("line deleted")
edit(cursor, cursor, "\n" + indent)
ask("Enter")
print("exit", cl.shutdown())
