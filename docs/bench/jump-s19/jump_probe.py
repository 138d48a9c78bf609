"""Back from the imports: the request after a jump to the top of a long file and back.

Per file (a function of the repo suite's projects deep in a long file): open the file
with the function's body half written, ask at its end (a cold prompt), type the next 4
lines of the body with a request after each, jump to the top and add an import (a
request there), come back (one line further down now), type the next character and ask:
that last request is what this measures (its latency, what it prefilled). Each file runs
through two servers, interleaved (order alternating per file), the same model: OLD, a
checkout of the code before the nineteenth session (one KV cache per document, windows
not remembered), and NEW, this checkout. Real servers over stdio, real model; no
debounce, no cursor notifications (the request comes right after the jump back), no
background suggestions (``prefetch`` off: the model thread is idle between requests, so
each request's counters are its own). The latency is to the answer the user sees (a
block is answered at its first line's end, ``earlyAnswerMs`` 0, as the server does).

    git worktree add /tmp/wt-old 1d2a6ff
    python docs/bench/jump-s19/jump_probe.py /tmp/wt-old 6 [MODEL] [prefetch]

``prefetch``: with the server's background suggestions on (its default): the latency is
then the user's, but a request's counters include the background work that ran while
it waited.
"""
import sys
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command
from fastcoder_bench.replay import load_average, suite_tasks, task_workspace, utf16_pos

OLD, N = Path(sys.argv[1]), int(sys.argv[2])
MODEL = sys.argv[3] if len(sys.argv) > 3 else "qwen2.5-coder-0.5b"
PREFETCH = len(sys.argv) > 4 and sys.argv[4] == "prefetch"
HERE = Path(__file__).resolve().parents[3]


def command(code: Path) -> list[str]:
    """``fastcoder serve`` from the checkout ``code`` (this venv's editable install of the
    current checkout set aside for it)."""
    cmd = server_command(MODEL, "auto", "cpu")
    boot = (f"import sys, runpy; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
            f"sys.path.insert(0, {str(code)!r}); runpy.run_module('fastcoder_cli', run_name='__main__', alter_sys=True)")
    return [cmd[0], "-c", boot, *cmd[3:]]


def run(code: Path, task, ws: Path) -> dict:
    client = StdioClient(command(code), ws / f"server-{code.name}.log")
    try:
        opts = {"model": MODEL, "dtype": "auto", "device": "cpu", "debounceMs": 0, "warmOnOpen": False, "prefetch": PREFETCH,
                "prepareWindow": False}  # fmt: skip (prepareWindow: unknown to OLD, ignored there)
        client.initialize(ws, opts, timeout=900)
        client.wait_status("ready", timeout=900)
        uri = (ws / task.path.name).as_uri()
        lines = task.body.splitlines(keepends=True)
        half = max(1, len(lines) // 2)
        typed = "".join(lines[:half])
        buffer = task.before + typed + task.after
        cursor = len(task.before) + len(typed)
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": buffer}})
        version = 1

        def ask() -> tuple[float, dict]:
            """The request's latency and what the model thread did meanwhile (the server's
            counters before and after: answering and background generations)."""
            line, col = utf16_pos(buffer, cursor)
            before = client.command("fastcoder.stats")["result"]
            t0 = time.monotonic()
            answer = client.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {
                "line": line, "character": col}, "context": {"triggerKind": 2}}, timeout=600)  # fmt: skip
            ms = 1000 * (time.monotonic() - t0)
            items = (answer.get("result") or {}).get("items") or []
            while True:  # an early answer's generation goes on: its counters come when it ends
                after = client.command("fastcoder.stats")["result"]
                if after["model"]["busy"] is None and not after["model"]["queued"]:
                    break
                time.sleep(0.05)
            delta = {k: after[part][name] - before[part][name]
                     for k, part, name in (("generations", "total", "generations"), ("prefill", "total", "prefillTokens"),
                                           ("background", "prefetch", "generations"))}  # fmt: skip
            return ms, {**delta, "prompt": (after["last"] or {}).get("promptTokens"),
                        "text": items[0].get("insertText", "") if items else "", "outcomes": {
                k: v - before["outcomes"].get(k, 0) for k, v in after["outcomes"].items() if v != before["outcomes"].get(k, 0)}}

        def insert(at: int, text: str) -> None:
            nonlocal buffer, version
            line, col = utf16_pos(buffer, at)
            version += 1
            pos = {"line": line, "character": col}
            client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                      "contentChanges": [{"range": {"start": pos, "end": pos}, "text": text}]})  # fmt: skip
            buffer = buffer[:at] + text + buffer[at:]

        cold_ms, cold = ask()
        for line in lines[half : half + 4]:
            insert(cursor, line)
            cursor += len(line)
            ask()
        insert(0, "import os\n")
        cursor += len("import os\n")
        saved, cursor = cursor, len("import os\n")
        top_ms, _ = ask()
        cursor = saved
        rest = task.body[len(typed) + sum(len(x) for x in lines[half : half + 4]) :]
        insert(cursor, rest[:1] or " ")
        cursor += 1
        back_ms, back = ask()
        client.shutdown(timeout=30)
        return {"cold_ms": cold_ms, "cold_prompt": cold["prompt"], "top_ms": top_ms, "back_ms": back_ms,
                "back_prefill": back["prefill"], "back_prompt": back["prompt"], "back_runs": back["generations"],
                "back_outcomes": back["outcomes"], "back_text": back["text"]}  # fmt: skip
    finally:
        client.close()


print(f"model {MODEL}, prefetch {'on' if PREFETCH else 'off'}; load average before: {load_average()}")
rows = []
tasks = suite_tasks(N, None, 300, 4000, 0, 6000)
for i, task in enumerate(tasks):
    order = [("old", OLD), ("new", HERE)] if i % 2 == 0 else [("new", HERE), ("old", OLD)]
    for name, code in order:
        with tempfile.TemporaryDirectory(prefix="fastcoder-jump-") as tmp:
            task_workspace(task, Path(tmp))
            r = run(code, task, Path(tmp))
        rows.append((task.path.name, name, r))
        print(f"{task.path.name:<24} {name}: cold {r['cold_ms']:.0f} ms ({r['cold_prompt']} tokens), top {r['top_ms']:.0f} ms, "
              f"back {r['back_ms']:.0f} ms, prefilled {r['back_prefill']} of {r['back_prompt']} in {r['back_runs']} model runs "
              f"{r['back_outcomes']} {r['back_text'][:40]!r}; load {load_average()}", flush=True)
for name in ("old", "new"):
    back = sorted(r["back_ms"] for _f, n, r in rows if n == name)
    pre = sorted(r["back_prefill"] or 0 for _f, n, r in rows if n == name)
    print(f"{name}: back from the jump, ms: median {back[len(back) // 2]:.0f}, all {[round(x) for x in back]}; "
          f"tokens prefilled: median {pre[len(pre) // 2]}")
