"""Thirtieth session: token healing over more than the last typed token, measured through the real
server. Cursor positions inside names of real code (the pinned projects of the quality benchmark):
the line cut inside a name (at least one character typed, at least one left), nothing after the
cursor on its line, the file's lines around it as the document; the suggestion's first line against
the rest of the real line. Two servers over stdio, the same model (qwen2.5-coder-0.5b, dtype auto):
OLD_TREE (a checkout whose healing takes back the last token only) and the working tree, asked in
turn for every position::

    python docs/bench/probes-s30/midword.py OLD_TREE [N_PER_PROJECT] [N_PROJECTS]

Prints per position (when the two differ) and the totals: first line exact, the name completed
right (the suggestion starts with the rest of the name), edit similarity of the first line.
"""
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command
from fastcoder_bench.quality.metrics import edit_similarity
from fastcoder_bench.quality.tasks import Project, python_files
from fastcoder_bench.suite.projects import fetch_project, load_projects

OLD = Path(sys.argv[1]).resolve()
PER = int(sys.argv[2]) if len(sys.argv) > 2 else 30
N_PROJECTS = int(sys.argv[3]) if len(sys.argv) > 3 else 4
NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]{3,}")
BEFORE, AFTER = 80, 30

pinned, _ = load_projects(None)
projects = [Project(Path(fetch_project(p)), p.name) for p in pinned[:N_PROJECTS]]
tasks = []
for project in projects:
    rng = random.Random(f"midword:{project.name}")
    files = python_files(project.root)
    rng.shuffle(files)
    picked = 0
    for rel in files:
        if picked >= PER:
            break
        lines = (project.root / rel).read_text(encoding="utf-8", errors="replace").split("\n")
        spots = [(i, m) for i, ln in enumerate(lines) if ln.startswith("    ") and not ln.strip().startswith(("#", '"', "'"))
                 for m in NAME.finditer(ln)]  # fmt: skip
        if not spots:
            continue
        i, m = rng.choice(spots)
        cut = m.start() + rng.randint(1, len(m.group()) - 1)
        lo = max(0, i - BEFORE)
        before = "\n".join(lines[lo:i] + [lines[i][:cut]])
        after = "\n" + "\n".join(lines[i + 1 : i + 1 + AFTER])
        tasks.append({"project": project.name, "path": rel, "line": i + 1, "typed": lines[i][:cut].strip(),
                      "rest_of_name": m.group()[cut - m.start():], "target": lines[i][cut:].rstrip(), "text": before + after,
                      "pos": {"line": i - lo, "character": cut}})  # fmt: skip
        picked += 1

ws = Path(tempfile.mkdtemp(prefix="fastcoder-midword-"))
os.chdir(ws)  # the servers run `python -m`: the current folder would come before PYTHONPATH
opts = {"debounceMs": 0, "prefetch": False, "warmAtCursor": False, "earlyAnswerMs": None, "maxNewTokens": 32,
        "workspaceIndex": False}  # fmt: skip
servers = {}
for name, tree in (("old", OLD), ("new", Path(__file__).resolve().parents[3])):
    cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws / f"{name}.log", env={"PYTHONPATH": str(tree)})
    cl.initialize(ws, opts)
    servers[name] = cl
for cl in servers.values():
    cl.wait_status("ready", 600)

totals = {n: {"exact": 0, "name": 0, "es": 0.0, "ms": []} for n in servers}
for k, t in enumerate(tasks):
    got = {}
    for name in (("old", "new") if k % 2 == 0 else ("new", "old")):
        cl = servers[name]
        uri = (ws / f"{name}-{k}.py").as_uri()
        cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": t["text"]}})
        t0 = time.perf_counter()
        a = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": t["pos"], "context": {"triggerKind": 1}}, timeout=300)
        totals[name]["ms"].append(1000 * (time.perf_counter() - t0))
        cl.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        items = (a.get("result") or {}).get("items") or []
        got[name] = (items[0]["insertText"] if items else "").split("\n")[0].rstrip()
    for name, first in got.items():
        totals[name]["exact"] += first == t["target"]
        totals[name]["name"] += first.startswith(t["rest_of_name"])
        totals[name]["es"] += edit_similarity(first, t["target"])
    if got["old"] != got["new"]:
        print(f"{t['project']}/{t['path']}:{t['line']} {t['typed'][-40:]!r}|{t['target'][:40]!r}\n"
              f"    old {got['old'][:60]!r}\n    new {got['new'][:60]!r}")
n = len(tasks)
print(f"\n{n} positions inside names, {N_PROJECTS} projects ({', '.join(p.name for p in projects)})")
for name, s in totals.items():
    ms = sorted(s["ms"])
    print(f"{name}: first line exact {s['exact']} ({100 * s['exact'] / n:.1f}%), the name completed right {s['name']} "
          f"({100 * s['name'] / n:.1f}%), edit similarity {s['es'] / n:.3f}, request p50 {ms[len(ms) // 2]:.0f} ms")
for cl in servers.values():
    cl.shutdown()
