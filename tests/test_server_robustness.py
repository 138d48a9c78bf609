"""Regression tests of the faults found by fuzzing the server (issue 16), one block per
fault: the pure pieces (position codec, signature scans, surrogates, strict params) on
their own, and each fault end to end over the real server's stdio (fastcoder_bench/lsp_client.py).
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace import TextDocument

from lsp_server.actions import find_stub
from lsp_server.documents import (
    BadRequest,
    LspDocument,
    line_text,
    offset_at,
    position_at,
    tokenizable,
)
from lsp_server.prompt import encode
from lsp_server.protocol import strict_converter
from lsp_server.server import word_before
from lsp_server.signatures import brace_signature, py_def
from fastcoder_bench.lsp_client import StdioClient, frame, server_command

# ============================================================================ 4. line breaks


def _doc(text: str) -> LspDocument:
    return LspDocument("file:///t.py", text)


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


def test_only_lf_crlf_and_cr_break_lines():
    text = "a\x0cb\x0bc\u2028d\x85e\x1cf\n" "g\r\n" "h\r" "i"
    doc = _doc(text)
    assert [line_text(doc, i) for i in range(4)] == ["a\x0cb\x0bc\u2028d\x85e\x1cf", "g", "h", "i"]
    assert offset_at(doc, pos(0, 4)) == 4  # after the form feed: still line 0
    assert offset_at(doc, pos(0, 11)) == 11  # the end of line 0
    with pytest.raises(BadRequest):
        offset_at(doc, pos(0, 12))
    assert offset_at(doc, pos(1, 1)) == text.index("g") + 1
    assert offset_at(doc, pos(3, 1)) == len(text)
    for off in range(len(text) + 1):
        p = position_at(doc, off)
        if text[off - 1 : off + 1] != "\r\n":  # not between the \r and \n of one break
            assert offset_at(doc, p) == off, (off, p)
    assert position_at(doc, text.index("\r\n") + 1) == pos(1, 1)  # inside a break: end of its line


def test_columns_are_utf16_code_units():
    doc = _doc("s = '😀' + 'é'\n")
    assert offset_at(doc, pos(0, 7)) == 6  # the emoji is two units, one character
    with pytest.raises(BadRequest, match="inside a character"):
        offset_at(doc, pos(0, 6))
    assert position_at(doc, 6) == pos(0, 7)
    lone = _doc("a\ud83db")
    assert offset_at(lone, pos(0, 2)) == 2  # a lone surrogate is one unit, like in the editor


def test_positions_outside_the_document_are_errors_for_plain_pygls_documents_too():
    doc = TextDocument("file:///x.py", "ab\x0ccd\n")
    assert offset_at(doc, pos(0, 5)) == 5  # pygls' own doc.lines would break at the form feed
    assert offset_at(doc, pos(1, 0)) == 6
    with pytest.raises(BadRequest):
        offset_at(doc, pos(1, 1))


def _change(doc: LspDocument, start: types.Position, end: types.Position, text: str) -> None:
    doc.apply_change(types.TextDocumentContentChangePartial(range=types.Range(start=start, end=end), text=text))


def test_incremental_edits_after_a_form_feed_land_where_the_editor_put_them():
    doc = _doc("x = 1\x0cy = 2\nz\n")
    _change(doc, pos(0, 10), pos(0, 11), "42")  # "y = 2" -> "y = 42" (LSP line 0, column 10)
    assert doc.source == "x = 1\x0cy = 42\nz\n"
    _change(doc, pos(1, 0), pos(1, 1), "w")
    assert doc.source == "x = 1\x0cy = 42\nw\n"


def test_incremental_edits_are_clamped_like_the_reference_text_document():
    # vscode-languageserver-textdocument: a line past the end is the end of the text,
    # a column past its line's end is the end of that line, a reversed range is swapped
    doc = _doc("ab\r\ncd")
    _change(doc, pos(0, 99), pos(0, 99), "!")
    assert doc.source == "ab!\r\ncd"
    _change(doc, pos(9, 0), pos(12, 3), "?")
    assert doc.source == "ab!\r\ncd?"
    _change(doc, pos(1, 1), pos(0, 1), "")  # reversed
    assert doc.source == "ad?"
    _change(doc, pos(0, 0), pos(0, 0), "\U0001f600")
    _change(doc, pos(0, 1), pos(0, 1), "|")  # inside the emoji: its start
    assert doc.source == "|\U0001f600ad?"


def test_an_inserted_lf_after_a_cr_joins_the_break():
    doc = _doc("a\rb")
    _change(doc, pos(1, 0), pos(1, 0), "\n")
    assert doc.source == "a\r\nb" and [line_text(doc, i) for i in range(2)] == ["a", "b"]


# ============================================================================ 2. long lines


_OLD_PY_DEF = re.compile(r"^(\s*)(async\s+)?def\s+(\w+)\s*\(.*\)\s*(->\s*[^:]+)?:\s*(#.*)?$")
_OLD_BRACE = re.compile(
    r"^(\s*)(?!(?:if|for|while|switch|catch|else|do|try|return)\b)[^;{}()]*?(\w+)\s*\([^;{}]*\)[^;{}]*\{\s*(\}?)\s*$"
)
_ATOMS = ["def", " ", "async", "f", "foo", "(", ")", ":", "->", "#", "x", ",", "{", "}", ";", "if", "\t", "é", "_", "a.b"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), min_size=1, max_size=12).map("".join))
def test_signature_scans_agree_with_the_old_regexes(line):
    m = _OLD_PY_DEF.match(line)
    assert py_def(line) == ((m.group(1), m.group(3)) if m else None)
    m = _OLD_BRACE.match(line)
    if m and re.match(r"\s+(if|for|while|switch|catch|else|do|try|return)\b", line):
        # the old regex backtracked its indentation to take "  if (x) {" for a function
        assert brace_signature(line) is None
    else:
        assert brace_signature(line) == ((m.group(1), m.group(2), bool(m.group(3))) if m else None)


def _finishes(fn, *args, bound: float = 30.0):
    """Runs ``fn(*args)`` in a thread; fails if it is still running after ``bound`` s
    (a stall bound, not a speed measurement: the old regexes took minutes here)."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    t.start()
    t.join(bound)
    assert not t.is_alive(), f"{fn.__name__} still running after {bound} s"
    return out[0]


