"""Benchmark tasks: task-file parsing, function selection, body masking and D_r leakage."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from fastcoder_bench.suite.projects import load_projects
from fastcoder_bench.suite.repo import RepoCorpus
from fastcoder_bench.suite.runner import append_result, read_results
from fastcoder_bench.suite.tasks import (
    functions_in_file,
    is_test_path,
    make_repo_task,
    mask_body,
    read_task_file,
    spread,
)
from fastcoder.errors import FastCoderError

GEOMETRY = textwrap.dedent(
    '''\
    """Small geometry helpers."""

    import math


    def hypotenuse(a, b):
        """Length of the hypotenuse of a right triangle with legs a and b."""
        squared = a * a + b * b
        root_of_squares = math.sqrt(squared)
        assert root_of_squares >= 0
        return root_of_squares


    def too_short(x):
        """Two body lines only."""
        y = x + 1
        return y


    def no_docstring(x):
        y = x * 2
        z = y * 3
        return z


    class Shape:
        """A shape."""

        def area_of_polygon(self, points,
                            closed=True):
            """Shoelace formula.

            Multi-line docstring.
            """

            total_shoelace = 0.0
            for (x0, y0), (x1, y1) in zip(points, points[1:] + points[:1]):
                total_shoelace += x0 * y1 - x1 * y0
            return abs(total_shoelace) / 2.0

        def has_column_zero_string(self):
            """The stop rule would fire inside this body."""
            text = """
    column zero line
    """
            more = text.strip()
            return more


    def outer_function(values):
        """Outer."""
        def inner_helper(v):
            """Inner helper with a body."""
            doubled_inner = v * 2
            tripled_inner = doubled_inner + v
            return tripled_inner
        return [inner_helper(v) for v in values]


    def one_line_doc(x): """Doc on the def line."""; return x
    '''
)

LONG = "def long_function(x):\n    \"\"\"Long.\"\"\"\n" + "".join(f"    x = x + {i}\n" for i in range(61)) + "    return x\n"

TEST_FILE = textwrap.dedent(
    '''\
    def test_something_long():
        """A test, never a target."""
        a = 1
        b = 2
        assert a + b == 3
    '''
)

USES = textwrap.dedent(
    '''\
    from pkg.geometry import hypotenuse


    def diagonal(width, height):
        """Diagonal of a rectangle."""
        return hypotenuse(width, height)
    '''
)


@pytest.fixture()
def fixture_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "geometry.py").write_text(GEOMETRY)
    (root / "pkg" / "long.py").write_text(LONG)
    (root / "pkg" / "uses.py").write_text(USES)
    (root / "tests" / "test_geometry.py").write_text(TEST_FILE)
    (root / "README.md").write_text("# pkg\n\nGeometry helpers.\n")
    (root / ".env").write_text("SECRET=1\n")  # the scan never reads it
    return root


# --------------------------------------------------------------------------------------
# selection
# --------------------------------------------------------------------------------------


def test_function_selection_rules():
    found = {f.qualname: f for f in functions_in_file("pkg/geometry.py", GEOMETRY)}
    assert set(found) == {"hypotenuse", "Shape.area_of_polygon", "outer_function", "outer_function.inner_helper"}
    h = found["hypotenuse"]
    lines = GEOMETRY.split("\n")
    assert lines[h.body_start - 1].strip() == "squared = a * a + b * b"
    assert lines[h.body_end - 1].strip() == "return root_of_squares"
    assert h.indent == 4
    area = found["Shape.area_of_polygon"]
    # the blank line after the docstring goes to the prompt; the body is 4 lines at indent 8
    assert lines[area.body_start - 1].strip() == "total_shoelace = 0.0"
    assert area.body_end - area.body_start + 1 == 4 and area.indent == 8
    # nested functions are targets too, with their own indent
    assert found["outer_function.inner_helper"].indent == 8
    assert "too_short" not in found and "no_docstring" not in found and "one_line_doc" not in found
    assert "Shape.has_column_zero_string" not in found


def test_body_length_limits():
    assert functions_in_file("pkg/long.py", LONG) == []  # 62 body lines > 60
    lines = ["def f(x):", '    """Doc."""'] + [f"    x = x + {i}" for i in range(59)] + ["    return x", ""]
    spans = functions_in_file("f.py", "\n".join(lines))
    assert len(spans) == 1 and spans[0].body_end - spans[0].body_start + 1 == 60


def test_tests_are_not_targets(fixture_repo: Path):
    assert is_test_path("tests/test_geometry.py") and is_test_path("pkg/test_x.py")
    assert is_test_path("pkg/x_test.py") and is_test_path("conftest.py") and is_test_path("docs/conf.py")
    assert not is_test_path("pkg/geometry.py") and not is_test_path("pkg/testing_utils.py")
    corpus = RepoCorpus(fixture_repo, name="fixture")
    spans = corpus.functions()
    assert {s.path for s in spans} == {"pkg/geometry.py"}
    assert [s.path for s in spans] == sorted(s.path for s in spans)
    assert ".env" not in corpus.texts and "tests/test_geometry.py" in corpus.texts


def test_spread_is_deterministic_and_round_robin():
    groups = {"b": list(range(5)), "a": list(range(100, 103)), "c": [200]}
    one = spread(groups, seed=0)
    assert one == spread(groups, seed=0)
    assert sorted(one) == sorted(x for v in groups.values() for x in v)
    # the first round takes one item of each group, in name order
    assert one[0] >= 100 and one[0] < 103 and one[1] < 5 and one[2] == 200
    assert spread(groups, seed=1) != one or len(one) < 3


def test_pinned_projects():
    projects, seed = load_projects()
    assert len(projects) >= 5 and isinstance(seed, int)
    for p in projects:
        assert p.version and p.version[0].isdigit() and "*" not in p.version
    assert len({p.name for p in projects}) == len(projects)


# --------------------------------------------------------------------------------------
# masking and leakage
# --------------------------------------------------------------------------------------


def test_mask_body_removes_exactly_the_body():
    text = "a\nb\nc\nd\ne\n"
    assert mask_body(text, 2, 3) == "a\nd\ne\n"
    assert mask_body(text.replace("\n", "\r\n"), 2, 3) == "a\nd\ne\n"


def test_repo_task_prompt_reference_and_mask(fixture_repo: Path):
    corpus = RepoCorpus(fixture_repo, name="fixture")
    span = next(s for s in corpus.functions() if s.qualname == "Shape.area_of_polygon")
    task = corpus.task(span)
    text = (fixture_repo / "pkg" / "geometry.py").read_text()
    assert task.prompt.endswith('"""\n\n')  # signature + docstring + blank line
    assert task.prompt.rstrip().endswith('"""') and "def area_of_polygon(self, points," in task.prompt
    assert text.startswith(task.prompt + task.reference)
    assert task.masked == task.prompt + text[len(task.prompt + task.reference) :]
    assert "total_shoelace" not in task.masked
    stop = task.stop_fn()
    assert stop(task.reference) is None  # the real body does not trigger the stop rule
    assert stop(task.reference + "\n    def next_method(self):\n") == len(task.reference)


