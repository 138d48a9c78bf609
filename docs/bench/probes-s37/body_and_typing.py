"""Thirty-seventh session: completions asked while "Generate function body" runs, through the
real server over stdio (qwen2.5-coder-0.5b, dtype auto, default settings but debounce 0, no
prefetch, no warm-at-cursor). For each of 3 stubs: open it and another file (warmed by one
completion first), resolve the body action, and while it runs type 3 pieces in the other file,
0.8 s apart, each followed by an inline completion request; print each completion's wait and when the body arrived::

    python docs/bench/probes-s37/body_and_typing.py
"""
import tempfile
import threading
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

STUBS = [
    ("cli.py", "import argparse\n\n\ndef parse_args(argv=None):\n    \"\"\"Options: --verbose, --output FILE, --jobs N (default 4), --dry-run, and one or more input paths.\"\"\"\n", 3),
    ("inventory.py", "class Inventory:\n    def __init__(self):\n        self.items = {}\n\n    def add(self, name, qty, price):\n        pass\n\n    def remove(self, name, qty):\n        pass\n\n    def report(self):\n        \"\"\"A table of every item: name, quantity, unit price, total value; the grand total last.\"\"\"\n", 10),
    ("csvsum.py", "import csv\nfrom collections import defaultdict\n\n\ndef summarize(path, key, value):\n    \"\"\"Read a CSV file; sum the column `value` per distinct `key`; return the sums sorted, largest first, and write them to path + '.summary.csv'.\"\"\"\n", 4),
]
OTHER = "import os\n\n\ndef list_python_files(root):\n    out = []\n    for dirpath, dirnames, filenames in os.walk(root):\n        for name in filenames:\n            "
TYPED = [  # per stub; unlike what the model suggests, so that it runs
    ["if not", " name.startswith('_')", " and"],
    ["path", " = os.path", ".join(dirpath, name)"],
    ["if name", " in (", "'setup.py'"],
]

ws = Path(tempfile.mkdtemp(prefix="fastcoder-interleave-")) / "project"
ws.mkdir()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws.parent / "server.log")
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False})
cl.wait_status("ready", 300)
other = (ws / "walk.py").as_uri()
version = 1
text = OTHER
cl.notify("textDocument/didOpen", {"textDocument": {"uri": other, "languageId": "python", "version": 1, "text": text}})


def position(t: str) -> dict:
    lines = t.split("\n")
    return {"line": len(lines) - 1, "character": len(lines[-1])}


def complete() -> tuple[float, str]:
    t0 = time.perf_counter()
    res = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": other}, "position": position(text),
                                                    "context": {"triggerKind": 2}}, timeout=120)
    items = (res.get("result") or {}).get("items") or [] if isinstance(res.get("result"), dict) else res.get("result") or []
    return time.perf_counter() - t0, (items[0]["insertText"] if items else "")


print("warm-up completion: %.2f s %r" % complete())
for (name, body_text, line), typed in zip(STUBS, TYPED):
    uri = (ws / name).as_uri()
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": body_text}})
    rng = {"start": {"line": line, "character": 4}, "end": {"line": line, "character": 4}}
    (action,) = cl.call("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": rng, "context": {"diagnostics": []}})["result"]
    done: list[float] = []
    t0 = time.perf_counter()

    def resolve() -> None:
        res = cl.call("codeAction/resolve", action, timeout=300)
        done.append(time.perf_counter() - t0)
        if "error" in res:
            done.append(res["error"].get("message"))
            return
        edit = (res.get("result") or {}).get("edit") or {}
        edits = [e for dc in edit.get("documentChanges") or [] for e in dc["edits"]] + [e for es in (edit.get("changes") or {}).values() for e in es]
        done.append(f'{len(edits[0]["newText"].strip().splitlines())} lines' if edits else "no edit")

    th = threading.Thread(target=resolve)
    th.start()
    time.sleep(0.3)
    waits = []
    for piece in typed:
        version += 1
        cl.notify("textDocument/didChange", {"textDocument": {"uri": other, "version": version},
                                             "contentChanges": [{"range": {"start": position(text), "end": position(text)}, "text": piece}]})
        text += piece
        asked = time.perf_counter() - t0
        wait, got = complete()
        waits.append((asked, wait, got))
        time.sleep(0.8)
    th.join()
    print(f"== {name}: body arrived after {done[0]:.2f} s ({done[1]})")
    for asked, wait, got in waits:
        print(f"   completion asked at {asked:5.2f} s: answered in {wait:5.2f} s  {got[:50]!r}")
    # back to where the other file was, for the next stub
    start = position(OTHER)
    version += 1
    cl.notify("textDocument/didChange", {"textDocument": {"uri": other, "version": version},
                                         "contentChanges": [{"range": {"start": start, "end": position(text)}, "text": ""}]})
    text = OTHER
print("exit", cl.shutdown())
