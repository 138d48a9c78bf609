"""The typing replay's report: side-by-side summary, identical share, the red flag for a
method slower than AR, tasks taken from real files. No model: synthetic samples."""

from __future__ import annotations

import random
from pathlib import Path

from fastcoder_bench.replay import (
    Sample, identical_shares, keystrokes, neighbours, print_table, slower_than_ar, summarize, task_from_span,
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
    s = {"ar": summarize(ar), "fastcoder": summarize(fc)}
    assert s["ar"]["model_run"]["n"] == 3 and round(s["ar"]["model_run"]["p50_ms"]) == 500
    assert s["fastcoder"]["mean_accept_length"] == 2.5 and s["ar"]["mean_accept_length"] == 1.0
    split = s["ar"]["time_split_ms"]
    assert split["debounce"] == 150 and split["prefill"] == 10.0
    assert round(split["decode"]) == 485 and round(split["post_and_protocol"]) == 5
    assert s["ar"]["prefill_saving"] == 0.6 and s["ar"]["accepted_by_source"] == {"context": 4}
    same = identical_shares([{"ar": ar[0]["samples"], "fastcoder": fc[0]["samples"]}])
    assert same["all_methods"] == 0.75 and same["vs_ar"]["fastcoder"] == 0.75
    assert slower_than_ar(s) == {"fastcoder": 800 / 500}
    md = print_table(s, same, color=False)
    out = capsys.readouterr().out
    assert "SLOWER THAN AR" in out and "fastcoder: model-run p50 is 1.60x AR's" in out
    assert "\\color{red}" in md and md.count("\\color{red}") == 1  # only the slow method
    # a faster method is not flagged
    s["fastcoder"] = summarize([run([5.0, 0.2, 0.2, 0.2], ["a"] * 4)])
    assert slower_than_ar(s) == {} and "\\color{red}" not in print_table(s, same, color=False)


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
