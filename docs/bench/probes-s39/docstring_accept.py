"""Thirty-ninth session: a docstring started between auto-closed triple quotes, with the
server's default settings (early answers at the first line's end, prefetch on; no debounce),
through the real server over stdio (qwen2.5-coder-0.5b, dtype auto): the suggestion, then the
user accepts it (Tab) and the next suggestion there, twice. Each step: the time to the answer
and what the editor shows::

    python docs/bench/probes-s39/docstring_accept.py
"""
import json
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

DOCS = [
    "def parse_duration(text: str) -> int:\n    \"\"\"|\"\"\"\n    total = 0\n    for part in text.split():\n"
    "        total += int(part[:-1]) * {'h': 3600, 'm': 60, 's': 1}[part[-1]]\n    return total\n",
    "class RateLimiter:\n    \"\"\"|\"\"\"\n\n    def __init__(self, rate: float, burst: int):\n        self.rate = rate\n"
    "        self.burst = burst\n",
    "def is_palindrome(s: str) -> bool:\n    \"\"\"|\"\"\"\n    s = ''.join(c.lower() for c in s if c.isalnum())\n"
    "    return s == s[::-1]\n",
]

ws = Path(tempfile.mkdtemp(prefix="fastcoder-docacc-")) / "project"
ws.mkdir()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws.parent / "server.log")
cl.initialize(ws, {"debounceMs": 0})
cl.wait_status("ready", 300)
for n, doc in enumerate(DOCS):
    cursor = doc.index("|")
    text = doc.replace("|", "", 1)
    uri = (ws / f"doc{n}.py").as_uri()
    version = 1
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
    print(f"== doc{n}.py")
    for step in range(3):
        before = text[:cursor]
        line = before.count("\n")
        col = len(before[before.rfind("\n") + 1 :])
        t0 = time.perf_counter()
        a = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col},
                                                      "context": {"triggerKind": 2}}, timeout=120)  # fmt: skip
        ms = (time.perf_counter() - t0) * 1000
        items = (a.get("result") or {}).get("items") or []
        shown = items[0]["insertText"] if items else None
        print(f"  step {step}: {ms:.0f} ms -> {json.dumps(shown)}")
        if not shown:
            break
        # Tab: the editor inserts the suggestion at the cursor
        version += 1
        cl.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [
            {"range": {"start": {"line": line, "character": col}, "end": {"line": line, "character": col}}, "text": shown}]})
        text = before + shown + text[cursor:]
        cursor += len(shown)
        time.sleep(0.3)  # the user reads it
    print("  document:\n    " + "\n    ".join(text.split("\n")[:12]))
print("exit", cl.shutdown())
