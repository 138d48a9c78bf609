"""Back to a document whose KV cache ``kvCacheMb`` evicted (fiftieth session): what the rows
written to disk at eviction save. Real `fastcoder serve` over stdio, the real model, a
cache folder of its own (an empty store), four files of the bench projects open,
``kvCacheMb: 40`` (one 2,000-token document's cache with the 0.5B in bf16: every switch
evicts the last file's), the cursor at the end of the line 60% of the way into each.

Each visit types a character at the cursor and asks for a suggestion (a new state: the
model runs). Cycle 1 visits every file once (cold: the store is empty); cycle 2 visits them
again, each evicted since. Servers with the store on (``kvDiskMb: 512``) and off (0)
alternate, ``ROUNDS`` each. Per visit of cycle 2: time to the answer, tokens prefilled, and
whether the answer equals the other server's for the same state.

    python docs/bench/probes-s50/evicted_return.py [ROUNDS] [MAX_NEW_TOKENS]
"""
import os
import statistics as st
import sys
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command
from fastcoder_bench.suite.projects import bench_cache

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
N = int(sys.argv[2]) if len(sys.argv) > 2 else 16
FILES = ["httpx-0.28.1/httpx/_client.py", "requests-2.32.3/src/requests/cookies.py",
         "click-8.1.8/src/click/utils.py", "markdown-3.8/markdown/util.py"]
user_cache = Path(os.environ.get("FASTCODER_CACHE", Path.home() / ".cache" / "fastcoder"))
ws = Path(tempfile.mkdtemp(prefix="evict-ws-"))
docs = []
for rel in FILES:
    text = (bench_cache() / "src" / rel).read_text()
    path = ws / rel.replace("/", "_")
    path.write_text(text)
    lines = text.split("\n")
    line = int(len(lines) * 0.6)
    docs.append((path.as_uri(), text, line, len(lines[line])))


def run(label: str, kv_disk_mb: int) -> list[dict]:
    cache = Path(tempfile.mkdtemp(prefix="evict-cache-"))
    for src in user_cache.iterdir():  # the model, its cost curve, D_c ... as the user has them; the store empty
        if src.name != "kv":
            (cache / src.name).symlink_to(src)
    client = StdioClient(server_command("qwen2.5-coder-0.5b", "auto"), ws.parent / f"{ws.name}-{label}.log",
                         env={"FASTCODER_CACHE": str(cache)})  # fmt: skip
    opts = {"model": "qwen2.5-coder-0.5b", "dtype": "auto", "device": "cpu", "maxNewTokens": N, "debounceMs": 0,
            "prefetch": False, "kvDiskMb": kv_disk_mb, "kvCacheMb": 40, "earlyAnswerMs": None, "warmOnOpen": False}  # fmt: skip
    out = []
    try:
        client.initialize(ws, opts, timeout=300)
        client.wait_status("ready", timeout=600)
        for uri, text, _line, _col in docs:
            client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
        typed = {uri: 0 for uri, *_ in docs}
        for cycle in (1, 2):
            for uri, _text, line, col in docs:
                at = {"line": line, "character": col + typed[uri]}
                typed[uri] += 1
                client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 1 + typed[uri]},
                                                         "contentChanges": [{"range": {"start": at, "end": at}, "text": "x"}]})  # fmt: skip
                pos = {"line": line, "character": col + typed[uri]}
                time.sleep(0.3)  # the eviction's write, by its own thread, as a user's switch gives it
                t0 = time.perf_counter()
                answer = client.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": pos,
                                                                        "context": {"triggerKind": 1}}, timeout=300)  # fmt: skip
                ms = 1000 * (time.perf_counter() - t0)
                res = answer["result"]
                items = res["items"] if isinstance(res, dict) else res
                stats = client.command("fastcoder.stats")["result"]
                last = stats["last"]
                out.append({"cycle": cycle, "file": Path(uri).name, "ms": ms, "text": items[0]["insertText"] if items else "",
                            "prompt": last["promptTokens"], "prefilled": last["prefillTokens"]})  # fmt: skip
                print(f"{label:9s} cycle {cycle} {Path(uri).name:40s} {ms:7.0f} ms  prompt {last['promptTokens']:5d}  "
                      f"prefilled {last['prefillTokens']:5d}  kv in memory {stats['server'].get('kvCacheMb')} MB  "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
        disk = client.command("fastcoder.stats")["result"]["server"]["kvDisk"]
        print(f"{label:9s} store: {disk}", flush=True)
    finally:
        client.shutdown()
        client.close()
    return out


results: dict[str, list[list[dict]]] = {"on": [], "off": []}
for r in range(ROUNDS):
    for label, mb in ((("on", 512), ("off", 0)) if r % 2 == 0 else (("off", 0), ("on", 512))):
        results[label].append(run(f"{label}-r{r}", mb))
print("--- cycle 2 (each file's cache evicted since its last visit): time to the answer, ms")
for label in ("on", "off"):
    visits = [v for rs in results[label] for v in rs if v["cycle"] == 2]
    print(f"store {label:3s}: median {st.median(v['ms'] for v in visits):7.0f} ms, prefilled median "
          f"{st.median(v['prefilled'] for v in visits):6.0f} of {st.median(v['prompt'] for v in visits):6.0f} tokens (n={len(visits)})")
pairs = [(a, b) for ra, rb in zip(results["on"], results["off"]) for a, b in zip(ra, rb) if a["cycle"] == 2]
print(f"on / off per visit: median {st.median(a['ms'] / b['ms'] for a, b in pairs):.3f} "
      f"({min(a['ms'] / b['ms'] for a, b in pairs):.3f}-{max(a['ms'] / b['ms'] for a, b in pairs):.3f}); "
      f"same answer {sum(a['text'] == b['text'] for a, b in pairs)}/{len(pairs)}")
