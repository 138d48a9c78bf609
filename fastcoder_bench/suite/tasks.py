"""Benchmark tasks: what to generate, from which prompt, with which stop rule and D_r.

A task is one function body to generate. Three sources of tasks:

- :func:`select_functions` picks bodies from a repository with Python's ``ast``;
- :func:`read_task_file` reads them from a JSONL task file (``--tasks``);
- :mod:`fastcoder_bench.suite.humaneval` makes the HumanEval problems into tasks.

For a repository task the prompt is the file text before the body (signature and
docstring included) and D_r is the project with the body removed from the target
file (:func:`mask_body`), so nothing of the answer leaks into the datastore.
"""

from __future__ import annotations

import ast
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Sequence

from fastcoder.errors import FastCoderError
from fastcoder.stops import block_end, indent_of

MIN_BODY_LINES = 3
MAX_BODY_LINES = 60

TEST_DIRS = frozenset({"test", "tests", "testing", "docs", "doc"})
"""Directory names whose files are never benchmark targets (they stay in D_r)."""


@dataclass
class BenchTask:
    """One function body to generate.

    ``prompt``: the text before the body (it ends with a newline); ``reference``: the
    real body (for information: never shown to a method); ``indent``: the body's
    indentation, for the stop rule; ``group``: the project (D_r and per-project
    sessions are keyed by it; None for standalone tasks); ``repo``/``path``: the
    repository and the target file (relative, posix); ``masked``: the target file's
    text with the body removed (the document D_r holds instead of the file).
    """

    id: str
    suite: str
    prompt: str
    reference: str
    indent: int
    group: str | None = None
    repo: Path | None = None
    path: str | None = None
    masked: str | None = None
    body_lines: tuple[int, int] | None = None  # 1-based inclusive, in the file
    problem: dict[str, Any] | None = None  # HumanEval problem (for pass@1)
    meta: dict[str, Any] = field(default_factory=dict)

    def stop_fn(self):
        """THE stop rule for function bodies: the block at the body's indent ends."""
        return block_end(self.indent, check_first_line=True)

    def describe(self) -> dict[str, Any]:
        """JSON-able identification of the task (recorded in tasks.jsonl)."""
        return {
            "id": self.id,
            "suite": self.suite,
            "group": self.group,
            "repo": str(self.repo) if self.repo is not None else None,
            "path": self.path,
            "body_lines": list(self.body_lines) if self.body_lines else None,
            "indent": self.indent,
            "reference_lines": self.reference.count("\n") + (not self.reference.endswith("\n")),
            **self.meta,
        }


# --------------------------------------------------------------------------------------
# text helpers
# --------------------------------------------------------------------------------------


def normalize_newlines(text: str) -> str:
    """``\\r\\n`` and ``\\r`` to ``\\n`` (ast line numbers count those three)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_lines(text: str) -> list[str]:
    """Lines without their ``\\n`` (only ``\\n`` splits, unlike ``str.splitlines``)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def mask_body(text: str, start: int, end: int) -> str:
    """``text`` with lines ``start..end`` (1-based, inclusive) removed: the file as it
    is in the editor before the body is written."""
    lines = split_lines(normalize_newlines(text))
    kept = lines[: start - 1] + lines[end:]
    return "\n".join(kept) + ("\n" if kept else "")


def make_repo_task(
    task_id: str,
    repo: Path,
    relpath: str,
    text: str,
    start: int,
    end: int,
    *,
    group: str | None = None,
    suite: str = "repo",
    meta: dict[str, Any] | None = None,
) -> BenchTask:
    """A repository task for body lines ``start..end`` (1-based, inclusive) of
    ``relpath``; leading blank body lines move into the prompt."""
    lines = split_lines(normalize_newlines(text))
    if not 1 <= start <= end <= len(lines):
        raise FastCoderError(f"body lines {start}..{end} are out of range: {relpath} has {len(lines)} lines")
    while start < end and not lines[start - 1].strip():
        start += 1
    if not lines[start - 1].strip():
        raise FastCoderError(f"body lines {start}..{end} of {relpath} are blank")
    prompt = "\n".join(lines[: start - 1]) + "\n" if start > 1 else ""
    if not prompt.strip():
        raise FastCoderError(f"nothing but blank lines before body line {start} of {relpath}: no prompt")
    reference = "\n".join(lines[start - 1 : end]) + "\n"
    return BenchTask(
        id=task_id,
        suite=suite,
        prompt=prompt,
        reference=reference,
        indent=indent_of(lines[start - 1]),
        group=group if group is not None else str(repo),
        repo=repo,
        path=relpath,
        masked=mask_body(text, start, end),
        body_lines=(start, end),
        meta=dict(meta or {}),
    )


# --------------------------------------------------------------------------------------
# function selection
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionSpan:
    """A selectable function: its body lines (1-based, inclusive) after the docstring."""

    path: str
    qualname: str
    def_line: int
    body_start: int
    body_end: int
    indent: int


