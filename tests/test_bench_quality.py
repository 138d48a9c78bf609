"""`fastcoder bench quality`: the cross-file task picker, the metrics, and (tiny random
model) one short run through the real server over stdio."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from fastcoder_bench.quality.metrics import edit_similarity, exact_match, identifier_match, identifiers, levenshtein, prediction, score
from fastcoder_bench.quality.tasks import Project, candidates, pick_tasks

A = '''\
"""Definitions used from b.py."""

LIMIT = 10


def helper(x):
    return x + 1


class Thing:
    def __init__(self, value):
        self.value = value
'''

B = '''\
from pkg.a import helper, Thing
from . import a as amod
from .c import local_only
import pkg.a as A


def use_them(values):
    total = 0
    for v in values:
        total += v
    item = Thing(total)
    result = helper(item.value)
    if result > 3:
        result = result * 2
        result -= 1
    return result


def use_module(values):
    size = len(values)
    limit = amod.LIMIT
    other = A.helper(size)
    return limit + other


def plain(values):
    out = []
    for v in values:
        out.append(v * 2)
    return local_only(out)
'''

C = '''\
def local_only(x):
    return x
'''

# lines of b.py that use a name of a.py (1-based), the others must never be targets
CROSS = {11, 12, 21, 22}


@pytest.fixture()
def tiny_project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "a.py").write_text(A)
    (root / "pkg" / "b.py").write_text(B)
    (root / "pkg" / "c.py").write_text(C)
    return root


def test_only_lines_that_use_a_name_of_another_file_are_candidates(tiny_project):
    project = Project(tiny_project)
    assert project.modules["pkg.a"] == "pkg/a.py" and project.modules["pkg"] == "pkg/__init__.py"
    found = candidates(project, "pkg/b.py")
    lines = B.split("\n")
    assert {c.line for c in found} == CROSS | {30}  # 30: `return local_only(out)` (c.py)
    for c in found:
        assert c.uses and all(f in ("pkg/a.py", "pkg/c.py") for _, f in c.uses)
        text = lines[c.line - 1]
        for name, _ in c.uses:
            assert name.rpartition(".")[2] in re.findall(r"\w+", text)
    uses = {c.line: dict(c.uses) for c in found}
    assert uses[11] == {"Thing": "pkg/a.py"}  # absolute from-import
    assert uses[12] == {"helper": "pkg/a.py"}
    assert uses[21] == {"amod.LIMIT": "pkg/a.py"}  # relative `from . import a as amod`
    assert uses[22] == {"A.helper": "pkg/a.py"}  # `import pkg.a as A`
    assert uses[30] == {"local_only": "pkg/c.py"}  # relative `from .c import local_only`
    assert candidates(project, "pkg/a.py") == []  # a.py imports nothing of the project


def test_the_picker_is_deterministic_and_builds_the_documents(tiny_project):
    project = Project(tiny_project)
    first = pick_tasks([project], 5, seed=0)
    again = pick_tasks([Project(tiny_project)], 5, seed=0)
    assert [t.to_json() for t in first] == [t.to_json() for t in again]
    assert len(first) == 5
    assert {t.kind for t in first} == {"line", "block"} and first[0].kind == "line"
    assert {t.line for t in first} <= CROSS | {30}
    assert len({t.line for t in first}) == 5  # no line twice
    assert sorted(t.line for t in pick_tasks([project], 5, seed=1)) == sorted(t.line for t in first)  # all 5 there are
    text = B
    for t in first:
        lines = text.split("\n")
        indent = re.match(r"\s*", lines[t.line - 1]).group(0)
        n = len(t.target_lines)
        assert t.target_lines[0] == lines[t.line - 1].strip()
        assert t.target_lines[1:] == lines[t.line : t.line - 1 + n]
        assert t.kind == "line" and n == 1 or t.kind == "block" and 2 <= n <= 4
        # the document: the file without the target, the cursor's line keeps its indentation
        assert t.text == "\n".join(lines[: t.line - 1] + [indent] + lines[t.line - 1 + n :])
        assert t.prefix.endswith("\n" + indent)
        assert t.position == {"line": t.line - 1, "character": len(indent)}
        assert t.tabs == ["pkg/a.py", "pkg/c.py"]
    blocks = {t.line: t.target_lines for t in pick_tasks([project], 5, seed=0) + pick_tasks([project], 5, seed=2)
              if t.kind == "block"}  # fmt: skip
    if 12 in blocks:  # `result = helper(...)` and the `if` block below, four lines at most
        assert blocks[12] == ["result = helper(item.value)", "    if result > 3:", "        result = result * 2",
                              "        result -= 1"]  # fmt: skip
    if 22 in blocks:  # up to the dedent at the end of the function
        assert blocks[22] == ["other = A.helper(size)", "    return limit + other"]


def test_midname_tasks_put_the_cursor_inside_the_cross_file_name(tiny_project):
    """``--kinds midname``: the cursor inside the line's first cross-file name (its last
    part for ``A.helper``), at least one character typed and one left; the document is the
    file without the rest of that line, which is the target; deterministic; the default
    kinds pick what they picked before."""
    project = Project(tiny_project)
    mids = pick_tasks([project], 4, seed=0, kinds=("midname",))
    assert [t.to_json() for t in mids] == [t.to_json() for t in pick_tasks([Project(tiny_project)], 4, seed=0, kinds=("midname",))]
    assert len(mids) == 4 and {t.kind for t in mids} == {"midname"} and {t.line for t in mids} <= CROSS | {30}
    lines = B.split("\n")
    names = {11: "Thing", 12: "helper", 21: "LIMIT", 22: "helper", 30: "local_only"}
    for t in mids:
        line = lines[t.line - 1]
        typed = t.prefix[t.prefix.rfind("\n") + 1 :]
        assert typed + t.target == line.rstrip() and t.prefix + t.target + t.suffix == B  # the rest of the line taken out
        name = names[t.line]
        start = line.index(name)
        assert start < len(typed) < start + len(name)  # inside the name: some typed, some left
        assert t.position == {"line": t.line - 1, "character": len(typed)}
    mixed = pick_tasks([project], 6, seed=0, kinds=("line", "block", "midname"))
    assert [t.kind for t in mixed].count("midname") == 2 and len({t.line for t in mixed}) == len(mixed)
    assert [t.to_json() for t in pick_tasks([project], 5, seed=0)] == [t.to_json() for t in pick_tasks([project], 5, seed=0, kinds=("line", "block"))]
    with pytest.raises(ValueError):
        pick_tasks([project], 4, kinds=("line",))


def test_a_name_the_file_defines_itself_is_not_cross_file(tmp_path):
    root = tmp_path / "p"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("from .a import helper\n")
    (root / "pkg" / "a.py").write_text(A)
    (root / "pkg" / "b.py").write_text("from pkg import helper\n\n\ndef f(x):\n    y = helper(x)\n    return y\n\n\n"
                                       "def g(helper):\n    return helper(1)\n")  # fmt: skip
    (root / "pkg" / "d.py").write_text("from pkg.a import helper\n\n\ndef helper2(x):\n    return helper(x)\n\n\n"
                                       "def helper(x):\n    return x\n")  # fmt: skip
    project = Project(root)
    # the package re-exports helper: followed to a.py; `helper` is an argument of g: bound in b.py
    assert candidates(project, "pkg/b.py") == []
    assert candidates(project, "pkg/d.py") == []  # d.py defines helper itself
    (root / "pkg" / "b.py").write_text("from pkg import helper\n\n\ndef f(x):\n    y = helper(x)\n    return y\n")
    project = Project(root)
    assert [(c.line, c.uses) for c in candidates(project, "pkg/b.py")] == [(5, (("helper", "pkg/a.py"),))]


def test_levenshtein_and_edit_similarity():
    assert levenshtein("", "") == 0
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("flaw", "lawn") == 2
    assert levenshtein("abc", "") == 3 and levenshtein("", "abc") == 3
    assert edit_similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)
    assert edit_similarity("  x = 1  ", "x = 1") == 1.0  # stripped
    assert edit_similarity("abc", "xyz") == 0.0


def test_identifier_and_exact_match():
    assert identifiers("if not has(obj): return x.y_1") == ["if", "not", "has", "obj", "return", "x", "y_1"]
    assert identifier_match("foo(a, b)", "foo(a,b)")
    assert identifier_match("x = helper(1)", "x = helper(2)")  # numbers are not identifiers
    assert not identifier_match("x = helper(a)", "x = helper(a, b)")
    assert exact_match("a = 1\n    b = 2  ", "a = 1\n        b = 2")
    assert not exact_match("a = 1", "a = 2")


def test_prediction_and_score():
    assert prediction("x = 1\n    y = 2\n    z = 3", "line", 1) == "x = 1"
    assert prediction("x = 1\n    y = 2\n    z = 3", "block", 2) == "x = 1\n    y = 2"
    s = score("result = helper(item.value)\n    if result:", "line", "result = helper(item.value)")
    assert s["exact_match"] and s["identifier_match"] and s["edit_similarity"] == 1.0 and not s["empty"]
    empty = score("", "block", "a\nb")
    assert empty["empty"] and not empty["exact_match"] and empty["edit_similarity"] == 0.0


def test_paired_counts_tasks_gained_and_lost_and_the_standard_error():
    from fastcoder_bench.quality.metrics import paired

    def row(em: bool, es: float) -> dict:
        return {"exact_match": em, "edit_similarity": es}

    base = [row(True, 1.0), row(False, 0.5), row(False, 0.2), row(False, 0.4)]
    other = [row(False, 0.8), row(True, 1.0), row(True, 1.0), row(False, 0.4)]
    p = paired(base, other)
    assert (p["n"], p["exact_gained"], p["exact_lost"]) == (4, 2, 1)
    assert (p["edit_better"], p["edit_worse"], p["edit_equal"]) == (2, 1, 1)
    diffs = [-0.2, 0.5, 0.8, 0.0]
    mean = sum(diffs) / 4
    assert p["edit_diff_mean"] == pytest.approx(mean)
    sd = (sum((d - mean) ** 2 for d in diffs) / 3) ** 0.5
    assert p["edit_diff_se"] == pytest.approx(sd / 2)
    assert paired(base, base)["edit_diff_mean"] == 0 and paired(base, base)["exact_gained"] == 0
    with pytest.raises(ValueError):
        paired(base, other[:3])


def test_a_short_run_through_the_real_server(tiny_model_dir, tiny_project, tmp_path):
    from fastcoder_bench.quality import main

    out = tmp_path / "out"
    twin = tmp_path / "twin-model"  # the same weights under another name: a second server, NAME@MODEL
    shutil.copytree(tiny_model_dir, twin)
    other = f"no-context@{twin}"
    rc = main(["--root", str(tiny_project), "--tasks", "2", "--variants", f"no-context,context,{other}",
               "--model", str(tiny_model_dir), "--dtype", "float32", "--device", "cpu",
               "--server-options", json.dumps({"commonIndex": False, "maxNewTokens": 8}), "--out", str(out)])  # fmt: skip
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert report["kind"] == "quality"
    res = report["results"]
    assert set(res["variants"]) == {"no-context", "context", other}
    assert set(res["models"]) == {str(tiny_model_dir), str(twin)}
    assert res["variant_settings"][other] == {"crossFileContext": False, "model": str(twin)}
    assert sorted(s["model"] for s in res["servers"]) == sorted([str(tiny_model_dir), str(twin)])
    for v in res["variants"].values():
        assert v["n"] == 2
        for key in ("exact_match", "edit_similarity", "identifier_match", "prompt_tokens_mean", "latency_ms_p50",
                    "context_tokens_mean", "empty_share"):  # fmt: skip
            assert key in v
        assert v["errors"] == 0
    assert set(res["by_kind"]) <= {"line", "block"}
    assert [t["kind"] for t in res["tasks"]] == ["line", "block"]
    assert {"project", "path", "line", "kind", "target"} <= set(res["tasks"][0])
    assert res["ratios_vs_no_context"]["no-context"]["exact_match"] in (None, 1.0)
    assert "cpu_flags" in res["machine"] and res["model"] and res["date"]
    lines = (out / "tasks.jsonl").read_text().splitlines()
    assert len(lines) == 2
    for line in lines:
        row = json.loads(line)
        assert set(row["variants"]) == {"no-context", "context", other}
        assert "suggestion" in row["variants"]["context"] and "prediction" in row["variants"]["context"]
        # each server answered its own variants (by the model the answering server reports)
        assert row["variants"]["no-context"]["model"] == row["variants"]["context"]["model"] == str(tiny_model_dir)
        assert row["variants"][other]["model"] == str(twin)
        # the twin has the same weights in fp32 and the same settings: the same suggestion
        assert row["variants"][other]["suggestion"] == row["variants"]["no-context"]["suggestion"]
        assert row["variants"][other]["new_tokens"] == row["variants"]["no-context"]["new_tokens"] > 0
    assert "Traceback" not in (out / "server-proj.log").read_text()
    assert "Traceback" not in (out / "server-proj-twin-model.log").read_text()
    # task by task against the base: the twin gains and loses nothing
    assert res["base"] == "no-context" and set(res["paired_vs_base"]) == {"context", other}
    twin_pair = res["paired_vs_base"][other]
    assert (twin_pair["n"], twin_pair["exact_gained"], twin_pair["exact_lost"], twin_pair["edit_diff_mean"]) == (2, 0, 0, 0)
    # rescoring the run's tasks.jsonl gives the run's figures, against any variant
    from fastcoder_bench.quality.run import rescore

    again = rescore(out / "tasks.jsonl", other)
    for v in res["variants"]:
        for key in ("n", "exact_match", "edit_similarity", "identifier_match", "latency_ms_p50"):
            assert again["variants"][v][key] == res["variants"][v][key]
    assert again["base"] == other and set(again["paired_vs_base"]) == {"no-context", "context"}
    with pytest.raises(SystemExit, match="not a variant"):
        rescore(out / "tasks.jsonl", "definitions")
    with pytest.raises(SystemExit, match="No such file"):
        rescore(out / "missing.jsonl", "no-context")
