"""Thirty-seventh session: a block answered early in one file runs on for its rest; a completion
asked right then in another file (another tab, the next notebook cell) waited for it? Through
the real server over stdio (qwen2.5-coder-0.5b, dtype auto, default settings but debounce 0, no
prefetch, no warm-at-cursor), three rounds: both documents warmed by a completion first, then
the block in A (answered at its first line) and at once a completion in B::

    python docs/bench/probes-s37/switch_files.py
"""
import tempfile, time, json
from pathlib import Path
from fastcoder_bench.lsp_client import StdioClient, server_command
ws = Path(tempfile.mkdtemp()) / "project"; ws.mkdir()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws.parent / "server.log")
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False})
cl.wait_status("ready", 300)
A = "import csv\n\n\ndef load(path):\n    \"\"\"Rows of a CSV file as dicts, numbers converted to floats.\"\"\"\n    rows = []\n    "
B = "import os\n\n\ndef sizes(root):\n    out = {}\n    for name in os.listdir(root):\n        "
def pos(t):
    l = t.split("\n"); return {"line": len(l) - 1, "character": len(l[-1])}
def ask(uri, t):
    t0 = time.perf_counter()
    r = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": pos(t), "context": {"triggerKind": 2}}, timeout=120)
    items = (r.get("result") or {}).get("items") or []
    return time.perf_counter() - t0, items[0]["insertText"] if items else ""
for k in range(3):
    ua, ub = (ws / f"a{k}.py").as_uri(), (ws / f"b{k}.py").as_uri()
    a, b = A + "\n" * 0 + "" , B + "# %d\n        " % k
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": ua, "languageId": "python", "version": 1, "text": a.replace("rows = []", f"rows = []  # {k}")}})
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": ub, "languageId": "python", "version": 1, "text": b}})
    ask(ua, a.replace("rows = []", f"rows = []  # {k}") + "x")  # warm both documents' caches
    ask(ub, b + "y")
    ta, sa = ask(ua, a.replace("rows = []", f"rows = []  # {k}"))
    tb, sb = ask(ub, b)
    time.sleep(3)
    st = cl.command("fastcoder.stats")
    print(f"A answered in {ta:.2f} s ({sa.count(chr(10)) + 1} lines shown); B asked right after: {tb:.2f} s {sb[:40]!r}")
cl.shutdown()