def test_stub_search_on_a_200k_character_line_finishes():
    line = "x(" + ")" * 100_000 + "a(" * 50_000
    for lang in ("javascript", "python", "cython"):
        assert _finishes(find_stub, line + "\n" + line, 1, lang) is None
    js = "function f() {\n}\n" + line
    assert _finishes(find_stub, js, 0, "javascript").name == "f"


def test_word_before_the_cursor_on_a_40k_line():
    line = "a" * 40_000
    assert _finishes(word_before, line) == line
    assert word_before("x = foo.ba") == "ba" and word_before("x = ") == "" and word_before("") == ""


# ============================================================================ 3. surrogates


def test_lone_surrogates_are_replaced_one_for_one(tiny_tokenizer):
    text = "s = '\ud83d' + '\ude00x' + '😀'"
    clean = tokenizable(text)
    assert len(clean) == len(text) and clean.count("\ufffd") == 2 and "😀" in clean
    with pytest.raises(Exception):
        tiny_tokenizer(text)  # what completion, warm-up and index updates used to do
    assert encode(tiny_tokenizer, text) == encode(tiny_tokenizer, clean)


# ============================================================================ 5. wrong-type params


@pytest.mark.parametrize("bad", ["0", 0.5, True, None, [1]])
def test_wrong_type_integers_are_rejected_not_coerced(bad):
    conv = strict_converter()
    with pytest.raises(Exception):
        conv.structure({"line": bad, "character": 0}, types.Position)
    with pytest.raises(Exception):
        conv.structure({"textDocument": {"uri": 5}, "position": {"line": 0, "character": 0}}, types.CompletionParams)
    assert conv.structure({"line": 1.0, "character": 2}, types.Position) == pos(1, 2)


