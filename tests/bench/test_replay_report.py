"""The typing replay's report: side-by-side summary, identical share, the red flag for a
method slower than AR, tasks taken from real files. No model: synthetic samples."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

from fastcoder_bench.replay import (
    Sample, identical_shares, keystrokes, neighbours, paired_vs_ar, print_table, slower_than_ar, summarize, task_from_span,
)  # fmt: skip


def run(latencies, texts, accept=(10, 5), model=True):
    samples = [
        Sample(index=i, seconds=s, text=t, expected=t, gap_left=0.1, typed_through=False, model_ran=model,
               prefill_ms=10.0, engine_ms=1000 * s - 5, accepted_by_source={"context": 1})
        for i, (s, t) in enumerate(zip(latencies, texts))
    ]  # fmt: skip
    new, fwd = accept
    stats = {"total": {"generations": 1, "newTokens": new + 1, "forwardSteps": fwd, "decodeMs": 100.0,
                       "promptTokens": 100, "prefillTokens": 40},
             "outcomes": {}, "model": {"name": "m"}, "index": {"summary": "x"}}  # fmt: skip
    return {"samples": samples, "stats": stats, "keys": 10, "typing_s": 2.0, "ready_s": 1.0}


def test_summary_time_split_and_red_flag(capsys):
    ar = [run([5.0, 0.40, 0.50, 0.60], ["a", "b", "c", "d"], accept=(10, 10))]
    fc = [run([5.0, 0.70, 0.80, 0.90], ["a", "b", "x", "d"], accept=(10, 4))]
    # one more request where AR's text is longer: a prefix (a time budget's cut), no divergence
    extra = dataclasses.replace(fc[0]["samples"][3], index=4, text="e")
    more = {"ar": ar[0]["samples"] + [dataclasses.replace(extra, text="ef")], "fastcoder": fc[0]["samples"] + [extra]}
    s = {"ar": summarize(ar), "fastcoder": summarize(fc)}
    assert s["ar"]["model_run"]["n"] == 3 and round(s["ar"]["model_run"]["p50_ms"]) == 500
    assert s["fastcoder"]["mean_accept_length"] == 2.5 and s["ar"]["mean_accept_length"] == 1.0
    split = s["ar"]["time_split_ms"]
    assert split["debounce"] == 150 and split["prefill"] == 10.0
    assert round(split["decode"]) == 485 and round(split["post_and_protocol"]) == 5
    assert s["ar"]["prefill_saving"] == 0.6 and s["ar"]["accepted_by_source"] == {"context": 4}
    same = identical_shares([{"ar": ar[0]["samples"], "fastcoder": fc[0]["samples"]}])
    assert same["all_methods"] == 0.75 and same["vs_ar"]["fastcoder"] == 0.75
    more = identical_shares([more])
    assert more["vs_ar"]["fastcoder"] == 0.6
    assert more["diverging_from_ar"]["fastcoder"] == 0.2  # "c" vs "x" only; "ef" vs "e" is a cut, not a divergence
    assert slower_than_ar(s) == {"fastcoder": 800 / 500}
    md = print_table(s, same, color=False)
    out = capsys.readouterr().out
    assert "SLOWER THAN AR" in out and "fastcoder: model-run p50 is 1.60x AR's" in out
    assert "\\color{red}" in md and md.count("\\color{red}") == 1  # only the slow method
    # a faster method is not flagged
    s["fastcoder"] = summarize([run([5.0, 0.2, 0.2, 0.2], ["a"] * 4)])
    assert slower_than_ar(s) == {} and "\\color{red}" not in print_table(s, same, color=False)


def test_early_answers_count_in_the_model_run_figures_and_methods_compare_on_the_same_requests(capsys):
    """A slower method answers more requests early (its block is not done by earlyAnswerMs):
    leaving early answers out kept only AR's quick request and flagged the faster method
    as 3x slower (seen in a real replay). The model-run figures time every request that
    ran the model to the answer shown, and AR is compared on the same requests."""
    ar = run([5.0, 0.45, 0.45, 0.10, 0.002], ["a", "b", "c", "d", "e"])
    fc = run([5.0, 0.30, 0.32, 0.10, 0.002], ["a", "bb", "cc", "d", "e"])
    for i in (1, 2):  # AR showed the first lines while its block went on; FastCoder finished
        ar["samples"][i] = dataclasses.replace(ar["samples"][i], early=True)
    for r in (ar, fc):  # the last request was typed through: no model run
        r["samples"][4] = dataclasses.replace(r["samples"][4], model_ran=False, typed_through=True)
    s = {"ar": summarize([ar]), "fastcoder": summarize([fc])}
    assert s["ar"]["model_run"]["n"] == 1 and s["fastcoder"]["model_run"]["n"] == 3  # the biased view
    assert s["ar"]["model_answer"]["n"] == 3 and round(s["ar"]["model_answer"]["p50_ms"]) == 450
    assert round(s["fastcoder"]["model_answer"]["p50_ms"]) == 300
    paired = paired_vs_ar([{"ar": ar["samples"], "fastcoder": fc["samples"]}])
    pair = paired["fastcoder"]
    assert pair["n"] == 3 and round(pair["ar_p50_ms"]) == 450 and round(pair["p50_ms"]) == 300
    assert round(pair["ratio"], 3) == round(300 / 450, 3) and round(pair["median_ratio"], 3) == round(0.32 / 0.45, 3)
    assert slower_than_ar(s, paired) == {}
    md = print_table(s, identical_shares([{"ar": ar["samples"], "fastcoder": fc["samples"]}]), color=False, paired=paired)
    assert "SLOWER THAN AR" not in capsys.readouterr().out and "\\color{red}" not in md
    assert "| fastcoder | 300 | " in md and "0.67× (3)" in md


def test_rescore_reads_an_earlier_report(tmp_path: Path, capsys):
    """`fastcoder bench replay --rescore report.json`: the model-run figures of a run
    already made, from the samples its report kept (early answers included)."""
    import json

    from fastcoder_bench.replay import main

    ar = run([5.0, 0.45, 0.10], ["a", "b", "c"])
    fc = run([4.0, 0.30, 0.10], ["a", "bb", "c"])
    ar["samples"][1] = dataclasses.replace(ar["samples"][1], early=True)
    samples = {k: [[dataclasses.asdict(x) for x in r["samples"]]] for k, r in (("ar", ar), ("fastcoder", fc))}
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"kind": "replay", "results": {"samples": samples}}))
    assert main(["--rescore", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ar                   model ran: n=2 p50" in out and "complete runs only: n=1" in out
    assert "vs AR on the same 2 requests 0.73x" in out  # p50 of (0.30, 0.10) / p50 of (0.45, 0.10)


def test_task_from_a_suite_span_types_the_body_after_the_docstring(tmp_path: Path):
    from fastcoder_bench.suite.tasks import FunctionSpan

    src = 'import os\n\n\ndef f(x):\n    """Doc."""\n    y = x + 1\n    return y\n\n\ndef g():\n    """G."""\n    return 2\n'
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "big.py").write_text("x = 1\n" * 50)
    (tmp_path / "small.py").write_text("y = 2\n")
    span = FunctionSpan(path="m.py", qualname="f", def_line=4, body_start=6, body_end=7, indent=4)
    task = task_from_span(tmp_path, span, "proj")
    assert task.body == "y = x + 1\n    return y\n"
    assert task.before.endswith('"""Doc."""\n    ') and task.before + task.body + task.after == src
    assert task.name == "proj/m.py::f"
    assert neighbours(tmp_path / "m.py", 1) == (tmp_path / "big.py",)
    # the typing script reproduces the body exactly
    keys = keystrokes(task.body, random.Random(0))
    assert "".join(k.typed for k in keys) == task.body


# ---------------------------------------------------------------------------- layouts and keys


def test_run_keys_and_order_per_layout():
    from fastcoder_bench.replay import ar_key, run_key, run_order, split_key

    layouts = ["default", "psm"]
    keys = [run_key(m, lay, layouts) for lay in layouts for m in ["ar", "fastcoder"]]
    assert keys == ["ar", "fastcoder", "ar@psm", "fastcoder@psm"]
    assert split_key("fastcoder@psm") == ("fastcoder", "psm") and split_key("ar") == ("ar", "")
    assert ar_key("fastcoder@psm") == "ar@psm" and ar_key("fastcoder") == "ar"
    # the first layout listed gets the bare names, whatever it is
    assert run_key("ar", "psm", ["psm", "default"]) == "ar" and run_key("ar", "default", ["psm", "default"]) == "ar@default"
    # every pair once per file, rotated from file to file
    orders = [run_order(["ar", "fastcoder"], layouts, i) for i in range(5)]
    assert all(sorted(o) == sorted(orders[0]) and len(o) == 4 for o in orders)
    assert orders[0][0] == ("ar", "default") and orders[1][0] == ("fastcoder", "default") and orders[2][0] == ("ar", "psm")
    assert orders[4] == orders[0]


def test_layouts_compare_within_their_own_layout(capsys):
    from fastcoder_bench.replay import compare_layouts, print_layouts

    def with_prefill(r, tokens):
        for s in r["samples"]:
            s.prefill_tokens = tokens
        return r

    runs = {
        "ar": [with_prefill(run([5.0, 0.40, 0.50, 0.60], ["a", "b", "c", "d"]), 100)],
        "fastcoder": [with_prefill(run([5.0, 0.30, 0.30, 0.30], ["a", "b", "x", "d"]), 120)],
        "ar@psm": [with_prefill(run([5.0, 0.10, 0.10, 0.10], ["a", "b", "c", "e"]), 4)],
        "fastcoder@psm": [with_prefill(run([5.0, 0.20, 0.20, 0.20], ["a", "b", "c", "e"]), 6)],
    }
    s = {k: summarize(v) for k, v in runs.items()}
    assert s["fastcoder@psm"]["prefill_tokens"] == {"median": 6.0, "p95": 6.0}
    same = identical_shares([{k: v[0]["samples"] for k, v in runs.items()}])
    # fastcoder@psm is compared with ar@psm (same text everywhere), fastcoder with ar
    assert same["vs_ar"] == {"fastcoder": 0.75, "fastcoder@psm": 1.0}
    assert same["requests"] == 8 and same["all_methods"] == 7 / 8
    assert same["by_layout"] == {"default": {"all_methods": 0.75, "requests": 4}, "psm": {"all_methods": 1.0, "requests": 4}}
    # fastcoder@psm is slower than ar@psm (0.2 vs 0.1), fastcoder is faster than ar
    assert slower_than_ar(s) == {"fastcoder@psm": 2.0}
    md = print_table(s, same, color=False, accept=True)
    out = capsys.readouterr().out
    assert "fastcoder@psm: model-run p50 is 2.00x ar@psm's" in out
    head = md.splitlines()[0]
    assert "prefill tok (median)" in head and "after-accept p50 ms" in head and "ready" in head
    assert [ln.split(" | ")[0] for ln in md.splitlines()[2:]] == ["| ar", "| fastcoder", "| ar@psm", "| fastcoder@psm"]
    assert md.count("\\color{red}") == 1
    cmp = compare_layouts(s, ["ar", "fastcoder"], ["default", "psm"])
    assert round(cmp["fastcoder"]["psm"]["model_run_p50_ratio"], 6) == 1.5
    assert cmp["ar"]["psm"]["prefill_tokens_median"] == [100.0, 4.0]
    lines = print_layouts(cmp, ["default", "psm"])
    assert lines[1] == "fastcoder: default/psm model-run p50 1.50x (300 vs 200 ms), prefill tokens median 120 vs 6"
    # the same comparison on the requests where both layouts ran the model
    per_file = [{k: v[0]["samples"] for k, v in runs.items()}]
    paired = compare_layouts(s, ["ar", "fastcoder"], ["default", "psm"], per_file)
    pair = paired["fastcoder"]["psm"]["same_requests"]
    assert pair["n"] == 3 and round(pair["ratio"], 6) == 1.5
    assert round(paired["ar"]["psm"]["same_requests"]["ratio"], 6) == 5.0
    assert print_layouts(paired, ["default", "psm"])[1] == (
        "fastcoder: default/psm model-run p50 1.50x (300 vs 200 ms); 1.50x on the same 3 requests, "
        "prefill tokens median 120 vs 6")  # fmt: skip


def test_summary_every_request_after_accept_and_accepts():
    r = run([5.0, 0.40, 0.05, 0.60, 0.02], ["a", "b", "c", "d", "e"])
    smp = r["samples"]
    smp[1].accepted, smp[1].accepted_chars = True, 7
    smp[2].after_accept, smp[2].ready, smp[2].model_ran = True, True, False
    smp[3].accepted, smp[3].accepted_chars = True, 3
    smp[4].after_accept, smp[4].typed_through, smp[4].model_ran = True, True, False
    r["typed_chars"], r["accept_refused"] = 30, {"closers": 2}
    s = summarize([r])
    assert s["all_requests"]["n"] == 5 and s["all_requests"]["max_ms"] == 5000.0
    assert round(s["all_requests"]["p50_ms"]) == 400 and round(s["all_requests"]["p95_ms"]) == 4120
    assert s["after_accept"]["n"] == 2 and s["after_accept"]["ready_share"] == 0.5
    assert round(s["after_accept"]["p50_ms"]) == 35
    assert s["accepts"] == {"n": 2, "chars": 10, "chars_share": 0.25, "refused": {"closers": 2}}
    assert s["model_run"]["n"] == 2 and s["ready"] == 1
    # without accepts: the fields are there, empty
    s0 = summarize([run([5.0, 0.4], ["a", "b"])])
    assert s0["after_accept"] == {"n": 0, "p50_ms": None, "p95_ms": None, "ready_share": None}
    assert s0["accepts"]["n"] == 0 and s0["accepts"]["chars_share"] is None


def test_requests_matched_by_where_they_were_sent():
    """With --accept the runs part ways; requests pair up by body offset and closers."""
    def sample(at, text, closers=""):
        return Sample(index=0, seconds=0.1, text=text, expected="", gap_left=0.1, typed_through=False,
                      model_ran=True, at=at, closers=closers)  # fmt: skip

    ar = [sample(0, "x"), sample(5, "y"), sample(9, "z", ")")]
    fc = [sample(0, "x"), sample(7, "q"), sample(9, "z", ")"), sample(12, "w")]
    same = identical_shares([{"ar": ar, "fastcoder": fc}])
    assert same["requests"] == 2 and same["all_methods"] == 1.0 and same["vs_ar"] == {"fastcoder": 1.0}
    fc[2] = sample(9, "z", "")  # same offset, other closers right of the cursor: another buffer
    assert identical_shares([{"ar": ar, "fastcoder": fc}])["requests"] == 1


# ---------------------------------------------------------------------------- accepting


def buffer_of(before, body, typed, right, after):
    return before + body[:typed] + right + after


def test_keystrokes_track_the_auto_closers_right_of_the_cursor():
    from fastcoder_bench.replay import _script

    body = "x = f(a, [b])\n"
    keys = _script(body)
    assert [k.at for k in keys] == list(range(len(body)))
    assert [k.right for k in keys if k.typed in "([])"] == [")", "])", ")", ""]
    assert "".join(k.typed for k in keys) == body
    # replaying the keys on a buffer keeps before + body[:typed] + closers + after
    buf, cur, typed = "B" + "A", 1, 0
    for k in keys:
        buf = buf[:cur] + k.insert + buf[cur:]
        cur += k.cursor_after
        typed += len(k.typed)
        assert buf == buffer_of("B", body, typed, k.right, "A")


def replay_keys(buf, cur, keys, before, body, after):
    for k in keys:
        buf = buf[:cur] + k.insert + buf[cur:]
        cur += k.cursor_after
        assert buf == buffer_of(before, body, k.at + len(k.typed), k.right, after)
    return buf, cur


def test_enter_between_brackets_splits_them_as_vs_code_does():
    """Enter right after an auto-closed opener puts the closer on a line of its own (VS
    Code's IndentOutdent): the argument lines have nothing right of the cursor, and the
    user moves down onto the closer's line instead of typing it."""
    from fastcoder_bench.replay import _script

    body = "return self.request(\n        url,\n        params=params,\n    )\n"
    keys = _script(body)
    enters = [k for k in keys if k.typed.startswith("\n")]
    assert enters[0].insert == "\n        " + "\n    " and enters[0].cursor_after == len("\n        ")
    assert [k.right for k in enters] == ["\n    )", "\n    )", ")", ""]
    assert enters[2].typed == "\n    " and enters[2].insert == ""  # onto the closer's line
    closer = next(k for k in keys if k.typed == ")")
    assert closer.insert == "" and closer.right == ""
    buf, _ = replay_keys("B" + "A", 1, keys, "B", body, "A")
    assert buf == "B" + body + "A"
    # nested: the rest of the line goes down with the closer
    body = "x = f(g(\n    1\n))\n"
    keys = _script(body)
    assert [k.right for k in keys if k.typed.startswith("\n")][0] == "\n))"
    assert replay_keys("", 0, keys, "", body, "")[0] == body


def test_quotes_close_as_vs_code_closes_them():
    """The replay's editor closes quotes where VS Code's own editor does with Python's
    language configuration (the same cases, checked there by the browser scenario
    ``editor-model``), types over them, and the document typed is the body."""
    from fastcoder_bench.replay import _script, closers_after

    cases = [
        ('x = "', '"'), ('x = "GET"', ""), ('x = "GET", f"', '"'), ('x = "GET", f"a"', ""),
        ("d = don'", ""), ('h = print(x"', ")"), ("c = 1  # '", ""), ('k = 1  # "', '"'),
        ("y = \"it'", '"'), ('e = "a\\"', '"'), ('p = "a(', ')"'), ('u = """', ""),
    ]
    for typed, right in cases:
        assert closers_after(typed, 0, len(typed), "") == right, typed
    assert closers_after('x = "a"', 0, 7, "", autoclose=False) == ""
    for body in ('x = "GET", f"{a}"\n', 'd = "it\'s"  # don\'t\n', 'u = """doc\n    more"""\ny = 1\n', 'e = "a\\"b"\n'):
        assert replay_keys("", 0, _script(body), "", body, "")[0] == body, body


def test_enter_keeps_the_closer_where_the_body_does_not_split():
    """A closer the body writes at the end of an argument line (or at another
    indentation) stays right of the cursor, as before the split was modelled."""
    from fastcoder_bench.replay import _script

    for body in ("x = f(\n    a, b)\ny = 1\n", "if a:\n    x = f(\n        a,\n)\n", "x = f(a,\n      b)\n"):
        keys = _script(body)
        assert all(k.insert == k.typed for k in keys if k.typed.startswith("\n")), body
        assert replay_keys("", 0, keys, "", body, "")[0] == body


def test_accept_the_next_argument_line_above_a_split_closer():
    from fastcoder_bench.replay import closers_after, plan_accept, rest_keys

    before, after = "async def head(self, url):\n    ", "\n"
    body = "return self.request(\n        url,\n        params=params,\n    )\n"
    typed = body.index("url,") + len("url,")
    right = closers_after(body, 0, typed, "")
    assert right == "\n    )"
    buf = buffer_of(before, body, typed, right, after)
    cursor = len(before) + typed
    plan, why = plan_accept(body, typed, right, buf, cursor, "\n        params=params,")
    assert why == "" and plan.right == right
    new = buf[: plan.start] + plan.insert + buf[plan.end :]
    new, _ = replay_keys(new, plan.start + len(plan.insert), rest_keys(body, plan.at, plan.right, script=[], seed=0),
                         before, body, after)  # fmt: skip
    assert new == before + body + after
    # the same lines with the closer: accepting would leave a second ")" below
    assert plan_accept(body, typed, right, buf, cursor, "\n        params=params,\n    )")[1] == "closers"


def test_accept_argument_lines_right_after_the_opener():
    """At ``request(|)`` the server suggests the arguments on lines of their own, ending
    with a line break and the closer's indentation (the ``)`` stays right of the cursor and
    lands below them): Tab gives the document that typing gives, and typing on finishes it."""
    from fastcoder_bench.replay import closers_after, plan_accept, rest_keys

    before, after = "async def head(self, url):\n    ", "\n"
    body = "return self.request(\n        url,\n        params=params,\n    )\n"
    typed = len("return self.request(")
    right = closers_after(body, 0, typed, "")
    assert right == ")"
    buf = buffer_of(before, body, typed, right, after)
    cursor = len(before) + typed
    plan, why = plan_accept(body, typed, right, buf, cursor, "\n        url,\n        params=params,\n    ")
    assert why == "", why
    new = buf[: plan.start] + plan.insert + buf[plan.end :]
    assert new == buffer_of(before, body, plan.at, plan.right, after)
    new, _ = replay_keys(new, plan.start + len(plan.insert), rest_keys(body, plan.at, plan.right, script=[], seed=0),
                         before, body, after)  # fmt: skip
    assert new == before + body + after
    # the first argument line alone (an early answer): Tab, then the rest is typed
    plan, why = plan_accept(body, typed, right, buf, cursor, "\n        url,\n    ")
    assert why == "", why
    new = buf[: plan.start] + plan.insert + buf[plan.end :]
    new, _ = replay_keys(new, plan.start + len(plan.insert), rest_keys(body, plan.at, plan.right, script=[], seed=0),
                         before, body, after)  # fmt: skip
    assert new == before + body + after


def test_accept_a_suggestion_trimmed_before_the_auto_closed_paren():
    from fastcoder_bench.replay import plan_accept, rest_keys

    before, after = "def f():\n    ", "\n"
    body = "return g(a, b)\n    y = 1\n"
    typed, right = len("return g("), ")"
    buf = buffer_of(before, body, typed, right, after)
    cursor = len(before) + typed
    # the server trimmed the ")" that is already right of the cursor: accepted
    plan, why = plan_accept(body, typed, right, buf, cursor, "a, b")
    assert why == "" and plan is not None and plan.shown == "a, b" and plan.at == typed + 4 and plan.right == ")"
    new = buf[: plan.start] + plan.insert + buf[plan.end :]
    assert new == buffer_of(before, body, plan.at, plan.right, after)
    # what is left to type steps over the pending ")" and ends with the body's text
    keys = rest_keys(body, plan.at, plan.right, script=[], seed=0)
    cur = plan.start + len(plan.insert)
    for k in keys:
        new = new[:cur] + k.insert + new[cur:]
        cur += k.cursor_after
    assert keys[0].typed == ")" and keys[0].insert == "" and new == before + body + after
    # the same text with the ")": the editor would leave a stray ")" -> no Tab
    plan, why = plan_accept(body, typed, right, buf, cursor, "a, b)")
    assert plan is None and why == "closers"
    # ... unless the item's range covers the auto-closed ")": then it replaces it
    plan, why = plan_accept(body, typed, right, buf, cursor, "a, b)", span=(cursor, cursor + 1))
    assert why == "" and plan.right == "" and plan.at == typed + 5
    assert buf[: plan.start] + plan.insert + buf[plan.end :] == buffer_of(before, body, plan.at, "", after)
    # a range reaching past the closers into the document: no
    assert plan_accept(body, typed, right, buf, cursor, "a, b)\n", span=(cursor, cursor + 2))[1] == "range"
    # a range starting before the cursor: its text must start with what is there
    plan, why = plan_accept(body, typed, right, buf, cursor, "g(a, b", span=(cursor - 2, cursor))
    assert why == "" and plan.shown == "a, b" and plan.right == ")"
    assert plan_accept(body, typed, right, buf, cursor, "h(a, b", span=(cursor - 2, cursor))[1] == "range"


def test_accept_only_what_the_user_types_next():
    from fastcoder_bench.replay import plan_accept

    body = "return g(a, b)\n"
    buf = buffer_of("", body, 7, "", "")
    assert plan_accept(body, 7, "", buf, 7, "")[1] == "empty"
    assert plan_accept(body, 7, "", buf, 7, "  \n ")[1] == "empty"
    assert plan_accept(body, 7, "", buf, 7, "g(a, c)")[1] == "no-match"
    plan, why = plan_accept(body, 7, "", buf, 7, "g(a, b)\n")  # to the end of the body
    assert why == "" and plan.at == len(body) and plan.right == ""


def test_accept_an_open_call_then_type_its_closer():
    """``foo(`` accepted: nothing auto-closed it, so the user types the ``)`` (inserted,
    not stepped over) and the document ends the same."""
    from fastcoder_bench.replay import plan_accept, rest_keys

    body = "y = h(foo(x))\n"
    typed, right = len("y = h("), ")"
    buf = buffer_of("", body, typed, right, "")
    plan, why = plan_accept(body, typed, right, buf, typed, "foo(")
    assert why == "" and plan.right == ")"
    new = buf[: plan.start] + plan.insert + buf[plan.end :]
    cur = plan.start + len(plan.insert)
    for k in rest_keys(body, plan.at, plan.right, script=[], seed=0):
        new = new[:cur] + k.insert + new[cur:]
        cur += k.cursor_after
        assert new == buffer_of("", body, k.at + len(k.typed), k.right, "")
    assert new == body


def test_rest_keys_keep_the_pauses_of_the_script():
    from fastcoder_bench.replay import rest_keys

    body = "a = b(1)\nif a:\n    c = 2\n"
    script = keystrokes(body, random.Random(3))
    rest = rest_keys(body, 4, ")", script, seed=3)  # from "a = " on, with a ")" pending
    by_at = {k.at: k for k in script}
    assert all(k.gap == by_at[k.at].gap for k in rest if by_at[k.at].typed == k.typed)
    # starting inside an indentation: the spaces are single keys with drawn pauses, then the script again
    start = body.index("    c") + 2
    rest = rest_keys(body, start, "", script, seed=3, stop=len(body) - 2)
    assert [k.typed for k in rest[:3]] == [" ", " ", "c"] and rest[-1].at < len(body) - 2
    assert rest[0].gap == rest_keys(body, start, "", script, seed=3)[0].gap > 0  # deterministic
    assert rest[2].gap == by_at[rest[2].at].gap


def test_utf16_offsets_round_trip():
    from fastcoder_bench.replay import utf16_offset, utf16_pos

    text = "a😀b\n\tcé\n"
    for off in range(len(text) + 1):
        assert utf16_offset(text, *utf16_pos(text, off)) == off
    assert utf16_offset(text, 0, 99) == 3 and utf16_offset(text, 9, 0) == len(text)


def test_layout_names_become_server_options():
    from fastcoder_bench.replay import layout_options

    assert layout_options("default") == {}
    assert layout_options("psm+nocontext") == {"promptLayout": "psm", "crossFileContext": False}
    assert layout_options("packed") == {"packWeights": "on"} and layout_options("plain") == {"packWeights": "off"}
    assert layout_options("context+plain") == {"crossFileContext": True, "packWeights": "off"}
    assert layout_options("middle") == {"crossFileContext": True, "contextPlacement": "before-middle"}
    assert layout_options("noprune") == {"engine": {"pruneAtLineEnd": False}}
    assert layout_options("noprune+nomerge") == {"engine": {"pruneAtLineEnd": False, "mergePromptTail": 0}}
    assert layout_options("noagree") == {"engine": {"sourceAgreement": False}}
    assert layout_options("nogate+nomerge") == {"engine": {"sourceGate": False, "mergePromptTail": 0}}
    assert layout_options("nocalib") == {"engine": {"stepCalibration": False}}
    assert layout_options("calib") == {"engine": {"stepCalibration": True}}
    assert layout_options("noheader+nocontext") == {"fileHeader": False, "crossFileContext": False}
    assert layout_options("nowarm") == {"warmAtCursor": False}
    assert layout_options("nointerrupt") == {"engine": {"interruptSteps": False}}
    assert layout_options("nomidblocks") == {"midLineBlocks": False} and layout_options("midblocks") == {"midLineBlocks": True}
    assert layout_options("sdpa") == {"explicitAttention": "off"} and layout_options("explicit") == {"explicitAttention": "auto"}
    assert layout_options("interrupt") == {"engine": {"interruptSteps": True}}
    assert layout_options("window1024+early150") == {"maxPromptTokens": 1024, "earlyAnswerMs": 150}
    assert layout_options("debounce0") == {"debounceMs": 0} and layout_options("debounce120") == {"debounceMs": 120}
    assert layout_options("model=qwen2.5-coder-1.5b+early0") == {"model": "qwen2.5-coder-1.5b", "earlyAnswerMs": 0}


def test_rounds_type_every_file_again_with_the_method_order_reversed(monkeypatch, capsys):
    """``--rounds 2``: each file typed twice, AR and FastCoder swapping places in the second
    round (AR, FastCoder, FastCoder, AR on a file), every run pooled and paired per file."""
    import argparse

    import fastcoder_bench.replay as replay_mod

    tasks = [replay_mod.Task(path=Path(f"f{i}.py"), function="f", before="", body="x", after="") for i in range(2)]
    for i, t in enumerate(tasks):
        t.name = f"f{i}"
    monkeypatch.setattr(replay_mod, "_tasks", lambda args: tasks)
    order = []

    async def fake_replay(args, task, workspace):
        order.append((task.name, args.method))
        return run([2.0, 0.4 if args.method == "ar" else 0.3], ["a", "b"])

    monkeypatch.setattr(replay_mod, "replay", fake_replay)
    monkeypatch.setattr(replay_mod, "task_workspace", lambda task, ws: None)
    args = argparse.Namespace(methods="ar,fastcoder", layouts="default", rounds=2, accept=False, json=None)
    results = replay_mod._run(args)
    assert order == [("f0", "ar"), ("f0", "fastcoder"), ("f1", "fastcoder"), ("f1", "ar"),
                     ("f0", "fastcoder"), ("f0", "ar"), ("f1", "ar"), ("f1", "fastcoder")]  # fmt: skip
    assert results["files"] == ["f0", "f1", "f0", "f1"]
    assert all(len(v) == 4 for v in results["samples"].values())
    assert results["paired_vs_ar"]["fastcoder"]["n"] == 4  # each round's later request, paired per file
