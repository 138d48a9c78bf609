"""Adapter to the ``indexer`` package: the server's one place that knows its API.

What the server needs from the indexer:

* D_r, the workspace's own code, kept up to date (a file watcher, plus the text of
  open editor buffers, fresher than the disk): ``indexer.WorkspaceIndex``;
* D_c, a common-code datastore (the standard library), built once per tokenizer and
  cached: ``indexer.ensure_common``;
* D_d, the installed dependencies (``dependencyIndex``), built in the background:
  ``indexer.deps.start_deps``;
* status and progress callbacks while building, and counts for ``fastcoder.stats``.

Everything here is defensive: when ``indexer`` cannot be imported, or a call fails,
completion runs without D_r / D_c / D_d, the reason is logged and shown by
:meth:`IndexAdapter.stats`, and nothing else breaks.

Progress: one ``begin`` when indexing starts (D_c, then D_r's first open, or a
rebuild), ``report`` for the indexer's file counts, ``end`` when the indexer says
``ready`` (or ``error``).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable

from fastcoder.drafters import Sources
from indexer.priority import lower_thread_priority

log = logging.getLogger(__name__)

# kind ("begin" | "report" | "end"), percentage or None, message
ProgressFn = Callable[[str, "int | None", str], None]
StatusFn = Callable[[str, str], None]


class IndexUnavailable(RuntimeError):
    """The workspace index cannot be used; the message says why."""


def _indexer() -> Any:
    return importlib.import_module("indexer")


class IndexAdapter:
    """The server's datastores for one tokenizer and set of workspace folders: D_r
    (``indexer.WorkspaceIndex``), D_c and D_d, handed to the engine by :meth:`sources`."""

    def __init__(
        self,
        tokenizer: Any,
        roots: list[Path],
        on_progress: ProgressFn,
        on_status: StatusFn,
        *,
        fingerprint: str | None = None,
        use_common: bool = True,
        use_workspace: bool = True,
        use_deps: bool = False,
        python: str | None = None,
        deps_options: dict[str, Any] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.fingerprint = fingerprint
        self.roots = [r for r in roots if r.is_dir()]
        self.use_common = use_common
        self.use_workspace = use_workspace
        self.use_deps = use_deps
        self.python = python
        self.deps: Any = None  # indexer.deps.DepsHandle (D_d), built in the background
        self.deps_options = dict(deps_options or {})  # passed to indexer.deps.start_deps
        self._on_progress = on_progress
        self._on_status = on_status
        self.workspace: Any = None  # indexer.WorkspaceIndex
        self.dr: Any = None  # its RetrievalSource
        self.want_symbols = False  # the symbol table (read once wanted: use_symbols)
        self.dc: Any = None
        self.problems: dict[str, str] = {}
        self.state = "idle"  # idle | indexing | ready | unavailable
        self.message = ""
        self.started: float | None = None
        self.index_s: float | None = None
        self._in_progress = False
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------ progress
    def _begin(self, message: str) -> None:
        with self._lock:
            if self._in_progress:
                return
            self._in_progress = True
        self.state = "indexing"
        self.started = time.perf_counter()
        self._on_progress("begin", 0, message)

    def _end(self, message: str) -> None:
        with self._lock:
            if not self._in_progress:
                return
            self._in_progress = False
        if self.started is not None:
            self.index_s = time.perf_counter() - self.started
        self.state = "ready" if (self.dr is not None or self.dc is not None) else "unavailable"
        self._on_progress("end", None, message)

    def _dr_progress(self, done: int, total: int) -> None:
        pct = max(0, min(100, int(100 * done / total))) if total else None
        self._on_progress("report", pct, f"{done}/{total} files")

    def _dr_status(self, state: str, message: str) -> None:
        self.message = message
        if state == "indexing":
            self._begin(message)
            self._on_progress("report", None, message)
        elif state in ("ready", "error"):
            if state == "error":
                self.problems["D_r"] = message
            else:
                self.problems.pop("D_r", None)
            self._end(message)
        self._on_status(self.state if state != "error" else "ready", f"workspace index: {message}")

    # ------------------------------------------------------------------ building
    def start(self) -> None:
        """Open D_c and D_r in the background; progress and status are reported."""
        self._begin("indexing the workspace")
        threading.Thread(target=self._open, name="fastcoder-index-open", daemon=True).start()

    def _open(self) -> None:
        lower_thread_priority()  # D_c and D_r are built on this thread and those it starts
        try:
            if self.use_common:
                try:
                    self._on_progress("report", None, "common code (D_c)")
                    self.dc = _indexer().ensure_common(self.tokenizer, progress=False, fingerprint=self.fingerprint)
                except Exception as exc:
                    self._problem("D_c", exc)
            else:
                self.problems["D_c"] = "turned off (commonIndex: false)"
            if self.use_deps:
                try:
                    from indexer.deps import start_deps

                    root = self.roots[0] if self.roots else None
                    self.deps = start_deps(root, self.tokenizer, python=self.python, fingerprint=self.fingerprint, **self.deps_options)
                except Exception as exc:
                    self._problem("D_d", exc)
            if not self.use_workspace:
                self.problems["D_r"] = "turned off (workspaceIndex: false)"
            elif not self.roots:
                self.problems["D_r"] = "no workspace folder"
            else:
                try:
                    ws = _indexer().WorkspaceIndex(
                        [str(r) for r in self.roots], self.tokenizer, fingerprint=self.fingerprint,
                        on_progress=self._dr_progress, on_status=self._dr_status,
                    )  # fmt: skip
                    self.workspace, self.dr = ws, ws.source
                    if self._closed:
                        return
                    if self.want_symbols:
                        ws.use_symbols()
                    ws.start()  # its status callbacks end the progress
                    return
                except Exception as exc:
                    self._problem("D_r", exc)
        except Exception as exc:  # never let the thread die silently
            self._problem("index", exc)
        self._end(self.summary())

    def _problem(self, what: str, exc: BaseException) -> None:
        if isinstance(exc, ModuleNotFoundError) and (exc.name or "").startswith("indexer"):
            reason = f"indexer package not available ({exc})"
        else:
            reason = f"{type(exc).__name__}: {exc}"
        self.problems[what] = reason
        log.warning("running without %s: %s", what, reason)

    # ------------------------------------------------------------------ using
    def sources(self) -> Sources:
        return Sources(dr=self.dr, dc=self.dc, dd=self.deps.source if self.deps is not None else None)

    def summary(self) -> str:
        have = [name for name, obj in (("D_r", self.dr), ("D_c", self.dc)) if obj is not None]
        if not have:
            return "no datastores (" + "; ".join(f"{k}: {v}" for k, v in self.problems.items()) + ")"
        return "using " + " and ".join(have)

    def _call(self, name: str, *args: Any) -> Any:
        fn = getattr(self.workspace, name, None)
        if not callable(fn):
            return None
        try:
            return fn(*args)
        except Exception as exc:
            log.warning("workspace index %s failed: %s", name, exc)
            return None

    def use_symbols(self) -> None:
        """Have D_r's symbol table read (``crossFileContext`` on): now, or once it opens."""
        self.want_symbols = True
        ws = self.workspace
        if ws is not None:
            ws.use_symbols()

    def update_buffer(self, path: str, text: str) -> None:
        """The text of an open editor buffer (fresher than the file on disk)."""
        self._call("update_buffer", path, text)

    def close_buffer(self, path: str) -> None:
        self._call("release_buffer", path)

    def rebuild(self, timeout: float = 3600.0) -> dict[str, Any]:
        """Rebuild D_r from scratch and wait for it (blocking: run it in a thread).
        Raises IndexUnavailable with the reason when there is no workspace index."""
        if self.workspace is None:
            if self.state == "indexing":
                raise IndexUnavailable("the workspace index is still being opened; try again when it is ready")
            raise IndexUnavailable(f"no workspace index to rebuild: {self.problems.get('D_r', 'not built')}")
        self.workspace.rebuild()
        flush = getattr(self.workspace, "flush", None)
        if callable(flush) and not flush(timeout):
            raise IndexUnavailable(f"the rebuild did not finish within {timeout:.0f} s")
        return self.stats()

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "summary": self.summary(), "problems": dict(self.problems)}
        if self.index_s is not None:
            out["indexSeconds"] = self.index_s
        for name, obj in (("D_r", self.workspace), ("D_c", self.dc)):
            if obj is None:
                continue
            try:
                fn = getattr(obj, "stats", None)
                if callable(fn):
                    out[name] = dict(fn())
                else:
                    out[name] = {a: int(getattr(obj, a)) for a in ("n_tokens", "n_docs") if hasattr(obj, a)}
            except Exception as exc:
                out[name] = {"error": str(exc)}
        return out

    def close(self) -> None:
        """Stop watching and save the index (blocking: run it in a thread)."""
        if self._closed:
            return
        self._closed = True
        if self.deps is not None:
            try:
                self.deps.cancel(wait=False)
            except Exception as exc:
                log.warning("stopping the dependency index: %s", exc)
        if self.workspace is not None:
            try:
                self.workspace.stop(save=True, timeout=10.0)
            except Exception as exc:
                log.warning("stopping the workspace index: %s", exc)
