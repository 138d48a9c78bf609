"""Live typing: how soon a suggestion shows while a user types in real time.

The typing replay (:mod:`fastcoder_bench.replay`) sends keystrokes on a simulated clock
and waits for every answer before typing on, so the server never sees real typing: no
keystroke ever arrives while a generation runs, and the server's debounce (which counts
from the last change) cannot be measured there. Here the replay's keystroke script (same tasks, same seeded
gaps, auto-indent and auto-closed brackets) is typed in real time into the real server
over stdio, driven as VS Code drives an inline-completion provider:

* every keystroke is a ``didChange`` at its real time; a request still unanswered is
  cancelled (``$/cancelRequest``) when the document changes, and the next
  ``textDocument/inlineCompletion`` goes out once the document has been still for
  ``--client-debounce-ms`` (50: VS Code's ``InlineCompletionsModel`` debounces
  inline completions by 50 ms);
* a ghost text the user types into stays shown (VS Code keeps it while the typed text
  matches its start): *carried*, visible at once;
* once the cursor has rested 300 ms, ``fastcoder/cursor`` (our VS Code client's
  ``REST_MS``);
* before the first keystroke the user looks at the function (``--first-pause``, with the
  cursor notification) and a first request is answered (reported apart: its prefill).

Per keystroke, what the user sees before the next one: the first suggestion visible
for the text after the key (carried, or an answer that arrived in the gap) and when.
Reported per method (and ``--layouts``, as the replay's: e.g. ``debounce0`` sends
``debounceMs: 0``):

* **felt latency at pauses**: over the keys followed by a pause of at least
  ``--pause-ms`` (the user stops and looks), the time from the key to the suggestion
  (0 when carried); a pause that ends with none counts as never (percentiles then
  print ``none``), and the share of pauses with a suggestion is given;
* the same over the pauses a carried ghost text did not answer (the model had to run);
* every keystroke: the share with a suggestion visible before the next key;
* the suggestions visible at the end of a pause that are what the user then typed;
* the cost: requests sent, cancelled by a keystroke, model runs started (completed or
  cut), background runs, and the model thread's busy seconds per typed second.

Methods and layouts run side by side per file (a fresh server each, rotating order),
the same keystrokes in each. Timings are real time, so the load average is printed
with every run; compare only figures of one run.

    fastcoder bench live --files 4 --max-keys 150 --methods ar,fastcoder --out DIR
    fastcoder bench live --methods fastcoder --layouts default,debounce0 --out DIR
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fastcoder_bench.lsp_client import StdioClient, server_command
from fastcoder_bench.output import recording
from fastcoder_bench.replay import (
    Key, Task, _names, _tasks, add_typing_args, check_typing_args, curve_measuring, first_line_right, keystrokes, load_average,
    run_key, run_order, server_options, task_workspace, typing_rounds, utf16_pos,
)  # fmt: skip

CLIENT_DEBOUNCE_S = 0.050  # VS Code's InlineCompletionsModel: debounce min = max = 50 ms
CURSOR_REST_S = 0.300  # editor-client/vscode/src/cursor.ts REST_MS
LAST_WAIT_S = 5.0  # after the last keystroke, how long the user waits for a suggestion
REQUEST_CANCELLED = -32800


@dataclass
class Request:
    key: int  # index of the keystroke whose text it asks about (-1: the first request)
    sent: float
    answered: float | None = None
    text: str = ""
    error: int | None = None  # JSON-RPC error code (-32800: cancelled by a keystroke)


@dataclass
class Seen:
    """What the user saw after one keystroke, before the next."""

    key: int
    gap: float  # seconds until the next keystroke (the last one: LAST_WAIT_S)
    expected: str  # the body's text after the key (what the user types next)
    latency: float | None = None  # seconds from the key to the first suggestion visible in the gap
    carried: bool = False  # the ghost text of the previous gap, typed into
    text: str = ""  # the suggestion visible at the end of the gap ("" none)


def visible(keys: list[Key], times: list[float], body: str, requests: list[Request], last_wait: float = LAST_WAIT_S) -> list[Seen]:
    """Per keystroke ``i`` (typed at ``times[i]``), what was visible until the next: an
    answer to a request about the text after key ``i`` that arrived in the gap (the
    latest one wins), or the previous gap's ghost text with key ``i`` typed into it
    (VS Code keeps it: the key inserted exactly what it typed, and the ghost text
    starts with that and goes on)."""
    by_key: dict[int, list[Request]] = {}
    for r in requests:
        if r.answered is not None and r.error is None and r.text:
            by_key.setdefault(r.key, []).append(r)
    seen: list[Seen] = []
    shown = ""
    for i, k in enumerate(keys):
        end = times[i + 1] if i + 1 < len(times) else times[i] + last_wait
        s = Seen(i, end - times[i], body[k.at + len(k.typed) :])
        if shown and k.insert and k.insert == k.typed and shown.startswith(k.insert) and len(shown) > len(k.insert):
            s.text, s.latency, s.carried = shown[len(k.insert) :], 0.0, True
        answers = sorted((r for r in by_key.get(i, []) if r.answered < end), key=lambda r: r.answered)  # type: ignore[operator]
        if answers:
            if s.latency is None:
                s.latency = answers[0].answered - times[i]  # type: ignore[operator]
            s.text = answers[-1].text
        shown = s.text
        seen.append(s)
    return seen


def type_live(args: argparse.Namespace, task: Task, ws: Path) -> dict[str, Any]:
    """One server, the task's keystrokes in real time; the keys' times, the requests,
    what was visible and the server's counters."""
    options = server_options(args)
    cmd = server_command(options["model"], args.dtype, args.device) + ["--method", args.method]
    client = StdioClient(cmd, ws / "server.log")
    try:
        t0 = time.monotonic()
        client.initialize(ws, options, timeout=args.ready_timeout)
        client.wait_status("ready", timeout=args.ready_timeout)
        ready_s = time.monotonic() - t0
        while not args.first_start and curve_measuring(client.command("fastcoder.stats")["result"]):
            if time.monotonic() - t0 > args.ready_timeout:
                raise SystemExit(f"no cost curve after {args.ready_timeout} s (--first-start types without it)")
            time.sleep(0.2)
        curve_s = time.monotonic() - t0 - ready_s
        for other in task.others:
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": (ws / other.name).as_uri(), "languageId": "python", "version": 1,
                "text": other.read_text(encoding="utf-8")}})  # fmt: skip
        uri = (ws / task.path.name).as_uri()
        buffer, cursor, version = task.before + task.after, len(task.before), 1
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": buffer}})

        def position() -> dict[str, int]:
            line, col = utf16_pos(buffer, cursor)
            return {"line": line, "character": col}

        requests: dict[Any, Request] = {}

        def ask(key: int) -> Any:
            msg_id = client.request("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": position(), "context": {"triggerKind": 2}})  # fmt: skip
            requests[msg_id] = Request(key, client.sent[msg_id][0])
            return msg_id

        client.notify("fastcoder/cursor", {"textDocument": {"uri": uri}, "position": position()})
        time.sleep(args.first_pause)
        first = ask(-1)
        client.wait(first, timeout=args.ready_timeout)
        before = client.command("fastcoder.stats")["result"]
        script = keystrokes(task.body, random.Random(args.seed), autoclose=True)
        if args.max_keys:
            script = script[: args.max_keys]
        times: list[float] = []
        pending: Any = None  # the request not answered yet
        t_typing = time.monotonic()
        for i, k in enumerate(script):
            if pending is not None and not client.answers.get(pending):
                client.notify("$/cancelRequest", {"id": pending})  # the editor: the text changed
            pending = None
            if k.insert:
                version += 1
                at = position()  # an insertion at the cursor
                client.notify("textDocument/didChange", {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"range": {"start": at, "end": at}, "text": k.insert}]})  # fmt: skip
                buffer = buffer[:cursor] + k.insert + buffer[cursor:]
            cursor += k.cursor_after
            t = time.monotonic()
            times.append(t)
            gap = k.gap if i + 1 < len(script) else LAST_WAIT_S
            if gap > args.client_debounce_ms / 1000:
                _sleep_until(t + args.client_debounce_ms / 1000)
                pending = ask(i)
            if gap > CURSOR_REST_S:
                _sleep_until(t + CURSOR_REST_S)
                client.notify("fastcoder/cursor", {"textDocument": {"uri": uri}, "position": position()})
            _sleep_until(t + gap)
        typing_s = time.monotonic() - t_typing
        if buffer != task.before + task.body[: script[-1].at + len(script[-1].typed)] + script[-1].right + task.after:
            raise RuntimeError("live typing bug: the buffer diverged from the keystroke script")
        after = client.command("fastcoder.stats")["result"]
        for msg_id, r in requests.items():
            got = client.answers.get(msg_id)
            if got:
                r.answered, msg = got[0]
                if "error" in msg:
                    r.error = int(msg["error"].get("code", 0))
                else:
                    items = (msg.get("result") or {}).get("items") or []
                    r.text = items[0].get("insertText", "") if items else ""
        try:
            client.shutdown(timeout=30)
        except Exception:
            pass
    finally:
        client.close()
    reqs = list(requests.values())
    return {
        "keys": [asdict(k) for k in script], "times": [t - t_typing for t in times],
        "requests": [asdict(r) | {"sent": r.sent - t_typing, "answered": None if r.answered is None else r.answered - t_typing}
                     for r in reqs],  # fmt: skip
        "seen": [asdict(s) for s in visible(script, times, task.body, [r for r in reqs if r.key >= 0])],
        "first_ms": 1000 * ((reqs[0].answered or reqs[0].sent) - reqs[0].sent),
        "ready_s": ready_s, "curve_s": curve_s, "typing_s": typing_s, "before": before, "after": after,
    }  # fmt: skip


