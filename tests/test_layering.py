"""The house's layering, read from the source with ``ast``: who may import whom.

Rooms, top to bottom; a module imports its own room and the rooms below, never one
above, and no chain of imports comes back to where it started (no cycle):

    editor-client    VS Code (TypeScript) and Neovim (Lua): LSP over stdio to `fastcoder serve`
    fastcoder_cli    the `fastcoder` command: the subcommands that wire the rooms together
    fastcoder_bench  every benchmark (`fastcoder bench KIND`)
    lsp_server       the pygls language server
    indexer          files -> token datastores (D_r, D_c, D_d)
    fastcoder        the engine: token ids in, token ids out

Imports inside functions count as well as those at the top of a file, and so do lazy
imports by name (a string constant naming a module of these packages, as
``importlib.import_module`` tables use). An import of a package's own submodules by its
``__init__`` and a submodule's implicit import of its package are not edges.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ["fastcoder", "indexer", "lsp_server", "fastcoder_bench", "fastcoder_cli"]
"""Bottom to top."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@lru_cache(maxsize=1)
def import_graph() -> dict[str, set[str]]:
    """module -> the modules of the rooms it imports (the nearest existing module of
    ``a.b.c``: ``from fastcoder.models import cache_root`` is an edge to fastcoder.models)."""
    files = {_module_name(p): p for room in ROOMS for p in (ROOT / room).rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    where = ".".join(base + ([node.module] if node.module else []))
                else:
                    where = node.module or ""
                names = [f"{where}.{a.name}" if f"{where}.{a.name}" in files else where for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value:
                names = [node.value] if node.value in files else []  # a lazy import table
            else:
                continue
            for name in names:
                target = resolve(name)
                if target is not None and target != mod:
                    edges.add(target)
        graph[mod] = edges
    return graph


def room(module: str) -> str:
    return module.split(".")[0]


def test_the_graph_is_read():
    g = import_graph()
    assert {room(m) for m in g} == set(ROOMS)
    assert len(g) > 60
    # known arrows, so that a broken reader cannot pass the tests below
    assert "indexer.deps" in g["lsp_server.workspace"]  # a lazy import inside a method
    assert "fastcoder.datastore" in g["indexer.common"]
    assert "fastcoder_cli.commands.serve_cmd" in g["fastcoder_cli.main"]  # its lazy table
    assert "fastcoder_bench.cli" in g["fastcoder_cli.main"]


def test_no_arrow_points_up():
    rank = {r: i for i, r in enumerate(ROOMS)}
    up = sorted(
        f"{m} -> {t}" for m, targets in import_graph().items() for t in targets if rank[room(t)] > rank[room(m)]
    )
    assert up == [], "imports from a room above:\n" + "\n".join(up)


def test_the_product_imports_no_benchmark_and_no_cli():
    product = {"fastcoder", "indexer", "lsp_server"}
    bad = sorted(
        f"{m} -> {t}" for m, targets in import_graph().items() if room(m) in product
        for t in targets if room(t) not in product
    )
    assert bad == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert _cycles(import_graph()) == []
