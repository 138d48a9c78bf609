"""Thirty-eighth session: completions asked while the server indexes a large workspace for the
first time, through the real server over stdio (qwen2.5-coder-0.5b, dtype auto, default
settings but debounce 0). The workspace is a copy of the Python standard library's own
modules (no site-packages, no tests: ~580 files, 11 MB) in a new folder, so its index is
built from nothing (the model and the common index come from the user's cache, as on any
later start). A small file is opened at once and a new line is typed in it every 0.7 s
(20 distinct lines; no prefetch, so the model runs), a completion asked after each; each line: the time
since start, the index state, the completion's wall time (the model is ready first: the
index is opened with its tokenizer). Then the same typing in a new file after the index is
ready::

    python docs/bench/probes-s38/typing_while_indexing.py
"""
import json
import os
import shutil
import sysconfig
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

lib = Path(sysconfig.get_paths()["stdlib"])
root = Path(tempfile.mkdtemp(prefix="fastcoder-bigws-"))
ws = root / "project"
ignore = shutil.ignore_patterns("site-packages", "test", "tests", "idlelib", "__pycache__", "*.pyc", "lib2to3", "turtledemo")
shutil.copytree(lib, ws / "stdlib", ignore=ignore, symlinks=True)
files = [p for p in (ws / "stdlib").rglob("*.py")]
print(f"workspace: {len(files)} .py files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB")
doc = "import os\n\n\ndef list_python_files(root):\n    result = []\n    for dirpath, dirnames, filenames in os.walk(root):\n        "
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), root / "server.log")
t_start = time.perf_counter()
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False})  # every request runs the model
while cl.command("fastcoder.stats", None)["result"]["model"]["state"] != "ready":  # not the index: it builds on
    time.sleep(0.1)
print(f"model ready after {time.perf_counter() - t_start:.1f} s")
uri = ""
text, version = doc, 1


def open_fresh(name: str) -> None:
    global uri, text, version
    uri, text, version = (ws / name).as_uri(), doc, 1
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": doc}})


def ask() -> tuple[float, str]:
    line = text.count("\n")
    col = len(text) - text.rfind("\n") - 1
    t0 = time.perf_counter()
    a = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col},
                                                  "context": {"triggerKind": 2}}, timeout=120)  # fmt: skip
    items = (a.get("result") or {}).get("items") or []
    return (time.perf_counter() - t0) * 1000, (items[0]["insertText"] if items else "")


def index_state() -> str:
    info = cl.command("fastcoder.stats", None)["result"]["index"]
    d = info.get("D_r") or {}
    return f"{info.get('state')} files={d.get('files')}"


LINES = ["total = 0", "count = len(filenames)", "names = sorted(filenames)", "skipped = []", "if '.git' in dirnames:",
         "    dirnames.remove('.git')", "for name in names:", "    path = os.path.join(dirpath, name)",
         "    if not name.endswith('.py'):", "        skipped.append(path)", "        continue",
         "    size = os.path.getsize(path)", "    total += size", "    result.append((path, size))",
         "if count == 0:", "    print('empty folder', dirpath)", "depth = dirpath.count(os.sep)",
         "if depth > 10:", "    dirnames.clear()", "largest = max(result, key=lambda r: r[1], default=None)"]


def type_lines(first: int, n: int, label: str) -> list[float]:
    """Types half of a line (then asks), then the rest of it and a line break."""
    global text, version
    out = []
    for i in range(first, first + n):
        whole = LINES[i % len(LINES)]
        indent = " " * (len(whole) - len(whole.lstrip()))
        for piece in (whole[: len(whole) // 2 + 1], whole[len(whole) // 2 + 1 :] + "\n        " + indent):
            line = text.count("\n")
            col = len(text) - text.rfind("\n") - 1
            version += 1
            cl.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [
                {"range": {"start": {"line": line, "character": col}, "end": {"line": line, "character": col}}, "text": piece}]})  # fmt: skip
            text += piece
        text = text[: len(text) - len(indent)]  # the next line's indentation comes with it
        version += 1
        cl.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [
            {"range": {"start": {"line": text.count("\n"), "character": len(text) - text.rfind("\n") - 1},
                       "end": {"line": text.count("\n"), "character": len(text) - text.rfind("\n") - 1 + len(indent)}}, "text": ""}]})  # fmt: skip
        ms, shown = ask()
        out.append(ms)
        print(f"{label} t={time.perf_counter() - t_start:6.1f}s [{index_state()}] {ms:7.0f} ms {json.dumps(shown[:50])}")
        time.sleep(0.7)
    return out


open_fresh("walk.py")
during = type_lines(0, 20, "indexing")
while not index_state().startswith("ready"):
    time.sleep(1)
print(f"index ready after {time.perf_counter() - t_start:.1f} s: {index_state()}")
open_fresh("walk2.py")  # the same typing again, in a new file
after = type_lines(0, 20, "ready   ")
during.sort(), after.sort()
print(f"median while indexing {during[len(during) // 2]:.0f} ms (max {during[-1]:.0f}), after {after[len(after) // 2]:.0f} ms (max {after[-1]:.0f})")
print("exit", cl.shutdown())
