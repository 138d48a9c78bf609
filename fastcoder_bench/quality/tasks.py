"""Cross-file completion tasks (CrossCodeEval's construction, Ding et al. 2023).

A task is a cursor inside a function body of a real project whose *target* (the rest of
the line, or a short block) uses a name defined in another file of the same project:

* the file's imports are read with :mod:`ast` and resolved to ``.py`` files of the
  project: absolute ``from pkg.mod import name``, relative ``from .mod import name`` /
  ``from . import mod``, ``import pkg.mod as m`` (then ``m.name``) and ``import pkg.mod``
  (then ``pkg.mod.name``); a name a package ``__init__`` re-exports is followed to the
  file that defines it (a few hops);
* a name counts when that file defines it at top level (function, class, assignment,
  also inside a top-level ``if``/``try``), the current file binds it nowhere but by the
  import, and the target line uses it (a ``Name`` or, through a module alias, an
  ``Attribute`` on that line).

Only lines that start a statement of a function body (not its docstring) are targets.
``line`` target: the line's text after its indentation. ``block`` target: that line and
the following non-blank lines indented at least as deep, 2 to :data:`MAX_BLOCK_LINES`
lines. The document is the file without the target: the cursor's line keeps only its
indentation, the cursor after it. ``midname`` (opt-in, ``--kinds``): the cursor inside the
first cross-file name of the line, at least one character of it typed and one left (a user
typing it: the prompt ends inside a word); the target is the rest of the line, the lines
below stay.
"""

from __future__ import annotations

import ast
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from fastcoder_bench.suite.tasks import normalize_newlines

MAX_FILE_BYTES = 200_000
MAX_BLOCK_LINES = 4
KINDS = ("line", "block", "midname")
DEFAULT_KINDS = ("line", "block")
SKIP_DIRS = frozenset({"build", "dist", "node_modules", "__pycache__", "site-packages"})


@dataclass
class QualityTask:
    project: str
    root: Path  # the project folder (the server's workspace root)
    path: str  # relative posix path of the file
    line: int  # 1-based line of the target's first line
    kind: str  # "line" | "block" | "midname"
    target: str  # the line after its indentation (midname: after the cursor); block: the following lines in full, "\n"-joined
    prefix: str  # document text before the cursor (ends with the target line's indentation; midname: inside a name)
    suffix: str  # document text after the cursor ("\n" + the lines after the target)
    names: list[str] = field(default_factory=list)  # the cross-file names the target line uses
    defined_in: list[str] = field(default_factory=list)  # the files defining them (relative, sorted)
    tabs: list[str] = field(default_factory=list)  # editor tabs: files the file imports from (<= 3, sorted)

    @property
    def text(self) -> str:
        return self.prefix + self.suffix

    @property
    def target_lines(self) -> list[str]:
        return self.target.split("\n")

    @property
    def position(self) -> dict[str, int]:
        """The cursor as an LSP position (after indentation: spaces/tabs are one UTF-16 unit each)."""
        line_start = self.prefix.rfind("\n") + 1
        return {"line": self.line - 1, "character": len(self.prefix) - line_start}

    def to_json(self) -> dict[str, object]:
        return {"project": self.project, "path": self.path, "line": self.line, "kind": self.kind, "target": self.target,
                "names": self.names, "defined_in": self.defined_in, "tabs": self.tabs}  # fmt: skip


# ------------------------------------------------------------------------------ the project's files


def python_files(root: Path) -> list[str]:
    """Relative posix paths of the project's ``.py`` files of at most 200 KB, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIP_DIRS)
        for name in filenames:
            p = Path(dirpath) / name
            if name.endswith(".py") and p.is_file() and not p.is_symlink() and p.stat().st_size <= MAX_FILE_BYTES:
                out.append(p.relative_to(root).as_posix())
    return sorted(out)


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module defines at top level: functions, classes, assignments (also in a
    top-level ``if`` / ``try`` / ``with``)."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                visit(getattr(node, "finalbody", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)
    visit(tree.body)
    return names


def bound_names(tree: ast.Module) -> set[str]:
    """Every name the file binds anywhere other than by an import: assignments, loop
    and ``with`` targets, functions, classes, arguments, ``except ... as``."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
    return out