def _sleep_until(t: float) -> None:
    left = t - time.monotonic()
    if left > 0:
        time.sleep(left)


def _busy_s(stats: dict[str, Any]) -> float:
    """Seconds the model thread ran generations (answering and background ones) and
    idle-time window prefills."""
    parts = [stats.get("total") or {}, stats.get("prefetch") or {}, stats.get("window") or {}]
    return sum(((p.get("prefillMs") or 0.0) + (p.get("decodeMs") or 0.0)) / 1000 for p in parts)


def summarize(runs: list[dict[str, Any]], pause_s: float) -> dict[str, Any]:
    """One method@layout over its files: felt latency at pauses, suggestions in time, cost."""
    seen = [s for r in runs for s in r["seen"]]
    pauses = [s for s in seen if s["gap"] >= pause_s]
    model = [s for s in pauses if not s["carried"]]

    def felt(group: list[dict[str, Any]]) -> dict[str, Any]:
        never = float("inf")
        lat = [s["latency"] if s["latency"] is not None else never for s in group]
        p50, p95 = _rank(lat, 0.5), _rank(lat, 0.95)
        shown = [x for x in lat if x != never]
        return {"n": len(group), "shown_share": (len(shown) / len(lat)) if lat else None,
                "p50_ms": None if p50 is None or p50 == never else 1000 * p50,
                "p95_ms": None if p95 is None or p95 == never else 1000 * p95,
                "max_shown_ms": 1000 * max(shown) if shown else None}  # fmt: skip

    reqs = [q for r in runs for q in r["requests"] if q["key"] >= 0]
    delta = lambda r, *path: _get(r["after"], *path) - _get(r["before"], *path)  # noqa: E731
    typing_s = sum(r["typing_s"] for r in runs)
    end_texts = [s for s in pauses if s["text"]]
    return {
        "files": len(runs), "keys": len(seen), "typing_s": typing_s,
        "pauses": felt(pauses), "pauses_model": felt(model),
        "keys_shown_share": (sum(s["latency"] is not None for s in seen) / len(seen)) if seen else None,
        "pause_match_share": (sum(s["expected"].startswith(s["text"]) for s in end_texts) / len(end_texts)) if end_texts else None,
        # the whole suggestion is stricter on a longer one (a block ready sooner): its first line too
        "pause_first_line_share": (sum(first_line_right(s["text"], s["expected"]) for s in end_texts) / len(end_texts)) if end_texts else None,
        "requests": len(reqs), "cancelled": sum(q["error"] == REQUEST_CANCELLED for q in reqs),
        "model_runs": sum(delta(r, "total", "generations") for r in runs),
        "background_runs": sum(delta(r, "prefetch", "generations") for r in runs),
        "window_prefills": sum(delta(r, "window", "prefills") for r in runs),
        "window_prefill_tokens": sum(delta(r, "window", "prefillTokens") for r in runs),
        "prefill_tokens": sum(delta(r, "total", "prefillTokens") for r in runs),
        # what model runs waited for the model thread (a running generation's last forward,
        # background work) before they began, ms per run
        "queue_ms_per_run": (sum(delta(r, "total", "queueMs") for r in runs)
                             / max(1.0, sum(delta(r, "total", "generations") for r in runs))),
        "busy_per_typed_s": (sum(_busy_s(r["after"]) - _busy_s(r["before"]) for r in runs) / typing_s) if typing_s else None,
        "first_ms": [r["first_ms"] for r in runs],
    }  # fmt: skip


