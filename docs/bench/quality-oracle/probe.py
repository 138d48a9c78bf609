"""Can cross-file context help this model at all? An upper bound: the definitions of
the very names the target uses (an *oracle* retrieval: it looks at the answer, which no
editor can), against the document alone and against the server's own ``definitions``
choice for the cursor, on the quality benchmark's tasks.

    python docs/bench/quality-oracle/probe.py [N_TASKS] [MODEL] [VARIANTS]

Offline, in one process, one model, greedy (AR; FastCoder's output is the same): each
task's prompt is the server's (``lsp_server.prompt.build_prompt``, anchored layout,
2,048 tokens, suffix <= 128) with the context in Qwen's repository format
(``<|repo_name|>``, ``<|file_sep|>`` per file) before it, taken out of the same 2,048
tokens; up to 64 new tokens, cut at the end of the line (``line`` tasks) or of the
target's line count (``block``); scored by the benchmark's metrics
(``fastcoder_bench.quality.metrics.score``). Variants:

* ``none``: the document alone;
* ``wanted``: the definitions the server would pick at the cursor (``lsp_server.context``
  ``_wanted`` order: the imported names nearest the cursor first), up to 512 tokens;
* ``oracle``: the definitions of the names the target line uses (``QualityTask.names``,
  found in ``QualityTask.defined_in``), up to 512 tokens;
* ``oracle-file``: the whole defining file(s), cut to 1,024 tokens (more of the repo,
  as CrossCodeEval's retrieved chunks give);
* ``oracle-chunks``: CrossCodeEval's "retrieval with reference": the project's code chunks
  (16 lines, stride 8, as ``lsp_server.context``'s ``open`` source cuts them; every file
  but the task's) most similar (identifier Jaccard) to the last 10 lines before the cursor
  *plus the target*, the best last, up to 512 tokens;
* ``draft-chunks``: the same with the model's own no-context suggestion in place of the
  target (RepoCoder's iteration: an editor could do this, at the price of a second
  generation).

``VARIANTS``: a comma-separated subset (``none`` always runs: the base).

Not the server's post-processing (the server trims overlaps with the suffix): the same
scoring for every variant, so only the ratios between variants mean anything.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from fastcoder.config import DecodeConfig
from fastcoder.engine import Engine
from fastcoder.models import detect_fim
from fastcoder.models.load import load_model
from fastcoder.tokens import TokenInfo
from fastcoder_bench.quality.metrics import aggregate, paired, score
from fastcoder_bench.quality.tasks import Project, pick_tasks
from fastcoder_bench.suite.projects import fetch_project, load_projects
from indexer.symbols import python_definitions
from lsp_server.prompt import CursorContext, build_prompt, encode

n_tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 48
model = sys.argv[2] if len(sys.argv) > 2 else "qwen2.5-coder-0.5b"
out = Path(__file__).parent
pinned, _ = load_projects(None)
projects = [Project(Path(fetch_project(p)), p.name) for p in pinned[:4]]
tasks = pick_tasks(projects, n_tasks, 0)
loaded = load_model(model, dtype="auto")
tok = loaded.tokenizer
engine = Engine(loaded.model, tok, name=model)
fim = detect_fim(tok)
info = TokenInfo.for_tokenizer(tok)
repo_id, sep_id = tok.convert_tokens_to_ids("<|repo_name|>"), tok.convert_tokens_to_ids("<|file_sep|>")
print(f"{model} {loaded.dtype}; {len(tasks)} tasks; load {os.getloadavg()}", flush=True)


def definitions_of(project: Project, rel: str) -> dict[str, str]:
    defs = python_definitions(project.text(rel), key=rel, relpath=rel) or []
    return {d.name: d.text for d in defs}


def render(project: Project, cur: str, files: dict[str, list[str]], budget: int) -> list[int]:
    """Qwen's repository format: <|repo_name|>name, then <|file_sep|>path + text per file,
    then <|file_sep|>current path; pieces dropped from the end until it fits."""
    items = [(p, t) for p, ts in files.items() for t in ts]
    while True:
        ids = [repo_id, *encode(tok, project.name + "\n")]
        by: dict[str, list[str]] = {}
        for p, t in items:
            by.setdefault(p, []).append(t)
        for p, ts in by.items():
            ids += [sep_id, *encode(tok, p + "\n"), *encode(tok, "\n...\n".join(ts) + "\n")]
        ids += [sep_id, *encode(tok, cur + "\n")]
        if len(ids) <= budget or not items:
            return ids if items else []
        if len(items) == 1:  # one piece too long: cut its text
            p, t = items[0]
            items = [(p, t[: int(len(t) * 0.8)])]
        else:
            items.pop()


def contexts(task) -> dict[str, list[int]]:
    project = next(p for p in projects if p.name == task.project)
    oracle: dict[str, list[str]] = {}
    for rel in task.defined_in:
        defs = definitions_of(project, rel)
        for name in task.names:
            base = name.split(".")[-1]
            if base in defs:
                oracle.setdefault(rel, []).append(defs[base])
    # the server's choice at the cursor: imported names nearest the cursor first
    from indexer.symbols import SymbolTable
    from lsp_server.context import ContextBuilder

    table = SymbolTable()
    for rel in project.files:
        table.update(str(project.root / rel), rel, project.text(rel))
    wanted = ContextBuilder()._wanted(table, str(project.root / task.path), task.path, CursorContext(task.prefix, task.suffix))
    near: dict[str, list[str]] = {}
    seen = set()
    for name, d in wanted.items():
        if (d.relpath, d.name) not in seen:
            seen.add((d.relpath, d.name))
            near.setdefault(d.relpath, []).append(d.text)
    whole = {rel: [project.text(rel)] for rel in task.defined_in}
    return {
        "none": [],
        "wanted": render(project, task.path, near, 512),
        "oracle": render(project, task.path, oracle, 512),
        "oracle-file": render(project, task.path, whole, 1024),
    }


variants = ["none", "wanted", "oracle", "oracle-file"]
if len(sys.argv) > 3:
    variants = ["none"] + [v for v in sys.argv[3].split(",") if v != "none"]
_chunk_index: dict[str, list[tuple[str, int, str, set[str]]]] = {}


def chunk_index(project: Project) -> list[tuple[str, int, str, set[str]]]:
    if project.name not in _chunk_index:
        from lsp_server.context import _IDENT, _chunks

        _chunk_index[project.name] = [(rel, line, text, set(_IDENT.findall(text)))
                                      for rel in project.files for line, text in _chunks(project.text(rel))]
    return _chunk_index[project.name]


def similar_chunks(task, query: str, budget: int = 512) -> list[int]:
    from lsp_server.context import _IDENT, jaccard

    project = next(p for p in projects if p.name == task.project)
    q = set(_IDENT.findall(query))
    scored = sorted(((jaccard(q, ids), rel, line, text) for rel, line, text, ids in chunk_index(project) if rel != task.path),
                    reverse=True)
    picked, used = [], 0
    for score_, rel, line, text in scored:
        if score_ <= 0:
            break
        cost = len(encode(tok, text)) + 8
        if used + cost > budget:
            continue
        picked.append((rel, text))
        used += cost
        if used > budget - 40:
            break
    files: dict[str, list[str]] = {}
    for rel, text in reversed(picked):  # the best last, nearest the code
        files.setdefault(rel, []).append(text)
    return render(project, task.path, files, budget + 64)


def last_lines(text: str, n: int = 10) -> str:
    return "\n".join(text.split("\n")[-n:])
rows: dict[str, list[dict]] = {v: [] for v in variants}
records = []
t_start = time.time()
for i, task in enumerate(tasks):
    ctx_ids = contexts(task)
    if "oracle-chunks" in variants:
        ctx_ids["oracle-chunks"] = similar_chunks(task, last_lines(task.prefix) + task.target)
    rec = {"task": task.to_json(), "variants": {}}
    for v in variants:  # none first: draft-chunks asks with its suggestion
        if v == "draft-chunks":
            ctx_ids[v] = similar_chunks(task, last_lines(task.prefix) + rec["variants"]["none"]["text"])
        c = ctx_ids[v]
        p = build_prompt(tok, fim, CursorContext(task.prefix, task.suffix), 2048 - len(c), max_suffix_tokens=128,
                         layout="anchored", info=info, headroom=False)
        lines = len(task.target.split("\n")) if task.kind == "block" else 1

        def stop(text: str, n=lines) -> int | None:  # the cut: after the n-th line
            return len(text) if text.count("\n") >= n else None

        gen = engine.generate(c + p.ids, DecodeConfig(method="ar", max_new_tokens=64), stop_fn=stop,
                              first_allowed=p.allowed, stop_ids=set(tok.convert_tokens_to_ids(["<|endoftext|>", "<|fim_pad|>", "<|file_sep|>"])))
        text = gen.text[len(p.heal):]
        s = score(text, task.kind, task.target)
        s.update(context_tokens=len(c), prompt_tokens=len(c) + len(p.ids), latency_ms=1000 * gen.stats.total_s)
        rows[v].append(s)
        rec["variants"][v] = {**s, "text": text}
    records.append(rec)
    print(f"task {i} {task.kind} {task.project}:{task.path}:{task.line} names {task.names}: "
          + ", ".join(f"{v} {'EM' if rec['variants'][v]['exact_match'] else '  '} {rec['variants'][v]['edit_similarity']:.2f} ({ctx_ids[v] and len(ctx_ids[v]) or 0})" for v in variants), flush=True)
print(f"load {os.getloadavg()}; {time.time() - t_start:.0f} s")
suffix = "" if len(sys.argv) <= 3 else "-" + "-".join(variants[1:])
with open(out / f"tasks-{model}{suffix}.jsonl", "w") as fh:
    for r in records:
        fh.write(json.dumps(r) + "\n")
agg = {v: aggregate(rows[v]) for v in variants}
for v in variants:
    a = agg[v]
    pr = paired(rows["none"], rows[v]) if v != "none" else {}
    print(f"{v:12s} EM {a['exact_match']:.3f}  ES {a['edit_similarity']:.3f}  ident {a['identifier_match']:.3f}  n {a['n']}  "
          + (f"vs none: EM +{pr['exact_gained']}/-{pr['exact_lost']}, ES {pr['edit_diff_mean']:+.3f} ± {pr['edit_diff_se']:.3f}" if pr else ""))