class Project:
    """A project folder: its Python files, parsed on demand, and module resolution."""

    def __init__(self, root: Path, name: str | None = None) -> None:
        self.root = Path(root)
        self.name = name or self.root.name
        self.files = python_files(self.root)
        self._trees: dict[str, ast.Module | None] = {}
        self._texts: dict[str, str] = {}
        self.modules = self._module_map()
        self.module_of = {f: m for m, f in sorted(self.modules.items(), reverse=True)}  # file -> its (shortest) name

    def text(self, rel: str) -> str:
        if rel not in self._texts:
            try:
                self._texts[rel] = normalize_newlines((self.root / rel).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                self._texts[rel] = ""
        return self._texts[rel]

    def tree(self, rel: str) -> ast.Module | None:
        if rel not in self._trees:
            try:
                self._trees[rel] = ast.parse(self.text(rel)) if self.text(rel) else None
            except (SyntaxError, ValueError):
                self._trees[rel] = None
        return self._trees[rel]

    def _module_map(self) -> dict[str, str]:
        """Dotted module name -> file. A source root is the folder above a top-level
        package (a folder with ``__init__.py`` whose parent has none), and the project
        root itself; a file is named from the deepest source root holding it, and the
        first file to claim a name keeps it."""
        have = set(self.files)
        roots = {""}
        for rel in self.files:
            if rel.endswith("/__init__.py"):
                pkg = rel.rsplit("/", 1)[0]
                parent = pkg.rsplit("/", 1)[0] if "/" in pkg else ""
                if (f"{parent}/__init__.py" if parent else "__init__.py") not in have:
                    roots.add(parent)
        out: dict[str, str] = {}
        for rel in self.files:
            for r in sorted(roots, key=lambda s: (-s.count("/") - bool(s), s)):  # the deepest root first
                if r and not rel.startswith(r + "/"):
                    continue
                inner = rel[len(r) + 1 :] if r else rel
                parts = inner[:-3].split("/")
                if parts[-1] == "__init__":
                    parts.pop()
                if parts and all(p.isidentifier() for p in parts):
                    out.setdefault(".".join(parts), rel)
                    break
        return out

    def package_of(self, rel: str) -> str | None:
        """The dotted name of the package holding ``rel`` (None when it is not in one)."""
        mod = self.module_of.get(rel)
        if mod is None:
            return None
        return mod if rel.endswith("__init__.py") else mod.rpartition(".")[0]

    def resolve_from(self, rel: str, module: str | None, level: int) -> str | None:
        """The dotted module an ``ImportFrom`` in ``rel`` names (None when it is outside)."""
        if not level:
            return module
        pkg = self.package_of(rel)
        if pkg is None:
            return None
        parts = pkg.split(".") if pkg else []
        if level - 1 > len(parts):
            return None
        base = parts[: len(parts) - (level - 1)]
        return ".".join(base + ([module] if module else []))

    def defining_file(self, module: str, name: str, depth: int = 3) -> str | None:
        """The project file that defines ``name`` at top level, starting from ``module``
        and following re-exports (``from .x import name`` in a package) ``depth`` hops."""
        rel = self.modules.get(module)
        tree = self.tree(rel) if rel else None
        if tree is None or rel is None:
            return None
        if name in top_level_names(tree):
            return rel
        if depth <= 0:
            return None
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if (a.asname or a.name) == name:
                        src = self.resolve_from(rel, node.module, node.level)
                        return None if src is None else self.defining_file(src, a.name, depth - 1)
        return None

    def imports(self, rel: str) -> tuple[dict[str, str], dict[str, str]]:
        """``(names, modules)`` of file ``rel``: local name -> the file defining it, and
        local dotted module alias -> the module's file (``m`` of ``import pkg.mod as m``,
        ``pkg.mod`` of ``import pkg.mod``, ``mod`` of ``from . import mod``)."""
        tree = self.tree(rel)
        names: dict[str, str] = {}
        modules: dict[str, str] = {}
        if tree is None:
            return names, modules
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        if a.name in self.modules:
                            modules[a.asname] = self.modules[a.name]
                    else:
                        parts = a.name.split(".")
                        for i in range(1, len(parts) + 1):
                            dotted = ".".join(parts[:i])
                            if dotted in self.modules:
                                modules[dotted] = self.modules[dotted]
            elif isinstance(node, ast.ImportFrom):
                src = self.resolve_from(rel, node.module, node.level)
                if src is None:
                    continue
                for a in node.names:
                    if a.name == "*":
                        continue
                    local = a.asname or a.name
                    sub = f"{src}.{a.name}" if src else a.name
                    if sub in self.modules:
                        modules[local] = self.modules[sub]
                        continue
                    found = self.defining_file(src, a.name)
                    if found is not None:
                        names[local] = found
        names = {k: v for k, v in names.items() if v != rel}
        modules = {k: v for k, v in modules.items() if v != rel}
        return names, modules


# ------------------------------------------------------------------------------ positions


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def cross_file_uses(project: Project, rel: str, stmt: ast.stmt, names: dict[str, str], modules: dict[str, str],
                    bound: set[str]) -> dict[str, str]:  # fmt: skip
    """The cross-file names the first line of ``stmt`` uses: name (as written) -> defining file."""
    line = stmt.lineno
    out: dict[str, str] = {}
    for n in ast.walk(stmt):
        if getattr(n, "lineno", None) != line:
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names and n.id not in bound:
            out[n.id] = names[n.id]
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
            dotted = _dotted(n.value)
            if dotted is None or dotted not in modules or dotted.split(".")[0] in bound:
                continue
            mod_file = modules[dotted]
            mod = project.module_of.get(mod_file)
            found = project.defining_file(mod, n.attr) if mod is not None else None
            if found is not None and found != rel and n.attr not in bound:
                out[f"{dotted}.{n.attr}"] = found
    return out


def _body_statements(tree: ast.Module) -> list[ast.stmt]:
    """Statements of function bodies (nested blocks included, docstrings not)."""
    out: list[ast.stmt] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = fn.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body = body[1:]
        for top in body:
            for n in ast.walk(top):
                if isinstance(n, ast.stmt) and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out.append(n)
    return out


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def block_length(lines: list[str], i: int) -> int:
    """Lines of the block starting at ``lines[i]``: it and the following non-blank lines
    indented at least as deep, at most :data:`MAX_BLOCK_LINES`."""
    depth = len(_indent(lines[i]).expandtabs())
    n = 1
    while n < MAX_BLOCK_LINES and i + n < len(lines):
        nxt = lines[i + n]
        if not nxt.strip() or len(_indent(nxt).expandtabs()) < depth:
            break
        n += 1
    return n


@dataclass(frozen=True)
class Candidate:
    path: str
    line: int  # 1-based
    block: int  # lines a block task would take (1: no block task here)
    uses: tuple[tuple[str, str], ...]


def candidates(project: Project, rel: str) -> list[Candidate]:
    """Every target line of ``rel`` that uses a cross-file name, in line order."""
    tree = project.tree(rel)
    if tree is None:
        return []
    names, modules = project.imports(rel)
    if not names and not modules:
        return []
    bound = bound_names(tree)
    lines = project.text(rel).split("\n")
    seen: set[int] = set()
    out = []
    for stmt in _body_statements(tree):
        i = stmt.lineno - 1
        if stmt.lineno in seen or i >= len(lines) or not lines[i].strip():
            continue
        text = lines[i]
        # the statement must start its line (not `x = 1; y = helper()`)
        if stmt.col_offset != len(_indent(text)):
            continue
        uses = cross_file_uses(project, rel, stmt, names, modules, bound)
        if uses:
            seen.add(stmt.lineno)
            out.append(Candidate(rel, stmt.lineno, block_length(lines, i), tuple(sorted(uses.items()))))
    return sorted(out, key=lambda c: c.line)


def make_task(project: Project, c: Candidate, kind: str) -> QualityTask:
    lines = project.text(c.path).split("\n")
    i = c.line - 1
    n = c.block if kind == "block" else 1
    indent = _indent(lines[i])
    target = "\n".join([lines[i][len(indent) :], *lines[i + 1 : i + n]])
    prefix = "".join(ln + "\n" for ln in lines[:i]) + indent
    suffix = "\n" + "\n".join(lines[i + n :])
    return _task(project, c, kind, target, prefix, suffix)


def _task(project: Project, c: Candidate, kind: str, target: str, prefix: str, suffix: str) -> QualityTask:
    """The task at ``c``: its names, the files defining them and the editor tabs (the files
    the file imports from, 3 at most)."""
    names, modules = project.imports(c.path)
    imported = sorted(set(names.values()) | set(modules.values()))
    return QualityTask(project.name, project.root, c.path, c.line, kind, target, prefix, suffix,
                       names=[u for u, _ in c.uses], defined_in=sorted({f for _, f in c.uses}), tabs=imported[:3])  # fmt: skip


def make_midname_task(project: Project, c: Candidate, rng: random.Random) -> QualityTask | None:
    """A ``midname`` task at ``c``: the cursor inside the first cross-file name the line uses
    (its last part for ``mod.name``), ``rng`` choosing how much of it is typed; None when
    the name is one character or not found as written."""
    lines = project.text(c.path).split("\n")
    i = c.line - 1
    text = lines[i]
    spots = []
    for written, _ in c.uses:
        ident = written.rsplit(".", 1)[-1]
        m = re.search(r"(?<![\w.])" + re.escape(written) + r"(?!\w)", text)
        if m is not None and len(ident) >= 2:
            spots.append((m.end() - len(ident), ident))
    if not spots:
        return None
    start, ident = min(spots)
    cut = start + rng.randint(1, len(ident) - 1)
    prefix = "".join(ln + "\n" for ln in lines[:i]) + text[:cut]
    return _task(project, c, "midname", text[cut:].rstrip(), prefix, "\n" + "\n".join(lines[i + 1 :]))


# ------------------------------------------------------------------------------ choosing


def pick_tasks(projects: list[Project], n: int, seed: int = 0, kinds: tuple[str, ...] = DEFAULT_KINDS) -> list[QualityTask]:
    """``n`` tasks spread evenly over ``projects`` (the first get one more when ``n``
    does not divide), half ``line`` and half ``block`` per project (``line`` first), no
    line taken twice. Deterministic: a seeded shuffle per project; the result runs
    project by project in the order given, kinds alternating. With ``midname`` in
    ``kinds``, its share of each project's quota (all of it alone) comes first from the
    shuffled candidates; the default kinds pick exactly what they picked before it
    existed."""
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds or ("line" in kinds) != ("block" in kinds):
        raise ValueError(f"kinds: 'line,block', 'midname' or 'line,block,midname', not {','.join(kinds)}")
    quotas = [n // len(projects) + (1 if k < n % len(projects) else 0) for k in range(len(projects))] if projects else []
    out: list[QualityTask] = []
    for project, quota in zip(projects, quotas):
        cands = [c for rel in project.files for c in candidates(project, rel)]
        random.Random(f"{seed}:{project.name}").shuffle(cands)
        if "midname" in kinds:
            rng = random.Random(f"{seed}:{project.name}:midname")
            want = quota if len(kinds) == 1 else quota // len(kinds)
            mids: list[QualityTask] = []
            while cands and len(mids) < want:
                task = make_midname_task(project, cands.pop(0), rng)
                if task is not None:
                    mids.append(task)
            out.extend(mids)
            quota -= len(mids)
            if "line" not in kinds:
                continue
        blocks = [c for c in cands if c.block >= 2]
        want_block = min(quota // 2, len(blocks))
        chosen_blocks = blocks[:want_block]
        taken = {(c.path, c.line) for c in chosen_blocks}
        lines = [c for c in cands if (c.path, c.line) not in taken][: quota - want_block]
        # alternate kinds: line, block, line, block, ... (the longer list's rest at the end)
        mixed: list[QualityTask] = []
        for k in range(max(len(lines), len(chosen_blocks))):
            if k < len(lines):
                mixed.append(make_task(project, lines[k], "line"))
            if k < len(chosen_blocks):
                mixed.append(make_task(project, chosen_blocks[k], "block"))
        out.extend(mixed)
    return out
