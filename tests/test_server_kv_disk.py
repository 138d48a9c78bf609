"""Documents' KV caches kept between server runs, end to end over the real server's stdio:
a server writes its open documents' caches at shutdown (and a closed document's when it
closes); the next server, on the same cache folder, gives a reopened document its rows,
so the first completion there prefills only what it cannot reuse, and answers what the
first server answered. ``kvDiskMb: 0`` turns it off."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fastcoder_bench.lsp_client import StdioClient, server_command

TEXT = "".join(f"def function_{i}(a, b):\n    total = a + b * {i}\n    return total\n\n" for i in range(12)) + "def last(x):\n    "


def _start(model_dir: Path, ws: Path, log: str, **extra) -> StdioClient:
    client = StdioClient(server_command(model_dir), ws.parent / log)
    opts = {"model": str(model_dir), "dtype": "float32", "device": "cpu", "maxNewTokens": 6, "timeBudgetMs": 0,
            "earlyAnswerMs": None, "warmOnOpen": False, "warmAtCursor": False, "prefetch": False, "debounceMs": 0,
            "commonIndex": False, "workspaceIndex": False, "dependencyIndex": False, **extra}  # fmt: skip
    client.initialize(ws, opts)
    client.wait_status("ready")
    return client


def _stats(client: StdioClient) -> dict:
    return client.command("fastcoder.stats")["result"]


def _complete(client: StdioClient, uri: str) -> tuple[str, dict]:
    lines = TEXT.split("\n")
    pos = {"line": len(lines) - 1, "character": len(lines[-1])}
    answer = client.call("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": pos, "context": {"triggerKind": 1}})  # fmt: skip
    items = answer["result"]["items"] if isinstance(answer["result"], dict) else answer["result"]
    return (items[0]["insertText"] if items else ""), _stats(client)["last"]


def _open(client: StdioClient, uri: str) -> None:
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": TEXT}})


def _wait(predicate, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _entries() -> list[Path]:
    return sorted((Path(os.environ["FASTCODER_CACHE"]) / "kv").glob("*/*.kv"))


@pytest.mark.parametrize("warm", [False, True], ids=["no-warm", "warm-on-open"])
def test_a_reopened_document_prefills_only_what_it_cannot_reuse(tiny_model_dir, tmp_path: Path, warm: bool):
    ws = tmp_path / "ws"
    ws.mkdir()
    uri = (ws / "mod.py").as_uri()
    (ws / "mod.py").write_text(TEXT)
    before = set(_entries())
    first = _start(tiny_model_dir, ws, "kv-first.log", warmOnOpen=warm)
    try:
        _open(first, uri)
        if warm:
            _wait(lambda: _stats(first)["outcomes"].get("warmed") == 1)
            warmed_a = _stats(first)["warm"]["prefillTokens"]
            assert warmed_a > 50
        text_a, last_a = _complete(first, uri)
        assert _stats(first)["server"]["kvDisk"]["state"] == "on"
    finally:
        assert first.shutdown() == 0
    new = set(_entries()) - before
    assert len(new) == 1  # the open document's cache, written at shutdown
    assert last_a["promptTokens"] > 50
    if not warm:
        assert last_a["prefillTokens"] == last_a["promptTokens"]  # the first run prefilled it all

    second = _start(tiny_model_dir, ws, "kv-second.log", warmOnOpen=warm)
    try:
        _open(second, uri)
        _wait(lambda: _stats(second)["server"]["kvDisk"].get("restored") == 1)
        disk = _stats(second)["server"]["kvDisk"]
        assert disk["restored_tokens"] >= last_a["promptTokens"]
        if warm:  # the warm-up found the document's start held already: it prefilled the last line's few tokens
            _wait(lambda: _stats(second)["outcomes"].get("warmed") == 1)
            assert _stats(second)["warm"]["prefillTokens"] <= 4 < warmed_a
        text_b, last_b = _complete(second, uri)
        assert last_b["promptTokens"] == last_a["promptTokens"]
        # the rows came from disk (after a warm-up, the prompt's few tokens past the
        # document's last line start, as in the first run)
        assert last_b["prefillTokens"] <= (last_a["prefillTokens"] if warm else 2) <= 4
        assert text_b == text_a  # and the answer is the first run's
        # a closed document's cache is written when it closes (replacing the entry)
        mtime = next(iter(new)).stat().st_mtime_ns
        second.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        _wait(lambda: next(iter(new)).stat().st_mtime_ns != mtime)
    finally:
        assert second.shutdown() == 0
        assert "Traceback" not in second.log_text(), second.log_text()[-3000:]


def test_kv_disk_off_reads_and_writes_nothing(tiny_model_dir, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    uri = (ws / "other.py").as_uri()
    before = set(_entries())
    client = _start(tiny_model_dir, ws, "kv-off.log", kvDiskMb=0)
    try:
        _open(client, uri)
        _complete(client, uri)
        assert _stats(client)["server"]["kvDisk"] == {"state": "off"}
    finally:
        assert client.shutdown() == 0
    assert set(_entries()) == before


def test_only_files_that_are_not_secrets_go_to_disk():
    from lsp_server.complete import keeps_kv

    assert keeps_kv("file:///w/pkg/mod.py")
    for uri in ("file:///w/.env", "file:///w/.env.local", "file:///w/server.pem", "file:///home/u/.ssh/id_rsa",
                "untitled:Untitled-1", "vscode-notebook-cell:/w/nb.ipynb#W0sZmlsZQ%3D%3D"):  # fmt: skip
        assert not keeps_kv(uri), uri
