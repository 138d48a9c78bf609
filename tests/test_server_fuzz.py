"""A seeded fuzz stream against the real server over real stdio (tiny random model).

The stream mixes valid and invalid messages: edits with out-of-range, reversed and huge
ranges, whole-document changes, non-BMP text, lone surrogates, CRLF, lone CR and form
feeds; completion / inline completion / code action requests at random positions and
on unknown URIs; cancels; wrong-type params; malformed JSON; unknown methods; nested
objects that look like messages; good and bad configuration; opens and closes.

It asserts:

* every request gets exactly one answer, within ``ANSWER_BOUND_S``, and no answer
  comes for an id that was never sent; no answer is an InternalError;
* after every edit, the server's copy of the document (``fastcoder.debugDocument``:
  SHA-256 of its UTF-16 code units) equals the client's, which is kept here as UTF-16
  code units with the semantics of the reference ``vscode-languageserver-textdocument``
  (a line past the end is the end, a column past the line's end is the line's end, a
  reversed range is swapped);
* cheap requests that wait on nothing (``fastcoder.debugDocument``, ``fastcoder.stats``)
  are answered within ``STALL_BOUND_S`` while the model works: nothing stalls the loop;
* ``shutdown`` + ``exit`` end the server with code 0, and its log has no traceback.

``FASTCODER_FUZZ_SEED`` and ``FASTCODER_FUZZ_STEPS`` change the stream (defaults: a
fixed seed, a size that runs in well under 3 minutes on a loaded 2-core machine).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastcoder_bench.lsp_client import StdioClient, frame, server_command

SEED = int(os.environ.get("FASTCODER_FUZZ_SEED", "16"))
STEPS = int(os.environ.get("FASTCODER_FUZZ_STEPS", "400"))
ANSWER_BOUND_S = 90.0  # every request, even a completion queued behind others on the model thread
STALL_BOUND_S = 10.0  # a request the event loop answers by itself
UINT_MAX = 2**31 - 1
CHEAP = {"fastcoder.debugDocument", "fastcoder.stats"}

SNIPPETS = [
    "def f(x):\n    return x + 1\n",
    "class A:\n    pass\n",
    "x = '😀🎉'  # non-BMP\n",
    "s = '\ud83d'\n",  # a lone surrogate, as an editor may send one
    "\ude00",
    "a = 1\r\nb = 2\r\n",
    "\r",
    "\x0c\n# page two\n",
    "line\x0bwith\u2028odd\x85breaks\x1c\n",
    "    if x:\n        y = [i for i in range(10)]\n",
    "é ñ 中文 ",
    "\n",
    "",
]


# ---------------------------------------------------------------------------- the client's copy


class ClientDocument:
    """A document as the editor holds it: UTF-16 code units (little-endian bytes)."""

    def __init__(self, text: str) -> None:
        self.data = _utf16(text)

    @property
    def units(self) -> int:
        return len(self.data) // 2

    def unit(self, i: int) -> int:
        return self.data[2 * i] | (self.data[2 * i + 1] << 8)

    def line_offsets(self) -> list[int]:
        """Where lines start, in code units: after each \\r\\n, \\r or \\n unit."""
        return [0, *(m.end() // 2 for m in _BREAK_UNITS.finditer(self.data) if m.start() % 2 == 0)]

    def offset_at(self, line: int, character: int) -> int:
        """vscode-languageserver-textdocument's TextDocument.offsetAt."""
        offsets = self.line_offsets()
        if line >= len(offsets):
            return self.units
        if line < 0:
            return 0
        start = offsets[line]
        if character <= 0:
            return start
        nxt = offsets[line + 1] if line + 1 < len(offsets) else self.units
        off = min(start + character, nxt)
        while off > start and self.unit(off - 1) in (0x0D, 0x0A):  # ensureBeforeEOL
            off -= 1
        return off

    def splits_a_pair(self, off: int) -> bool:
        return 0 < off < self.units and 0xD800 <= self.unit(off - 1) <= 0xDBFF and 0xDC00 <= self.unit(off) <= 0xDFFF

    def replace(self, start: int, end: int, text: str) -> None:
        self.data = self.data[: 2 * start] + _utf16(text) + self.data[2 * end :]

    def position_of(self, off: int) -> tuple[int, int]:
        offsets = self.line_offsets()
        line = bisect.bisect_right(offsets, off) - 1
        return line, off - offsets[line]

    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


# a match at an odd byte offset straddles two units and is no line break; it can never
# hide one at an even offset (its second byte would have to be a unit's low byte, 0x00)
_BREAK_UNITS = re.compile(rb"\r\x00\n\x00|\r\x00|\n\x00")


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-le", "surrogatepass")


