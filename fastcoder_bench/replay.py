"""Typing replay: the product benchmark. Real typing into the real server over stdio.

Several real files from the repo suite's pinned projects (``fastcoder bench`` suite,
:mod:`fastcoder_bench.suite.projects`) are opened, each with one function's body
removed (signature and docstring kept), next to another open file of the same folder
(an editor has several buffers). The body is typed back character by character on a
simulated clock:

* inter-key gaps are drawn (seeded) from a log-normal around 130 ms, with longer
  pauses after word boundaries and at the start of a line;
* the editor auto-indents after Enter (the next line's indentation arrives with the
  newline) and auto-closes ``()[]{}`` (typing the closer later steps over it);
* a request (``textDocument/inlineCompletion``) fires only when 150 ms pass without
  typing (debounce). The benchmark waits for each answer (real time) before typing on.

Methods run side by side: for every file, every method gets a fresh server and the
same keystroke script (the order of methods rotates from file to file). Reported per
method: model-run latency p50/p95 (later requests that ran the model), first-request
latency, the mean accepted length and accepted draft tokens by source, the share of
suggestions identical across methods (same request, same text), the time split per
request (debounce wait, prefill, decode, post-processing + protocol), typed-through
answers and suggestions that match what was typed next. A method whose model-run p50
is slower than AR's in the same run is flagged in red.

    fastcoder bench replay --out DIR                                 # 4 files, ar and fastcoder
    fastcoder bench replay --files 6 --methods ar,pld,fastcoder --max-keys 150 --out DIR
    fastcoder bench replay --file F --function NAME --methods ar,fastcoder --out DIR

Not a test: it prints numbers. Absolute times on a shared CPU are noisy; the load
average is printed with them.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fastcoder_bench.output import recording

DEBOUNCE_S = 0.150
CLOSERS = {"(": ")", "[": "]", "{": "}"}


# ------------------------------------------------------------------------------ the task


@dataclass
class Task:
    path: Path
    function: str
    before: str  # document text before the body (signature + docstring + newline)
    body: str  # the body to type (indented lines, ending with a newline)
    after: str  # document text after the body
    name: str = ""  # e.g. "click/src/click/utils.py::echo"
    others: tuple[Path, ...] = ()  # other files open in the editor (same folder)


def make_task(path: Path, function: str) -> Task:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    node = next(
        (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function),
        None,
    )
    if node is None:
        raise SystemExit(f"no function {function!r} in {path}")
    body = node.body
    first = body[1] if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) else body[0]
    lines = text.splitlines(keepends=True)
    start = sum(len(ln) for ln in lines[: first.lineno - 1])
    end = sum(len(ln) for ln in lines[: node.end_lineno])
    body_text = text[start:end]
    indent = body_text[: len(body_text) - len(body_text.lstrip(" \t"))]
    # the editor auto-indented the line after the docstring: the user types from there
    return Task(path, function, text[:start] + indent, body_text[len(indent) :], text[end:])


def task_from_span(root: Path, span: Any, group: str) -> Task:
    """A task from a repo-suite function (:class:`fastcoder_bench.suite.tasks.FunctionSpan`):
    the body lines after the docstring are typed; the editor auto-indented the first."""
    path = root / span.path
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
    lines = text.splitlines(keepends=True)
    start = sum(len(ln) for ln in lines[: span.body_start - 1])
    end = sum(len(ln) for ln in lines[: span.body_end])
    body_text = text[start:end]
    indent = body_text[: len(body_text) - len(body_text.lstrip(" \t"))]
    return Task(path, span.qualname, text[:start] + indent, body_text[len(indent) :], text[end:],
                name=f"{group}/{span.path}::{span.qualname}")


def neighbours(path: Path, n: int) -> tuple[Path, ...]:
    """Up to ``n`` other Python files of the folder, largest first (the ones a user has open)."""
    if n <= 0:
        return ()
    files = [p for p in path.parent.iterdir() if p.is_file() and p.suffix == ".py" and p != path]
    files.sort(key=lambda p: (-p.stat().st_size, p.name))
    return tuple(files[:n])


def suite_tasks(n: int, seed: int | None, min_chars: int, max_chars: int, open_others: int) -> list[Task]:
    """``n`` functions of the repo suite's pinned projects, from ``n`` different files
    (projects taken round-robin, the suite's seeded order), bodies of a typable size."""
    from fastcoder_bench.suite.projects import fetch_project, load_projects
    from fastcoder_bench.suite.repo import RepoCorpus
    from fastcoder_bench.suite.tasks import spread

    projects, list_seed = load_projects(None)
    roots: dict[str, Path] = {}
    spans: dict[str, list[Any]] = {}
    for p in projects:
        root = fetch_project(p)
        roots[p.name] = Path(root)
        spans[p.name] = [(p.name, sp) for sp in RepoCorpus(root, name=p.name).functions()]
    tasks: list[Task] = []
    files: set[tuple[str, str]] = set()
    for name, span in spread(spans, list_seed if seed is None else seed):
        if len(tasks) >= n:
            break
        if (name, span.path) in files:
            continue
        task = task_from_span(roots[name], span, name)
        if not min_chars <= len(task.body) <= max_chars or not task.body.strip():
            continue
        task.others = neighbours(task.path, open_others)
        files.add((name, span.path))
        tasks.append(task)
    return tasks


# ------------------------------------------------------------------------------ typing


@dataclass
class Key:
    typed: str  # what the user typed (body characters consumed)
    insert: str  # text inserted into the buffer ("" when stepping over an auto-closed char)
    cursor_after: int  # cursor advance (chars) in the buffer
    gap: float  # seconds until the next keystroke


def keystrokes(body: str, rng: random.Random, autoclose: bool = True) -> list[Key]:
    """The body as editor events: characters, Enter + auto-indent, auto-closed brackets."""
    keys: list[Key] = []
    pending: list[str] = []  # auto-inserted closers right of the cursor, nearest first
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\n":
            j = i + 1
            while j < len(body) and body[j] in " \t":
                j += 1
            chunk = body[i:j]  # Enter: the editor puts the indentation there too
            keys.append(Key(chunk, chunk, len(chunk), 0.0))
            i = j
            continue
        if autoclose and pending and c == pending[0]:
            pending.pop(0)
            keys.append(Key(c, "", 1, 0.0))
        elif autoclose and c in CLOSERS:
            keys.append(Key(c, c + CLOSERS[c], 1, 0.0))
            pending.insert(0, CLOSERS[c])
        else:
            keys.append(Key(c, c, 1, 0.0))
        i += 1
    for k in keys:
        gap = rng.lognormvariate(math.log(0.130), 0.45)
        last = k.typed[-1] if k.typed.strip() else k.typed[:1]
        if k.typed.startswith("\n"):
            gap += rng.uniform(0.3, 1.2)  # a new line: think a moment
        elif last in " .,:()[]=":
            gap += rng.uniform(0.05, 0.35)  # word boundary
        k.gap = gap
    return keys


# ------------------------------------------------------------------------------ measuring


@dataclass
class Sample:
    index: int
    seconds: float
    text: str
    expected: str
    gap_left: float  # time the user leaves before the next keystroke
    typed_through: bool
    model_ran: bool
    early: bool = False  # answered with the first lines while the block went on
    new_tokens: int = 0
    prefill_tokens: int = 0
    prompt_tokens: int = 0
    forward_steps: int = 0
    prefill_ms: float = 0.0  # the engine's prefill (KV prefix reuse: only what changed)
    engine_ms: float = 0.0  # the whole generation in the engine (prefill + decode)
    accepted_by_source: dict | None = None
    error: str = ""

    @property
    def decode_ms(self) -> float:
        return max(self.engine_ms - self.prefill_ms, 0.0)

    @property
    def post_ms(self) -> float:
        """Request latency outside the engine: queueing, prompt building,
        post-processing and the protocol round trip."""
        return max(1000 * self.seconds - self.engine_ms, 0.0) if self.model_ran else 1000 * self.seconds

    @property
    def one_line(self) -> bool:
        return bool(self.text) and "\n" not in self.text.strip("\n")

    @property
    def exact(self) -> bool:
        return bool(self.text.strip()) and self.expected.startswith(self.text)

    @property
    def first_line(self) -> bool:
        """The suggestion's first non-blank line is right (the rest may not be)."""
        got, exp = self.text.split("\n"), self.expected.split("\n")
        i = next((j for j, ln in enumerate(got) if ln.strip()), None)
        if i is None or i >= len(exp) or any(exp[j].strip() for j in range(i)):
            return False
        return exp[i].startswith(got[i])


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def ms(v: float | None) -> str:
    return "-" if v is None else f"{1000 * v:.0f}"


def utf16_pos(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return line, len(text[start:offset].encode("utf-16-le")) // 2


async def replay(args: argparse.Namespace, task: Task, workspace: Path) -> dict[str, Any]:
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("fastcoder-bench", "0")
    statuses: list[tuple[str, str]] = []

    @client.feature("fastcoder/status")
    def _status(params: Any) -> None:
        get = params.get if isinstance(params, dict) else lambda k: getattr(params, k, None)
        statuses.append((get("state"), get("message")))

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def _log(params: Any) -> None:
        pass

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def _show(params: Any) -> None:
        print(f"server: {params.message}", file=sys.stderr)

    cmd = [sys.executable, "-m", "fastcoder_cli", "serve", "--model", args.model, "--dtype", args.dtype,
           "--device", args.device, "--method", args.method]  # fmt: skip
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    t_start = time.perf_counter()
    await client.start_io(*cmd, env=env)
    options = {
        "model": args.model, "dtype": args.dtype, "device": args.device, "method": args.method,
        "maxNewTokens": args.max_new_tokens, "timeBudgetMs": args.time_budget_ms,
        "reuseSuggestions": not args.no_reuse, "commonIndex": not args.no_common,
        "maxPromptTokens": args.max_prompt_tokens,
    }  # fmt: skip
    if args.engine:
        options["engine"] = json.loads(args.engine)
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=workspace.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="bench")],
            initialization_options=options,
        )
    )
    client.initialized(types.InitializedParams())
    while not statuses or statuses[-1][0] != "ready":
        if statuses and statuses[-1][0] == "error":
            raise SystemExit(f"server error: {statuses[-1][1]}")
        if time.perf_counter() - t_start > args.ready_timeout:
            raise SystemExit(f"server not ready after {args.ready_timeout} s: {statuses[-1:]}")
        await asyncio.sleep(0.1)
    ready_s = time.perf_counter() - t_start

    async def stats() -> dict[str, Any]:
        return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="fastcoder.stats"))

    for other in task.others:  # the other buffers the user has open
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=(workspace / other.name).as_uri(), language_id="python",
                                                     version=1, text=other.read_text(encoding="utf-8"))
            )
        )  # fmt: skip
    doc_path = workspace / task.path.name
    uri = doc_path.as_uri()
    buffer = task.before + task.after
    cursor = len(task.before)
    version = 1
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=buffer)
        )
    )
    await asyncio.sleep(args.first_pause)  # the user looks at the file before typing (real time)
    rng = random.Random(args.seed)
    keys = keystrokes(task.body, rng, autoclose=not args.no_autoclose)
    if args.max_keys:
        keys = keys[: args.max_keys]
    samples: list[Sample] = []
    typed = 0  # body characters typed so far
    sim_clock = 0.0
    before = await stats()
    # a request at the very start (the user paused after the docstring), then while typing
    pending_request = True
    for idx in range(len(keys) + 1):
        if pending_request:
            line, col = utf16_pos(buffer, cursor)
            params = types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=line, character=col),
                context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
            )
            t0 = time.perf_counter()
            err = ""
            try:
                result = await client.text_document_inline_completion_async(params)
                items = result.items if isinstance(result, types.InlineCompletionList) else (result or [])
                text = items[0].insert_text if items else ""
            except Exception as exc:
                text, err = "", str(exc)
            seconds = time.perf_counter() - t0
            after = await stats()
            tt = after["outcomes"].get("typed_through", 0) > before["outcomes"].get("typed_through", 0)
            early = after["outcomes"].get("early", 0) > before["outcomes"].get("early", 0)
            gens = after["total"]["generations"] - before["total"]["generations"]
            last = after.get("last") or {}
            gap = keys[idx - 1].gap if idx > 0 else args.first_pause
            samples.append(
                Sample(
                    index=len(samples), seconds=seconds, text=text, expected=task.body[typed:],
                    gap_left=gap - DEBOUNCE_S, typed_through=tt, model_ran=gens > 0 or early, early=early,
                    new_tokens=last.get("newTokens", 0) if gens else 0,
                    prefill_tokens=last.get("prefillTokens", 0) if gens else 0,
                    prompt_tokens=last.get("promptTokens", 0) if gens else 0,
                    forward_steps=last.get("forwardSteps", 0) if gens else 0,
                    prefill_ms=last.get("prefillMs", 0.0) if gens else 0.0,
                    engine_ms=last.get("totalMs", 0.0) if gens else 0.0,
                    accepted_by_source=last.get("acceptedBySource") if gens else None, error=err,
                )
            )  # fmt: skip
            before = after
            if args.verbose:
                s = samples[-1]
                print(f"#{s.index:3d} {1000 * s.seconds:6.0f} ms {'TT' if tt else ('EA' if early else '  ')} "
                      f"{'OK' if s.exact else ('L1' if s.first_line else '  ')} {s.text[:60]!r} | {s.expected[:40]!r}")  # fmt: skip
        if idx == len(keys):
            break
        k = keys[idx]
        # type key idx
        if k.insert:
            line, col = utf16_pos(buffer, cursor)
            version += 1
            here = types.Position(line=line, character=col)
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=here, end=here), text=k.insert)],
                )
            )
            buffer = buffer[:cursor] + k.insert + buffer[cursor:]
        cursor += k.cursor_after
        typed += len(k.typed)
        sim_clock += k.gap
        pending_request = k.gap >= DEBOUNCE_S and idx < len(keys) - 1
    final = await stats()
    try:
        await asyncio.wait_for(client.shutdown_async(None), 15)
        client.exit(None)
    except Exception:
        pass
    await client.stop()
    return {"samples": samples, "stats": final, "ready_s": ready_s, "keys": len(keys), "typing_s": sim_clock,
            "statuses": statuses}  # fmt: skip


