"""Live typing (fastcoder_bench.live): what the user sees after each keystroke, from the
keys' times and the requests' answers; the summary's felt latency at pauses."""

from __future__ import annotations

from fastcoder_bench.live import REQUEST_CANCELLED, Request, summarize, table, visible
from fastcoder_bench.replay import Key, keystrokes

BODY = "x = f(a)\n"


def _keys(body: str = BODY) -> list[Key]:
    import random

    return keystrokes(body, random.Random(0))


def test_an_answer_is_visible_from_its_arrival_until_the_next_key():
    keys = _keys()
    times = [10.0 * i for i in range(len(keys))]  # a key every 10 s
    reqs = [
        Request(key=0, sent=0.05, answered=0.30, text="y = 1"),  # in the gap after key 0
        Request(key=1, sent=10.05, answered=20.5, text="= f(a)"),  # after key 2 came: stale, never shown
    ]
    seen = visible(keys, times, BODY, reqs)
    assert abs(seen[0].latency - 0.30) < 1e-9 and seen[0].text == "y = 1" and not seen[0].carried
    assert seen[1].latency is None and seen[1].text == ""
    assert seen[0].expected == BODY[1:] and seen[0].gap == 10.0


def test_typing_into_a_ghost_text_carries_it_at_once():
    keys = _keys()
    times = [1.0 * i for i in range(len(keys))]
    reqs = [Request(key=0, sent=0.05, answered=0.2, text=" = g(b)")]
    seen = visible(keys, times, BODY, reqs)
    # key 1 types " ": the ghost text " = g(b)" starts with it -> "= g(b)" at once
    assert seen[1].carried and seen[1].latency == 0.0 and seen[1].text == "= g(b)"
    assert seen[2].carried and seen[2].text == " g(b)"
    # key 4 is "f": the ghost text goes on with "g" -> gone
    assert keys[4].typed == "f" and seen[4].latency is None and seen[4].text == ""


def test_no_carry_over_an_auto_closed_bracket_nor_a_used_up_ghost_text():
    keys = _keys()
    paren = next(i for i, k in enumerate(keys) if k.typed == "(")
    assert keys[paren].insert == "()"  # the editor inserted the closer too
    times = [1.0 * i for i in range(len(keys))]
    reqs = [Request(key=paren - 1, sent=0, answered=paren - 1 + 0.1, text="(a)")]
    seen = visible(keys, times, BODY, reqs)
    assert seen[paren - 1].text == "(a)" and not seen[paren].carried and seen[paren].text == ""
    # a ghost text the key uses up entirely leaves nothing to show
    reqs = [Request(key=0, sent=0, answered=0.1, text=" ")]
    assert visible(keys, times, BODY, reqs)[1].text == ""


def test_the_first_answer_sets_the_latency_the_latest_the_text_and_errors_show_nothing():
    keys = _keys()
    times = [1.0 * i for i in range(len(keys))]
    reqs = [
        Request(key=0, sent=0.05, answered=0.9, text=" = f(a)"),
        Request(key=0, sent=0.05, answered=0.4, text=" = h"),
        Request(key=0, sent=0.05, answered=0.2, error=REQUEST_CANCELLED),
        Request(key=0, sent=0.05, answered=0.1, text=""),
    ]
    s = visible(keys, times, BODY, reqs)[0]
    assert abs(s.latency - 0.4) < 1e-9 and s.text == " = f(a)"


def test_the_last_key_waits_for_its_suggestion():
    keys = _keys()
    times = [1.0 * i for i in range(len(keys))]
    last = len(keys) - 1
    reqs = [Request(key=last, sent=last + 0.05, answered=last + 3.0, text="return x")]
    s = visible(keys, times, BODY, reqs, last_wait=5.0)[last]
    assert s.gap == 5.0 and abs(s.latency - 3.0) < 1e-9
    assert visible(keys, times, BODY, reqs, last_wait=2.0)[last].latency is None


def _run(seen: list[dict], requests: list[dict] | None = None, busy: float = 0.0) -> dict:
    stats = lambda gens, pre, ms: {"total": {"generations": gens, "prefillMs": ms}, "prefetch": {"generations": pre}}  # noqa: E731
    return {"seen": seen, "requests": requests or [], "typing_s": 10.0, "first_ms": 2000.0,
            "before": stats(1, 0, 0.0), "after": stats(5, 2, 1000 * busy)}  # fmt: skip