def is_test_path(relpath: str) -> bool:
    """Tests (and docs) are never targets: ``tests/``, ``test_*.py``, ``*_test.py``, ``conftest.py``."""
    parts = PurePosixPath(relpath).parts
    name = parts[-1] if parts else ""
    if any(p.lower() in TEST_DIRS for p in parts[:-1]):
        return True
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def _functions(tree: ast.AST) -> Iterable[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        prefix, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    yield name, child
                stack.append((name + ".", child))
            else:
                stack.append((prefix, child))


def functions_in_file(relpath: str, text: str) -> list[FunctionSpan]:
    """Functions of one file that make good tasks, in line order.

    Rules: a docstring on its own line(s); 3..60 body lines after it (from the first
    non-blank line after the docstring to the function's last line); the body is
    indented deeper than the ``def``; and the shared stop rule (``block_end`` at the
    body's indent) does not fire inside the real body, so stopping is well defined.
    """
    text = normalize_newlines(text)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = split_lines(text)
    out: list[FunctionSpan] = []
    for qualname, fn in _functions(tree):
        if ast.get_docstring(fn, clean=False) is None or len(fn.body) < 2:
            continue
        doc = fn.body[0]
        if doc.lineno <= fn.lineno or doc.end_lineno is None or fn.end_lineno is None:
            continue
        # the signature may span lines; the docstring must start its own line
        doc_line = lines[doc.lineno - 1]
        if doc_line[: doc.col_offset].strip():
            continue
        if fn.body[1].lineno <= doc.end_lineno:
            continue  # `"""doc"""; x = 1`
        start = doc.end_lineno + 1
        end = fn.end_lineno
        while start <= end and not lines[start - 1].strip():
            start += 1
        if start > end:
            continue
        n = end - start + 1
        if not MIN_BODY_LINES <= n <= MAX_BODY_LINES:
            continue
        indent = indent_of(lines[start - 1])
        def_indent = indent_of(lines[fn.lineno - 1])
        if indent <= def_indent:
            continue
        # the function's last line must end with it (no `x = 1; y = 2` after it)
        tail = lines[end - 1].encode("utf-8")[fn.end_col_offset or 0 :].decode("utf-8", "replace").strip()
        if tail and not tail.startswith("#"):
            continue
        body = "\n".join(lines[start - 1 : end]) + "\n"
        if block_end(indent, check_first_line=True)(body) is not None:
            continue  # e.g. a multi-line string at column 0 inside the body
        out.append(FunctionSpan(relpath, qualname, fn.lineno, start, end, indent))
    out.sort(key=lambda f: (f.def_line, f.qualname))
    return out


def spread(groups: dict[str, list[Any]], seed: int) -> list[Any]:
    """Deterministic order that spreads ``--limit N`` across groups: each group's items
    (given in sorted order) get a seeded shuffle, then groups are taken round-robin in
    sorted-name order."""
    shuffled = []
    for name in sorted(groups):
        items = list(groups[name])
        random.Random(f"{seed}:{name}").shuffle(items)
        shuffled.append(items)
    out = []
    i = 0
    while any(i < len(items) for items in shuffled):
        for items in shuffled:
            if i < len(items):
                out.append(items[i])
        i += 1
    return out


# --------------------------------------------------------------------------------------
# task files (--tasks)
# --------------------------------------------------------------------------------------

TASK_FIELDS = {"id": str, "repo": str, "path": str, "body_start_line": int, "body_end_line": int}


def read_task_file(path: str | os.PathLike[str]) -> list[BenchTask]:
    """Tasks from a JSONL file: one object a line with ``id``, ``repo`` (absolute
    directory), ``path`` (file relative to ``repo``), ``body_start_line`` and
    ``body_end_line`` (1-based, inclusive). Blank lines and lines starting with ``#``
    are skipped. Any bad line raises :class:`FastCoderError` naming ``FILE:LINE``."""
    path = Path(path)
    try:
        raw_lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise FastCoderError(f"cannot read the task file {path}: {exc}") from exc
    tasks: list[BenchTask] = []
    seen: dict[str, int] = {}
    texts: dict[Path, str] = {}
    for lineno, line in enumerate(raw_lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue

        def bad(msg: str) -> FastCoderError:
            return FastCoderError(f"{path}:{lineno}: {msg}")

        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise bad(f"not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise bad("expected a JSON object")
        missing = [k for k in TASK_FIELDS if k not in obj]
        if missing:
            raise bad(f"missing field(s) {', '.join(missing)}")
        for key, typ in TASK_FIELDS.items():
            val = obj[key]
            if typ is int and (isinstance(val, bool) or not isinstance(val, int)):
                raise bad(f"{key} must be an integer, got {val!r}")
            if typ is str and (not isinstance(val, str) or not val):
                raise bad(f"{key} must be a non-empty string, got {val!r}")
        task_id = obj["id"]
        if task_id in seen:
            raise bad(f"duplicate id {task_id!r} (first on line {seen[task_id]})")
        seen[task_id] = lineno
        repo = Path(obj["repo"])
        if not repo.is_absolute():
            raise bad(f"repo must be an absolute directory, got {obj['repo']!r}")
        if not repo.is_dir():
            raise bad(f"repo {repo} is not a directory")
        rel = PurePosixPath(obj["path"])
        if rel.is_absolute() or ".." in rel.parts:
            raise bad(f"path must be relative to repo and stay inside it, got {obj['path']!r}")
        file = repo / rel
        if file not in texts:
            try:
                texts[file] = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise bad(f"cannot read {file}: {exc}") from None
        start, end = obj["body_start_line"], obj["body_end_line"]
        if start < 1 or end < start:
            raise bad(f"need 1 <= body_start_line <= body_end_line, got {start}..{end}")
        try:
            tasks.append(make_repo_task(task_id, repo, rel.as_posix(), texts[file], start, end, suite="tasks"))
        except FastCoderError as exc:
            raise bad(str(exc)) from None
    if not tasks:
        raise FastCoderError(f"the task file {path} holds no tasks")
    return tasks


def limit_tasks(tasks: Sequence[BenchTask], limit: int | None) -> list[BenchTask]:
    return list(tasks if limit is None else tasks[:limit])