def test_dr_holds_no_trace_of_the_body(fixture_repo: Path, tiny_tokenizer):
    corpus = RepoCorpus(fixture_repo, name="fixture")
    for span in corpus.functions():
        task = corpus.task(span)
        dr = corpus.dr_for(task, tiny_tokenizer)
        docs = [tiny_tokenizer.decode(dr.doc_tokens(i).tolist()) for i in range(dr.n_docs)]
        body = task.reference.strip()
        assert not any(body in d for d in docs), f"{task.id}: the body leaked into D_r"
        for line in task.reference.strip().splitlines():
            if len(line.strip()) > 12:  # distinctive lines, not `return x`
                assert not any(line.strip() in d for d in docs), f"{task.id}: {line!r} leaked"
        # the masked target file is there, and so are the other files (tests included)
        assert task.masked in docs
        assert USES in docs and TEST_FILE in docs
        assert (fixture_repo / "pkg" / "geometry.py").read_text() not in docs
        # the body tokens are not found by the suffix search either
        ids = tiny_tokenizer(task.reference, add_special_tokens=False)["input_ids"]
        lo, hi = dr.find_range(ids[2:14])
        assert hi - lo == 0


# --------------------------------------------------------------------------------------
# task files
# --------------------------------------------------------------------------------------


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_task_file_parses(fixture_repo: Path, tmp_path: Path):
    spans = {s.qualname: s for s in RepoCorpus(fixture_repo).functions()}
    h = spans["hypotenuse"]
    f = _write(
        tmp_path / "t.jsonl",
        [
            "# a comment",
            json.dumps({"id": "hyp", "repo": str(fixture_repo), "path": "pkg/geometry.py",
                        "body_start_line": h.body_start, "body_end_line": h.body_end}),
            "",
            json.dumps({"id": "diag", "repo": str(fixture_repo), "path": "pkg/uses.py",
                        "body_start_line": 6, "body_end_line": 6}),
        ],
    )
    tasks = read_task_file(f)
    assert [t.id for t in tasks] == ["hyp", "diag"]
    assert tasks[0].reference.strip().startswith("squared") and tasks[0].indent == 4
    assert tasks[1].reference == "    return hypotenuse(width, height)\n"
    assert tasks[0].group == tasks[1].group == str(fixture_repo)
    assert "return hypotenuse" not in tasks[1].masked