def test_summary_counts_a_pause_without_a_suggestion_as_never():
    seen = [
        {"gap": 0.2, "latency": 0.05, "carried": False, "text": "a", "expected": "ab"},  # not a pause
        {"gap": 1.0, "latency": 0.0, "carried": True, "text": "bc", "expected": "bc\n"},
        {"gap": 1.0, "latency": 0.3, "carried": False, "text": "zz", "expected": "c\n"},
        {"gap": 1.0, "latency": None, "carried": False, "text": "", "expected": "\n"},
        {"gap": 1.0, "latency": None, "carried": False, "text": "", "expected": ""},
    ]
    reqs = [{"key": 0, "error": REQUEST_CANCELLED}, {"key": 1, "error": None}, {"key": -1, "error": None}]
    s = summarize([_run(seen, reqs, busy=4.0)], pause_s=0.5)
    assert s["pauses"]["n"] == 4 and s["pauses"]["shown_share"] == 0.5
    assert s["pauses_model"]["n"] == 3 and abs(s["pauses_model"]["shown_share"] - 1 / 3) < 1e-9
    assert s["pauses_model"]["p50_ms"] is None  # most of them never showed one
    assert s["keys_shown_share"] == 3 / 5 and s["pause_match_share"] == 0.5
    assert s["requests"] == 2 and s["cancelled"] == 1  # the first request (key -1) apart
    assert s["model_runs"] == 4 and s["background_runs"] == 2 and abs(s["busy_per_typed_s"] - 0.4) < 1e-9
    md = table({"fastcoder": s}, 500)
    assert "| fastcoder |" in md and "none" in md and "(50% of 4)" in md and "| 50% / 50% |" in md


def test_a_block_whose_first_line_is_right_counts_for_the_first_line_only():
    """At a pause a longer suggestion (a block ready sooner) is less often right as a whole:
    the summary gives the first line's share beside the whole's."""
    seen = [
        {"gap": 1.0, "latency": 0.1, "carried": False, "text": "x = 1\nreturn x", "expected": "x = 1\nreturn y\n"},
        {"gap": 1.0, "latency": 0.1, "carried": False, "text": "x = 1", "expected": "x = 1\n"},
        {"gap": 1.0, "latency": 0.1, "carried": False, "text": "\n    y = 2", "expected": "\n    y = 3\n"},
    ]
    s = summarize([_run(seen)], pause_s=0.5)
    assert abs(s["pause_match_share"] - 1 / 3) < 1e-9 and abs(s["pause_first_line_share"] - 2 / 3) < 1e-9


def test_rounds_type_every_file_again_with_the_method_order_reversed(monkeypatch):
    """``bench live --rounds 2``: as the replay's (the same :func:`typing_rounds`), each file
    typed twice, AR and FastCoder swapping places in the second round; every run pooled."""
    import argparse
    from pathlib import Path

    import fastcoder_bench.live as live_mod

    tasks = [live_mod.Task(path=Path(f"f{i}.py"), function="f", before="", body="x", after="") for i in range(2)]
    for i, t in enumerate(tasks):
        t.name = f"f{i}"
    monkeypatch.setattr(live_mod, "_tasks", lambda args: tasks)
    order = []

    def fake_type_live(args, task, ws):
        order.append((task.name, args.method))
        seen = [{"gap": 1.0, "latency": 0.3 if args.method == "ar" else 0.2, "carried": False, "text": "x", "expected": "x"}]
        return _run(seen) | {"keys": [], "times": [], "ready_s": 0.0, "curve_s": 0.0}

    monkeypatch.setattr(live_mod, "type_live", fake_type_live)
    monkeypatch.setattr(live_mod, "task_workspace", lambda task, ws: None)
    args = argparse.Namespace(methods="ar,fastcoder", layouts="default", rounds=2, pause_ms=500.0)
    results = live_mod._run(args)
    assert order == [("f0", "ar"), ("f0", "fastcoder"), ("f1", "fastcoder"), ("f1", "ar"),
                     ("f0", "fastcoder"), ("f0", "ar"), ("f1", "ar"), ("f1", "fastcoder")]  # fmt: skip
    assert results["files"] == ["f0", "f1", "f0", "f1"]
    assert results["methods"]["ar"]["files"] == 4 and results["methods"]["fastcoder"]["pauses"]["p50_ms"] == 200.0
