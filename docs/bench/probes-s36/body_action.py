"""Thirty-sixth session: the "Generate function body" code action at real stubs, through the
real server over stdio (qwen2.5-coder-0.5b, dtype auto): Python stubs (a docstring, ``pass``,
``...``, ``raise NotImplementedError``, a method, a one-line ``def f(): pass``) and brace
languages (JavaScript, Go, TypeScript, C). Each: the stub and the document after the edit is
applied (the lines the edit wrote)::

    python docs/bench/probes-s36/body_action.py
"""
import json
import tempfile
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

CASES = [
    ("doc.py", "python", 'import math\n\n\ndef hypot(a, b):\n    """The hypotenuse of a right triangle with legs a and b."""\n\n\nprint(hypot(3, 4))\n', 3),
    ("pass.py", "python", "def is_palindrome(s: str) -> bool:\n    pass\n", 0),
    ("ellipsis.py", "python", "from dataclasses import dataclass\n\n\n@dataclass\nclass Account:\n    balance: float = 0.0\n\n    def deposit(self, amount: float) -> None:\n        ...\n\n    def withdraw(self, amount: float) -> None:\n        if amount > self.balance:\n            raise ValueError(\"insufficient funds\")\n        self.balance -= amount\n", 7),
    ("raise.py", "python", "def parse_duration(text: str) -> int:\n    \"\"\"Seconds in a duration like '1h30m' or '45s'.\"\"\"\n    raise NotImplementedError\n", 0),
    ("oneline.py", "python", "def square(x): pass\n", 0),
    ("util.js", "javascript", "function capitalize(word) {\n}\n\nmodule.exports = { capitalize };\n", 0),
    ("max.go", "go", "package main\n\nfunc maxOf(xs []int) int {\n}\n", 2),
    ("range.ts", "typescript", "export function range(start: number, end: number): number[] {\n}\n", 0),
    ("fact.c", "c", "int factorial(int n) {\n}\n", 0),
    ("async.py", "python", "import asyncio\n\n\nasync def fetch_all(urls, fetch):\n    \"\"\"Fetch every url concurrently; results in order.\"\"\"\n", 3),
    ("prop.py", "python", "class Rect:\n    def __init__(self, w, h):\n        self.w, self.h = w, h\n\n    @property\n    def area(self):\n        ...\n", 5),
    ("tabs.py", "python", "class Queue:\n\tdef __init__(self):\n\t\tself.items = []\n\n\tdef push(self, x):\n\t\tpass\n", 4),
    ("broken.py", "python", "def slugify(title):\n    pass\n\n\ndef main(\n", 0),
    ("crlf.py", "python", "def reverse_words(s):\r\n    pass\r\n", 0),
]

ws = Path(tempfile.mkdtemp(prefix="fastcoder-body-")) / "project"
ws.mkdir()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws.parent / "server.log")
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False})
cl.wait_status("ready", 300)
for name, lang, text, line in CASES:
    uri = (ws / name).as_uri()
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": lang, "version": 1, "text": text}})
    rng = {"start": {"line": line, "character": 4}, "end": {"line": line, "character": 4}}
    acts = cl.call("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": rng, "context": {"diagnostics": []}})
    actions = acts.get("result") or []
    print(f"== {name} (line {line + 1}): {len(actions)} action(s) {[a.get('title') for a in actions]}")
    if not actions:
        continue
    res = cl.call("codeAction/resolve", actions[0], timeout=300)
    if "error" in res:
        print("   error:", res["error"].get("message"))
        continue
    edit = res["result"].get("edit") or {}
    changes = (edit.get("changes") or {}).get(uri) or [e for dc in edit.get("documentChanges") or [] for e in dc.get("edits", [])]
    lines = text.split("\n")
    for e in sorted(changes, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]), reverse=True):
        s, t = e["range"]["start"], e["range"]["end"]
        head = "\n".join(lines[: s["line"]] + [lines[s["line"]][: s["character"]]])
        tail = lines[t["line"]][t["character"] :] + "\n" + "\n".join(lines[t["line"] + 1 :])
        text2 = head + e["newText"] + tail
        lines = text2.split("\n")
    print("   " + "\n   ".join("\n".join(lines).rstrip("\n").split("\n")))
print("exit", cl.shutdown())
