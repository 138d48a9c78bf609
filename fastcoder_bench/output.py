"""One shape for every benchmark's results: ``DIR/report.json`` and ``DIR/report.md``.

``report.json`` of every kind holds ``kind`` (suite, replay, edit, ...), ``machine``
(CPU, CPU count, versions, load average at start and end) and ``run`` (the arguments);
the kind's figures are under ``results`` (the suite keeps its documented top-level keys,
``methods`` / ``per_task`` / ..., see ``suite/report.py``). ``report.md`` starts with
``# fastcoder bench: KIND``, a machine line and the command, then the figures.

A benchmark that prints its tables runs inside :func:`recording`, which copies what it
prints into ``report.md`` and writes both files when the run finishes::

    with recording(args.out, "edit", args, argv) as rec:
        ...print tables...
        rec.results = {...}
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator


def _loadavg() -> list[float]:
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):
        return []


def machine_info() -> dict[str, Any]:
    """CPU, versions and the load average now (``loadavg_start``); cheap, imports nothing heavy."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for dist in ("torch", "transformers"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {"cpu": cpu, "cpu_count": os.cpu_count(), **versions, "python": platform.python_version(),
            "platform": platform.platform(), "loadavg_start": _loadavg()}


class _Tee(io.TextIOBase):
    def __init__(self, *streams: Any) -> None:
        self.streams = streams

    def write(self, s: str) -> int:
        for st in self.streams:
            st.write(s)
        return len(s)

    def flush(self) -> None:
        for st in self.streams:
            st.flush()


@dataclass
class Recording:
    """What a benchmark hands to :func:`recording`: its figures (JSON-serialisable)."""

    kind: str
    results: Any = None
    printed: io.StringIO = field(default_factory=io.StringIO)
    markdown: str = ""  # optional tables for report.md, above what was printed


def _jsonable(args: Any) -> dict[str, Any]:
    d = vars(args) if not isinstance(args, dict) else args
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items() if not callable(v)}


def write(out: str | os.PathLike[str], kind: str, args: Any, argv: list[str] | None, results: Any, printed: str,
          machine: dict[str, Any], markdown: str = "") -> Path:
    """Write ``out/report.json`` and ``out/report.md`` (atomically each); returns ``out``.

    ``argv`` are the benchmark's own arguments (``sys.argv[1:]`` when None)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    machine = dict(machine, loadavg_end=_loadavg())
    command = " ".join(["fastcoder bench", kind, *(sys.argv[1:] if argv is None else argv)])
    report = {"kind": kind, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": command,
              "machine": machine, "run": {"args": _jsonable(args)}, "results": results}
    tmp = out / "report.json.tmp"
    tmp.write_text(json.dumps(report, indent=1, default=str))
    os.replace(tmp, out / "report.json")
    md = [
        f"# fastcoder bench: {kind}",
        "",
        f"- {report['created']}; `{command}`",
        f"- machine: {machine.get('cpu')} ({machine.get('cpu_count')} CPUs), torch {machine.get('torch')}, "
        f"transformers {machine.get('transformers')}; load average at start "
        f"{', '.join(f'{x:.2f}' for x in machine.get('loadavg_start', []))}, at end "
        f"{', '.join(f'{x:.2f}' for x in machine['loadavg_end'])}",
        *(["", markdown.rstrip("\n"), ""] if markdown else []),
        "- figures: `report.json` (`results`); what the benchmark printed:",
        "",
        "```text",
        printed.rstrip("\n"),
        "```",
        "",
    ]
    tmp = out / "report.md.tmp"
    tmp.write_text("\n".join(md))
    os.replace(tmp, out / "report.md")
    return out


@contextlib.contextmanager
def recording(out: str | os.PathLike[str] | None, kind: str, args: Any, argv: list[str] | None) -> Iterator[Recording]:
    """Run a benchmark's body; with ``out`` set, tee stdout and write the report at the end.

    Nothing is written when the body raises (a half run is not a result)."""
    rec = Recording(kind)
    if out is None:
        yield rec
        return
    machine = machine_info()
    with contextlib.redirect_stdout(_Tee(sys.stdout, rec.printed)):
        yield rec
    path = write(out, kind, args, argv, rec.results, rec.printed.getvalue(), machine, rec.markdown)
    print(f"report: {path / 'report.md'}")
