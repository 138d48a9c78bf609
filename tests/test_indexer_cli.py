"""`fastcoder index` and `fastcoder build-common` run as real subprocesses."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


from fastcoder.datastore import TokenDatastore
from test_indexer_support import phrase, write

REPO = Path(__file__).resolve().parents[1]


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(FASTCODER_CACHE=str(cache), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _cli(*args: str, cache: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fastcoder_cli", *args],
        capture_output=True, text=True, env=_env(cache), timeout=timeout, cwd=REPO,
    )


class Lines:
    """Reads a process's stdout lines on a thread; ``expect`` waits with a deadline."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.q: queue.Queue[str | None] = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc) -> None:
        for line in proc.stdout:
            self.q.put(line)
        self.q.put(None)

    def expect(self, pred, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching event within {timeout} s; saw {self.seen}")
            try:
                line = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"the process ended; saw {self.seen}")
            obj = json.loads(line)  # every stdout line is one JSON object
            self.seen.append(obj)
            if pred(obj):
                return obj


def test_watch_events_and_sigint(tmp_path, tiny_model_dir):
    root = tmp_path / "ws"
    write(root / "a.py", f"{phrase('alpha')}\n")
    write(root / "b.py", f"{phrase('bravo')}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastcoder_cli", "index", str(root), "--model", str(tiny_model_dir), "--watch", "--events"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path / "cache"), cwd=REPO,
    )
    try:
        out = Lines(proc)
        ready = out.expect(lambda e: e["event"] == "ready", timeout=120)
        assert ready["files"] == 2 and ready["tokens"] > 0 and ready["seconds"] >= 0
        write(root / "pkg" / "c.py", f"{phrase('charlie')}\n")
        ev = out.expect(lambda e: e["event"] == "indexed" and e["path"] == "pkg/c.py")
        assert ev["tokens"] > 0 and ev["latency_ms"] >= 0
        (root / "a.py").unlink()
        out.expect(lambda e: e["event"] == "removed" and e["path"] == "a.py")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the state at exit was saved: a lookup from a new process sees it
    r = _cli("index", str(root), "--model", str(tiny_model_dir), "--lookup", " ".join(phrase("charlie").split()[:4]),
             cache=tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["match_len"] > 0
    assert res["continuations"][0]["source"] == "D_r"
    assert res["continuations"][0]["text"].startswith(" charliew4")


def test_index_build_update_and_lookup_with_common(tmp_path, tiny_model_dir):
    cache = tmp_path / "cache"
    root = tmp_path / "ws"
    write(root / "a.py", f"{phrase('alpha')}\n")
    r = _cli("index", str(root), "--model", str(tiny_model_dir), "--json", cache=cache)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert (info["mode"], info["files"]) == ("built", 1)
    write(root / "b.py", f"{phrase('bravo')}\n")
    r = _cli("index", str(root), "--model", str(tiny_model_dir), "--json", cache=cache)
    info = json.loads(r.stdout)
    assert (info["mode"], info["files"], info["changed"]) == ("loaded", 2, 1)

    corpus = tmp_path / "corpus"
    write(corpus / "lib.py", "def common_helper(value):\n    return value * 2\n")
    write(corpus / "tests" / "skip.py", "def skipped_test(): pass\n")
    jsonl = tmp_path / "stack.jsonl"
    jsonl.write_text(
        json.dumps({"content": "def from_the_stack(x):\n    return x\n"}) + "\n" + "not json\n" + json.dumps({"other": 1}) + "\n"
    )
    out = tmp_path / "dc.fcds"
    r = _cli("build-common", "--source", str(corpus), "--jsonl", str(jsonl), "--model", str(tiny_model_dir),
             "--out", str(out), "--json", "--no-progress", cache=cache)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["documents"] == 2 and rep["tokens"] > 0 and rep["file_bytes"] == out.stat().st_size
    meta = TokenDatastore.load(out).meta
    assert meta["files"] == 2 and meta["python"] and any("stack.jsonl" in s for s in meta["sources"])

    r = _cli("index", str(root), "--model", str(tiny_model_dir), "--lookup", "def common_helper(value",
             "--common", str(out), cache=cache)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["match_len"] > 0
    assert {c["source"] for c in res["continuations"]} == {"D_c"}
    assert res["continuations"][0]["text"].startswith("):")


def test_cli_errors_are_clear(tmp_path, tiny_model_dir):
    r = _cli("index", str(tmp_path / "missing"), "--model", str(tiny_model_dir), cache=tmp_path / "c")
    assert r.returncode == 1 and "not a directory" in r.stderr and "Traceback" not in r.stderr
    r = _cli("index", str(tmp_path), "--model", str(tmp_path / "no-model"), cache=tmp_path / "c")
    assert r.returncode == 1 and "Traceback" not in r.stderr
