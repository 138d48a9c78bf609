"""Thirtieth session (second batch): requests a user makes while typing, through the real server over stdio
(qwen2.5-coder-0.5b, dtype auto, default settings but no debounce), to look for answers that are
plainly wrong (as the Angular import in an empty file was, or ``os.path.jo(`` before healing took
back more than one token)::

    python docs/bench/probes-s30/user_flows2.py

Each line: the file, the text around the cursor (``|``), what the editor would show.
"""
import json
import tempfile
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

ws = Path(tempfile.mkdtemp(prefix="fastcoder-user-"))
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws / "server.log")
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False, "earlyAnswerMs": None})
cl.wait_status("ready", 300)

INVENTORY = '''class Inventory:
    """Items and their counts."""

    def __init__(self):
        self.items = {}

    def add(self, name: str, count: int = 1) -> None:
        self.items[name] = self.items.get(name, 0) + count

    def remove(self, name: str) -> None:
        if name in self.it|

    def total(self) -> int:
        return sum(self.items.values())
'''
cases = [
    ("inventory.py", "python", INVENTORY),
    ("middle.py", "python", "def parse(line):\n    key, _, value = line.partition(\"=\")\n    |\n    return key.strip(), value.strip()\n\n\ndef main():\n    pass\n"),
    ("comment_call.py", "python", "import logging\n\nlog = logging.getLogger(__name__)\nlog.info(|)  # startup\n"),
    ("iface.ts", "typescript", "interface User {\n  id: number;\n  name: string;\n  |\n}\n"),
    ("vec.rs", "rust", "fn main() {\n    let v: Vec<i32> = |;\n    println!(\"{:?}\", v);\n}\n"),
    ("ifblock.py", "python", "def sign(x):\n    if x > 0:\n        |\n"),
    ("kwargs.py", "python", "import requests\n\nresp = requests.get(url, time|)\n"),
    ("listcomp.py", "python", "words = [\"a\", \"bb\", \"ccc\"]\nlengths = [len(w) for w in |]\n"),
    ("tabs.go", "go", "package main\n\nfunc add(a int, b int) int {\n\t|\n}\n"),
    ("emptyline.py", "python", "import sys\n\n\ndef main(argv):\n    \"\"\"Print the arguments, one per line.\"\"\"\n|\n"),
]
for name, lang, text in cases:
    cursor = text.index("|")
    text = text.replace("|", "", 1)
    before = text[:cursor]
    line = before.count("\n")
    col = len(before) - (before.rfind("\n") + 1)
    uri = (ws / name).as_uri()
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": lang, "version": 1, "text": text}})
    a = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col},
                                                  "context": {"triggerKind": 1}}, timeout=120)  # fmt: skip
    items = (a.get("result") or {}).get("items") or []
    shown = items[0]["insertText"] if items else None
    around = before[-40:] + "|" + text[cursor : cursor + 20]
    print(f"{name}: {json.dumps(around)}\n    -> {json.dumps(shown)}")
print("exit", cl.shutdown())
