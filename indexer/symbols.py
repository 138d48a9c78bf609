"""The workspace's symbol table: where each top-level name of a Python file is defined,
and what its declaration says.

Kept by :class:`indexer.workspace.WorkspaceIndex` from the same stream as D_r (the
files its filter admits: never an ignored or secret file; an open editor buffer
overrides the disk), so a definition changed on disk (a watchdog event) or in an
editor buffer is seen by the next prompt. The language server uses it to put the
definitions of the names used near the cursor that live in *other* files into the
prompt (:mod:`lsp_server.context`).

What a definition's text is (the declaration a reader needs to call it, short):

* a function: its decorators and signature, then its docstring's first lines, then
  the body when it is short (``SHORT_BODY_LINES``), else ``...``;
* a class: its header, docstring summary, class-level fields (dataclass fields,
  constants) and the signature of each method (``__init__`` first), each followed by
  ``...``;
* a top-level assignment: whole when short (``FIELD_LINES``), else its first line
  with the value elided (``x = ...``), as class fields.

Only Python is parsed (``ast``; a file with a syntax error keeps its last good
parse). Imports are read with regular expressions instead, because the document
being edited is usually not valid Python at the moment of the completion.
"""

from __future__ import annotations

import ast
import re
import threading
from dataclasses import dataclass
from pathlib import PurePosixPath

SHORT_BODY_LINES = 6
"""A function body of at most this many lines is shown whole."""
FIELD_LINES = 4
"""An assignment (class-level or top-level) of at most this many lines is shown whole."""
DOC_LINES = 3
"""Docstring lines kept."""
MAX_METHODS = 24
"""Method signatures shown per class."""
MAX_DEFINITION_CHARS = 2400
"""A definition's text is cut (at a line end) beyond this."""
PYTHON_SUFFIXES = (".py", ".pyi")


@dataclass(frozen=True)
class Definition:
    """One top-level name of a file."""

    name: str
    key: str
    """The file (the index's key: an absolute path)."""
    relpath: str
    """The file relative to its workspace root (posix)."""
    kind: str
    """``function``, ``class`` or ``variable``."""
    line: int
    """1-based line of the definition."""
    text: str
    """The declaration (module docstring)."""
    alias: str = ""
    """For ``name = other`` (``ib = attr = attrib``): ``other``, whose definition is the
    one worth showing."""


@dataclass(frozen=True)
class Import:
    """``local`` names ``name`` of ``module`` (``name`` None: the module itself)."""

    local: str
    module: str
    """Dotted, with leading dots for a relative import (``..pkg.mod``)."""
    name: str | None


# ---------------------------------------------------------------------------- parsing


def _segment(lines: list[str], start: int, end: int) -> str:
    return "\n".join(lines[start - 1 : end])


def _docstring(node: ast.AST, indent: str) -> list[str]:
    doc = (ast.get_docstring(node, clean=True) or "").strip()  # type: ignore[arg-type]
    if not doc:  # none, or only blanks (matplotlib's scale.py has one)
        return []
    kept = doc.splitlines()[:DOC_LINES]
    if len(kept) == 1:
        return [f'{indent}"""{kept[0]}"""']
    return [f'{indent}"""{kept[0]}', *(f"{indent}{ln}" if ln else "" for ln in kept[1:]), f'{indent}"""']