def _rank(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile (no interpolation: a value may be infinite, "never")."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def _get(d: dict[str, Any], *path: str) -> float:
    for p in path:
        d = (d or {}).get(p) or {}
    return float(d) if isinstance(d, (int, float)) else 0.0


def table(summaries: dict[str, dict[str, Any]], pause_ms: float) -> str:
    def f(v: Any, pct_: bool = False) -> str:
        if v is None:
            return "none" if not pct_ else "–"
        return f"{100 * v:.0f}%" if pct_ else f"{v:.0f}"

    head = (f"| method | felt latency at pauses ≥ {pause_ms:.0f} ms: p50 / p95 ms (shown) "
            "| same, the model had to run: p50 / p95 / slowest shown ms "
            "| keys with a suggestion before the next | pause suggestion = typed next (whole / 1st line) | requests (cancelled) "
            "| model runs (background) | waited for the model thread, ms per run "
            "| tokens prefilled: model runs / idle window | model busy per typed s |")  # fmt: skip
    lines = [head, "|" + "---|" * 10]
    for k, s in summaries.items():
        p, m = s["pauses"], s["pauses_model"]
        lines.append(
            f"| {k} | {f(p['p50_ms'])} / {f(p['p95_ms'])} ({f(p['shown_share'], True)} of {p['n']}) "
            f"| {f(m['p50_ms'])} / {f(m['p95_ms'])} / {f(m.get('max_shown_ms'))} ({f(m['shown_share'], True)} of {m['n']}) "
            f"| {f(s['keys_shown_share'], True)} | {f(s['pause_match_share'], True)} / {f(s.get('pause_first_line_share'), True)} "
            f"| {s['requests']} ({s['cancelled']}) "
            f"| {s['model_runs']:.0f} ({s['background_runs']:.0f}) | {f(s.get('queue_ms_per_run'))} "
            f"| {s.get('prefill_tokens', 0):.0f} / {s.get('window_prefill_tokens', 0):.0f} | {s['busy_per_typed_s']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fastcoder bench live", description=__doc__.split("\n\n")[0])
    add_typing_args(ap)
    ap.set_defaults(dtype="auto", max_keys=150)
    ap.add_argument("--client-debounce-ms", type=float, default=1000 * CLIENT_DEBOUNCE_S,
                    help="the editor asks this long after the last change (default 50: VS Code's)")
    ap.add_argument("--pause-ms", type=float, default=500.0, help="a gap this long is a pause: the user looks for a suggestion")
    args = ap.parse_args(argv)
    check_typing_args(ap, args)
    with recording(args.out, "live", argparse.Namespace(**vars(args)), argv) as rec:
        rec.results = _run(args, rec)
    return 0


def _run(args: argparse.Namespace, rec: Any = None) -> dict[str, Any]:
    methods, layouts = _names(args.methods), _names(args.layouts)
    keys = [run_key(m, lay, layouts) for lay in layouts for m in methods]
    tasks = _tasks(args)
    print(f"load average before: {load_average()}")
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
    typed = typing_rounds(tasks, args)  # --rounds: every file again, pooled
    for r, rotation, task in typed:
        print(f"typing {task.name or task.function}: {len(task.body)} characters; also open: "
              f"{', '.join(p.name for p in task.others) or '-'}" + (f" (round {r + 1})" if typed[-1][0] else ""))  # fmt: skip
        for method, layout in run_order(methods, layouts, rotation):
            key = run_key(method, layout, layouts)
            run_args = argparse.Namespace(**{**vars(args), "method": method, "layout": layout})
            with tempfile.TemporaryDirectory(prefix="fastcoder-live-") as tmp:
                task_workspace(task, Path(tmp))
                run = type_live(run_args, task, Path(tmp))
            runs[key].append(run)
            one = summarize([run], args.pause_ms / 1000)["pauses"]
            cal = ((run.get("after") or {}).get("model") or {}).get("stepCalibration")  # the budget's steps vs its curve
            print(f"  {key:<22} {len(run['seen'])} keys in {run['typing_s']:.0f} s, first {run['first_ms']:.0f} ms; "
                  f"felt at pauses p50 {one['p50_ms'] or 0:.0f} ms ({100 * (one['shown_share'] or 0):.0f}% shown); "
                  + (f"steps vs curve x{cal['base']} (1 row), x{cal['tree']} (tree rows); " if cal and sum(cal.get("steps", [])) else "")
                  + f"load {load_average()}")  # fmt: skip
    summaries = {k: summarize(runs[k], args.pause_ms / 1000) for k in keys}
    md = table(summaries, args.pause_ms)
    print()
    print(md)
    print(f"load average after: {load_average()}")
    if rec is not None:
        rec.markdown = md
    return {"files": [t.name or str(t.path) for _, _, t in typed], "methods": summaries, "runs": runs}


if __name__ == "__main__":
    sys.exit(main())
