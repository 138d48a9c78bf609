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


def test_a_cache_evicted_from_memory_is_stored_and_read_back(tiny_model_dir, tmp_path: Path):
    """``kvCacheMb`` evicts the least recently used document's cache when another document
    needs memory: its rows go to disk then (not only at close or shutdown), and its next
    completion reads them back and prefills only what changed."""
    ws = tmp_path / "ws"
    ws.mkdir()
    long_text = "".join(f"def helper_{i}(a, b):\n    value = a * {i} + b\n    return value\n\n" for i in range(40)) + TEXT
    uris = [(ws / name).as_uri() for name in ("a.py", "b.py")]
    before = set(_entries())
    client = _start(tiny_model_dir, ws, "kv-evict.log", kvCacheMb=1)  # one document's cache (~1.3 MB) is over it
    try:
        lines = long_text.split("\n")
        pos = {"line": len(lines) - 1, "character": len(lines[-1])}

        def complete(uri: str) -> tuple[str, dict]:
            answer = client.call("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": pos, "context": {"triggerKind": 1}})  # fmt: skip
            items = answer["result"]["items"] if isinstance(answer["result"], dict) else answer["result"]
            return (items[0]["insertText"] if items else ""), _stats(client)["last"]

        for uri in uris:
            client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                    "text": long_text}})  # fmt: skip
        text_a, first_a = complete(uris[0])
        assert first_a["prefillTokens"] == first_a["promptTokens"] > 1000
        assert not set(_entries()) - before  # nothing written yet
        complete(uris[1])  # a.py's cache is evicted for b.py's: written to disk
        _wait(lambda: _stats(client)["server"]["kvDisk"].get("saved") == 1)
        assert len(set(_entries()) - before) == 1
        # a.py again, the user having typed a character: its rows come back from disk
        client.notify("textDocument/didChange", {"textDocument": {"uri": uris[0], "version": 2}, "contentChanges": [
            {"range": {"start": pos, "end": pos}, "text": "r"}]})  # fmt: skip
        pos = {**pos, "character": pos["character"] + 1}
        _text, again = complete(uris[0])
        assert _stats(client)["server"]["kvDisk"]["restored"] == 1
        assert again["promptTokens"] > 1000 and again["prefillTokens"] <= 3
    finally:
        assert client.shutdown() == 0
        assert "Traceback" not in client.log_text(), client.log_text()[-3000:]
