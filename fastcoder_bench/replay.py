"""Typing replay benchmark: time-to-suggestion of the real server over real stdio.

A real file is opened with one function's body removed (signature and docstring
kept), and the body is typed back character by character on a simulated clock:

* inter-key gaps are drawn (seeded) from a log-normal around 130 ms, with longer
  pauses after word boundaries and at the start of a line;
* the editor auto-indents after Enter (the next line's indentation arrives with the
  newline) and auto-closes ``()[]{}`` (typing the closer later steps over it);
* a request (``textDocument/inlineCompletion``) fires only when 150 ms pass without
  typing (debounce). The benchmark waits for each answer (real time) before typing on.

Reported: time-to-suggestion p50/p95 for the first request and for the later ones
(all, those that ran the model, one-line suggestions), the share of suggestions that
match what was actually typed next (whole suggestion / first line), the share that
arrived before the next keystroke, and the server's own counters (prefill saving,
mean accepted length, typed-through answers).

    fastcoder bench replay                      # pygls' TextDocument._apply_incremental_change
    fastcoder bench replay --file F --function NAME --method ar --dtype bfloat16

Not a test: it prints numbers. Absolute times on a shared CPU are noisy; the load
average is printed with them.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import importlib.util
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


def default_file() -> tuple[Path, str]:
    spec = importlib.util.find_spec("pygls.workspace.text_document")
    assert spec is not None and spec.origin
    return Path(spec.origin), "_apply_incremental_change"


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
    error: str = ""

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
    }  # fmt: skip
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
                    prompt_tokens=last.get("promptTokens", 0) if gens else 0, error=err,
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


def summarize(run: dict[str, Any]) -> dict[str, Any]:
    samples: list[Sample] = run["samples"]
    first, later = samples[:1], samples[1:]
    shown = [s for s in samples if s.text.strip()]

    def lat(group: list[Sample]) -> dict[str, Any]:
        v = [s.seconds for s in group]
        return {"n": len(v), "p50_ms": None if not v else 1000 * pct(v, 0.5), "p95_ms": None if not v else 1000 * pct(v, 0.95)}

    st = run["stats"]
    return {
        "requests": len(samples),
        "keystrokes": run["keys"],
        "simulated_typing_s": run["typing_s"],
        "server_ready_s": run["ready_s"],
        "first": lat(first),
        "later": lat(later),
        "later_model": lat([s for s in later if s.model_ran]),
        "later_typed_through": lat([s for s in later if s.typed_through]),
        "later_early": lat([s for s in later if s.early]),
        "later_one_line": lat([s for s in later if s.one_line]),
        "later_one_line_model": lat([s for s in later if s.one_line and s.model_ran]),
        "suggestions": len(shown),
        "empty": len(samples) - len(shown),
        "errors": sum(1 for s in samples if s.error),
        "match_exact_share": (sum(s.exact for s in shown) / len(shown)) if shown else None,
        "match_first_line_share": (sum(s.first_line for s in shown) / len(shown)) if shown else None,
        "in_time_share": (sum(s.seconds <= s.gap_left for s in samples) / len(samples)) if samples else None,
        "prefill_saving": st["total"].get("prefillSaving"),
        "mean_accept_length": st["total"].get("meanAcceptLength"),
        "ms_per_token": st["total"].get("msPerToken"),
        "typed_through": st["outcomes"].get("typed_through", 0),
        "model": st["model"],
        "index": st["index"].get("summary"),
    }


def print_summary(name: str, s: dict[str, Any]) -> None:
    def row(label: str, d: dict[str, Any]) -> str:
        return f"  {label:<28} n={d['n']:<4d} p50 {ms(None if d['p50_ms'] is None else d['p50_ms'] / 1000):>6} ms   p95 {ms(None if d['p95_ms'] is None else d['p95_ms'] / 1000):>6} ms"

    def share(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.0f}%"

    print(f"== {name}: {s['model'].get('name')} {s['model'].get('dtype')} on {s['model'].get('device')}; index: {s['index']}")
    print(f"  {s['keystrokes']} keystrokes, {s['requests']} requests (150 ms debounce), "
          f"{s['simulated_typing_s']:.0f} s of simulated typing; server ready in {s['server_ready_s']:.1f} s")  # fmt: skip
    print(row("first request", s["first"]))
    print(row("later requests", s["later"]))
    print(row("  that ran the model", s["later_model"]))
    print(row("  typed-through (no model)", s["later_typed_through"]))
    print(row("  answered early (block)", s["later_early"]))
    print(row("  one-line suggestions", s["later_one_line"]))
    print(row("  one-line, model ran", s["later_one_line_model"]))
    print(f"  suggestions {s['suggestions']} (empty {s['empty']}, errors {s['errors']}); match what was typed next: "
          f"whole {share(s['match_exact_share'])}, first line {share(s['match_first_line_share'])}; "
          f"arrived before the next keystroke {share(s['in_time_share'])}")  # fmt: skip
    acc = s["mean_accept_length"]
    mpt = s["ms_per_token"]
    print(f"  prefill saving (KV reuse) {share(s['prefill_saving'])}; mean accepted length "
          f"{'-' if acc is None else f'{acc:.2f}'}; decode {'-' if mpt is None else f'{mpt:.0f}'} ms/token; "
          f"typed-through answers {s['typed_through']}")  # fmt: skip


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fastcoder bench replay", description=__doc__.splitlines()[0])
    ap.add_argument("--file", type=Path, help="Python file (default: pygls/workspace/text_document.py)")
    ap.add_argument("--function", help="function whose body is typed (default: _apply_incremental_change)")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--method", default="fastcoder", help="method(s), comma-separated: each gets a fresh server")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--time-budget-ms", type=int, default=2000)
    ap.add_argument("--no-reuse", action="store_true", help="turn off typed-through reuse of the last suggestion")
    ap.add_argument("--no-common", action="store_true", help="no D_c (stdlib datastore)")
    ap.add_argument("--no-autoclose", action="store_true", help="the editor does not auto-close brackets")
    ap.add_argument("--max-keys", type=int, default=0, help="type only this many keystrokes")
    ap.add_argument("--first-pause", type=float, default=1.0,
                    help="seconds (real time) the user looks at the opened file before typing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ready-timeout", type=float, default=900)
    ap.add_argument("--json", type=Path, help="write the summary (and every sample) here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every request")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR", help="write DIR/report.json and DIR/report.md")
    args = ap.parse_args(argv)
    with recording(args.out, "replay", argparse.Namespace(**vars(args)), argv) as rec:
        rec.results = _run(args)
    return 0


def _run(args: argparse.Namespace) -> dict:
    """The replay, one fresh server per method; prints the summaries and returns them."""

    path, function = default_file()
    path = args.file or path
    function = args.function or function
    task = make_task(path, function)
    print(f"typing {function}() of {path}: {len(task.body)} characters, {task.body.count(chr(10))} lines")
    print(f"load average before: {load_average()}")
    results = {}
    for method in [m.strip() for m in args.method.split(",") if m.strip()]:
        args.method = method
        with tempfile.TemporaryDirectory(prefix="fastcoder-bench-") as tmp:
            ws = Path(tmp)
            # the workspace: the file's folder, with the body already removed on disk too
            for p in path.parent.iterdir():
                if p.is_file() and p.suffix == ".py":
                    shutil.copy2(p, ws / p.name)
            (ws / path.name).write_text(task.before + task.after, encoding="utf-8")
            run = asyncio.run(replay(args, task, ws))
        summary = summarize(run)
        results[method] = {"summary": summary, "samples": [asdict(s) for s in run["samples"]]}
        print_summary(method, summary)
        print(f"load average after: {load_average()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return results


if __name__ == "__main__":
    sys.exit(main())
