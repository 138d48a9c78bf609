"""Twenty-ninth session: new and untitled documents through the real server over stdio (qwen2.5-coder-0.5b,
default settings, so `fileHeader: auto`): the suggestion at the start of an empty untitled Go and Python
buffer, an empty new .ts file and a build.sh holding `#!`, and the context tokens the header took::

    python docs/bench/probes-s29/new_files_server.py
"""
import json, sys, time
from pathlib import Path
from fastcoder_bench.lsp_client import StdioClient, server_command
import tempfile
ws = Path(tempfile.mkdtemp(prefix="fastcoder-newfiles-"))
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws / "server.log")
cl.initialize(ws, {"debounceMs": 0})
cl.wait_status("ready", 300)
for uri, lang, text in (("untitled:Untitled-1", "go", ""), ("untitled:Untitled-2", "python", ""), ((ws / "new_util.ts").as_uri(), "typescript", ""),
                        ((ws / "build.sh").as_uri(), "shellscript", "#!")):
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": lang, "version": 1, "text": text}})
    a = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": len(text)}, "context": {"triggerKind": 1}}, timeout=120)
    items = (a.get("result") or {}).get("items") or []
    st = cl.command("fastcoder.stats")["result"]["last"]
    print(f"{uri} [{lang}] {text!r} -> {json.dumps(items[0]['insertText'] if items else None)}  (context tokens {st['contextTokens']})")
print("exit", cl.shutdown())