def _header(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    """Decorators and the ``def``/``class`` line(s) up to the body."""
    first = min([d.lineno for d in node.decorator_list] + [node.lineno])
    body_start = node.body[0].lineno if node.body else node.lineno
    head = _segment(lines, first, max(node.lineno, body_start - 1))
    if node.body and body_start == node.lineno:  # def f(): return 1 (one line)
        head = lines[node.lineno - 1]
    return head.rstrip()


def _body_indent(lines: list[str], node: ast.AST) -> str:
    body = getattr(node, "body", None)
    if not body:
        return "    "
    line = lines[body[0].lineno - 1]
    return line[: len(line) - len(line.lstrip())] or "    "


def _function_text(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef, full_body: bool = True) -> str:
    head = _header(lines, node)
    end = node.end_lineno or node.lineno
    if node.body and node.body[0].lineno == node.lineno:
        return head
    body = node.body
    has_doc = bool(body) and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
    rest = body[1:] if has_doc else body
    indent = _body_indent(lines, node)
    out = [head, *_docstring(node, indent)]
    if full_body and rest and (end - rest[0].lineno + 1) <= SHORT_BODY_LINES:
        out.append(_segment(lines, rest[0].lineno, end).rstrip())
    else:
        out.append(f"{indent}...")
    return "\n".join(out)


def _field_text(lines: list[str], node: ast.Assign | ast.AnnAssign) -> str:
    """An assignment whole when short (``FIELD_LINES``), else its first line with the
    value elided (``x = (`` alone would not parse)."""
    end = node.end_lineno or node.lineno
    if end - node.lineno < FIELD_LINES:
        return _segment(lines, node.lineno, end).rstrip()
    first = lines[node.lineno - 1]
    value = node.value
    if value is None or value.lineno != node.lineno:
        return first.rstrip()
    head = first.encode("utf-8")[: value.col_offset].decode("utf-8", "replace")  # col_offset counts UTF-8 bytes
    return head.rstrip() + " ..."


def _class_text(lines: list[str], node: ast.ClassDef) -> str:
    indent = _body_indent(lines, node)
    out = [_header(lines, node), *_docstring(node, indent)]
    methods: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for child in node.body:
        if isinstance(child, (ast.Assign, ast.AnnAssign)):
            out.append(_field_text(lines, child))
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            methods.append(child)
    methods.sort(key=lambda m: (m.name != "__init__", m.lineno))
    for m in methods[:MAX_METHODS]:
        out.append(_function_text(lines, m, full_body=False))
    if len(out) == 1:
        out.append(f"{indent}...")
    return "\n".join(out)


def _cut(text: str) -> str:
    if len(text) <= MAX_DEFINITION_CHARS:
        return text
    nl = text.rfind("\n", 0, MAX_DEFINITION_CHARS)
    return text[: nl if nl > 0 else MAX_DEFINITION_CHARS] + "\n    ..."


def python_definitions(text: str, key: str = "", relpath: str = "") -> list[Definition] | None:
    """The top-level definitions of a Python source, or None when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = text.splitlines()
    out: list[Definition] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(Definition(node.name, key, relpath, "function", node.lineno, _cut(_function_text(lines, node))))
        elif isinstance(node, ast.ClassDef):
            out.append(Definition(node.name, key, relpath, "class", node.lineno, _cut(_class_text(lines, node))))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            text = _field_text(lines, node)
            alias = node.value.id if isinstance(node.value, ast.Name) else ""
            for t in targets:
                if isinstance(t, ast.Name):
                    out.append(Definition(t.id, key, relpath, "variable", node.lineno, _cut(text), alias))
    return out


_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)?|[^\n#]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#;]+)", re.M)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def imports_of(text: str) -> list[Import]:
    """The imports of a Python source, read line by line (works on broken code)."""
    out: list[Import] = []
    for m in _FROM.finditer(text):
        module, names = m.group(1), m.group(2).strip().strip("()").replace("\\\n", " ")
        for part in names.replace("\n", ",").split(","):
            bits = part.split("#")[0].split()
            if not bits or bits[0] == "*":
                continue
            local = bits[2] if len(bits) == 3 and bits[1] == "as" else bits[0]
            if _IDENT.fullmatch(bits[0]) and _IDENT.fullmatch(local):
                out.append(Import(local, module, bits[0]))
    for m in _IMPORT.finditer(text):
        for part in m.group(1).split(","):
            bits = part.split()
            if not bits:
                continue
            if len(bits) == 3 and bits[1] == "as":
                out.append(Import(bits[2], bits[0], None))
            elif re.fullmatch(r"[\w.]+", bits[0]):
                out.append(Import(bits[0].split(".")[0], bits[0], None))
    return out


def identifiers(text: str) -> list[str]:
    return _IDENT.findall(text)


def module_of(relpath: str) -> str:
    """``pkg/sub/mod.py`` -> ``pkg.sub.mod``; ``pkg/__init__.py`` -> ``pkg``."""
    p = PurePosixPath(relpath)
    parts = list(p.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def absolute_module(module: str, relpath: str) -> str:
    """A relative import (``..mod``) made absolute from the importing file's path."""
    level = len(module) - len(module.lstrip("."))
    if not level:
        return module
    package = list(PurePosixPath(relpath).parent.parts)
    if level > 1:
        package = package[: len(package) - (level - 1)] if level - 1 <= len(package) else []
    rest = module[level:]
    return ".".join(package + ([rest] if rest else []))


# ---------------------------------------------------------------------------- the table


class SymbolTable:
    """key -> definitions, and name -> definitions, for the Python files of a workspace.

    Thread-safe: updated from the index's worker thread, read from the model thread.
    ``version(key)`` grows with every change of a file's definitions, so a reader can
    tell that what it holds is stale."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, tuple[str, list[Definition], list[Import]]] = {}  # key -> (module, defs, imports)
        self._by_module: dict[str, str] = {}  # dotted module (and its suffixes) -> key
        self._versions: dict[str, int] = {}
        self._counter = 0

    def __len__(self) -> int:
        return len(self._files)

    @staticmethod
    def _is_python(key: str) -> bool:
        return key.endswith(PYTHON_SUFFIXES)

    def update(self, key: str, relpath: str, text: str) -> bool:
        """Parse ``text`` as the content of ``key``. Returns whether its definitions
        changed (a file that does not parse keeps its last good definitions)."""
        if not self._is_python(key):
            return False
        defs = python_definitions(text, key, relpath)
        if defs is None:
            return False
        module = module_of(relpath)
        imports = [Import(i.local, absolute_module(i.module, relpath), i.name) for i in imports_of(text)]
        with self._lock:
            old = self._files.get(key)
            if old is not None and old[1] == defs and old[2] == imports:
                return False
            self._files[key] = (module, defs, imports)
            self._index_module(module, key)
            self._counter += 1
            self._versions[key] = self._counter
        return True

    def _index_module(self, module: str, key: str) -> None:
        parts = module.split(".")
        for i in range(len(parts)):  # src/pkg/mod.py answers to pkg.mod and mod too
            name = ".".join(parts[i:])
            if name and (i == 0 or name not in self._by_module):
                self._by_module[name] = key

    def remove(self, key: str) -> bool:
        with self._lock:
            gone = self._files.pop(key, None)
            if gone is None:
                return False
            self._by_module = {m: k for m, k in self._by_module.items() if k != key}
            for other, (module, _, _) in self._files.items():
                self._index_module(module, other)
            self._counter += 1
            self._versions[key] = self._counter
        return True

    def version(self, key: str) -> int:
        return self._versions.get(key, 0)

    def __len__(self) -> int:
        """Files with symbols."""
        with self._lock:
            return len(self._files)

    def definitions(self, key: str) -> list[Definition]:
        with self._lock:
            entry = self._files.get(key)
        return list(entry[1]) if entry else []

    def module_key(self, module: str) -> str | None:
        """The file of a dotted module name, or None when it is not in the workspace."""
        with self._lock:
            return self._by_module.get(module)

    def resolve(self, module: str, name: str, depth: int = 3) -> Definition | None:
        """The definition ``name`` in ``module`` (absolute dotted), following re-exports
        (``from .core import name`` in a package's ``__init__.py``) ``depth`` deep."""
        key = self.module_key(module)
        if key is None:
            return None
        with self._lock:
            entry = self._files.get(key)
        if entry is None:
            return None
        for d in entry[1]:
            if d.name == name:
                if d.alias and d.alias != name and depth > 0:  # ib = attrib: show attrib
                    return self.resolve(module, d.alias, depth - 1) or d
                return d
        if depth > 0:
            for imp in entry[2]:
                if imp.local == name and imp.name is not None:
                    return self.resolve(imp.module, imp.name, depth - 1)
        return None

    def lookup(self, name: str) -> list[Definition]:
        """Every top-level definition called ``name`` (for names used without an import)."""
        with self._lock:
            files = list(self._files.values())
        return [d for _, defs, _ in files for d in defs if d.name == name]
