"""The first completion in files reopened by a restarted server (forty-ninth session): what
the KV caches kept on disk (`kvDiskMb`) save. Real `fastcoder serve` over stdio, the real
model, a cache folder of its own (an empty store), four files of the bench projects, the
cursor at the end of the line 60% of the way into each (a ~2,000-token prompt):

1. ``cold``: a server with the store on opens the files and asks for a suggestion in each,
   one after the other, right after opening them; its shutdown writes their caches;
2. ``restored``: a second server on the same folder does the same: each document's empty
   session takes its rows at open;
3. ``off``: a third with ``kvDiskMb: 0`` does the same (a cold start again, for a fair
   comparison with 2 under the same conditions).

Per request: the time to the answer (the client's clock), prompt and prefilled tokens, and
whether the answer equals the cold run's.

    python docs/bench/probes-s49/reopen_first_request.py [MAX_NEW_TOKENS]
"""
import os
import statistics as st
import sys
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command
from fastcoder_bench.suite.projects import bench_cache

N = int(sys.argv[1]) if len(sys.argv) > 1 else 16
FILES = ["httpx-0.28.1/httpx/_client.py", "requests-2.32.3/src/requests/cookies.py",
         "click-8.1.8/src/click/utils.py", "markdown-3.8/markdown/util.py"]
cache = Path(tempfile.mkdtemp(prefix="reopen-cache-"))
user_cache = Path(os.environ.get("FASTCODER_CACHE", Path.home() / ".cache" / "fastcoder"))
for src in user_cache.iterdir():  # the model, its cost curve, D_c ... as the user has them; the store empty
    if src.name != "kv":
        (cache / src.name).symlink_to(src)
ws = Path(tempfile.mkdtemp(prefix="reopen-ws-"))
docs = []
for rel in FILES:
    text = (bench_cache() / "src" / rel).read_text()
    path = ws / rel.replace("/", "_")
    path.write_text(text)
    lines = text.split("\n")
    line = int(len(lines) * 0.6)
    docs.append((path.as_uri(), text, {"line": line, "character": len(lines[line])}))


def run(label: str, kv_disk_mb: int) -> list[dict]:
    client = StdioClient(server_command("qwen2.5-coder-0.5b", "auto"), ws.parent / f"{ws.name}-{label}.log",
                         env={"FASTCODER_CACHE": str(cache)})  # fmt: skip
    opts = {"model": "qwen2.5-coder-0.5b", "dtype": "auto", "device": "cpu", "maxNewTokens": N, "debounceMs": 0,
            "prefetch": False, "kvDiskMb": kv_disk_mb, "earlyAnswerMs": None}  # fmt: skip
    out = []
    try:
        client.initialize(ws, opts, timeout=300)
        client.wait_status("ready", timeout=600)
        for uri, text, pos in docs:
            client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
            t0 = time.perf_counter()
            answer = client.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": pos,
                                                                    "context": {"triggerKind": 1}}, timeout=300)  # fmt: skip
            ms = 1000 * (time.perf_counter() - t0)
            res = answer["result"]
            items = res["items"] if isinstance(res, dict) else res
            last = client.command("fastcoder.stats")["result"]["last"]
            out.append({"ms": ms, "text": items[0]["insertText"] if items else "", "prompt": last["promptTokens"],
                        "prefilled": last["prefillTokens"]})  # fmt: skip
            print(f"{label:9s} {Path(uri).name:40s} {ms:7.0f} ms  prompt {last['promptTokens']:5d}  prefilled "
                  f"{last['prefillTokens']:5d}  load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
        disk = client.command("fastcoder.stats")["result"]["server"]["kvDisk"]
        print(f"{label:9s} store: {disk}", flush=True)
    finally:
        client.shutdown()
        client.close()
    return out


cold = run("cold", 512)
restored = run("restored", 512)
off = run("off", 0)
print("--- first request of each file, ms (median over the files)")
for name, rs in (("cold", cold), ("restored", restored), ("off", off)):
    same = sum(r["text"] == c["text"] for r, c in zip(rs, cold))
    print(f"{name:9s} median {st.median(r['ms'] for r in rs):7.0f}  prefilled median {st.median(r['prefilled'] for r in rs):6.0f}"
          f"  same answer as cold {same}/{len(rs)}")  # fmt: skip
ratios = [r["ms"] / o["ms"] for r, o in zip(restored, off)]
print(f"restored / off, per file: {', '.join(f'{x:.3f}' for x in ratios)}; median {st.median(ratios):.3f}")
