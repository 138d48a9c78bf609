"""Forty-first session: a first start of the real server with no cost curve cached.

Point ``FASTCODER_CACHE`` at a folder that holds the converted model but no curve (links to
the usual cache's model folders, an empty ``costs``)::

    mkdir -p /tmp/fc-cold/costs /tmp/fc-cold/index
    for d in common converted downloads gguf matmul; do ln -sfn ~/.cache/fastcoder/$d /tmp/fc-cold/$d; done
    rm -f /tmp/fc-cold/costs/*; FASTCODER_CACHE=/tmp/fc-cold python docs/bench/probes-s41/first_start.py

Prints when the server said ``ready``, then every 3 s one completion's answer time and the
cost curve's state (``fastcoder.stats`` -> ``model.costCurve``: units measured of all), and
the curve the server cached (ms per step at 512 and 2,048 cached rows, the CPU share).
"""
import glob
import json
import os
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

ws = Path(tempfile.mkdtemp()) / "p"
ws.mkdir()
(ws / "a.py").write_text("def add(a, b):\n    return a + b\n")
t0 = time.monotonic()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws.parent / "server.log")  # the log outside the workspace
cl.initialize(ws, {})
cl.wait_status("ready", 600)
t1 = time.monotonic()
print(f"ready {t1 - t0:.1f} s")
uri = (ws / "a.py").as_uri()
text = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    "
cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
for i in range(10):
    t = time.monotonic()
    a = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {"line": 5, "character": 4},
                                                  "context": {"triggerKind": 1}}, timeout=300)  # fmt: skip
    items = (a.get("result") or {}).get("items") or []
    st = cl.command("fastcoder.stats")["result"]
    print(f"t+{t - t1:5.1f} s answer in {1000 * (time.monotonic() - t):6.0f} ms {items[0]['insertText'] if items else None!r}"
          f" curve {st['model'].get('costCurve')} ar_until_curve {st.get('outcomes', {}).get('ar_until_curve', 0)}")  # fmt: skip
    time.sleep(3)
print("exit", cl.shutdown())
cache = os.environ.get("FASTCODER_CACHE", os.path.expanduser("~/.cache/fastcoder"))
for f in glob.glob(f"{cache}/costs/qwen2.5-coder-0.5b*.json"):
    d = json.load(open(f))
    print("cached curve ms:", [round(x * 1000) for x in d["seconds"]],
          {k: [round(x * 1000) for x in v] for k, v in d.get("by_length", {}).items()}, "cpu share", d.get("cpu_share"))
