"""Thirty-ninth session: a docstring being started, through the real server over stdio
(qwen2.5-coder-0.5b, dtype auto, default settings but no debounce). Functions, methods and
classes of the Python standard library with a docstring: the docstring is taken out and the
cursor put between the triple quotes an editor closed by itself (``\"\"\"|\"\"\"``, as
Pylance does in VS Code), in the module's text. Each case: what the editor would show, the
document's own docstring (its first line), and their similarity; at the end, how many
showed nothing and the mean similarity of the summary line::

    python docs/bench/probes-s39/docstrings.py [N]

N: how many cases (default 40; two functions or methods and one class per module, in order).
"""
import ast
import difflib
import json
import sys
import sysconfig
import tempfile
from pathlib import Path

from fastcoder_bench.lsp_client import StdioClient, server_command

N = int(sys.argv[1]) if len(sys.argv) > 1 else 40
MODULES = ["textwrap", "shlex", "fnmatch", "glob", "heapq", "string", "calendar", "pprint", "csv", "secrets",
           "statistics", "base64", "ipaddress", "json/encoder", "json/decoder", "html/parser", "gettext", "getopt",
           "difflib", "filecmp", "netrc", "queue", "sched", "tokenize", "zipapp"]


def cases():
    lib = Path(sysconfig.get_paths()["stdlib"])
    for mod in MODULES:
        src = (lib / f"{mod}.py").read_text(encoding="utf-8")
        lines = src.split("\n")
        funcs, classes = [], []
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and ast.get_docstring(node):
                doc = node.body[0]
                if doc.lineno == doc.end_lineno and len(node.body) == 1:
                    continue  # a one-line body: nothing below the docstring
                (classes if isinstance(node, ast.ClassDef) else funcs).append((node, doc))
        for node, doc in sorted(funcs, key=lambda p: p[0].lineno)[:2] + sorted(classes, key=lambda p: p[0].lineno)[:1]:
            indent = lines[doc.lineno - 1][: doc.col_offset]
            head = "\n".join(lines[: doc.lineno - 1]) + "\n" + indent + '"""'
            tail = '"""\n' + "\n".join(lines[doc.end_lineno :])
            summary = ast.get_docstring(node).strip().split("\n")[0].strip()
            yield f"{mod}.{node.name}", head, tail, summary


def summary_of(shown: str) -> str:
    for line in shown.split("\n"):
        line = line.strip().strip('"').strip()
        if line:
            return line
    return ""


ws = Path(tempfile.mkdtemp(prefix="fastcoder-doc-")) / "project"
ws.mkdir()
cl = StdioClient(server_command("qwen2.5-coder-0.5b", dtype="auto"), ws.parent / "server.log")
cl.initialize(ws, {"debounceMs": 0, "prefetch": False, "warmAtCursor": False, "earlyAnswerMs": None})
cl.wait_status("ready", 300)
empty, sims, multi = 0, [], 0
for i, (name, head, tail, summary) in enumerate(list(cases())[:N]):
    text = head + tail
    line = head.count("\n")
    col = len(head[head.rfind("\n") + 1 :].encode("utf-16-le")) // 2
    uri = (ws / f"case{i}.py").as_uri()
    cl.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})
    a = cl.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col},
                                                  "context": {"triggerKind": 1}}, timeout=120)  # fmt: skip
    cl.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    items = (a.get("result") or {}).get("items") or []
    shown = items[0]["insertText"] if items else None
    got = summary_of(shown or "")
    sim = difflib.SequenceMatcher(None, got.lower(), summary.lower()).ratio() if got else 0.0
    empty += not got
    multi += bool(shown and "\n" in shown)
    sims.append(sim)
    print(f"{name}: {json.dumps(shown)}\n    doc: {json.dumps(summary)}  similarity {sim:.2f}")
n = len(sims)
print(f"cases {n}: nothing shown {empty}, on lines of their own {multi}, "
      f"summary similarity mean {sum(sims) / max(n, 1):.3f}")
print("exit", cl.shutdown())
