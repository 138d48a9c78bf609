"""Thirty-seventh session: the first completion in a large open file (over the index's 1 MiB
file limit), through the real server over stdio (qwen2.5-coder-0.5b, dtype auto, default
settings but debounce 0). The file is stdlib modules joined (about 1.4 MB); it is opened, a
completion is asked at its end, then after the index has settled (15 s) a line is typed
there and another one is asked (the model runs again). Prints each request's time and what the
index holds::

    python docs/bench/probes-s37/big_buffer.py
"""
import json
import sysconfig
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

lib = Path(sysconfig.get_paths()["stdlib"])
text = ""
for name in ("typing.py", "argparse.py", "inspect.py", "pathlib.py", "dataclasses.py", "enum.py", "functools.py",
             "subprocess.py", "tarfile.py", "zipfile/__init__.py", "logging/__init__.py", "ssl.py", "socket.py",
             "http/client.py", "email/message.py", "unittest/case.py", "pickle.py", "_pydecimal.py", "datetime.py",
             "configparser.py", "shutil.py", "tempfile.py", "threading.py", "collections/__init__.py"):
    p = lib / name
    if p.exists():
        text += p.read_text(encoding="utf-8") + "\n\n"
    if len(text.encode()) > 1_400_000:
        break
text += "\n\ndef summarize(values):\n    total = 0\n    for value in values:\n        "
ws = Path(tempfile.mkdtemp(prefix="fastcoder-big-")) / "project"
ws.mkdir()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws.parent / "server.log")
cl.initialize(ws, {"debounceMs": 0})
cl.wait_status("ready", 300)
uri = (ws / "big.py").as_uri()
print(f"file: {len(text.encode()) / 1e6:.2f} MB, {text.count(chr(10))} lines")


def position(t: str) -> dict:
    lines = t.split("\n")
    return {"line": len(lines) - 1, "character": len(lines[-1])}


def ask(t: str) -> str:
    t0 = time.perf_counter()
    res = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": position(t),
                                                    "context": {"triggerKind": 1}}, timeout=300)
    items = (res.get("result") or {}).get("items") or []
    return f"{time.perf_counter() - t0:.2f} s {items[0]['insertText'][:40]!r}" if items else f"{time.perf_counter() - t0:.2f} s (none)"


cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
print("first request at the end:", ask(text))
time.sleep(15)
typed = "if value is None:\n            continue\n        "
cl.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                     "contentChanges": [{"range": {"start": position(text), "end": position(text)}, "text": typed}]})
print("15 s later, two lines typed:", ask(text + typed))
index = (cl.command("fastcoder.stats").get("result") or {}).get("index") or {}
print("index:", json.dumps({k: index.get(k) for k in ("state", "D_r")}, default=str)[:400])
print("exit", cl.shutdown())