@pytest.mark.parametrize(
    "make_line, message",
    [
        (lambda r: "{not json", "not valid JSON"),
        (lambda r: "[1, 2]", "expected a JSON object"),
        (lambda r: json.dumps({"id": "x", "repo": r, "path": "pkg/uses.py", "body_start_line": 6}), "missing field(s) body_end_line"),
        (lambda r: json.dumps({"id": "x", "repo": r, "path": "pkg/uses.py", "body_start_line": "6", "body_end_line": 6}), "body_start_line must be an integer"),
        (lambda r: json.dumps({"id": "", "repo": r, "path": "pkg/uses.py", "body_start_line": 6, "body_end_line": 6}), "id must be a non-empty string"),
        (lambda r: json.dumps({"id": "x", "repo": "relative/dir", "path": "pkg/uses.py", "body_start_line": 6, "body_end_line": 6}), "absolute"),
        (lambda r: json.dumps({"id": "x", "repo": r + "/nope", "path": "pkg/uses.py", "body_start_line": 6, "body_end_line": 6}), "not a directory"),
        (lambda r: json.dumps({"id": "x", "repo": r, "path": "../escape.py", "body_start_line": 1, "body_end_line": 1}), "stay inside"),
        (lambda r: json.dumps({"id": "x", "repo": r, "path": "pkg/missing.py", "body_start_line": 1, "body_end_line": 1}), "cannot read"),
        (lambda r: json.dumps({"id": "x", "repo": r, "path": "pkg/uses.py", "body_start_line": 5, "body_end_line": 99}), "out of range"),
        (lambda r: json.dumps({"id": "x", "repo": r, "path": "pkg/uses.py", "body_start_line": 6, "body_end_line": 5}), "body_start_line <= body_end_line"),
        (lambda r: json.dumps({"id": "x", "repo": r, "path": "pkg/uses.py", "body_start_line": 2, "body_end_line": 3}), "blank"),
        (lambda r: json.dumps({"id": "x", "repo": r, "path": "pkg/uses.py", "body_start_line": 1, "body_end_line": 1}), "no prompt"),
        (lambda r: json.dumps({"id": "first", "repo": r, "path": "pkg/uses.py", "body_start_line": 6, "body_end_line": 6}), "duplicate id 'first' (first on line 1)"),
    ],
)
def test_task_file_bad_line_names_the_line(fixture_repo: Path, tmp_path: Path, make_line, message):
    good = json.dumps({"id": "first", "repo": str(fixture_repo), "path": "pkg/uses.py", "body_start_line": 6, "body_end_line": 6})
    f = _write(tmp_path / "bad.jsonl", [good, "", make_line(str(fixture_repo))])
    with pytest.raises(FastCoderError) as err:
        read_task_file(f)
    assert f"{f}:3:" in str(err.value)
    assert message in str(err.value)


def test_task_file_empty_or_missing(tmp_path: Path):
    with pytest.raises(FastCoderError, match="holds no tasks"):
        read_task_file(_write(tmp_path / "e.jsonl", ["", "# nothing"]))
    with pytest.raises(FastCoderError, match="cannot read the task file"):
        read_task_file(tmp_path / "absent.jsonl")


def test_make_repo_task_rejects_out_of_range(tmp_path: Path):
    with pytest.raises(FastCoderError, match="out of range"):
        make_repo_task("t", tmp_path, "f.py", "a\nb\n", 2, 3)


# --------------------------------------------------------------------------------------
# results file
# --------------------------------------------------------------------------------------


def test_results_file_survives_a_torn_line(tmp_path: Path):
    append_result(tmp_path, {"id": "a", "x": 1})
    with open(tmp_path / "tasks.jsonl", "a") as fh:
        fh.write('{"id": "b", "x"')  # killed mid-write
    assert [r["id"] for r in read_results(tmp_path)] == ["a"]
    append_result(tmp_path, {"id": "c"})
    assert [r["id"] for r in read_results(tmp_path)] == ["a", "c"]
