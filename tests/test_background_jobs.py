"""The model thread's priorities: a background job (the prefetched suggestion) is
cancelled by any foreground job, and the debounce's arithmetic."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

from lsp_server.complete import AUTO_DEBOUNCE_S, Completer
from lsp_server.recall import after_accept, continues, may_still_serve, recall
from lsp_server.model_host import ModelHost
from lsp_server.prompt import CursorContext
from lsp_server.sessions import Answers, Suggestion, TypingClock


def test_a_foreground_job_cancels_the_background_one():
    host = ModelHost(lambda *_: None, lambda *_: None)
    started = threading.Event()

    def background(cancel: threading.Event) -> str:
        started.set()
        for _ in range(500):  # as the engine does: checks its event between forwards
            if cancel.is_set():
                return "cancelled"
            time.sleep(0.01)
        return "finished"

    async def main():
        cancel = threading.Event()
        bg = host.submit(background, cancel, label="prefetch", background=True, cancel=cancel)
        while not started.is_set():
            await asyncio.sleep(0.01)
        fg = host.submit(lambda: "answer", label="completion")
        assert await asyncio.wait_for(fg, 5) == "answer"
        assert await bg == "cancelled"
        # a promoted one (a request now waits for it) is no longer cancelled
        cancel2 = threading.Event()
        host.submit(lambda: None, label="prefetch", background=True, cancel=cancel2)
        host.promote(cancel2)
        await host.submit(lambda: None, label="completion")
        assert not cancel2.is_set()

    try:
        asyncio.run(main())
    finally:
        host.close()


def test_awaited_while_another_job_waits_for_the_model_thread():
    """``awaited``: what lets a cancelled generation's step stop between layers (only when
    someone waits; otherwise the step ends and its tokens reach the CACHE)."""
    host = ModelHost(lambda *_: None, lambda *_: None)
    release, running = threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        running.set()
        release.wait(5)
        seen.append(host.awaited())

    async def main():
        a = host.submit(first, label="completion")
        while not running.is_set():
            await asyncio.sleep(0.01)
        seen.append(host.awaited())  # the first runs, nobody waits
        b = host.submit(lambda: seen.append(host.awaited()), label="completion")
        release.set()
        await a
        await b

    try:
        asyncio.run(main())
    finally:
        host.close()
    assert seen == [False, True, False]


def test_free_memory_is_given_back_after_the_answer_not_before(monkeypatch):
    from lsp_server import model_host

    host = ModelHost(lambda *_: None, lambda *_: None)
    jobs: list = []
    trims: list[bool] = []  # whether the job before had its answer when the trim ran
    monkeypatch.setattr(model_host, "release_free_memory", lambda: trims.append(jobs[-1].done()))
    try:
        for _ in range(2):
            host._trimmed = 0.0  # (at most one trim a second)
            job = model_host._Job("completion", lambda: time.sleep(0.01) or "answer", ())
            host._queued += 1  # what submit() counts, without an event loop
            host._executor.submit(host._take, job)
            jobs.append(job.future)
            assert jobs[-1].result(5) == "answer"
            deadline = time.monotonic() + 5
            while len(trims) < len(jobs) and time.monotonic() < deadline:
                time.sleep(0.01)
        assert trims == [True, True]
    finally:
        host.close()


def test_answers_remember_states_and_typed_through():
    answers = Answers(size=3)
    answers.add(Suggestion("a = ", "\n", "block", "compute(x)"))
    answers.add(Suggestion("a = compute(x)", "\n", "block", "", background=True))
    hit = recall(answers, CursorContext("a = comp", "\n"))
    assert hit is not None and hit[0] == "ute(x)"
    hit = recall(answers, CursorContext("a = compute(x)", "\n"))  # accepted: the prepared (empty) answer
    assert hit is not None and hit[0] == "" and hit[1].background
    assert recall(answers, CursorContext("b = ", "\n")) is None
    for i in range(3):
        answers.add(Suggestion(f"s{i}", "", "block", "x"))
    assert len(answers) == 3 and recall(answers, CursorContext("a = ", "\n")) is None  # LRU


def test_after_accept_states_and_continues():
    ctx = CursorContext("def f():\n    ", "\n")
    states = after_accept(ctx, "x = 1\n    return x")
    assert [s.prefix for s in states] == ["def f():\n    x = 1\n    return x", "def f():\n    x = 1"]
    assert len(after_accept(ctx, "return 1")) == 1
    assert continues(CursorContext("def f():\n    x = ", "\n"), ctx, "x = 1\n")
    assert continues(CursorContext("def f():\n    x = 1\n    ret", "\n"), ctx, "x = 1\n")  # past it
    assert not continues(CursorContext("def f():\n    y", "\n"), ctx, "x = 1\n")
    assert not continues(CursorContext("def f():\n    x = ", ")\n"), ctx, "x = 1\n")  # a closer added after it


def test_a_running_block_may_still_serve_text_typed_along_its_output():
    start = CursorContext("def f():\n    ", "\n\nx = 2\n")
    out = "x = g(1)\n    return x"
    doc = lambda typed: start.prefix + typed + start.suffix  # noqa: E731
    assert may_still_serve(doc(""), start, out)  # nothing typed yet
    assert may_still_serve(doc("x = g"), start, out)  # its start typed
    assert may_still_serve(doc("x = g()"), start, out)  # an auto-closed bracket right of the cursor
    assert may_still_serve(doc("x = g(1)\n    return x + 1"), start, out)  # past what it produced so far
    assert not may_still_serve(doc("y"), start, out)  # off its path
    assert not may_still_serve(doc("x = h("), start, out)
    assert not may_still_serve(start.prefix + "x" + "\n\nx = 3\n", start, out)  # changed below the cursor
    assert not may_still_serve("# new first line\n" + doc("x"), start, out)  # changed above it
    assert not may_still_serve(start.prefix[:-2], start, out)  # deleted back past its start


def test_debounce_waits_until_the_document_has_been_still():
    doc = SimpleNamespace(typing=TypingClock())
    settings = SimpleNamespace(debounce_ms="auto")
    doc.typing.changed()  # a request right after a keystroke (a client that does not debounce)
    assert AUTO_DEBOUNCE_S - 0.02 < Completer.debounce_s(doc, settings) <= AUTO_DEBOUNCE_S
    doc.typing.changed(time.monotonic() - AUTO_DEBOUNCE_S)  # VS Code asks 50 ms after the change
    assert Completer.debounce_s(doc, settings) == 0.0
    settings.debounce_ms = 0
    doc.typing.changed()
    assert Completer.debounce_s(doc, settings) == 0.0
    settings.debounce_ms = 300
    doc.typing.changed(time.monotonic() - 0.1)
    assert 0.15 < Completer.debounce_s(doc, settings) <= 0.2


def test_the_warm_up_builds_what_the_first_request_would_pay_for(tiny_model, tiny_tokenizer):
    """The model host's warm-up (run while the model loads) builds the tokenizer's
    per-token table, which the first FastCoder request needs (anchored prompts, skip
    tokens, line-end pruning): in the typing replay it was 1.1 s of that request."""
    from fastcoder import tokens
    from fastcoder.engine import Engine
    from lsp_server.model_host import _warm_up

    engine = Engine(tiny_model, tiny_tokenizer, name="tiny")
    try:
        tokens._CACHE.pop(id(tiny_tokenizer), None)
        _warm_up(engine)
        assert id(tiny_tokenizer) in tokens._CACHE
    finally:
        engine.close()


def test_a_load_pauses_the_collector_and_freezes_what_it_leaves(tiny_model_dir):
    """Full collections walked every object the model load left (180-290 ms each in a
    served process): a load runs with the collector paused, then freezes what is alive;
    the next load unfreezes first (a replaced model's objects stay collectable), and a
    failed load leaves the collector on."""
    import gc

    host = ModelHost(lambda *_: None, lambda *_: None)
    try:
        gc.unfreeze()
        host.load(str(tiny_model_dir), "float32", "cpu", "off").result(300)
        assert host.state == "ready" and gc.isenabled() and gc.get_freeze_count() > 0
        host.load(str(tiny_model_dir / "missing"), "float32", "cpu", "off").result(300)
        assert host.state == "error" and gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


def test_a_long_job_runs_the_completions_asked_meanwhile_between_its_steps():
    """A function body calls ``run_waiting`` between its steps: a completion queued while it
    runs is answered there, before the body ends; a job that is not interleavable (a warm-up,
    a model load) still waits for the body; none runs inside the completion."""
    host = ModelHost(lambda *_: None, lambda *_: None)
    order: list[str] = []
    started, asked = threading.Event(), threading.Event()

    def body() -> str:
        started.set()
        for _ in range(300):
            time.sleep(0.01)
            host.run_waiting()
            if asked.is_set() and "completion" in order:
                break
        order.append("body")
        return "body"

    def completion() -> str:
        assert host.run_waiting() == 0.0  # no nesting inside the nested job
        assert host.describe()["busy"]["task"] == "completion a.py"
        order.append("completion")
        return "answer"

    async def main():
        long = host.submit(body, label="body a.py")
        while not started.is_set():
            await asyncio.sleep(0.01)
        warm = host.submit(lambda: order.append("warm"), label="warm b.py")
        fg = host.submit(completion, label="completion a.py", interleave=True)
        asked.set()
        assert await asyncio.wait_for(fg, 5) == "answer"
        assert await asyncio.wait_for(long, 5) == "body"
        await asyncio.wait_for(warm, 5)
        assert order == ["completion", "body", "warm"]
        assert host.waiting() == 0

    try:
        asyncio.run(main())
    finally:
        host.close()


def test_a_job_still_queued_at_close_is_cancelled():
    host = ModelHost(lambda *_: None, lambda *_: None)
    started, release = threading.Event(), threading.Event()

    async def main():
        first = host.submit(lambda: started.set() or release.wait(5), label="long")
        while not started.is_set():
            await asyncio.sleep(0.01)
        queued = host.submit(lambda: "never", label="completion", interleave=True)
        host.close()
        release.set()
        await asyncio.wait_for(first, 5)
        try:
            await asyncio.wait_for(queued, 5)
        except asyncio.CancelledError:
            return
        raise AssertionError("a job queued at close ran or was left waiting")

    asyncio.run(main())


def test_the_running_jobs_own_document_waits_for_it():
    """``run_waiting(exclude=uri)``: a completion of the running block's own document is not
    run inside it (it waits for it, or stops it); another document's is."""
    host = ModelHost(lambda *_: None, lambda *_: None)
    order: list[str] = []
    started, queued = threading.Event(), threading.Event()

    def block() -> None:
        started.set()
        queued.wait(5)
        host.run_waiting(exclude="a.py")
        order.append("block")

    async def main():
        running = host.submit(block, label="completion a.py", interleave=True, owner="a.py")
        while not started.is_set():
            await asyncio.sleep(0.01)
        own = host.submit(lambda: order.append("a.py"), label="completion a.py", interleave=True, owner="a.py")
        other = host.submit(lambda: order.append("b.py"), label="completion b.py", interleave=True, owner="b.py")
        queued.set()
        await asyncio.wait_for(asyncio.gather(running, own, other), 5)
        assert order == ["b.py", "block", "a.py"]

    try:
        asyncio.run(main())
    finally:
        host.close()


def test_a_deferred_cost_curve_is_measured_only_while_quiet_and_not_retried_after_a_failure() -> None:
    """The host measures a deferred cost curve between jobs and only while ``quiet()`` (no
    index being built); a measurement that fails leaves the server on plain AR, says why in
    ``describe()`` and is not tried again after every job."""
    quiet = threading.Event()
    calls: list[str] = []

    class Engine:  # what the host reads of fastcoder.engine.Engine
        verifier = SimpleNamespace(graph_status=lambda: {})
        calibration = SimpleNamespace(to_json=lambda: {})

        def curve_state(self):
            return {"state": "measuring", "units": [len(calls), 100]}

        def measure_some(self, stop):
            calls.append("unit")
            raise RuntimeError("out of memory")

        def close(self):
            pass

    host = ModelHost(lambda *_: None, lambda *_: None, quiet=quiet.is_set)
    host.engine = Engine()
    try:
        host.measure_when_idle()  # not quiet: nothing runs
        host._executor.submit(lambda: None).result(5)
        assert calls == []
        quiet.set()
        host.measure_when_idle()
        host._executor.submit(lambda: None).result(5)
        assert calls == ["unit"] and host.curve_error == "RuntimeError: out of memory"
        host.measure_when_idle()  # failed once: not again
        host._executor.submit(lambda: None).result(5)
        assert calls == ["unit"] and host.describe()["costCurve"]["error"] == "RuntimeError: out of memory"
    finally:
        host.close()
