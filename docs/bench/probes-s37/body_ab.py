"""Thirty-seventh session: what completions run inside a function body cost the body, in one
server (qwen2.5-coder-0.5b, dtype auto, debounce 0, no prefetch, no warm-at-cursor), alternating:
the `parse_args` body alone, and with three pieces typed in another file 0.5 s apart, each
followed by a completion (run between the body's steps). Per body: its wall time, the
completions' (as the client timed them), and the body's own time per step without them::

    python docs/bench/probes-s37/body_ab.py
"""
import tempfile, threading, time, json
from pathlib import Path
from fastcoder_bench.lsp_client import StdioClient, server_command
STUB = "import argparse\n\n\ndef parse_args(argv=None):\n    \"\"\"Options: --verbose, --output FILE, --jobs N (default 4), --dry-run, and one or more input paths.\"\"\"\n"
OTHER = "import os\n\n\ndef list_python_files(root):\n    out = []\n    for dirpath, dirnames, filenames in os.walk(root):\n        for name in filenames:\n            "
ws = Path(tempfile.mkdtemp()) / "project"; ws.mkdir()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws.parent / "server.log")
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False})
cl.wait_status("ready", 300)
other = (ws / "walk.py").as_uri(); ver = 1; text = OTHER
cl.notify("textDocument/didOpen", {"textDocument": {"uri": other, "languageId": "python", "version": 1, "text": text}})
def pos(t):
    l = t.split("\n"); return {"line": len(l) - 1, "character": len(l[-1])}
def complete():
    t0 = time.perf_counter()
    cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": other}, "position": pos(text), "context": {"triggerKind": 2}}, timeout=120)
    return time.perf_counter() - t0
complete()
for k, mode in enumerate(["alone", "typing", "alone", "typing", "alone", "typing"]):
    uri = (ws / f"cli{k}.py").as_uri()
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": STUB}})
    rng = {"start": {"line": 3, "character": 4}, "end": {"line": 3, "character": 4}}
    (action,) = cl.call("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": rng, "context": {"diagnostics": []}})["result"]
    t0 = time.perf_counter(); out = {}
    th = threading.Thread(target=lambda: out.update(r=cl.call("codeAction/resolve", action, timeout=300), t=time.perf_counter() - t0)); th.start()
    spent = 0.0
    if mode == "typing":
        for piece in [f" x{k}", " +", " 1"]:
            time.sleep(0.5)
            ver += 1
            cl.notify("textDocument/didChange", {"textDocument": {"uri": other, "version": ver}, "contentChanges": [{"range": {"start": pos(text), "end": pos(text)}, "text": piece}]})
            text += piece
            spent += complete()
    th.join()
    last = (cl.command("fastcoder.stats").get("result") or {}).get("last") or {}
    print(f"{mode:6s} body {out['t']:.2f} s, completions {spent:.2f} s; body stats: steps {last.get('forwardSteps')} tokens {last.get('newTokens')} total {last.get('totalMs', 0)/1000:.2f} s -> per step {(last.get('totalMs', 0)/1000 - spent)/max(1, last.get('forwardSteps') or 1)*1000:.0f} ms ({last.get('kind')})", flush=True)
cl.shutdown()
