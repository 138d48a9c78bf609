"""File-system watching: watchdog events → coalesced batches of changed paths.

:class:`FileWatcher` runs a watchdog ``Observer`` on the workspace roots and reports
every path an event touches (both ends of a move) to a callback, dropping noise
early: directory-modified events (a side effect of every file save), open/close-
without-write events, and anything inside default-excluded directories such as
``.git`` or ``node_modules``.

:class:`Debouncer` coalesces those paths: a save is often several events (truncate,
write, close, or write-temp-then-rename), so a batch is released only after
``window_s`` without new events, or at the latest ``max_delay_s`` after its first
event, so a steady stream of writes cannot starve indexing. It keeps the time each
path was first seen, from which indexing latency is measured.

What a path in a batch means is decided when the batch is processed, from the file
system as it is then (:mod:`indexer.workspace`): a file that exists and passes the
filter is (re)indexed, a path that no longer exists is removed (with everything
below it, for a directory), a directory is rescanned. That makes moves into and out
of ignored directories plain removals and additions.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Sequence

from watchdog.events import (
    DirModifiedEvent,
    FileClosedNoWriteEvent,
    FileOpenedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)

from indexer.scan import EXCLUDED_DIRS

log = logging.getLogger(__name__)

_NOISE = (DirModifiedEvent, FileOpenedEvent, FileClosedNoWriteEvent)


class Debouncer:
    """Thread-safe set of pending paths with the time each was first seen.

    Parameters:
        window_s: quiet time after the last event before a batch is due.
        max_delay_s: a batch is due at the latest this long after its first event.
        clock: time source (monotonic seconds).
    """

    def __init__(self, window_s: float = 0.1, max_delay_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.max_delay_s = max_delay_s
        self.clock = clock
        self._lock = threading.Lock()
        self._pending: dict[str, float] = {}
        self._first = 0.0
        self._last = 0.0

    def add(self, path: str, when: float | None = None) -> None:
        """Note an event on ``path`` (``when``: its time, default now)."""
        now = self.clock() if when is None else when
        with self._lock:
            if not self._pending:
                self._first = now
            self._pending.setdefault(path, now)
            self._last = now

    def due_in(self) -> float | None:
        """Seconds until the pending batch is due (<= 0: now), None if nothing is pending."""
        with self._lock:
            if not self._pending:
                return None
            now = self.clock()
            return min(self._last + self.window_s, self._first + self.max_delay_s) - now

    def take(self) -> dict[str, float]:
        """Remove and return the pending paths with their first-seen times."""
        with self._lock:
            out, self._pending = self._pending, {}
            return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)


def _excluded(path: str, roots: Sequence[str]) -> bool:
    """Cheap pre-filter: is ``path`` inside a default-excluded directory of a root?"""
    for root in roots:
        if path == root or path.startswith(root + os.sep):
            rel = path[len(root) + 1 :]
            parts = rel.split(os.sep)[:-1]
            return any(p in EXCLUDED_DIRS for p in parts)
    return True  # outside every root


class _Handler(FileSystemEventHandler):
    def __init__(self, roots: Sequence[str], on_path: Callable[[str, bool], None]) -> None:
        self.roots = list(roots)
        self.on_path = on_path

    def on_any_event(self, event: FileSystemEvent) -> None:
        if isinstance(event, _NOISE):
            return
        paths = [event.src_path]
        dest = getattr(event, "dest_path", "")
        if dest:
            paths.append(dest)
        for p in paths:
            p = os.fsdecode(p)
            if not _excluded(p, self.roots):
                try:
                    self.on_path(p, event.is_directory)
                except Exception:  # never let a callback kill the observer thread
                    log.exception("file event callback failed")


class FileWatcher:
    """A watchdog observer over some roots that reports touched paths.

    Parameters:
        roots: absolute, resolved directories to watch recursively.
        on_path: called from the observer thread as ``on_path(path, is_directory)``
            for every path an event touches; must be quick (queue it).
        polling: use the portable polling observer instead of the OS's (slower).
    """

    def __init__(self, roots: Sequence[str], on_path: Callable[[str, bool], None], *, polling: bool = False) -> None:
        self.roots = [os.fspath(r) for r in roots]
        self.on_path = on_path
        self.polling = polling
        self._observer = None

    def start(self) -> None:
        """Start watching. Falls back to polling if the OS watcher cannot start (for
        instance when the inotify watch limit is reached). Raises OSError when neither
        can."""
        handler = _Handler(self.roots, self.on_path)
        last: Exception | None = None
        for polling in ((True,) if self.polling else (False, True)):
            observer = self._make(polling)
            try:
                for root in self.roots:
                    observer.schedule(handler, root, recursive=True)
                observer.start()
            except OSError as exc:
                last = exc
                log.warning("cannot watch %s with %s: %s", self.roots, type(observer).__name__, exc)
                try:
                    observer.stop()
                except Exception:
                    pass
                continue
            self._observer = observer
            return
        raise OSError(f"cannot watch {', '.join(self.roots)}: {last}")

    @staticmethod
    def _make(polling: bool):
        if polling:
            from watchdog.observers.polling import PollingObserver

            return PollingObserver(timeout=1.0)
        from watchdog.observers import Observer

        return Observer()

    @property
    def running(self) -> bool:
        return self._observer is not None and self._observer.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the observer and wait for its thread."""
        obs, self._observer = self._observer, None
        if obs is None:
            return
        try:
            obs.stop()
            obs.join(timeout)
        except Exception:
            log.exception("stopping the file watcher failed")
