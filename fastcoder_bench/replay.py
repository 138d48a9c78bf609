"""Typing replay: the product benchmark. Real typing into the real server over stdio.

Several real files from the repo suite's pinned projects (``fastcoder bench`` suite,
:mod:`fastcoder_bench.suite.projects`) are opened, each with one function's body
removed (signature and docstring kept), next to another open file of the same folder
(an editor has several buffers). The body is typed back character by character on a
simulated clock:

* inter-key gaps are drawn (seeded) from a log-normal around 130 ms, with longer
  pauses after word boundaries and at the start of a line;
* the editor auto-indents after Enter (the next line's indentation arrives with the
  newline) and auto-closes ``()[]{}`` and quotes as VS Code's Python configuration does
  (not in strings, ``'`` not in comments, not after a word character other than a string
  prefix, not a third quote in a row; typing the closer later steps over it; checked in VS
  Code's own editor by the browser scenario ``editor-model``); Enter right
  after an opener whose closer it auto-inserted splits the brackets as VS Code does
  (its ``IndentOutdent`` rule): the closer goes to a line of its own below the cursor, so
  the arguments' lines have nothing right of the cursor, and the user later moves down
  onto that line instead of typing it. It does so where the body's own closer starts a
  line at that indentation (black's layout); ``foo(\n    a, b)`` keeps the closer right
  of the cursor, as before (an editor would split it and the user join it back);
* a request (``textDocument/inlineCompletion``) fires only when 150 ms pass without
  typing (debounce). The benchmark waits for each answer (real time) before typing on.
  The server cannot see the simulated clock, so its own debounce is off
  (``debounceMs: 0``; a ``debounceN`` layout sets it): ``fastcoder bench live`` types
  in real time and measures it.
* when the file is opened the editor places the cursor at the body and, as our clients
  do once the cursor stops moving, sends ``fastcoder/cursor`` there; the user looks at
  the file for ``--first-pause`` (1 s, real time) before the first request. With
  ``--open-at-top S`` the file opens with the cursor at its top (a rest there), and the
  cursor jumps to the body S seconds later: the first request follows a jump inside an
  open document.

Methods run side by side: for every file, every method gets a fresh server and the
same keystroke script (the order of methods rotates from file to file). Reported per
method: model-run latency p50/p95 (later requests that ran the model), first-request
latency, the mean accepted length and accepted draft tokens by source, the share of
suggestions identical across methods (same request, same text), the time split per
request (debounce wait, prefill, decode, post-processing + protocol), typed-through
answers and suggestions that match what was typed next. A method whose model-run p50
is slower than AR's in the same run is flagged in red.

Prompt layouts (``--layouts default,psm``) run side by side the same way: for every
file, every (method, layout) pair gets a fresh server and the same keystrokes. Layout
``default`` sends no ``promptLayout`` option (the server's own layout); ``context`` /
``nocontext`` turn the cross-file context on / off (``crossFileContext``), ``packed`` /
``plain`` the CPU matmul path (``packWeights`` on / off), ``noprune`` verifies drafts below a
line end in single-line completions (``engine.pruneAtLineEnd`` off), ``noagree`` turns the
draft budget's source agreement off (``engine.sourceAgreement``), ``noheader`` leaves the
workspace's name and the document's path out of the prompt (``fileHeader`` false), ``nomerge`` prefills a
keystroke's new prompt tokens before the first step instead of in it
(``engine.mergePromptTail`` 0), ``nowarm`` turns ``warmAtCursor`` off, ``prepare`` /
``noprepare`` ``prepareWindow`` on / off, ``noprefetch`` ``prefetch`` off, ``debounceN``
sets ``debounceMs`` N; any other name is sent as the ``promptLayout`` initialization
option; parts join with ``+`` (``psm+nocontext``). Results are keyed ``METHOD`` for
the first layout listed and ``METHOD@LAYOUT`` for the others; "same text as AR" and
"slower than AR" compare a key with the AR of its own layout, and a line per method
compares the layouts (model-run p50 ratio first/other, median prefilled tokens).

Accepting (``--accept``): when a shown suggestion is what the user is about to type (not
whitespace only, and the rest of the body starts with it), the user presses Tab: one
``didChange`` applies the item as an editor does (its ``insertText`` over its ``range``,
or at the cursor when it has none), the cursor goes to the end of the inserted text,
and the editor asks for the next inline completion at once (no debounce): an
*after-accept* request. Typing goes on from there. The auto-closed brackets right of
the cursor stay what they were (an accept inserts text literally, it auto-closes
nothing and steps over nothing, unless the item's range covers them). So that the
buffer the replay tracks (always equal to the server's: it applies the very edits it
sends) stays ``before + body[:typed] + closers + after``, :func:`plan_accept` accepts
only an item whose range covers at most the typed start of its text and a prefix of
the pending closers, and only when the document the user ends with is the one typing
gives: a suggestion that ends with the ``)`` already auto-closed right of the cursor
(without covering it) would leave a stray ``)``, so the user does not press Tab there
(counted as ``refused: closers``; the server's post-processing normally trims that
``)``, so most suggestions stop before it and are accepted). After an accept the rest
of the keystrokes is the same script regenerated from the new body offset with the
closers still pending (:func:`rest_keys`; each key keeps its pause from the original
script, so the methods meet the same pauses where they type the same keys). Since the
methods accept different suggestions, their requests part ways: requests are matched
across methods by where they were sent (body offset and closers), not by index. An
after-accept request counts as *ready* when the server's ``outcomes["ready"]`` counter
(``fastcoder.stats``; missing = 0) rose during it: answered, without a model run, from a
suggestion prepared in the background; a ready or typed-through answer never counts as
a model run. ``--accept-delay-ms`` waits (real time) before the Tab, for the user to
read the suggestion (default 1000 ms, a user reading a one-line ghost text; 0 is the
hardest case for background work, as keystrokes also go out without real-time pauses).

Also reported per key: every request's round trip (``all_requests``: n, p50, p95, max),
the tokens prefilled per model-run request (median, p95), with --accept the
after-accept requests (n, p50, p95, ready share) and the accepts (suggestions,
characters, share of the body written by Tab, matching suggestions refused).

    fastcoder bench replay --out DIR                                 # 4 files, ar and fastcoder
    fastcoder bench replay --files 6 --methods ar,pld,fastcoder --max-keys 150 --out DIR
    fastcoder bench replay --file F --function NAME --methods ar,fastcoder --out DIR
    fastcoder bench replay --methods ar,fastcoder --layouts default,psm --accept --out DIR

Not a test: it prints numbers. Absolute times on a shared CPU are noisy; the load
average is printed with them.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from fastcoder.stops import OPEN_BRACKETS
from fastcoder_bench.output import recording

DEBOUNCE_S = 0.150
DEFAULT_LAYOUT = "default"  # the prompt layout the server picks itself (no promptLayout option sent)
CLOSERS = OPEN_BRACKETS  # an opener -> the closer the editor inserts after it
QUOTES = "\"'"
QUOTE_PREFIXES = "rRuUfFbB"
"""Python's string prefixes: VS Code's Python language configuration pairs ``f"``, ``b'``
and the like, so a quote after one of them is auto-closed although a word character
precedes it."""


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
    scope, _, name = function.rpartition(".")  # "Class.method" (as the suite names tasks) or a plain name
    owners = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == scope] if scope else [tree]
    node = next(
        (n for o in owners for n in ast.walk(o) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
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


def suite_tasks(n: int, seed: int | None, min_chars: int, max_chars: int, open_others: int,
                min_before: int = 0) -> list[Task]:  # fmt: skip
    """``n`` functions of the repo suite's pinned projects, from ``n`` different files
    (projects taken round-robin, the suite's seeded order), bodies of a typable size,
    with at least ``min_before`` characters of their file before them."""
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
        if not min_chars <= len(task.body) <= max_chars or not task.body.strip() or len(task.before) < min_before:
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
    at: int = 0  # body offset where the key starts
    right: str = ""  # auto-inserted closers right of the cursor after the key, nearest first


def _units(right: str) -> list[str]:
    """The text right of the cursor as the script's pending units, nearest first: a
    closer, or a split (a line break and the indentation of the closers' own line)."""
    units: list[str] = []
    i = 0
    while i < len(right):
        j = i + 1
        if right[i] == "\n":
            while j < len(right) and right[j] in " \t":
                j += 1
        units.append(right[i:j])
        i = j
    return units


def _lex_state(text: str) -> str:
    """Where Python code ``text`` leaves its end: ``code``, ``comment`` or ``string``
    (escapes and triple quotes followed; prefixes need nothing). What VS Code's tokenizer
    tells its auto-closing rules (``notIn: string / comment``) as the body is typed."""
    state, quote, i = "code", "", 0
    while i < len(text):
        c = text[i]
        if state == "comment":
            state = "code" if c == "\n" else state
        elif state == "string":
            if c == "\\":
                i += 1
            elif text.startswith(quote, i):
                state, i = "code", i + len(quote) - 1
            elif c == "\n" and len(quote) == 1:
                state = "code"  # an unterminated one-line string ends with its line
        elif c == "#":
            state = "comment"
        elif c in QUOTES:
            quote = c * 3 if text.startswith(c * 3, i) else c
            state, i = "string", i + len(quote) - 1
        i += 1
    return state


def _auto_closes_quote(body: str, i: int) -> bool:
    """Whether VS Code auto-closes the quote typed at ``body[i]`` (Python's language
    configuration, checked in VS Code's own editor by the browser scenario ``editor-model``):
    not inside a string (``'`` not in a comment either), not right after a word character
    unless it is a string prefix (``f"``, ``rb"``), and not as the third of three quotes in a
    row (a triple-quoted string is not closed for the user)."""
    q = body[i]
    state = _lex_state(body[:i])
    if state == "string" or (q == "'" and state == "comment"):
        return False
    before = body[i - 1] if i else " "
    if (before.isalnum() or before == "_") and before not in QUOTE_PREFIXES:
        return False
    return body[max(0, i - 2) : i] != q * 2


def _split(body: str, i: int, pending: list[str], keys: list[Key]) -> str:
    """The split that Enter at ``body[i]`` makes (``"\\n" + indentation``), or ``""``.

    VS Code's Enter between an opener and the closer right after it puts the closer
    (and the rest of the line) on a new line at the opener line's indentation, the
    cursor on an indented line between. Modelled where the key before typed that opener
    (so its closer is ``pending[0]``, auto-inserted) and the body's matching closer starts
    a later line at that indentation, where the user moves down to it."""
    if i == 0 or not keys or not pending:
        return ""
    opener = body[i - 1]
    if opener not in CLOSERS or keys[-1].at != i - 1 or keys[-1].insert != opener + CLOSERS[opener] or pending[0] != CLOSERS[opener]:
        return ""
    depth = 0
    for p in range(i, len(body)):
        if body[p] in CLOSERS:
            depth += 1
        elif body[p] in CLOSERS.values():
            if depth == 0:
                break
            depth -= 1
    else:
        return ""
    if body[p] != pending[0]:
        return ""
    line = body.rfind("\n", 0, p) + 1
    indent = body[line:p]
    if line <= i or indent.strip(" \t"):
        return ""
    nl = body.rfind("\n", 0, i - 1)
    if nl >= 0:  # the opener's line is in the body: the split takes its indentation
        text = body[nl + 1 : i]
        if text[: len(text) - len(text.lstrip(" \t"))] != indent:
            return ""
    return "\n" + indent


def _script(body: str, start: int = 0, right: str = "", autoclose: bool = True, stop: int | None = None) -> list[Key]:
    """``body[start:stop]`` as editor events (gaps 0), with ``right`` (auto-closers and
    splits, :func:`_units`) already right of the cursor: characters, Enter +
    auto-indent, auto-closed brackets and quotes (quotes as VS Code's Python
    configuration closes them, :func:`_auto_closes_quote`; typing a closer that is the
    nearest pending one steps over it), Enter between an opener and its auto-closer
    splitting them (:func:`_split`; the body's whole text is read for it, not only up to
    ``stop``)."""
    keys: list[Key] = []
    pending = _units(right)  # auto-inserted closers (and splits) right of the cursor, nearest first
    end = len(body) if stop is None else stop
    i = start
    while i < end:
        c = body[i]
        if c == "\n":
            j = i + 1
            while j < end and body[j] in " \t":
                j += 1
            chunk = body[i:j]  # Enter: the editor puts the indentation there too
            if pending and pending[0] == chunk and len(pending) > 1 and body.startswith(pending[1], j):
                pending.pop(0)  # the closers' own line (a split): the user moves down onto it
                keys.append(Key(chunk, "", len(chunk), 0.0, i, "".join(pending)))
                i = j
                continue
            split = _split(body, i, pending, keys) if autoclose else ""
            if split:
                pending.insert(0, split)
            keys.append(Key(chunk, chunk + split, len(chunk), 0.0, i, "".join(pending)))
            i = j
            continue
        if pending and c == pending[0] and not (c in QUOTES and body[i - 1 : i] == "\\"):
            pending.pop(0)  # typed over (an escaped quote is not)
            keys.append(Key(c, "", 1, 0.0, i, "".join(pending)))
        elif autoclose and (c in CLOSERS or (c in QUOTES and _auto_closes_quote(body, i))):
            close = CLOSERS.get(c, c)
            pending.insert(0, close)
            keys.append(Key(c, c + close, 1, 0.0, i, "".join(pending)))
        else:
            keys.append(Key(c, c, 1, 0.0, i, "".join(pending)))
        i += 1
    return keys


def _gap(rng: random.Random, typed: str) -> float:
    gap = rng.lognormvariate(math.log(0.130), 0.45)
    last = typed[-1] if typed.strip() else typed[:1]
    if typed.startswith("\n"):
        gap += rng.uniform(0.3, 1.2)  # a new line: think a moment
    elif last in " .,:()[]=":
        gap += rng.uniform(0.05, 0.35)  # word boundary
    return gap


def keystrokes(body: str, rng: random.Random, autoclose: bool = True) -> list[Key]:
    """The body as editor events: characters, Enter + auto-indent, auto-closed brackets and quotes."""
    keys = _script(body, 0, "", autoclose)
    for k in keys:
        k.gap = _gap(rng, k.typed)
    return keys


def closers_after(body: str, start: int, stop: int, right: str, autoclose: bool = True) -> str:
    """The auto-closers right of the cursor after the script types ``body[start:stop]``
    with ``right`` pending."""
    keys = _script(body, start, right, autoclose, stop)
    return keys[-1].right if keys else right


def rest_keys(body: str, start: int, right: str, script: list[Key], seed: int, autoclose: bool = True,
              stop: int | None = None) -> list[Key]:
    """The keys left after an accept moved the cursor to ``body[start]`` with ``right``
    pending: the same script from there (up to ``stop``), each key with the gap it has
    in the original ``script`` (same offset, same text), else a gap drawn from a
    generator seeded by (seed, offset), so every method meets the same pauses."""
    stop = len(body) if stop is None else stop
    gaps = {k.at: (k.typed, k.gap) for k in script}
    keys = [k for k in _script(body, start, right, autoclose) if k.at < stop]
    for k in keys:
        typed, gap = gaps.get(k.at, (None, 0.0))
        k.gap = gap if typed == k.typed else _gap(random.Random(f"{seed}/{k.at}"), k.typed)
    return keys


@dataclass
class Accept:
    """A suggestion the user accepts with Tab: the edit the editor applies."""

    start: int  # buffer range the item replaces (its range; the cursor when it has none)
    end: int
    insert: str  # the item's insertText
    shown: str  # what it adds at the cursor (the ghost text)
    at: int  # body offset after the accept (the cursor is at len(before) + at)
    right: str  # auto-closers right of the cursor after the accept


def plan_accept(body: str, typed: int, right: str, buffer: str, cursor: int, insert_text: str,
                span: tuple[int, int] | None = None, autoclose: bool = True) -> tuple[Accept | None, str]:
    """Would the user press Tab on this suggestion, and what does the editor do then?

    ``typed``: body characters typed so far; ``right``: the auto-closers right of the
    cursor (the buffer is ``before + body[:typed] + right + after``); ``span``: the
    item's range as buffer offsets (None: at the cursor). Returns ``(accept, "")`` or
    ``(None, why)``: ``"empty"`` (whitespace only), ``"no-match"`` (not what the user
    types next: no Tab), ``"range"`` (the item's range replaces document text other than
    the typed prefix and the auto-closers) or ``"closers"`` (accepting would leave the
    document with an extra or missing closer compared with typing it: the suggestion
    repeats the auto-closed ``)`` right of the cursor without replacing it).
    """
    start, end = span if span is not None else (cursor, cursor)
    if not start <= cursor <= end:
        return None, "range"
    left = buffer[start:cursor]
    if not insert_text.startswith(left):
        return None, "range"
    shown = insert_text[len(left):]
    if not shown.strip():
        return None, "empty"
    if not body.startswith(shown, typed):
        return None, "no-match"
    covered = buffer[cursor:end]
    if not right.startswith(covered):
        return None, "range"
    at = typed + len(shown)
    new_right = right[len(covered):]
    # the document the user ends with must be the one that typing gives
    by_typing = closers_after(body, typed, at, right, autoclose)
    if closers_after(body, at, len(body), new_right, autoclose) != closers_after(body, at, len(body), by_typing, autoclose):
        return None, "closers"
    return Accept(start, end, insert_text, shown, at, new_right), ""


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
    early_split: dict | None = None  # then: the server's lastEarly (engine ms, steps, tokens, drafting ms to the answer)
    new_tokens: int = 0
    prefill_tokens: int = 0
    prompt_tokens: int = 0
    forward_steps: int = 0
    prefill_ms: float = 0.0  # the engine's prefill (KV prefix reuse: only what changed)
    engine_ms: float = 0.0  # the whole generation in the engine (prefill + decode)
    setup_ms: float = 0.0  # the server's prompt and draft sources, before the engine
    queue_ms: float = 0.0  # waiting for the model thread (e.g. a background job's forward)
    accepted_by_source: dict | None = None
    error: str = ""
    at: int = 0  # body characters typed (or accepted) when the request was sent
    closers: str = ""  # auto-closed brackets right of the cursor then (nearest first)
    after_accept: bool = False  # sent right after the user accepted the previous suggestion (Tab)
    ready: bool = False  # answered from a suggestion the server prepared in the background
    accepted: bool = False  # the user pressed Tab on this suggestion
    accepted_chars: int = 0  # characters the accept added at the cursor

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
        return first_line_right(self.text, self.expected)


def first_line_right(text: str, expected: str) -> bool:
    """``text``'s first non-blank line is what ``expected`` (what was typed next) has there
    (the lines after it may differ)."""
    got, exp = text.split("\n"), expected.split("\n")
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


def utf16_offset(text: str, line: int, character: int) -> int:
    """The string offset of an LSP position (UTF-16 column; clamped to the line)."""
    start = 0
    for _ in range(line):
        nl = text.find("\n", start)
        if nl < 0:
            return len(text)
        start = nl + 1
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    units = 0
    for i in range(start, end):
        if units >= character:
            return i
        units += 2 if ord(text[i]) > 0xFFFF else 1
    return end


def _insert_text(item: Any) -> str:
    text = item.insert_text
    return text if isinstance(text, str) else getattr(text, "value", "") or ""


def _item_span(buffer: str, item: Any) -> tuple[int, int] | None:
    """An inline completion item's range as buffer offsets (None: it has none)."""
    rng = getattr(item, "range", None)
    if rng is None:
        return None
    return (utf16_offset(buffer, rng.start.line, rng.start.character),
            utf16_offset(buffer, rng.end.line, rng.end.character))


def server_options(args: argparse.Namespace) -> dict[str, Any]:
    """The server's ``initializationOptions`` for a run: the method, model and limits
    of ``args``, then its layout's (:func:`layout_options`; ``engine`` options merged)."""
    layout = layout_options(getattr(args, "layout", DEFAULT_LAYOUT))
    options = {
        "model": layout.get("model", args.model), "dtype": args.dtype, "device": args.device, "method": args.method,
        "maxNewTokens": args.max_new_tokens, "timeBudgetMs": args.time_budget_ms,
        "reuseSuggestions": not args.no_reuse, "commonIndex": not args.no_common,
        "maxPromptTokens": args.max_prompt_tokens,
        # each server starts cold: none reads the KV caches an earlier one (another method,
        # the same files) wrote at its shutdown
        "kvDiskMb": 0,
    }  # fmt: skip
    if args.engine:
        options["engine"] = json.loads(args.engine)
    if "engine" in layout:  # --engine and the layout's, merged
        layout["engine"] = {**options.get("engine", {}), **layout["engine"]}
    options.update(layout)
    return options


def curve_measuring(stats: dict[str, Any]) -> bool:
    """Whether a server's ``fastcoder.stats`` says its first cost curve is still being
    measured in idle time (no curve cached for this model and machine: generations that
    would draft run as plain AR until it is done)."""
    return ((stats.get("model") or {}).get("costCurve") or {}).get("state") == "measuring"


def task_workspace(task: Task, ws: Path) -> None:
    """The workspace of ``task`` in the empty folder ``ws``: the file's folder, with the
    body already removed on disk too."""
    for p in task.path.parent.iterdir():
        if p.is_file() and p.suffix == ".py":
            shutil.copy2(p, ws / p.name)
    (ws / task.path.name).write_text(task.before + task.after, encoding="utf-8")


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

    # the simulated client waited DEBOUNCE_S before the request, on a clock the server
    # cannot see: its own debounce would wait again in real time (bench live measures it)
    options = {"debounceMs": 0, **server_options(args)}
    cmd = [sys.executable, "-m", "fastcoder_cli", "serve", "--model", options["model"], "--dtype", args.dtype,
           "--device", args.device, "--method", args.method]  # fmt: skip
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    t_start = time.perf_counter()
    await client.start_io(*cmd, env=env)
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

    if not args.first_start:  # the server's steady state: its first cost curve measured (then cached)
        while curve_measuring(await stats()):
            if time.perf_counter() - t_start > args.ready_timeout:
                raise SystemExit(f"no cost curve after {args.ready_timeout} s (--first-start types without it)")
            await asyncio.sleep(0.2)
    curve_s = time.perf_counter() - t_start - ready_s
    curve_state = ((await stats()).get("model") or {}).get("costCurve")  # as typing starts

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
    if args.open_at_top:
        # the editor opens the file at its top and the user reads there, then jumps to the
        # function: the first request below comes after a jump inside an open document
        client.protocol.notify("fastcoder/cursor", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
        await asyncio.sleep(args.open_at_top)
    # the editor places the cursor; our clients say where it rests (fastcoder/cursor)
    line, col = utf16_pos(buffer, cursor)
    client.protocol.notify("fastcoder/cursor", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col}})
    await asyncio.sleep(args.first_pause)  # the user looks at the file before typing (real time)
    rng = random.Random(args.seed)
    autoclose = not args.no_autoclose
    script = keystrokes(task.body, rng, autoclose=autoclose)
    if args.max_keys:
        script = script[: args.max_keys]
    stop = script[-1].at + len(script[-1].typed) if script else 0  # body offset where the user stops
    gap_after = {k.at + len(k.typed): k.gap for k in script}  # pause after reaching a body offset
    keys = deque(script)
    samples: list[Sample] = []
    typed = 0  # body characters typed (or accepted) so far
    right = ""  # auto-closers right of the cursor: the buffer is before + body[:typed] + right + after
    typed_keys = typed_chars = 0  # keys pressed and the body characters they typed (accepts apart)
    refused: dict[str, int] = {}
    sim_clock = 0.0
    before = await stats()

    def change(start: int, end: int, text: str) -> None:
        nonlocal version, buffer
        version += 1
        a, b = utf16_pos(buffer, start), utf16_pos(buffer, end)
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(start=types.Position(line=a[0], character=a[1]),
                                      end=types.Position(line=b[0], character=b[1])), text=text)],
            )
        )  # fmt: skip
        buffer = buffer[:start] + text + buffer[end:]

    # a request at the very start (the user paused after the docstring), then while typing;
    # with --accept also right after every Tab
    request, after_accept, gap_left = True, False, args.first_pause - DEBOUNCE_S
    while True:
        if request:
            line, col = utf16_pos(buffer, cursor)
            params = types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=line, character=col),
                context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
            )
            t0 = time.perf_counter()
            err = ""
            item = None
            try:
                result = await client.text_document_inline_completion_async(params)
                items = result.items if isinstance(result, types.InlineCompletionList) else (result or [])
                item = items[0] if items else None
                text = _insert_text(item) if item is not None else ""
            except Exception as exc:
                text, err = "", str(exc)
            seconds = time.perf_counter() - t0
            after = await stats()
            outcomes, was = after["outcomes"], before["outcomes"]
            tt = outcomes.get("typed_through", 0) > was.get("typed_through", 0)
            early = outcomes.get("early", 0) > was.get("early", 0)
            ready = outcomes.get("ready", 0) > was.get("ready", 0)
            gens = after["total"]["generations"] - before["total"]["generations"]
            last = after.get("last") or {}
            last_early = after.get("lastEarly") or {}
            fresh_early = early and last_early.get("seq") != (before.get("lastEarly") or {}).get("seq")
            samples.append(
                Sample(
                    index=len(samples), seconds=seconds, text=text, expected=task.body[typed:],
                    gap_left=gap_left, typed_through=tt, model_ran=(gens > 0 or early) and not (ready or tt),
                    early=early, early_split=last_early if fresh_early else None,
                    new_tokens=last.get("newTokens", 0) if gens else 0,
                    prefill_tokens=last.get("prefillTokens", 0) if gens else 0,
                    prompt_tokens=last.get("promptTokens", 0) if gens else 0,
                    forward_steps=last.get("forwardSteps", 0) if gens else 0,
                    prefill_ms=last.get("prefillMs", 0.0) if gens else 0.0,
                    engine_ms=last.get("totalMs", 0.0) if gens else 0.0,
                    setup_ms=last.get("setupMs", 0.0) if gens else 0.0,
                    queue_ms=last.get("queueMs", 0.0) if gens else 0.0,
                    accepted_by_source=last.get("acceptedBySource") if gens else None, error=err,
                    at=typed, closers=right, after_accept=after_accept, ready=ready,
                )
            )  # fmt: skip
            before = after
            s = samples[-1]
            if args.accept and item is not None and typed < stop:
                span = _item_span(buffer, item)
                plan, why = plan_accept(task.body, typed, right, buffer, cursor, text, span, autoclose)
                if plan is not None:  # Tab
                    if args.accept_delay_ms:
                        await asyncio.sleep(args.accept_delay_ms / 1000)  # the user reads it (real time)
                    change(plan.start, plan.end, plan.insert)
                    cursor = plan.start + len(plan.insert)
                    typed, right = plan.at, plan.right
                    s.accepted, s.accepted_chars = True, len(plan.shown)
                    keys = deque(rest_keys(task.body, typed, right, script, args.seed, autoclose, stop))
                    if buffer != task.before + task.body[:typed] + right + task.after or cursor != len(task.before) + typed:
                        raise RuntimeError(f"replay bug: the buffer diverged after accepting {plan.shown!r}")
                elif why in ("range", "closers"):
                    refused[why] = refused.get(why, 0) + 1
            if args.verbose:
                flags = "TT" if s.typed_through else ("EA" if s.early else ("RD" if s.ready else "  "))
                print(f"#{s.index:3d} {1000 * s.seconds:6.0f} ms {flags} {'AA' if s.after_accept else '  '} "
                      f"{'TAB' if s.accepted else ('OK ' if s.exact else ('L1 ' if s.first_line else '   '))} "
                      f"{s.text[:60]!r} | {s.expected[:40]!r}")  # fmt: skip
            if s.accepted:
                if typed >= stop:
                    break  # the user is done
                # the editor asks again at once after an accept (no debounce)
                gap = gap_after.get(typed)
                if gap is None:
                    gap = _gap(random.Random(f"{args.seed}/tab/{typed}"), s.text)
                sim_clock += gap
                request, after_accept, gap_left = True, True, gap
                continue
        if not keys:
            break
        k = keys.popleft()
        if k.insert:
            change(cursor, cursor, k.insert)
        cursor += k.cursor_after
        typed += len(k.typed)
        right = k.right
        typed_keys += 1
        typed_chars += len(k.typed)
        sim_clock += k.gap
        request, after_accept, gap_left = k.gap >= DEBOUNCE_S and bool(keys), False, k.gap - DEBOUNCE_S
    if buffer != task.before + task.body[:typed] + right + task.after:
        raise RuntimeError("replay bug: the buffer diverged from the keystroke script")
    final = await stats()
    try:
        await asyncio.wait_for(client.shutdown_async(None), 15)
        client.exit(None)
    except Exception:
        pass
    await client.stop()
    return {"samples": samples, "stats": final, "ready_s": ready_s, "curve_s": curve_s, "curve_state": curve_state, "keys": typed_keys, "typing_s": sim_clock,
            "statuses": statuses, "typed_chars": typed_chars, "accept_refused": refused}  # fmt: skip


