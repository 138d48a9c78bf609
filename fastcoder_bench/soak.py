"""Soak: many requests with random cancels against the real server over stdio; the
server's resident memory (RSS) over time and the request latencies.

Several documents (standard-library files) are open at once. Each step edits one of
them as a user would (types a few characters, deletes some, pastes a block, and every
``--big-every`` steps inserts a 200 KB block and deletes it again), then asks for a
completion or an inline completion at the cursor; some requests are cancelled after a
random short delay, some are superseded by the next keystroke, and now and then a code
action or ``fastcoder.stats`` is asked. At most ``--window`` requests are in flight (an
editor waits for its answers too). Every ``--every`` requests the server's RSS is read
from ``/proc/PID/status``.

What to read: RSS must level off (``slope of the second half`` near 0 MB per 1,000
requests), not creep; p50/p95/max latency per kind (completions answered with a
suggestion or empty, cancelled ones, cheap ones). Absolute times depend on the load
average, printed next to them.

    fastcoder bench soak [--model smollm2-135m] [--requests 10000] [--docs 4] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from fastcoder_bench.lsp_client import StdioClient, server_command
from fastcoder_bench.output import recording

STDLIB_FILES = ("textwrap.py", "shlex.py", "fnmatch.py", "heapq.py", "bisect.py", "glob.py", "queue.py", "sched.py")


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


class Doc:
    def __init__(self, uri: str, text: str) -> None:
        self.uri = uri
        self.text = text  # ASCII/BMP stdlib text: positions are character columns
        self.version = 1
        self.cursor = len(text) // 2

    def position(self, offset: int) -> dict[str, int]:
        line = self.text.count("\n", 0, offset)
        return {"line": line, "character": offset - (self.text.rfind("\n", 0, offset) + 1)}


class Soak:
    def __init__(self, args: argparse.Namespace, client: StdioClient, docs: list[Doc]) -> None:
        self.a = args
        self.c = client
        self.docs = docs
        self.rng = random.Random(args.seed)
        self.pending: dict[Any, tuple[float, str]] = {}  # id -> (sent, kind)
        self.cancel_at: list[tuple[float, Any]] = []
        self.latency: dict[str, list[float]] = {}
        self.outcomes: dict[str, int] = {}
        self.sent = 0
        self.rss: list[tuple[int, float, float]] = []  # (requests, seconds, MB)
        self.kv_mb: list[float] = []  # the server's KV caches at each RSS reading

    # ------------------------------------------------------------------ edits
    def change(self, doc: Doc, start: int, end: int, text: str) -> None:
        a, b = doc.position(start), doc.position(end)
        doc.text = doc.text[:start] + text + doc.text[end:]
        doc.version += 1
        doc.cursor = start + len(text)
        self.c.notify("textDocument/didChange", {"textDocument": {"uri": doc.uri, "version": doc.version},
                                                 "contentChanges": [{"range": {"start": a, "end": b}, "text": text}]})  # fmt: skip

    def edit(self, doc: Doc) -> None:
        r = self.rng
        roll = r.random()
        if roll < 0.6:  # type a few characters
            self.change(doc, doc.cursor, doc.cursor, r.choice(["x", "s", "(", " ", "\n    ", "re", "turn ", "self."]))
        elif roll < 0.8 and doc.cursor > 0:  # delete some
            start = max(0, doc.cursor - r.randint(1, 6))
            self.change(doc, start, doc.cursor, "")
        elif roll < 0.9:  # move elsewhere
            doc.cursor = r.randint(0, len(doc.text))
        else:  # paste a block from another document
            other = r.choice(self.docs).text
            at = r.randint(0, max(0, len(other) - 400))
            self.change(doc, doc.cursor, doc.cursor, other[at : at + r.randint(50, 400)])

    def big_cycle(self, doc: Doc) -> None:
        """Insert a 200 KB block and delete it again (two edits)."""
        block = ("value = compute(value) + 1  # filler line\n" * 5000)[:200_000]
        at = doc.cursor
        self.change(doc, at, at, block)
        self.request(doc, "completion")
        time.sleep(0.4)  # past the index's debounce (0.3 s): it indexes the big version too
        self.collect(block=False)
        self.change(doc, at, at + len(block), "")

    # ------------------------------------------------------------------ requests
    def request(self, doc: Doc, kind: str) -> None:
        pos = doc.position(doc.cursor)
        if kind == "completion":
            method, params = "textDocument/completion", {"textDocument": {"uri": doc.uri}, "position": pos}
        elif kind == "inline":
            method, params = "textDocument/inlineCompletion", {
                "textDocument": {"uri": doc.uri}, "position": pos, "context": {"triggerKind": 2}}  # fmt: skip
        elif kind == "codeAction":
            method, params = "textDocument/codeAction", {
                "textDocument": {"uri": doc.uri}, "range": {"start": pos, "end": pos}, "context": {"diagnostics": []}}  # fmt: skip
        else:
            method, params = "workspace/executeCommand", {"command": "fastcoder.stats"}
        msg_id = self.c.request(method, params)
        self.pending[msg_id] = (time.monotonic(), kind)
        self.sent += 1
        if kind in ("completion", "inline") and self.rng.random() < self.a.cancel_rate:
            self.cancel_at.append((time.monotonic() + self.rng.uniform(0.0, 0.3), msg_id))

    def collect(self, block: bool) -> None:
        """Record answered requests; send due cancels; with ``block``, wait until fewer
        than ``--window`` requests are in flight."""
        while True:
            now = time.monotonic()
            for due, msg_id in [x for x in self.cancel_at if x[0] <= now]:
                self.cancel_at.remove((due, msg_id))
                if msg_id in self.pending:
                    self.c.notify("$/cancelRequest", {"id": msg_id})
            for msg_id in [i for i in self.pending if self.c.answers.get(i)]:
                sent, kind = self.pending.pop(msg_id)
                at, msg = self.c.answers[msg_id][0]
                err = msg.get("error")
                if err is not None and err.get("code") == -32800:
                    outcome = "cancelled"
                elif err is not None:
                    outcome = f"error {err.get('code')}"
                elif kind in ("completion", "inline"):
                    res = msg.get("result") or {}
                    outcome = "suggestion" if res.get("items") else "empty"
                else:
                    outcome = kind
                self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
                key = outcome if outcome in ("cancelled", "suggestion", "empty") else kind
                self.latency.setdefault(key, []).append(at - sent)
            if not block or len(self.pending) < self.a.window:
                return
            if self.c.closed:
                raise RuntimeError("the server exited")
            time.sleep(0.002)

    def mark(self, t0: float, note: str = "") -> None:
        """Read the server's RSS (and its KV caches' size) and print a row."""
        self.rss.append((self.sent, time.monotonic() - t0, rss_mb(self.c.proc.pid)))
        stats = self.c.command("fastcoder.stats", timeout=300).get("result") or {}
        self.kv_mb.append(float((stats.get("server") or {}).get("kvCacheMb", float("nan"))))
        n, sec, mb = self.rss[-1]
        print(f"{n:>9} {sec:>8.1f} {mb:>8.1f} {self.kv_mb[-1]:>7.1f} {len(self.pending):>9}  {os.getloadavg()[0]:.2f}{note}", flush=True)

    def run(self) -> None:
        t0 = time.monotonic()
        print(f"{'requests':>9} {'seconds':>8} {'RSS MB':>8} {'KV MB':>7} {'in flight':>9}  load average")
        self.mark(t0)
        step = 0
        while self.sent < self.a.requests:
            step += 1
            doc = self.rng.choice(self.docs)
            if self.a.big_every and step % self.a.big_every == 0:
                self.big_cycle(doc)
            else:
                # a burst of keystrokes, each followed by a request (as an editor asks
                # again at every keystroke; the server supersedes the older ones)
                for _ in range(self.rng.randint(1, 4)):
                    self.edit(doc)
                    roll = self.rng.random()
                    kind = "completion" if roll < 0.45 else "inline" if roll < 0.9 else "codeAction" if roll < 0.95 else "stats"
                    self.request(doc, kind)
                    self.collect(block=True)
            if self.sent // self.a.every > self.rss[-1][0] // self.a.every:
                self.mark(t0)
        deadline = time.monotonic() + 300
        while self.pending and time.monotonic() < deadline:
            self.collect(block=False)
            time.sleep(0.01)
        self.mark(t0, "  (end)")


def slope_mb_per_1000(points: list[tuple[int, float, float]]) -> float:
    """Least-squares slope of RSS against requests, in MB per 1,000 requests."""
    if len(points) < 2:
        return float("nan")
    xs = [p[0] for p in points]
    ys = [p[2] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fastcoder bench soak", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m", help="model spec (default smollm2-135m)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--requests", type=int, default=10_000, help="requests to send (default 10000)")
    ap.add_argument("--docs", type=int, default=4, help="open documents (default 4, at most 8)")
    ap.add_argument("--cancel-rate", type=float, default=0.2, help="share of completions cancelled (default 0.2)")
    ap.add_argument("--window", type=int, default=6, help="requests in flight at most (default 6)")
    ap.add_argument("--every", type=int, default=500, help="print RSS every N requests (default 500)")
    ap.add_argument("--big-every", type=int, default=200, help="a 200 KB insert + delete every N steps (0: never)")
    ap.add_argument("--max-new-tokens", type=int, default=8)
    ap.add_argument("--max-prompt-tokens", type=int, default=1024)
    ap.add_argument("--kv-cache-mb", type=int, default=None, help="the server's kvCacheMb (default: its default)")
    ap.add_argument("--log", type=Path, default=None, help="keep the server's log in this file")
    ap.add_argument("--common-index", action="store_true", help="also open D_c (built for the model's tokenizer)")
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--out", type=Path, default=None, metavar="DIR", help="write DIR/report.json and DIR/report.md")
    args = ap.parse_args(argv)
    with recording(args.out, "soak", args, argv) as rec:
        rec.results = _run(args)
    return 0


def _run(args: argparse.Namespace) -> dict[str, Any]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    names = [n for n in STDLIB_FILES if (lib / n).exists()][: max(1, min(args.docs, len(STDLIB_FILES)))]
    with tempfile.TemporaryDirectory(prefix="fastcoder-soak-") as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        docs = []
        for n in names:
            text = (lib / n).read_text(encoding="utf-8")
            (root / n).write_text(text)
            docs.append(Doc((root / n).as_uri(), text))
        client = StdioClient(server_command(args.model, args.dtype, args.device), args.log or Path(tmp) / "server.log")
        try:
            opts = {"model": args.model, "dtype": args.dtype, "device": args.device, "maxNewTokens": args.max_new_tokens,
                    "maxPromptTokens": args.max_prompt_tokens,
                    **({"kvCacheMb": args.kv_cache_mb} if args.kv_cache_mb else {}),
                    "commonIndex": bool(args.common_index), "dependencyIndex": False}  # fmt: skip
            t_load = time.monotonic()
            client.initialize(root, opts, timeout=600)
            client.wait_status("ready", timeout=1200)
            load_s = time.monotonic() - t_load
            for d in docs:
                client.notify("textDocument/didOpen", {"textDocument": {"uri": d.uri, "languageId": "python", "version": 1, "text": d.text}})
            client.command("fastcoder.stats")
            print(f"model {args.model} ({args.dtype}, {args.device}) ready in {load_s:.1f} s; {len(docs)} documents: {', '.join(names)}")
            soak = Soak(args, client, docs)
            t0 = time.monotonic()
            soak.run()
            seconds = time.monotonic() - t0
            stats = client.command("fastcoder.stats", timeout=120).get("result", {})
            code = client.shutdown(timeout=120)
        finally:
            client.close()
        log = client.log_text()
    tracebacks = log.count("Traceback")
    rss = [p[2] for p in soak.rss]
    half = [p for p in soak.rss if p[0] >= args.requests // 2]
    print()
    print(f"{args.requests} requests in {seconds:.0f} s; outcomes {dict(sorted(soak.outcomes.items()))}")
    print(f"RSS MB: start {rss[0]:.0f}, max {max(rss):.0f}, end {rss[-1]:.0f}; slope over the whole run "
          f"{slope_mb_per_1000(soak.rss):+.1f} MB / 1000 requests, over the second half {slope_mb_per_1000(half):+.1f}")
    print()
    print(f"{'latency (s)':<14} {'n':>6} {'p50':>7} {'p95':>7} {'max':>7}")
    table = {}
    for key in sorted(soak.latency):
        v = soak.latency[key]
        table[key] = {"n": len(v), "p50": pct(v, 50), "p95": pct(v, 95), "max": max(v)}
        print(f"{key:<14} {len(v):>6} {pct(v, 50):>7.3f} {pct(v, 95):>7.3f} {max(v):>7.3f}")
    every = [x for v in soak.latency.values() for x in v]
    print(f"{'all':<14} {len(every):>6} {pct(every, 50):>7.3f} {pct(every, 95):>7.3f} {max(every):>7.3f}")
    print(f"server exit code {code}; tracebacks in its log: {tracebacks}; load average now {os.getloadavg()}")
    return {
        "model": args.model, "dtype": args.dtype, "requests": soak.sent, "seconds": seconds, "model_load_s": load_s,
        "documents": names, "outcomes": soak.outcomes, "rss_mb": [{"requests": p[0], "seconds": p[1], "rss_mb": p[2]} for p in soak.rss],
        "kv_cache_mb": soak.kv_mb, "rss_start_mb": rss[0], "rss_max_mb": max(rss), "rss_end_mb": rss[-1],
        "rss_slope_mb_per_1000": slope_mb_per_1000(soak.rss), "rss_slope_second_half_mb_per_1000": slope_mb_per_1000(half),
        "latency_s": table, "latency_all_s": {"n": len(every), "p50": pct(every, 50), "p95": pct(every, 95), "max": max(every)},
        "server_exit_code": code, "tracebacks": tracebacks, "server_metrics": stats.get("latency") if isinstance(stats, dict) else None,
    }  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