# ---------------------------------------------------------------------------- the stream


@dataclass
class Sent:
    method: str
    at: float
    expect_hash: str | None = None  # debugDocument: the client's copy when it was sent
    uri: str = ""


class Fuzzer:
    def __init__(self, client: StdioClient, root: Path, rng: random.Random) -> None:
        self.c = client
        self.root = root
        self.rng = rng
        self.docs: dict[str, ClientDocument] = {}
        self.versions: dict[str, int] = {}
        self.sent: dict[Any, Sent] = {}
        self.outstanding_completions: list[Any] = []
        self.edits = 0
        self.kinds: dict[str, int] = {}

    # ---------------------------------------------------------------- helpers
    def count(self, kind: str) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def uri(self) -> str:
        names = ["a.py", "b.py", "c.js", "d.txt"]
        return (self.root / self.rng.choice(names)).as_uri()

    def text(self, size: int = 3) -> str:
        r = self.rng
        parts = [r.choice(SNIPPETS) for _ in range(r.randint(0, size))]
        if r.random() < 0.1:
            parts.append("".join(r.choice("abc ()[]{}:;\n\r\t\x0c😀\ud83d") for _ in range(r.randint(1, 30))))
        return "".join(parts)

    def request(self, method: str, params: Any, **extra: Any) -> Any:
        msg_id = self.c.request(method, params)
        self.sent[msg_id] = Sent(method, time.monotonic(), **extra)
        return msg_id

    def position(self, doc: ClientDocument | None) -> dict[str, int]:
        r = self.rng
        if doc is None or r.random() < 0.15:  # anywhere, often outside the document
            return {"line": r.choice([0, 1, 5, 1000, UINT_MAX]), "character": r.choice([0, 3, 80, UINT_MAX])}
        off = r.randint(0, doc.units)
        line, col = doc.position_of(off)
        return {"line": line, "character": col}

    def check_document(self, uri: str) -> None:
        doc = self.docs[uri]
        self.request("workspace/executeCommand", {"command": "fastcoder.debugDocument", "arguments": [{"uri": uri}]},
                     expect_hash=doc.sha256(), uri=uri)  # fmt: skip

    # ---------------------------------------------------------------- actions
    def open(self) -> None:
        uri = self.uri()
        text = self.text(6)
        lang = {"py": "python", "js": "javascript"}.get(uri.rsplit(".", 1)[-1], "plaintext")
        self.versions[uri] = 1
        self.docs[uri] = ClientDocument(text)
        self.c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": lang, "version": 1, "text": text}})
        self.count("open")
        self.check_document(uri)

    def close(self) -> None:
        if not self.docs:
            return self.open()
        uri = self.rng.choice(sorted(self.docs))
        del self.docs[uri]
        self.c.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        self.count("close")

    def edit(self) -> None:
        r = self.rng
        if not self.docs:
            return self.open()
        uri = r.choice(sorted(self.docs))
        doc = self.docs[uri]
        changes = []
        for _ in range(r.choice([1, 1, 1, 2, 3])):
            kind = r.random()
            if kind < 0.05:  # the whole document
                text = self.text(4)
                changes.append({"text": text})
                doc.data = _utf16(text)
                self.count("edit-full")
                continue
            if kind < 0.08:  # huge: 100-200 KB, one long line or many lines
                text = ("x = 1;" * r.randint(17_000, 34_000)) if r.random() < 0.5 else "y = 2\n" * r.randint(17_000, 34_000)
                self.count("edit-huge")
            else:
                text = self.text(2)
            a = self._edit_position(doc)
            b = self._edit_position(doc) if r.random() < 0.7 else a
            if r.random() < 0.6 and (b["line"], b["character"]) < (a["line"], a["character"]):
                a, b = b, a  # mostly well-ordered; the rest stay reversed
            start, end = doc.offset_at(a["line"], a["character"]), doc.offset_at(b["line"], b["character"])
            if doc.splits_a_pair(start) or doc.splits_a_pair(end):
                continue  # an editor never splits a surrogate pair (the server would keep it whole)
            self.count("edit-reversed" if end < start else "edit")
            if end < start:
                start, end = end, start
            doc.replace(start, end, text)
            changes.append({"range": {"start": a, "end": b}, "text": text})
        if not changes:
            return
        self.versions[uri] += 1
        self.c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": self.versions[uri]}, "contentChanges": changes})
        self.edits += 1
        self.check_document(uri)

    def _edit_position(self, doc: ClientDocument) -> dict[str, int]:
        r = self.rng
        roll = r.random()
        if roll < 0.1:  # out of range
            return {"line": r.choice([0, 3, 10_000, UINT_MAX]), "character": r.choice([0, 500, UINT_MAX])}
        off = r.randint(0, doc.units)
        line, col = doc.position_of(off)
        if roll < 0.2:
            col += r.randint(1, 50)  # past the end of the line
        return {"line": line, "character": col}

    def completion(self) -> None:
        r = self.rng
        uri = r.choice(sorted(self.docs)) if self.docs and r.random() < 0.85 else (self.root / "never-opened.py").as_uri()
        method = r.choice(["textDocument/completion", "textDocument/inlineCompletion"])
        params: dict[str, Any] = {"textDocument": {"uri": uri}, "position": self.position(self.docs.get(uri))}
        if method == "textDocument/inlineCompletion":
            params["context"] = {"triggerKind": r.choice([1, 2])}
        self.outstanding_completions.append(self.request(method, params))
        self.count("completion")

    def code_action(self) -> None:
        uri = self.rng.choice(sorted(self.docs)) if self.docs else self.uri()
        p = self.position(self.docs.get(uri))
        self.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {"start": p, "end": p}, "context": {"diagnostics": []}})
        self.count("codeAction")

    def cancel(self) -> None:
        if not self.outstanding_completions:
            return self.completion()
        msg_id = self.rng.choice(self.outstanding_completions)
        self.c.notify("$/cancelRequest", {"id": msg_id})
        self.count("cancel")

    def cheap(self) -> None:
        if self.rng.random() < 0.5 and self.docs:
            self.check_document(self.rng.choice(sorted(self.docs)))
        else:
            self.request("workspace/executeCommand", {"command": "fastcoder.stats"})
        self.count("cheap")

    def invalid(self) -> None:
        r = self.rng
        uri = r.choice(sorted(self.docs)) if self.docs else self.uri()
        bad = r.choice(["0", 0.5, True, None, -1, UINT_MAX + 1, [], {}])
        roll = r.randrange(9)
        if roll == 0:
            self.request("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": bad, "character": 0}})
        elif roll == 1:
            self.request("textDocument/inlineCompletion", {"textDocument": {"uri": bad}, "position": {"line": 0, "character": 0}})
        elif roll == 2:  # wrong-type edit: ignored by the server, so not applied here either
            self.c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 99}, "contentChanges": [
                {"range": {"start": {"line": bad, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "zzz"}]})  # fmt: skip
        elif roll == 3:  # malformed JSON
            self.c.send_bytes(frame(r.choice([b'{"jsonrpc":', b"[1, 2", b"\xff\xfe{}", b"null", b"[]", b'"text"', b"[" * 100_000])))
        elif roll == 4:
            self.request(r.choice(["fastcoder/unknown", "textDocument/noSuchThing", "$/nothing"]), {"x": 1})
        elif roll == 5:  # a nested object that looks like a request
            lookalike = {"jsonrpc": "2.0", "id": 900_000 + r.randrange(1000), "method": "textDocument/completion", "params": {"x": 1}}
            self.request("workspace/executeCommand", {"command": "fastcoder.stats", "arguments": [lookalike]})
        elif roll == 6:  # bad or odd configuration
            settings = r.choice([{"fastcoder": {"maxNewTokens": "lots"}}, {"fastcoder": {"method": "magic"}}, {"fastcoder": 5},
                                 None, {"fastcoder": {"maxNewTokens": r.choice([2, 4])}}, {"fastcoder": {"enabled": r.random() < 0.8}}])  # fmt: skip
            self.c.notify("workspace/didChangeConfiguration", {"settings": settings})
        elif roll == 7:  # changes to a document that is not open
            self.c.notify("textDocument/didChange", {"textDocument": {"uri": (self.root / "ghost.py").as_uri(), "version": 2},
                                                     "contentChanges": [{"text": "ghost"}]})  # fmt: skip
        else:
            self.request("textDocument/completion", None)  # params missing
        self.count("invalid")

    def step(self) -> None:
        r = self.rng.random()
        if r < 0.06:
            self.open()
        elif r < 0.09:
            self.close()
        elif r < 0.45:
            self.edit()
        elif r < 0.62:
            self.completion()
        elif r < 0.68:
            self.code_action()
        elif r < 0.75:
            self.cancel()
        elif r < 0.85:
            self.cheap()
        else:
            self.invalid()


