"""A raw LSP client over the server's real stdio, for the soak benchmark and for tests
that send what a well-behaved client library would refuse to: malformed JSON,
wrong-type params, unknown methods, nested objects that look like messages.

Every message the server writes is read by a thread and kept with its arrival time;
requests the server sends (``workspace/applyEdit``, ``window/workDoneProgress/create``)
are answered at once with an empty result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


def server_command(model: str | Path, dtype: str = "float32", device: str = "cpu") -> list[str]:
    """``fastcoder serve`` with this interpreter (the checkout on PYTHONPATH)."""
    return [sys.executable, "-m", "fastcoder_cli", "serve", "--model", str(model), "--dtype", dtype, "--device", device]


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class StdioClient:
    """One server process; ``request`` returns the id, ``wait`` its answer."""

    def __init__(self, command: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")
        full_env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **(env or {}))
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=full_env)
        self._lock = threading.Condition()
        self._write_lock = threading.Lock()
        self.answers: dict[Any, list[tuple[float, dict[str, Any]]]] = {}
        self.notifications: list[tuple[float, dict[str, Any]]] = []
        self.sent: dict[Any, tuple[float, str]] = {}  # id -> (time sent, method)
        self.unparsable: list[bytes] = []
        self.closed = False
        self._next = 0
        self._reader = threading.Thread(target=self._read, name="lsp-stdio-reader", daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ reading
    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            while True:
                length = None
                while True:
                    line = out.readline()
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    name, _, value = line.decode("ascii", "replace").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = out.read(length or 0)
                now = time.monotonic()
                try:
                    msg = json.loads(body)
                except ValueError:
                    with self._lock:
                        self.unparsable.append(body)
                    continue
                self._dispatch(now, msg)
        finally:
            with self._lock:
                self.closed = True
                self._lock.notify_all()

    def _dispatch(self, now: float, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" in msg:  # a request from the server
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            with self._lock:
                self.notifications.append((now, msg))
            return
        with self._lock:
            if "method" in msg:
                self.notifications.append((now, msg))
            else:
                self.answers.setdefault(msg.get("id"), []).append((now, msg))
            self._lock.notify_all()

    # ------------------------------------------------------------------ writing
    def send_bytes(self, data: bytes) -> None:
        with self._write_lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_bytes(frame(json.dumps(message).encode("utf-8")))

    def new_id(self) -> int:
        self._next += 1
        return self._next

    def request(self, method: str, params: Any = None, msg_id: Any = None, **extra: Any) -> Any:
        msg_id = self.new_id() if msg_id is None else msg_id
        msg = {"jsonrpc": "2.0", "id": msg_id, "method": method, **extra}
        if params is not None:
            msg["params"] = params
        with self._lock:
            self.sent[msg_id] = (time.monotonic(), method)
        self.send(msg)
        return msg_id

    def notify(self, method: str, params: Any = None) -> None:
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def wait(self, msg_id: Any, timeout: float = 60.0) -> dict[str, Any]:
        """The (first) answer to ``msg_id``; AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self.answers.get(msg_id):
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise AssertionError(f"no answer to request {msg_id} ({self.sent.get(msg_id)}) in {timeout} s")
                self._lock.wait(min(left, 0.5))
            return self.answers[msg_id][0][1]

    def call(self, method: str, params: Any = None, timeout: float = 60.0) -> dict[str, Any]:
        return self.wait(self.request(method, params), timeout)

    def command(self, name: str, *args: Any, timeout: float = 60.0) -> dict[str, Any]:
        return self.call("workspace/executeCommand", {"command": name, "arguments": list(args)}, timeout)

    # ------------------------------------------------------------------ lifecycle
    def initialize(self, root: Path, options: dict[str, Any], timeout: float = 60.0,
                   capabilities: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        answer = self.call(
            "initialize",
            {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": capabilities or {},
             "workspaceFolders": [{"uri": root.as_uri(), "name": "ws"}], "initializationOptions": options},
            timeout,
        )  # fmt: skip
        self.notify("initialized", {})
        return answer

    def wait_status(self, state: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                states = [m["params"].get("state") for _, m in self.notifications if m.get("method") == "fastcoder/status"]
            if "error" in states:
                raise AssertionError(f"server reported an error: {self.statuses()}")
            if states and states[-1] == state:
                return
            time.sleep(0.05)
        raise AssertionError(f"server not {state} after {timeout} s: {self.statuses()}")

    def statuses(self) -> list[dict[str, Any]]:
        with self._lock:
            return [m["params"] for _, m in self.notifications if m.get("method") == "fastcoder/status"]

    def shutdown(self, timeout: float = 60.0) -> int:
        """shutdown + exit; the server's exit code."""
        answer = self.call("shutdown", None, timeout)
        assert "error" not in answer, answer
        self.notify("exit")
        try:
            return self.proc.wait(timeout)
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()

    def log_text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text("utf-8", "replace")