def _lat(group: list[Sample]) -> dict[str, Any]:
    v = [s.seconds for s in group]
    return {"n": len(v), "p50_ms": None if not v else 1000 * pct(v, 0.5), "p95_ms": None if not v else 1000 * pct(v, 0.95)}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One method over all its files (``runs``: one replay per file)."""
    firsts = [r["samples"][0] for r in runs if r["samples"]]
    later = [s for r in runs for s in r["samples"][1:]]
    samples = [s for r in runs for s in r["samples"]]
    shown = [s for s in samples if s.text.strip()]
    model = [s for s in later if s.model_ran and not s.early]
    gens = sum(r["stats"]["total"].get("generations", 0) for r in runs)
    new_tokens = sum(r["stats"]["total"].get("newTokens", 0) for r in runs)
    forwards = sum(r["stats"]["total"].get("forwardSteps", 0) for r in runs)
    decode_ms = sum(r["stats"]["total"].get("decodeMs", 0.0) for r in runs)
    prompt = sum(r["stats"]["total"].get("promptTokens", 0) for r in runs)
    prefilled = sum(r["stats"]["total"].get("prefillTokens", 0) for r in runs)
    by_source: dict[str, int] = {}
    for s in samples:
        for k, v in (s.accepted_by_source or {}).items():
            by_source[k] = by_source.get(k, 0) + int(v)
    decoded = max(new_tokens - gens, 0)
    return {
        "files": len(runs),
        "requests": len(samples),
        "keystrokes": sum(r["keys"] for r in runs),
        "simulated_typing_s": sum(r["typing_s"] for r in runs),
        "server_ready_s": _mean([r["ready_s"] for r in runs]),
        "first": _lat(firsts),
        "later": _lat(later),
        "model_run": _lat(model),
        "later_typed_through": _lat([s for s in later if s.typed_through]),
        "later_early": _lat([s for s in later if s.early]),
        "later_one_line_model": _lat([s for s in model if s.one_line]),
        "time_split_ms": {  # per model-run request (later ones), means
            "debounce": 1000 * DEBOUNCE_S,
            "prefill": _mean([s.prefill_ms for s in model]),
            "decode": _mean([s.decode_ms for s in model]),
            "post_and_protocol": _mean([s.post_ms for s in model]),
        },
        "suggestions": len(shown),
        "empty": len(samples) - len(shown),
        "errors": sum(1 for s in samples if s.error),
        "match_exact_share": (sum(s.exact for s in shown) / len(shown)) if shown else None,
        "match_first_line_share": (sum(s.first_line for s in shown) / len(shown)) if shown else None,
        "in_time_share": (sum(s.seconds <= s.gap_left for s in samples) / len(samples)) if samples else None,
        "prefill_saving": (1 - prefilled / prompt) if prompt else None,
        "generations": gens,
        "mean_accept_length": (decoded / forwards) if forwards else None,
        "decode_ms_per_token": (decode_ms / decoded) if decoded else None,
        "accepted_by_source": by_source,
        "typed_through": sum(r["stats"]["outcomes"].get("typed_through", 0) for r in runs),
        "model": runs[0]["stats"]["model"] if runs else {},
        "index": [r["stats"]["index"].get("summary") for r in runs],
    }


def identical_shares(per_file: list[dict[str, list[Sample]]]) -> dict[str, Any]:
    """Share of requests whose suggestion is the same text for every method (and, per
    method, the share equal to AR's). Requests are the same across methods: the
    keystroke script and the debounce decide them, not the answers."""
    same = total = 0
    vs_ar: dict[str, list[int]] = {}
    for by_method in per_file:
        methods = list(by_method)
        n = min(len(v) for v in by_method.values())
        for i in range(n):
            texts = {m: by_method[m][i].text for m in methods}
            total += 1
            same += len(set(texts.values())) == 1
            if "ar" in texts:
                for m in methods:
                    if m != "ar":
                        c = vs_ar.setdefault(m, [0, 0])
                        c[0] += texts[m] == texts["ar"]
                        c[1] += 1
    return {"all_methods": (same / total) if total else None, "requests": total,
            "vs_ar": {m: (a / b if b else None) for m, (a, b) in vs_ar.items()}}


RED = "\033[31m"
RESET = "\033[0m"


def slower_than_ar(summaries: dict[str, dict[str, Any]]) -> dict[str, float]:
    """method -> its model-run p50 / AR's, for the methods slower than AR."""
    ar = summaries.get("ar", {}).get("model_run", {}).get("p50_ms")
    out = {}
    for m, s in summaries.items():
        p = s["model_run"]["p50_ms"]
        if m != "ar" and ar and p and p > ar:
            out[m] = p / ar
    return out


def print_table(summaries: dict[str, dict[str, Any]], same: dict[str, Any], color: bool) -> str:
    """Print the side-by-side table; return it as markdown (with the red flags)."""
    ar = summaries.get("ar", {}).get("model_run", {}).get("p50_ms")
    slow = slower_than_ar(summaries)

    def f(x: float | None, fmt: str = ".0f") -> str:
        return "–" if x is None else format(x, fmt)

    def share(v: float | None) -> str:
        return "–" if v is None else f"{100 * v:.0f}%"

    head = ["method", "model-run p50 ms", "p95 ms", "p50 vs AR", "first request ms", "accepted length",
            "same text as AR", "debounce / prefill / decode / post ms", "typed-through", "match next (whole / 1st line)"]
    rows = []
    for m, s in summaries.items():
        p50 = s["model_run"]["p50_ms"]
        ratio = (p50 / ar) if (ar and p50) else None
        ts = s["time_split_ms"]
        rows.append([
            m, f(p50), f(s["model_run"]["p95_ms"]), "–" if ratio is None else f"{ratio:.2f}×", f(s["first"]["p50_ms"]),
            f(s["mean_accept_length"], ".2f"), "100%" if m == "ar" else share(same["vs_ar"].get(m)),
            f"{f(ts['debounce'])} / {f(ts['prefill'])} / {f(ts['decode'])} / {f(ts['post_and_protocol'])}",
            str(s["typed_through"]), f"{share(s['match_exact_share'])} / {share(s['match_first_line_share'])}",
        ])  # fmt: skip
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        flag = row[0] in slow
        cells = list(row)
        if flag:
            cells[3] = f"$\\color{{red}}{{\\textsf{{{cells[3]}\\ slower\\ than\\ AR}}}}$"
        md.append("| " + " | ".join(cells) + " |")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for row in rows:
        line = "  ".join(c.ljust(w) for c, w in zip(row, widths))
        if row[0] in slow:
            line += "  <- SLOWER THAN AR"
            if color:
                line = RED + line + RESET
        print(line)
    print(f"suggestions identical across all methods: {share(same['all_methods'])} of {same['requests']} requests")
    for m, r in slow.items():
        msg = f"{m}: model-run p50 is {r:.2f}x AR's in this run: slower than AR"
        print(RED + msg + RESET if color else msg)
    return "\n".join(md)


def print_summary(name: str, s: dict[str, Any]) -> None:
    def row(label: str, d: dict[str, Any]) -> str:
        return f"  {label:<28} n={d['n']:<4d} p50 {ms(None if d['p50_ms'] is None else d['p50_ms'] / 1000):>6} ms   p95 {ms(None if d['p95_ms'] is None else d['p95_ms'] / 1000):>6} ms"

    def share(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.0f}%"

    print(f"== {name}: {s['model'].get('name')} {s['model'].get('dtype')} on {s['model'].get('device')}; "
          f"{s['files']} files; index: {', '.join(sorted(set(map(str, s['index']))))}")
    print(f"  {s['keystrokes']} keystrokes, {s['requests']} requests (150 ms debounce), "
          f"{s['simulated_typing_s']:.0f} s of simulated typing; server ready in {s['server_ready_s']:.1f} s (mean)")  # fmt: skip
    print(row("first request (per file)", s["first"]))
    print(row("later requests", s["later"]))
    print(row("  that ran the model", s["model_run"]))
    print(row("  typed-through (no model)", s["later_typed_through"]))
    print(row("  answered early (block)", s["later_early"]))
    print(row("  one-line, model ran", s["later_one_line_model"]))
    print(f"  suggestions {s['suggestions']} (empty {s['empty']}, errors {s['errors']}); match what was typed next: "
          f"whole {share(s['match_exact_share'])}, first line {share(s['match_first_line_share'])}; "
          f"arrived before the next keystroke {share(s['in_time_share'])}")  # fmt: skip
    acc, mpt = s["mean_accept_length"], s["decode_ms_per_token"]
    src = ", ".join(f"{k} {v}" for k, v in sorted(s["accepted_by_source"].items(), key=lambda kv: -kv[1])) or "-"
    print(f"  prefill saving (KV reuse) {share(s['prefill_saving'])}; {s['generations']} generations, mean accepted length "
          f"{'-' if acc is None else f'{acc:.2f}'}; decode {'-' if mpt is None else f'{mpt:.0f}'} ms/token; "
          f"accepted draft tokens by source: {src}")  # fmt: skip


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fastcoder bench replay", description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=4, help="files (functions) of the repo suite's projects to type (default 4)")
    ap.add_argument("--file", type=Path, help="type one function of this Python file instead")
    ap.add_argument("--function", help="with --file: the function whose body is typed")
    ap.add_argument("--min-chars", type=int, default=150, help="suite functions: shortest body typed (characters)")
    ap.add_argument("--max-chars", type=int, default=700, help="suite functions: longest body typed (characters)")
    ap.add_argument("--open-others", type=int, default=1, help="other files of the folder open in the editor (default 1)")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--methods", "--method", dest="methods", default="ar,fastcoder",
                    help="methods, comma-separated: each gets a fresh server per file (default ar,fastcoder)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--max-prompt-tokens", type=int, default=2048, help="the server's context window (maxPromptTokens)")
    ap.add_argument("--time-budget-ms", type=int, default=2000)
    ap.add_argument("--engine", default="", metavar="JSON",
                    help='engine options for every server, e.g. \'{"maxDraftTokens": 16}\' (DecodeConfig fields)')
    ap.add_argument("--no-reuse", action="store_true", help="turn off typed-through reuse of the last suggestion")
    ap.add_argument("--no-common", action="store_true", help="no D_c (stdlib datastore)")
    ap.add_argument("--no-autoclose", action="store_true", help="the editor does not auto-close brackets")
    ap.add_argument("--max-keys", type=int, default=0, help="type only this many keystrokes per file")
    ap.add_argument("--first-pause", type=float, default=1.0,
                    help="seconds (real time) the user looks at the opened file before typing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ready-timeout", type=float, default=900)
    ap.add_argument("--json", type=Path, help="also write the summaries and every sample here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every request")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR", help="write DIR/report.json and DIR/report.md")
    args = ap.parse_args(argv)
    import logging

    logging.getLogger("pygls").setLevel(logging.WARNING)  # not every message of the client
    if args.engine:
        try:
            if not isinstance(json.loads(args.engine), dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            ap.error(f"--engine: {exc}")
    if args.function and not args.file:
        ap.error("--function needs --file")
    with recording(args.out, "replay", argparse.Namespace(**vars(args)), argv) as rec:
        rec.results = _run(args, rec)
    return 0


def _tasks(args: argparse.Namespace) -> list[Task]:
    if args.file:
        function = args.function
        if not function:
            raise SystemExit("--file needs --function")
        task = make_task(args.file, function)
        task.name = f"{args.file}::{function}"
        task.others = neighbours(args.file, args.open_others)
        return [task]
    tasks = suite_tasks(args.files, None, args.min_chars, args.max_chars, args.open_others)
    if not tasks:
        raise SystemExit("no suite function fits --min-chars/--max-chars")
    return tasks


def _run(args: argparse.Namespace, rec: Any = None) -> dict:
    """Every file, every method with a fresh server (rotating order); the side-by-side summary."""
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    tasks = _tasks(args)
    print(f"load average before: {load_average()}")
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    per_file: list[dict[str, list[Sample]]] = []
    for i, task in enumerate(tasks):
        print(f"typing {task.name or task.function}: {len(task.body)} characters, {task.body.count(chr(10))} lines; "
              f"also open: {', '.join(p.name for p in task.others) or '-'}")
        order = methods[i % len(methods):] + methods[: i % len(methods)]
        by_method: dict[str, list[Sample]] = {}
        for method in order:
            run_args = argparse.Namespace(**{**vars(args), "method": method})
            with tempfile.TemporaryDirectory(prefix="fastcoder-bench-") as tmp:
                ws = Path(tmp)
                # the workspace: the file's folder, with the body already removed on disk too
                for p in task.path.parent.iterdir():
                    if p.is_file() and p.suffix == ".py":
                        shutil.copy2(p, ws / p.name)
                (ws / task.path.name).write_text(task.before + task.after, encoding="utf-8")
                run = asyncio.run(replay(run_args, task, ws))
            runs[method].append(run)
            by_method[method] = run["samples"]
            model = [s for s in run["samples"][1:] if s.model_ran and not s.early]
            p50 = pct([s.seconds for s in model], 0.5)
            print(f"  {method:<10} {len(run['samples'])} requests, model ran {len(model)}, model-run p50 {ms(p50)} ms, "
                  f"first {ms(run['samples'][0].seconds if run['samples'] else None)} ms; load {load_average()}")
            if args.json:  # what is finished survives an interrupted run
                partial = {m: [[asdict(x) for x in r["samples"]] + [{"stats": r["stats"]}] for r in rs] for m, rs in runs.items()}
                args.json.write_text(json.dumps({"partial": True, "files": [t.name for t in tasks[: i + 1]],
                                                 "samples": partial}, default=str))
        per_file.append({m: by_method[m] for m in methods})
    summaries = {m: summarize(runs[m]) for m in methods}
    same = identical_shares(per_file)
    print()
    for m in methods:
        print_summary(m, summaries[m])
    print()
    table = print_table(summaries, same, color=sys.stdout.isatty())
    print(f"load average after: {load_average()}")
    if rec is not None:
        rec.markdown = table
    results = {
        "files": [t.name or str(t.path) for t in tasks],
        "methods": summaries,
        "identical": same,
        "slower_than_ar": slower_than_ar(summaries),
        "samples": {m: [[asdict(s) for s in r["samples"]] for r in runs[m]] for m in methods},
    }
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return results


if __name__ == "__main__":
    sys.exit(main())