# ---------------------------------------------------------------------------- the test


def test_fuzz_stream_every_request_answered_nothing_corrupted(tiny_model_dir, tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("def main():\n    pass\n")
    client = StdioClient(server_command(tiny_model_dir), tmp_path / "server.log")
    try:
        opts = {"model": str(tiny_model_dir), "dtype": "float32", "device": "cpu", "maxNewTokens": 4, "timeBudgetMs": 500,
                "earlyAnswerMs": None, "commonIndex": False, "dependencyIndex": False, "maxPromptTokens": 256}  # fmt: skip
        assert "result" in client.initialize(root, opts)
        client.wait_status("ready")
        fuzz = Fuzzer(client, root, random.Random(SEED))
        for i in range(STEPS):
            fuzz.step()
            if i % 25 == 24:  # let the server catch up now and then (as an editor's pace would)
                _wait_all(client, fuzz, list(fuzz.sent)[-25:], ANSWER_BOUND_S)
        _wait_all(client, fuzz, list(fuzz.sent), ANSWER_BOUND_S)
        _check(client, fuzz)
        assert client.shutdown(timeout=60) == 0
    finally:
        client.close()
    log = client.log_text()
    assert "Traceback" not in log, log[-4000:]
    print(f"seed {SEED}: {STEPS} steps, {len(fuzz.sent)} requests, {fuzz.edits} edit messages, kinds {fuzz.kinds}")


def _wait_all(client: StdioClient, fuzz: Fuzzer, ids: list[Any], bound: float) -> None:
    for msg_id in ids:
        sent = fuzz.sent[msg_id]
        client.wait(msg_id, max(0.1, sent.at + bound - time.monotonic()))
        if msg_id in fuzz.outstanding_completions:
            fuzz.outstanding_completions.remove(msg_id)


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def round_trips(answers: dict[Any, list], sent: dict[Any, Sent]) -> dict[str, Any]:
    """Round trip (send to first answer) of every request sent, in ms: n, p50, p95,
    max, overall and per method (reported, never asserted: timings here are noisy)."""
    by_method: dict[str, list[float]] = {}
    for msg_id, s in sent.items():
        if answers.get(msg_id):
            by_method.setdefault(s.method, []).append(1000.0 * (answers[msg_id][0][0] - s.at))

    def summary(v: list[float]) -> dict[str, Any]:
        return {"n": len(v), "p50_ms": round(_pct(v, 0.5), 1), "p95_ms": round(_pct(v, 0.95), 1), "max_ms": round(max(v), 1)}

    every = [x for v in by_method.values() for x in v]
    out: dict[str, Any] = summary(every) if every else {"n": 0}
    out["by_method"] = {m: summary(v) for m, v in sorted(by_method.items())}
    return out


def _check(client: StdioClient, fuzz: Fuzzer) -> None:
    time.sleep(0.5)  # a duplicate answer would arrive by now
    answers = client.answers
    rt = round_trips(answers, fuzz.sent)
    timing = f"round trips (ms) n={rt['n']} p50 {rt.get('p50_ms')} p95 {rt.get('p95_ms')} max {rt.get('max_ms')}"
    print(timing)
    for m, v in rt["by_method"].items():
        print(f"  {m}: n={v['n']} p50 {v['p50_ms']} p95 {v['p95_ms']} max {v['max_ms']} ms")
    strays = sorted(set(answers) - set(client.sent), key=str)
    assert not strays, f"answers to ids never sent: {strays[:10]}"
    twice = {i: len(a) for i, a in answers.items() if i in fuzz.sent and len(a) != 1}
    assert not twice, f"requests answered more than once: {twice}"
    checked = 0
    for msg_id, sent in fuzz.sent.items():
        assert answers.get(msg_id), f"request {msg_id} ({sent.method}) has no answer; {timing}"
        at, msg = answers[msg_id][0]
        assert at - sent.at <= ANSWER_BOUND_S, (msg_id, sent.method, at - sent.at, timing)
        error = msg.get("error")
        assert not (error and error.get("code") == -32603), (sent.method, error)  # no InternalError
        command = None
        if sent.method == "workspace/executeCommand":
            command = "fastcoder.debugDocument" if sent.expect_hash else "fastcoder.stats"
        if command in CHEAP:
            assert at - sent.at <= STALL_BOUND_S, f"{command} took {at - sent.at:.1f} s: the event loop stalled; {timing}"
        if sent.expect_hash is not None:
            assert error is None, (sent.uri, error)
            assert msg["result"]["sha256"] == sent.expect_hash, f"the server's copy of {sent.uri} diverged (request {msg_id})"
            checked += 1
    assert checked >= fuzz.edits, (checked, fuzz.edits)
    print(json.dumps({"documentChecks": checked, "requests": len(fuzz.sent), "roundTrips": rt}))