# ============================================================================ end to end, real stdio


TEXT = "import os\n\n\ndef total(values):\n    result = 0\n    for v in values:\n        result += v\n    return result\n"


def _start(model_dir: Path, ws: Path, log: str) -> StdioClient:
    (ws / "main.py").write_text(TEXT)
    client = StdioClient(server_command(model_dir), ws.parent / log)
    opts = {"model": str(model_dir), "dtype": "float32", "device": "cpu", "maxNewTokens": 4, "timeBudgetMs": 0,
            "earlyAnswerMs": None, "warmOnOpen": True, "commonIndex": False, "dependencyIndex": False}  # fmt: skip
    client.initialize(ws, opts)
    client.wait_status("ready")
    client.ws = ws  # type: ignore[attr-defined]
    return client


def _stop(client: StdioClient) -> None:
    assert client.shutdown() == 0
    assert "Traceback" not in client.log_text(), client.log_text()[-3000:]


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    client = _start(tiny_model_dir, tmp_path_factory.mktemp("robust-ws"), "robust-server.log")
    yield client
    _stop(client)


@pytest.fixture(scope="module")
def edit_server(edit_model_dir, tmp_path_factory):
    """A server whose model ends every edit (tests/conftest.py ``build_scripted_model``)."""
    client = _start(edit_model_dir, tmp_path_factory.mktemp("robust-edit-ws"), "robust-edit-server.log")
    yield client
    _stop(client)


def _open(client: StdioClient, uri: str, text: str, language: str = "python") -> None:
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": language, "version": 1, "text": text}})


def _server_text(client: StdioClient, uri: str) -> str:
    answer = client.command("fastcoder.debugDocument", {"uri": uri, "text": True})
    return answer["result"]["text"]


def test_nested_objects_that_look_like_messages_are_not_answered(server: StdioClient):
    # pygls structured (and, failing, answered) every nested object with "jsonrpc" in it
    lookalike = {"jsonrpc": "2.0", "id": 424242, "method": "textDocument/completion", "params": {"x": 1}}
    first = server.request("workspace/executeCommand", {"command": "fastcoder.stats", "arguments": [lookalike]})
    second = server.request("workspace/executeCommand", {"command": "fastcoder.stats", "arguments": [], "jsonrpc": "2.0"})
    assert "result" in server.wait(first) and "result" in server.wait(second)
    assert "result" in server.call("workspace/executeCommand", {"command": "fastcoder.stats"})  # still up
    assert 424242 not in server.answers
    assert all(len(server.answers[i]) == 1 for i in (first, second))


def test_a_client_answer_that_does_not_fit_fails_the_request_it_answers(edit_server: StdioClient):
    """This client answers every server request with ``null``, which is not an
    ApplyWorkspaceEditResult: pygls dropped that answer and editSelection, awaiting it,
    never answered (seen with a real model). Now the apply fails and the edit comes back
    in the command's answer, not applied."""
    uri = (edit_server.ws / "edit_me.py").as_uri()  # type: ignore[attr-defined]
    _open(edit_server, uri, TEXT)
    rng = {"start": {"line": 3, "character": 0}, "end": {"line": 7, "character": 17}}
    answer = edit_server.command("fastcoder.editSelection", {"uri": uri, "range": rng, "instruction": "Use sum()."}, timeout=120)
    assert "result" in answer, answer
    edit = answer["result"]["edit"]
    assert answer["result"]["applied"] is False and (edit.get("changes") or edit.get("documentChanges"))
    asked = [m for _, m in edit_server.notifications if m.get("method") == "workspace/applyEdit"]
    assert asked and "does not fit" in edit_server.log_text()
    assert "result" in edit_server.call("workspace/executeCommand", {"command": "fastcoder.stats"})  # still up