def _lat(group: list[Sample]) -> dict[str, Any]:
    v = [s.seconds for s in group]
    return {"n": len(v), "p50_ms": None if not v else 1000 * pct(v, 0.5), "p95_ms": None if not v else 1000 * pct(v, 0.95)}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One method (one layout) over all its files (``runs``: one replay per file)."""
    firsts = [r["samples"][0] for r in runs if r["samples"]]
    later = [s for r in runs for s in r["samples"][1:]]
    samples = [s for r in runs for s in r["samples"]]
    shown = [s for s in samples if s.text.strip()]
    model = [s for s in later if s.model_ran and not s.early]  # ran to the end before answering
    # every later request that ran the model, answered with its first lines (early) or whole:
    # when the user saw it. The figure to compare methods by: a slower method answers more
    # requests early (its block is not done by earlyAnswerMs), so "complete" alone keeps
    # only a slower method's quick requests
    answered = [s for s in later if s.model_ran]
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
    # tokens the decode steps gave (a server without the counter: all but each generation's first)
    decoded = sum(r["stats"]["total"].get("decodedTokens", max(r["stats"]["total"].get("newTokens", 0)
                  - r["stats"]["total"].get("generations", 0), 0)) for r in runs)  # fmt: skip
    everything = [s.seconds for s in samples]
    prefill_tokens = [float(s.prefill_tokens) for s in model]
    after_accept = [s for s in samples if s.after_accept]
    accepted = [s for s in samples if s.accepted]
    accepted_chars = sum(s.accepted_chars for s in accepted)
    typed_chars = sum(r.get("typed_chars", 0) for r in runs)
    refused: dict[str, int] = {}
    for r in runs:
        for k, v in (r.get("accept_refused") or {}).items():
            refused[k] = refused.get(k, 0) + v
    return {
        "files": len(runs),
        "requests": len(samples),
        "keystrokes": sum(r["keys"] for r in runs),
        "simulated_typing_s": sum(r["typing_s"] for r in runs),
        "server_ready_s": _mean([r["ready_s"] for r in runs]),
        "curve_wait_s": _mean([r.get("curve_s", 0.0) for r in runs]),
        # each server's cost curve as typing started: cached / measured (or measuring: --first-start)
        "curve_at_typing": [(r.get("curve_state") or {}).get("state") for r in runs],
        "all_requests": {  # every request's round trip, typed-through and after-accept ones included
            "n": len(everything),
            "p50_ms": None if not everything else 1000 * pct(everything, 0.5),
            "p95_ms": None if not everything else 1000 * pct(everything, 0.95),
            "max_ms": None if not everything else 1000 * max(everything),
        },
        "first": _lat(firsts),
        "later": _lat(later),
        "model_answer": _lat(answered),  # the model ran: time to the answer shown, early or whole
        "model_run": _lat(model),  # the model ran to the end before answering (early answers left out)
        "prefill_tokens": {  # tokens prefilled per model-run request (the rest came from the KV cache)
            "median": pct(prefill_tokens, 0.5),
            "p95": pct(prefill_tokens, 0.95),
        },
        # what the last generation before each model-run answer waited for the model thread:
        # mostly an older block's last forward. The replay sends the keystrokes after an
        # early answer at once, so the next request always finds that block mid-forward;
        # typing in real time (bench live) leaves it the time the keystrokes take
        "queue_ms_median": pct([s.queue_ms for s in answered], 0.5),
        "later_typed_through": _lat([s for s in later if s.typed_through]),
        "later_early": _lat([s for s in later if s.early]),
        # what the early answers waited for in the engine (the server's lastEarly), medians
        "early_split": {k: pct([s.early_split[k] for s in later if s.early and s.early_split], 0.5)
                        for k in ("engineMs", "forwardSteps", "tokens", "draftMs", "setupMs")},
        "later_one_line_model": _lat([s for s in model if s.one_line]),
        "time_split_ms": {  # per model-run request (later ones), means
            "debounce": 1000 * DEBOUNCE_S,
            "prefill": _mean([s.prefill_ms for s in model]),
            "decode": _mean([s.decode_ms for s in model]),
            "post_and_protocol": _mean([s.post_ms for s in model]),
        },
        "after_accept": {  # requests sent right after a Tab (--accept)
            **_lat(after_accept),
            "ready_share": (sum(s.ready for s in after_accept) / len(after_accept)) if after_accept else None,
        },
        "accepts": {  # suggestions the user accepted with Tab (--accept)
            "n": len(accepted),
            "chars": accepted_chars,
            "chars_share": (accepted_chars / (accepted_chars + typed_chars)) if accepted_chars + typed_chars else None,
            "refused": refused,  # matching suggestions not accepted: "closers" / "range" (see plan_accept)
        },
        "ready": sum(s.ready for s in samples),
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
        "ar_fallback": sum(r["stats"]["outcomes"].get("ar_fallback", 0) for r in runs),  # lsp_server/fallback.py
        # generations that would draft, run as plain AR: the server's first cost curve not measured yet (--first-start)
        "ar_until_curve": sum(r["stats"]["outcomes"].get("ar_until_curve", 0) for r in runs),
        # servers (one per file) whose probes priced AR's step, and holds of AR (documents set aside)
        "ar_priced": sum((r["stats"].get("server", {}).get("arFallback") or {}).get("arStepMs") is not None for r in runs),
        # drafter generations the fallback weighed, and of them those weighed up to an early answer
        "ar_judged": sum((r["stats"].get("server", {}).get("arFallback") or {}).get("judged", 0) for r in runs),
        "ar_judged_at_answer": sum((r["stats"].get("server", {}).get("arFallback") or {}).get("judgedAtAnswer", 0) for r in runs),
        "ar_holds": sum(d.get("fallbacks", 0) for r in runs
                        for d in ((r["stats"].get("server", {}).get("arFallback") or {}).get("documents") or {}).values()),
        "model": runs[0]["stats"]["model"] if runs else {},
        "index": [r["stats"]["index"].get("summary") for r in runs],
    }


# ------------------------------------------------------------------------------ keys: METHOD@LAYOUT


NO_CONTEXT = "nocontext"
CONTEXT = "context"
MIDDLE = "middle"  # the cross-file context on, placed before the FIM middle token
NO_WARM = "nowarm"  # warmAtCursor off: the server ignores where the cursor rests (an ablation)
PREPARE, NO_PREPARE = "prepare", "noprepare"  # prepareWindow on / off (idle-time prefill of the window's next start)
NO_PREFETCH = "noprefetch"  # prefetch off: no background suggestion for the state after accepting one
NO_FALLBACK = "nofallback"  # arFallback off: the drafter runs whatever it costs (lsp_server/fallback.py)
PACKED, PLAIN = "packed", "plain"  # the CPU matmul path: packWeights on / off
NO_LINE_PRUNE = "noprune"  # drafts below a line end verified even in single-line mode (an ablation)
NO_AGREE = "noagree"  # the draft budget blind to how many sources drafted a node (an ablation)
NO_GATE = "nogate"  # every datastore searched at every draft: no source gate (fastcoder/source_weights.py)
CALIBRATION, NO_CALIBRATION = "calib", "nocalib"  # the draft budget prices trees by the steps timed / by the cost curve alone (engine.stepCalibration on / off, the default)
INTERRUPT, NO_INTERRUPT = "interrupt", "nointerrupt"  # a cancelled generation's step stops between layers when a request waits / runs to its end (engine.interruptSteps)
EXPLICIT, SDPA = "explicit", "sdpa"  # explicitAttention auto / off (attention as two matrix products where it pays, or PyTorch's SDPA kernel: the default)
NO_MID_BLOCKS, MID_BLOCKS = "nomidblocks", "midblocks"  # midLineBlocks false (the default) / true: a suggestion from mid-line ends at its line unless it opens a block / may run on
NO_HEADER = "noheader"  # no workspace name and document path before the prompt (fileHeader false)
WINDOW = "window"  # windowN: maxPromptTokens N (the prompt window; windowN+context for both)
EARLY = "early"  # earlyN: earlyAnswerMs N (block mode: answer with the whole lines so far after N ms)
DEBOUNCE = "debounce"  # debounceN: debounceMs N (the server's wait before a model run; debounce0: none)
NO_MERGE = "nomerge"  # the prompt's uncached tail prefilled before the first step, not in it (an ablation)
MODEL = "model="  # model=NAME: the server runs this builtin model instead of --model (models side by side)


def layout_options(layout: str) -> dict[str, Any]:
    """Server options of a layout name: ``default`` (none: the server's own layout),
    a ``promptLayout`` (``psm``, ``anchored``), ``context`` / ``nocontext`` (cross-file
    context on / off), ``middle`` (on, ``contextPlacement`` before-middle), ``packed`` / ``plain`` (``packWeights`` on / off), ``noprune``
    (``engine.pruneAtLineEnd`` off), ``noagree`` (``engine.sourceAgreement`` off), ``nogate``
    (``engine.sourceGate`` off), ``calib`` / ``nocalib`` (``engine.stepCalibration`` on / off), ``interrupt`` / ``nointerrupt`` (``engine.interruptSteps`` on / off), ``explicit`` / ``sdpa`` (``explicitAttention`` auto /
    off), ``nomidblocks`` / ``midblocks`` (``midLineBlocks`` false / true), ``noheader``
    (``fileHeader`` false), ``nomerge`` (``engine.mergePromptTail`` 0), ``nowarm``
    (``warmAtCursor`` off: the cursor notification is ignored), ``prepare`` / ``noprepare``
    (``prepareWindow`` on / off), ``noprefetch`` (``prefetch`` off), ``nofallback``
    (``arFallback`` off), ``windowN``
    (``maxPromptTokens`` N, e.g. ``window1024``), ``earlyN`` (``earlyAnswerMs`` N),
    ``debounceN`` (``debounceMs`` N), ``model=NAME`` (the server
    runs model NAME instead of ``--model``), or a combination joined by ``+`` (``psm+nocontext``)."""
    options: dict[str, Any] = {}
    for part in layout.split("+"):
        if part in (NO_CONTEXT, CONTEXT):
            options["crossFileContext"] = part == CONTEXT
        elif part == MIDDLE:
            options.update(crossFileContext=True, contextPlacement="before-middle")
        elif part in (PACKED, PLAIN):
            options["packWeights"] = "on" if part == PACKED else "off"
        elif part == NO_LINE_PRUNE:
            options.setdefault("engine", {})["pruneAtLineEnd"] = False
        elif part == NO_AGREE:
            options.setdefault("engine", {})["sourceAgreement"] = False
        elif part == NO_GATE:
            options.setdefault("engine", {})["sourceGate"] = False
        elif part in (CALIBRATION, NO_CALIBRATION):
            options.setdefault("engine", {})["stepCalibration"] = part == CALIBRATION
        elif part in (INTERRUPT, NO_INTERRUPT):
            options.setdefault("engine", {})["interruptSteps"] = part == INTERRUPT
        elif part in (EXPLICIT, SDPA):
            options["explicitAttention"] = "auto" if part == EXPLICIT else "off"
        elif part in (NO_MID_BLOCKS, MID_BLOCKS):
            options["midLineBlocks"] = part == MID_BLOCKS
        elif part == NO_HEADER:
            options["fileHeader"] = False
        elif part == NO_MERGE:
            options.setdefault("engine", {})["mergePromptTail"] = 0
        elif part == NO_WARM:
            options["warmAtCursor"] = False
        elif part in (PREPARE, NO_PREPARE):
            options["prepareWindow"] = part == PREPARE
        elif part == NO_PREFETCH:
            options["prefetch"] = False
        elif part == NO_FALLBACK:
            options["arFallback"] = False
        elif part.startswith(WINDOW) and part[len(WINDOW):].isdigit():
            options["maxPromptTokens"] = int(part[len(WINDOW):])
        elif part.startswith(EARLY) and part[len(EARLY):].isdigit():
            options["earlyAnswerMs"] = int(part[len(EARLY):])
        elif part.startswith(DEBOUNCE) and part[len(DEBOUNCE):].isdigit():
            options["debounceMs"] = int(part[len(DEBOUNCE):])
        elif part.startswith(MODEL) and part[len(MODEL):]:
            options["model"] = part[len(MODEL):]
        elif part != DEFAULT_LAYOUT:
            options["promptLayout"] = part
    return options


def run_key(method: str, layout: str, layouts: list[str]) -> str:
    """The results key of a (method, layout) pair: ``METHOD`` for the first layout
    listed, ``METHOD@LAYOUT`` for the others."""
    return method if not layouts or layout == layouts[0] else f"{method}@{layout}"


def split_key(key: str) -> tuple[str, str]:
    """``"fastcoder@psm"`` -> ``("fastcoder", "psm")``; ``"ar"`` -> ``("ar", "")`` (the first layout)."""
    method, _, layout = key.partition("@")
    return method, layout


def ar_key(key: str) -> str:
    """The AR run of the same layout as ``key``."""
    layout = split_key(key)[1]
    return f"ar@{layout}" if layout else "ar"


def _align(lists: list[list[Sample]]) -> list[tuple[Sample, ...]]:
    """The same requests across runs. A request is where it was sent (body offset and
    auto-closers right of the cursor: the buffer then): with --accept the runs accept
    different suggestions and their requests part ways. Samples without distinct
    offsets (no offsets recorded) pair by index."""
    keys = [[(s.at, s.closers) for s in lst] for lst in lists]
    if all(len(set(k)) == len(k) for k in keys):
        maps = [dict(zip(k, lst)) for k, lst in zip(keys, lists)]
        return [tuple(m[x] for m in maps) for x in keys[0] if all(x in m for m in maps[1:])]
    n = min(len(lst) for lst in lists)
    return [tuple(lst[i] for lst in lists) for i in range(n)]


def identical_shares(per_file: list[dict[str, list[Sample]]], first_layout: str = DEFAULT_LAYOUT) -> dict[str, Any]:
    """Share of requests whose suggestion is the same text for every method of a layout
    (and, per run key, the share equal to the same layout's AR, and the share *diverging*
    from it: neither text a prefix of the other, so the decodes disagree on a token; a
    suggestion cut sooner by ``timeBudgetMs`` or a keystroke is a prefix, not a divergence). Requests are the same
    across methods: the keystroke script and the debounce decide them, not the answers
    (with --accept, the requests sent at the same place, see :func:`_align`)."""
    same = total = 0
    vs_ar: dict[str, list[int]] = {}
    by_layout: dict[str, list[int]] = {}
    for by_key in per_file:
        groups: dict[str, list[str]] = {}
        for key in by_key:
            groups.setdefault(split_key(key)[1], []).append(key)
        for layout, keys in groups.items():
            lay = by_layout.setdefault(layout or first_layout, [0, 0])
            for row in _align([by_key[k] for k in keys]):
                texts = {k: s.text for k, s in zip(keys, row)}
                total += 1
                lay[1] += 1
                equal = len(set(texts.values())) == 1
                same += equal
                lay[0] += equal
            ar = ar_key(keys[0])
            if ar in by_key:
                for k in keys:
                    if k == ar:
                        continue
                    c = vs_ar.setdefault(k, [0, 0, 0])
                    for a, b in _align([by_key[ar], by_key[k]]):
                        c[0] += a.text == b.text
                        c[1] += 1
                        # neither a prefix of the other: the two decodes disagree on a token
                        # (not one cut sooner by the time budget or a keystroke)
                        c[2] += not (a.text.startswith(b.text) or b.text.startswith(a.text))
    out: dict[str, Any] = {"all_methods": (same / total) if total else None, "requests": total,
                           "vs_ar": {m: (a / b if b else None) for m, (a, b, _) in vs_ar.items()},
                           "diverging_from_ar": {m: (d / b if b else None) for m, (_, b, d) in vs_ar.items()}}
    if len(by_layout) > 1:
        out["by_layout"] = {lay: {"all_methods": (a / b) if b else None, "requests": b} for lay, (a, b) in by_layout.items()}
    return out


RED = "\033[31m"
RESET = "\033[0m"


def paired_vs_ar(per_file: list[dict[str, list[Sample]]]) -> dict[str, dict[str, Any]]:
    """Per run key, against the same layout's AR on the *same requests*: the later requests
    (not a file's first) for which both ran the model, with the time to the answer each
    showed (early or whole). ``p50_ms`` / ``ar_p50_ms`` over those pairs, their ratio, and
    the median of the per-request ratios."""
    return paired_runs(per_file, ar_key)


def paired_runs(per_file: list[dict[str, list[Sample]]], base_of: Callable[[str], str]) -> dict[str, dict[str, Any]]:
    """:func:`paired_vs_ar` against any base run: ``base_of(key)`` names the run each key
    is compared with (``ar_p50_ms`` is the base's p50 over the pairs)."""
    pairs: dict[str, list[tuple[float, float]]] = {}
    for by_key in per_file:
        for key, samples in by_key.items():
            ar = base_of(key)
            if key == ar or ar not in by_key:
                continue
            got = pairs.setdefault(key, [])
            for a, b in _align([by_key[ar], samples]):
                if a.index > 0 and b.index > 0 and a.model_ran and b.model_ran:
                    got.append((a.seconds, b.seconds))
    out: dict[str, dict[str, Any]] = {}
    for key, got in pairs.items():
        ar50 = pct([a for a, _ in got], 0.5)
        p50 = pct([b for _, b in got], 0.5)
        out[key] = {
            "n": len(got),
            "ar_p50_ms": None if ar50 is None else 1000 * ar50,
            "p50_ms": None if p50 is None else 1000 * p50,
            "ratio": (p50 / ar50) if (p50 and ar50) else None,
            "median_ratio": pct([b / a for a, b in got if a > 0], 0.5),
        }
    return out


def vs_ar(summaries: dict[str, dict[str, Any]], paired: dict[str, dict[str, Any]] | None = None) -> dict[str, float]:
    """run key -> its model-run p50 / the same layout's AR's: over the same requests where
    ``paired`` has them, else the two runs' own p50s (``model_answer``)."""
    out = {}
    for m, s in summaries.items():
        if split_key(m)[0] == "ar":
            continue
        pair = (paired or {}).get(m) or {}
        if pair.get("ratio"):
            out[m] = pair["ratio"]
            continue
        ar = summaries.get(ar_key(m), {}).get("model_answer", {}).get("p50_ms")
        p = s["model_answer"]["p50_ms"]
        if ar and p:
            out[m] = p / ar
    return out


def slower_than_ar(summaries: dict[str, dict[str, Any]], paired: dict[str, dict[str, Any]] | None = None) -> dict[str, float]:
    """run key -> its model-run p50 / the same layout's AR's (:func:`vs_ar`), for the runs slower than AR."""
    return {m: r for m, r in vs_ar(summaries, paired).items() if r > 1}


def compare_layouts(summaries: dict[str, dict[str, Any]], methods: list[str], layouts: list[str],
                    per_file: list[dict[str, list[Sample]]] | None = None) -> dict[str, Any]:
    """Per method, the first layout against each other one: model-run p50 ratio
    (first / other), the same on the requests where both ran the model (``same_requests``,
    from ``per_file``), and the median prefilled tokens of both."""
    same = paired_runs(per_file, lambda k: run_key(split_key(k)[0], layouts[0], layouts)) if per_file else {}
    out: dict[str, Any] = {}
    for m in methods:
        base = summaries.get(run_key(m, layouts[0], layouts))
        if base is None:
            continue
        for lay in layouts[1:]:
            other = summaries.get(run_key(m, lay, layouts))
            if other is None:
                continue
            p0, p1 = base["model_answer"]["p50_ms"], other["model_answer"]["p50_ms"]
            out.setdefault(m, {})[lay] = {
                "model_run_p50_ratio": (p0 / p1) if (p0 and p1) else None,  # first layout / this one
                "model_run_p50_ms": [p0, p1],
                "prefill_tokens_median": [base["prefill_tokens"]["median"], other["prefill_tokens"]["median"]],
            }
            pair = same.get(run_key(m, lay, layouts))
            if pair and pair.get("ratio"):
                out[m][lay]["same_requests"] = {"n": pair["n"], "ratio": 1 / pair["ratio"]}  # first / this one
    return out


def print_layouts(cmp: dict[str, Any], layouts: list[str]) -> list[str]:
    def f(x: float | None, fmt: str = ".0f") -> str:
        return "–" if x is None else format(x, fmt)

    lines = []
    for m, per in cmp.items():
        for lay, c in per.items():
            (p0, p1), (t0, t1) = c["model_run_p50_ms"], c["prefill_tokens_median"]
            r = c["model_run_p50_ratio"]
            pair = c.get("same_requests")
            same = f"; {pair['ratio']:.2f}x on the same {pair['n']} requests" if pair else ""
            lines.append(f"{m}: {layouts[0]}/{lay} model-run p50 {'–' if r is None else f'{r:.2f}x'} "
                         f"({f(p0)} vs {f(p1)} ms){same}, prefill tokens median {f(t0)} vs {f(t1)}")  # fmt: skip
    for line in lines:
        print(line)
    return lines


def print_table(summaries: dict[str, dict[str, Any]], same: dict[str, Any], color: bool, accept: bool = False,
                paired: dict[str, dict[str, Any]] | None = None) -> str:
    """Print the side-by-side table (one row per run key: METHOD or METHOD@LAYOUT);
    return it as markdown (with the red flags). Model-run figures: later requests that
    ran the model, timed to the answer shown (early or whole); "vs AR": on the same
    requests (``paired``), else the runs' own p50s; "complete" leaves early answers out."""
    ratios = vs_ar(summaries, paired)
    slow = {m: r for m, r in ratios.items() if r > 1}

    def f(x: float | None, fmt: str = ".0f") -> str:
        return "–" if x is None else format(x, fmt)

    def share(v: float | None) -> str:
        return "–" if v is None else f"{100 * v:.0f}%"

    head = ["method", "model-run p50 ms", "p95 ms", "p50 vs AR (same requests)", "complete runs p50 ms", "first request ms", "accepted length",
            "same text as AR (diverging)", "debounce / prefill / decode / post ms", "prefill tok (median)", "typed-through",
            "match next (whole / 1st line)"]  # fmt: skip
    if accept:
        head += ["after-accept p50 ms", "ready", "accepted (n / chars)"]
    rows = []
    for m, s in summaries.items():
        p50 = s["model_answer"]["p50_ms"]
        ratio = ratios.get(m)
        pair = (paired or {}).get(m) or {}
        ts = s["time_split_ms"]
        is_ar = split_key(m)[0] == "ar"
        shown_ratio = "–" if ratio is None else f"{ratio:.2f}×" + (f" ({pair['n']})" if pair.get("ratio") else "")
        row = [
            m, f(p50), f(s["model_answer"]["p95_ms"]), shown_ratio, f(s["model_run"]["p50_ms"]), f(s["first"]["p50_ms"]),
            f(s["mean_accept_length"], ".2f"),
            "100%" if is_ar else f"{share(same['vs_ar'].get(m))} ({share(same.get('diverging_from_ar', {}).get(m))})",
            f"{f(ts['debounce'])} / {f(ts['prefill'])} / {f(ts['decode'])} / {f(ts['post_and_protocol'])}",
            f(s.get("prefill_tokens", {}).get("median")),
            str(s["typed_through"]), f"{share(s['match_exact_share'])} / {share(s['match_first_line_share'])}",
        ]  # fmt: skip
        if accept:
            aa, acc = s.get("after_accept", {}), s.get("accepts", {})
            row += [f(aa.get("p50_ms")), share(aa.get("ready_share")), f"{acc.get('n', 0)} / {acc.get('chars', 0)}"]
        rows.append(row)
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
    for lay, v in (same.get("by_layout") or {}).items():
        print(f"  layout {lay}: {share(v['all_methods'])} of {v['requests']} requests")
    for m, r in slow.items():
        ar = "AR" if ar_key(m) == "ar" else ar_key(m)  # the same layout's AR
        same_requests = " on the same requests" if (paired or {}).get(m, {}).get("ratio") else ""
        msg = f"{m}: model-run p50 is {r:.2f}x {ar}'s in this run{same_requests}: slower than AR"
        print(RED + msg + RESET if color else msg)
    return "\n".join(md)


def print_summary(name: str, s: dict[str, Any]) -> None:
    def row(label: str, d: dict[str, Any]) -> str:
        return f"  {label:<28} n={d['n']:<4d} p50 {ms(None if d['p50_ms'] is None else d['p50_ms'] / 1000):>6} ms   p95 {ms(None if d['p95_ms'] is None else d['p95_ms'] / 1000):>6} ms"

    def share(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.0f}%"

    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    print(f"== {name}: {s['model'].get('name')} {s['model'].get('dtype')} on {s['model'].get('device')}; "
          f"{s['files']} files; index: {', '.join(sorted(set(map(str, s['index']))))}")
    print(f"  {s['keystrokes']} keystrokes, {s['requests']} requests (150 ms debounce), "
          f"{s['simulated_typing_s']:.0f} s of simulated typing; server ready in {s['server_ready_s']:.1f} s (mean)"
          + (f", its first cost curve measured {s['curve_wait_s']:.1f} s later" if s.get("curve_wait_s", 0) >= 0.5 else ""))  # fmt: skip
    a = s["all_requests"]
    print(row("every request", a) + f"   max {num(a['max_ms']):>6} ms")
    print(row("first request (per file)", s["first"]))
    print(row("later requests", s["later"]))
    print(row("  that ran the model", s["model_answer"]))
    print(row("    ran to the end first", s["model_run"]))
    print(row("  typed-through (no model)", s["later_typed_through"]))
    print(row("  answered early (block)", s["later_early"]))
    es = s.get("early_split") or {}
    if es.get("engineMs") is not None:
        print(f"      to the answer, medians: engine {num(es['engineMs'])} ms ({num(es['forwardSteps'])} steps, "
              f"{num(es['tokens'])} tokens; drafting {es['draftMs']:.1f} ms), prompt and sources {es['setupMs']:.1f} ms")
    print(row("  one-line, model ran", s["later_one_line_model"]))
    acc, aa = s["accepts"], s["after_accept"]
    if acc["n"] or aa["n"] or acc["refused"]:
        print(row("after an accept (Tab)", aa) + f"   ready {share(aa['ready_share'])}")
        refused = ", ".join(f"{k} {v}" for k, v in sorted(acc["refused"].items())) or "none"
        print(f"  accepted {acc['n']} suggestions, {acc['chars']} characters ({share(acc['chars_share'])} of the body "
              f"written); matching suggestions not accepted: {refused}")  # fmt: skip
    pt = s["prefill_tokens"]
    print(f"  suggestions {s['suggestions']} (empty {s['empty']}, errors {s['errors']}); match what was typed next: "
          f"whole {share(s['match_exact_share'])}, first line {share(s['match_first_line_share'])}; "
          f"arrived before the next keystroke {share(s['in_time_share'])}")  # fmt: skip
    mean_acc, mpt = s["mean_accept_length"], s["decode_ms_per_token"]
    src = ", ".join(f"{k} {v}" for k, v in sorted(s["accepted_by_source"].items(), key=lambda kv: -kv[1])) or "-"
    print(f"  prefill saving (KV reuse) {share(s['prefill_saving'])}, prefilled tokens per model run median "
          f"{num(pt['median'])} p95 {num(pt['p95'])}; {s['generations']} generations ("
          + (f"{s['ar_until_curve']} as plain AR before the first cost curve, " if s.get("ar_until_curve") else "")
          + f"{s.get('ar_fallback', 0)} as plain AR: arFallback, AR priced in "
          f"{s.get('ar_priced', 0)} of {len(s.get('index') or [])} servers, {s.get('ar_holds', 0)} holds, "
          f"{s.get('ar_judged', 0)} weighed, {s.get('ar_judged_at_answer', 0)} of them up to an early answer), mean accepted length "
          f"{'-' if mean_acc is None else f'{mean_acc:.2f}'}; decode {'-' if mpt is None else f'{mpt:.0f}'} ms/token; "
          f"accepted draft tokens by source: {src}; waited for the model thread median {num(s.get('queue_ms_median'))} ms "
          f"per model run (an older block's last forward: the replay types on at once after an early answer)")  # fmt: skip


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    except OSError:
        return "?"


def rescore(path: Path) -> dict[str, Any]:
    """The model-run figures of a replay already run, from the samples its report (or
    ``--json`` file) kept: per run key the answer p50 / p95 (every later request that ran
    the model, early answers included), the complete-runs p50 (early answers left out, as
    reports before 2026-11-25 gave it) and the first request's p50; and each key against
    its layout's AR on the same requests (:func:`paired_vs_ar`). Prints them; returns them."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data = data.get("results", data)
    fields = {f.name for f in dataclasses.fields(Sample)}
    runs = {k: [[Sample(**{a: b for a, b in x.items() if a in fields}) for x in f if "index" in x] for f in v]
            for k, v in data["samples"].items()}  # fmt: skip
    n = min((len(v) for v in runs.values()), default=0)
    per_file = [{k: runs[k][i] for k in runs} for i in range(n)]
    out: dict[str, Any] = {"methods": {}, "paired_vs_ar": paired_vs_ar(per_file)}
    for k, files in runs.items():
        later = [x for f in files for x in f[1:]]
        out["methods"][k] = {"model_answer": _lat([x for x in later if x.model_ran]),
                             "model_run": _lat([x for x in later if x.model_ran and not x.early]),
                             "first": _lat([f[0] for f in files if f])}  # fmt: skip
    for k, v in out["methods"].items():
        a, c, f = v["model_answer"], v["model_run"], v["first"]
        pair = out["paired_vs_ar"].get(k)
        vs = f"; vs AR on the same {pair['n']} requests {pair['ratio']:.2f}x" if pair and pair.get("ratio") else ""
        print(f"{k:<20} model ran: n={a['n']} p50 {ms(None if a['p50_ms'] is None else a['p50_ms'] / 1000)} ms "
              f"p95 {ms(None if a['p95_ms'] is None else a['p95_ms'] / 1000)} ms{vs}; complete runs only: n={c['n']} "
              f"p50 {ms(None if c['p50_ms'] is None else c['p50_ms'] / 1000)} ms; first request p50 "
              f"{ms(None if f['p50_ms'] is None else f['p50_ms'] / 1000)} ms")  # fmt: skip
    return out


def add_typing_args(ap: argparse.ArgumentParser) -> None:
    """The arguments the replay and ``bench live`` share: which files are typed, the
    server each (method, layout) gets, the typing script's seed, ``--out``."""
    ap.add_argument("--files", type=int, default=4, help="files (functions) of the repo suite's projects to type (default 4)")
    ap.add_argument("--file", type=Path, help="type one function of this Python file instead")
    ap.add_argument("--function", help="with --file: the function whose body is typed")
    ap.add_argument("--min-chars", type=int, default=150, help="suite functions: shortest body typed (characters)")
    ap.add_argument("--max-chars", type=int, default=700, help="suite functions: longest body typed (characters)")
    ap.add_argument("--min-before", type=int, default=0,
                    help="suite functions: fewest characters of the file before the function (e.g. 6000: files longer "
                         "than the prompt window, whose start moves while a long body is typed)")
    ap.add_argument("--open-others", type=int, default=1, help="other files of the folder open in the editor (default 1)")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--methods", "--method", dest="methods", default="ar,fastcoder",
                    help="methods, comma-separated: each gets a fresh server per file (default ar,fastcoder)")
    ap.add_argument("--layouts", "--layout", dest="layouts", default=DEFAULT_LAYOUT,
                    help="prompt layouts, comma-separated, run side by side (default: default = the server's own, "
                         "no promptLayout option sent; context / nocontext: cross-file context on / off; any other name is sent as "
                         "promptLayout, e.g. anchored, psm; parts join with +, e.g. psm+nocontext)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--max-prompt-tokens", type=int, default=2048, help="the server's context window (maxPromptTokens)")
    ap.add_argument("--time-budget-ms", type=int, default=2000)
    ap.add_argument("--engine", default="", metavar="JSON",
                    help='engine options for every server, e.g. \'{"maxDraftTokens": 16}\' (DecodeConfig fields)')
    ap.add_argument("--no-reuse", action="store_true", help="turn off typed-through reuse of the last suggestion")
    ap.add_argument("--no-common", action="store_true", help="no D_c (stdlib datastore)")
    ap.add_argument("--max-keys", type=int, default=0, help="type only this many keystrokes per file (0: the whole body)")
    ap.add_argument("--first-pause", type=float, default=1.0,
                    help="seconds (real time) the user looks at the opened file before typing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ready-timeout", type=float, default=900)
    ap.add_argument("--first-start", action="store_true",
                    help="type as soon as the server says ready, as on a first start: where no cost curve is cached "
                         "for this model and machine, the server measures one in idle time and generations that would "
                         "draft run as plain AR until then (default: wait for the curve, the servers' steady state)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="type every file this many times, each round's method order one step further along the rotation "
                         "(2 with two methods: AR, FastCoder, FastCoder, AR on each file), pooled: a machine whose speed "
                         "drifts between servers biases no method (default 1)")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR", help="write DIR/report.json and DIR/report.md")


def typing_rounds(tasks: list[Task], args: argparse.Namespace) -> list[tuple[int, int, Task]]:
    """``(round, rotation, task)`` in the order the files are typed: every file once per
    ``--rounds``, the method order of a file one step further along the rotation each
    round (:func:`run_order` with ``rotation``; two methods, two rounds: AR, FastCoder,
    FastCoder, AR on each file)."""
    rounds = max(1, int(getattr(args, "rounds", 1) or 1))
    return [(r, i + r, task) for r in range(rounds) for i, task in enumerate(tasks)]


def check_typing_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``ap.error`` for what :func:`add_typing_args` parsed but cannot run."""
    if args.engine:
        try:
            if not isinstance(json.loads(args.engine), dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            ap.error(f"--engine: {exc}")
    if args.function and not args.file:
        ap.error("--function needs --file")
    methods, layouts = _names(args.methods), _names(args.layouts)
    if not methods or any("@" in m for m in methods) or len(set(methods)) != len(methods):
        ap.error("--methods: distinct names without '@'")
    if not layouts or any("@" in x for x in layouts) or len(set(layouts)) != len(layouts):
        ap.error("--layouts: distinct names without '@'")
    if args.rounds < 1:
        ap.error("--rounds: at least 1")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fastcoder bench replay", description=__doc__.splitlines()[0])
    ap.add_argument("--rescore", type=Path, metavar="REPORT_JSON",
                    help="run nothing: the model-run figures of an earlier run, from its report.json's samples")
    add_typing_args(ap)
    ap.add_argument("--accept", action="store_true",
                    help="the user presses Tab on a suggestion that is what they type next, then types on; "
                         "the editor asks again at once (after-accept requests)")
    ap.add_argument("--accept-delay-ms", type=float, default=1000.0,
                    help="with --accept: real time the user takes to read a suggestion before Tab (default 1000 ms; "
                         "0: at once, the hardest case for the background suggestion)")
    ap.add_argument("--no-autoclose", action="store_true", help="the editor does not auto-close brackets or quotes")
    ap.add_argument("--open-at-top", type=float, default=0.0, metavar="SECONDS",
                    help="the editor opens each file with the cursor at its top for SECONDS (real time), then jumps "
                         "to the function: the first request is then one after a jump inside an open document (default 0: "
                         "opened at the function)")  # fmt: skip
    ap.add_argument("--json", type=Path, help="also write the summaries and every sample here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every request")
    args = ap.parse_args(argv)
    if args.rescore:
        rescore(args.rescore)
        return 0
    import logging

    logging.getLogger("pygls").setLevel(logging.WARNING)  # not every message of the client
    check_typing_args(ap, args)
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
    tasks = suite_tasks(args.files, None, args.min_chars, args.max_chars, args.open_others, args.min_before)
    if not tasks:
        raise SystemExit("no suite function fits --min-chars/--max-chars")
    return tasks


def _names(value: str) -> list[str]:
    return [m.strip() for m in value.split(",") if m.strip()]


def run_order(methods: list[str], layouts: list[str], i: int) -> list[tuple[str, str]]:
    """The (method, layout) pairs of file ``i``, in the order they run: rotated from
    file to file (as methods alone rotate)."""
    pairs = [(m, lay) for lay in layouts for m in methods]
    k = i % len(pairs)
    return pairs[k:] + pairs[:k]


def _run(args: argparse.Namespace, rec: Any = None) -> dict:
    """Every file, every (method, layout) with a fresh server (rotating order); the side-by-side summary."""
    methods, layouts = _names(args.methods), _names(getattr(args, "layouts", DEFAULT_LAYOUT))
    keys = [run_key(m, lay, layouts) for lay in layouts for m in methods]
    tasks = _tasks(args)
    print(f"load average before: {load_average()}")
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
    per_file: list[dict[str, list[Sample]]] = []
    typed = typing_rounds(tasks, args)  # --rounds: every file again, pooled
    for n_done, (r, rotation, task) in enumerate(typed):
        print(f"typing {task.name or task.function}: {len(task.body)} characters, {task.body.count(chr(10))} lines; "
              f"also open: {', '.join(p.name for p in task.others) or '-'}" + (f" (round {r + 1})" if typed[-1][0] else ""))
        by_key: dict[str, list[Sample]] = {}
        for method, layout in run_order(methods, layouts, rotation):
            key = run_key(method, layout, layouts)
            run_args = argparse.Namespace(**{**vars(args), "method": method, "layout": layout})
            with tempfile.TemporaryDirectory(prefix="fastcoder-bench-") as tmp:
                task_workspace(task, Path(tmp))
                run = asyncio.run(replay(run_args, task, Path(tmp)))
            runs[key].append(run)
            by_key[key] = run["samples"]
            model = [s for s in run["samples"][1:] if s.model_ran]
            p50 = pct([s.seconds for s in model], 0.5)
            acc = [s for s in run["samples"] if s.accepted]
            cal = ((run.get("stats") or {}).get("model") or {}).get("stepCalibration")  # the budget's steps vs its curve
            print(f"  {key:<14} {len(run['samples'])} requests, model ran {len(model)}, model-run p50 {ms(p50)} ms, "
                  f"first {ms(run['samples'][0].seconds if run['samples'] else None)} ms"
                  + (f", accepted {len(acc)} ({sum(s.accepted_chars for s in acc)} chars)" if args.accept else "")
                  + (f"; steps vs curve x{cal['base']} (1 row), x{cal['tree']} (tree rows)" if cal and sum(cal.get("steps", [])) else "")
                  + f"; load {load_average()}")  # fmt: skip
            if args.json:  # what is finished survives an interrupted run
                partial = {m: [[asdict(x) for x in r["samples"]] + [{"stats": r["stats"]}] for r in rs] for m, rs in runs.items()}
                args.json.write_text(json.dumps({"partial": True, "files": [t.name for _, _, t in typed[: n_done + 1]],
                                                 "samples": partial}, default=str))
        per_file.append({k: by_key[k] for k in keys})
    summaries = {k: summarize(runs[k]) for k in keys}
    same = identical_shares(per_file, layouts[0])
    print()
    for k in keys:
        print_summary(k, summaries[k])
    print()
    paired = paired_vs_ar(per_file)
    table = print_table(summaries, same, color=sys.stdout.isatty(), accept=args.accept, paired=paired)
    layout_cmp = compare_layouts(summaries, methods, layouts, per_file)
    layout_lines = print_layouts(layout_cmp, layouts)
    print(f"load average after: {load_average()}")
    if rec is not None:
        rec.markdown = table + ("\n\n" + "\n".join(f"- {ln}" for ln in layout_lines) if layout_lines else "")
    results = {
        "files": [t.name or str(t.path) for _, _, t in typed],  # (each file once per round)
        "layouts": {"names": layouts, "first": layouts[0], "compare": layout_cmp},
        "methods": summaries,
        "identical": same,
        "paired_vs_ar": paired,
        "slower_than_ar": slower_than_ar(summaries, paired),
        "samples": {k: [[asdict(s) for s in r["samples"]] for r in runs[k]] for k in keys},
    }
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return results


if __name__ == "__main__":
    sys.exit(main())