def test_long_lines_do_not_stall_other_requests(server: StdioClient):
    uri = (server.ws / "long.js").as_uri()  # type: ignore[attr-defined]
    line = "x(" + ")" * 100_000 + "a(" * 50_000
    _open(server, uri, line + "\n", "javascript")
    action = server.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 5}, "end": {"line": 0, "character": 5}},
        "context": {"diagnostics": []}})  # fmt: skip
    word = "a" * 40_000
    py = (server.ws / "long.py").as_uri()  # type: ignore[attr-defined]
    _open(server, py, word)
    completion = server.request("textDocument/completion", {"textDocument": {"uri": py}, "position": {"line": 0, "character": 40_000}})
    stats = server.request("workspace/executeCommand", {"command": "fastcoder.stats"})
    assert server.wait(action, 60)["result"] == []
    assert "result" in server.wait(completion, 120)
    assert "result" in server.wait(stats, 120)


def test_lone_surrogates_complete_and_index(server: StdioClient):
    uri = (server.ws / "surrogate.py").as_uri()  # type: ignore[attr-defined]
    text = "s = '\ud83d'\ndef f(x):\n    return x\n"
    _open(server, uri, text)
    answer = server.call("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 9}})
    assert "result" in answer, answer
    assert _server_text(server, uri) == text
    time.sleep(1.0)  # the buffer reaches the index after 0.3 s; its update must not fail
    stats = server.command("fastcoder.stats")["result"]
    assert stats["index"]["state"] == "ready", stats["index"]
    assert "index update failed" not in server.log_text() and "background job failed" not in server.log_text()


def test_form_feed_edits_keep_the_servers_copy_equal(server: StdioClient):
    uri = (server.ws / "ff.py").as_uri()  # type: ignore[attr-defined]
    _open(server, uri, "x = 1\x0cy = 2\nz\n")
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 0, "character": 10}, "end": {"line": 0, "character": 11}}, "text": "42"}]})  # fmt: skip
    assert _server_text(server, uri) == "x = 1\x0cy = 42\nz\n"
    answer = server.call("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 10}})
    assert "result" in answer, answer  # a valid position after the form feed


def test_unknown_documents_and_bad_params_are_answered_quietly(server: StdioClient):
    before = len(server.notifications)
    server.notify("textDocument/didChange", {"textDocument": {"uri": "file:///nowhere.py", "version": 2}, "contentChanges": [{"text": "x"}]})
    bad = [
        {"textDocument": {"uri": "file:///nowhere.py"}, "position": {"line": 0, "character": 0}},
        {"textDocument": {"uri": (server.ws / "ff.py").as_uri()}, "position": {"line": "0", "character": 0}},  # type: ignore[attr-defined]
        {"textDocument": {"uri": (server.ws / "ff.py").as_uri()}, "position": {"line": 0.5, "character": 0}},  # type: ignore[attr-defined]
        {"textDocument": {"uri": (server.ws / "ff.py").as_uri()}, "position": {"line": True, "character": 0}},  # type: ignore[attr-defined]
    ]
    for params in bad:
        answer = server.call("textDocument/completion", params)
        assert answer.get("error", {}).get("code") == -32602, (params, answer)  # InvalidParams
    unknown = server.call("fastcoder/noSuchMethod", {})
    assert answer and unknown["error"]["code"] == -32601
    server.send_bytes(b"Content-Length: 9\r\n\r\n{not json")
    server.send_bytes(frame(b"[" * 100_000))  # too deep for json.loads: RecursionError
    assert "result" in server.call("workspace/executeCommand", {"command": "fastcoder.stats"})
    shown = [m for _, m in server.notifications[before:] if m.get("method") == "window/showMessage"]
    assert shown == []  # no "Error in server: KeyError" popup
    log = server.log_text()
    assert "nowhere.py, which is not open" in log
    assert " ERROR " not in log, [ln for ln in log.splitlines() if " ERROR " in ln]


# ============================================================================ 6. memory


class _Layer:
    def __init__(self, nbytes: int) -> None:
        import torch

        self.keys = torch.zeros(nbytes // 2, dtype=torch.uint8)
        self.values = torch.zeros(nbytes - nbytes // 2, dtype=torch.uint8)


class _Cache:
    def __init__(self, nbytes: int) -> None:
        self.layers = [_Layer(nbytes)]


def test_kv_caches_of_open_documents_are_capped_in_bytes():
    from fastcoder.config import DecodeConfig
    from lsp_server.sessions import SessionRegistry, kv_bytes

    reg = SessionRegistry(max_kv_documents=8, max_kv_bytes=250)
    for i in range(5):  # five documents of 100 bytes of KV each, the last used last
        state = reg.open(f"file:///{i}.py", DecodeConfig())
        state.session.kv.cache = _Cache(100)
    assert kv_bytes(reg.get("file:///4.py").session.kv) == 100
    reg.touch("file:///4.py")
    kept = [i for i in range(5) if reg.get(f"file:///{i}.py").session.kv.cache is not None]
    assert kept == [3, 4] and reg.kv_bytes() == 200  # 4 (in use) and 3 fit in 250 bytes
    big = reg.get("file:///0.py")
    big.session.kv.cache = _Cache(1000)  # the document in use keeps its KV, whatever its size
    reg.touch("file:///0.py")
    assert big.session.kv.cache is not None and reg.kv_bytes() == 1000
    reg.max_kv_documents, reg.max_kv_bytes = 2, 10**6  # and the count still caps them
    for i in (1, 2, 3):
        reg.get(f"file:///{i}.py").session.kv.cache = _Cache(10)
    reg.touch("file:///3.py")
    assert [i for i in range(5) if reg.get(f"file:///{i}.py").session.kv.cache is not None] == [0, 3]


def test_documents_share_the_registrys_source_gate_until_the_model_changes():
    from fastcoder.config import DecodeConfig
    from lsp_server.sessions import SessionRegistry

    reg = SessionRegistry()
    a, b = (reg.open(f"file:///{n}.py", DecodeConfig()) for n in "ab")
    assert a.session.gate.parent is reg.gate is b.session.gate.parent
    a.session.gate.observe({"D_c": 0.001}, {}, 0.004, 3)
    assert reg.gate.loss("D_c") is None and reg.gate._step[0] == 1  # fed by a document's steps
    old = reg.gate
    reg.reset_all(DecodeConfig())  # another model or device: another step cost
    assert reg.gate is not old and a.session.gate.parent is reg.gate


def test_kv_limits_hold_once_requests_end_and_spare_busy_sessions():
    from fastcoder.config import DecodeConfig
    from lsp_server.sessions import Inflight, SessionRegistry

    reg = SessionRegistry(max_kv_documents=8, max_kv_bytes=250)
    docs = [reg.open(f"file:///{i}.py", DecodeConfig()) for i in range(3)]
    for d in docs:
        d.session.kv.cache = _Cache(100)
    docs[0].inflight = Inflight(key=(0,))  # requests in flight for 0 and 1 while 2 is touched
    docs[1].inflight = Inflight(key=(1,))
    reg.touch("file:///2.py")
    assert reg.kv_bytes() == 300  # over the limit: every one of them is in use
    docs[1].inflight = None  # 1 ends: 2 and 1, the most recent, fit; 0 is in flight
    assert reg.enforce() == 0 and reg.kv_bytes() == 300
    docs[0].inflight = None  # 0's request ends while its session still runs (lock held)
    with docs[0].session.lock:
        assert reg.enforce() == 0 and reg.kv_bytes() == 300
    assert reg.enforce() == 100  # then it goes, the least recently used
    assert [d.session.kv.cache is not None for d in docs] == [False, True, True]
    assert reg.enforce() == 0 and reg.kv_bytes() == 200  # within the limit: nothing more goes
