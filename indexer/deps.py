"""D_d: the datastore of the workspace's dependencies (the source of installed packages).

The most relevant common code for a user is the source of the libraries their project
imports, so D_d is built from the ``*.py`` files of the distributions installed in the
workspace's Python environment.

**Which environment** (:func:`find_environment`), first that works:

1. the configured interpreter (``pythonPath`` of the server, ``--python`` of the CLI):
   an interpreter file, or a virtualenv folder;
2. ``.venv/`` then ``venv/`` in the workspace root;
3. the interpreter running the server (``sys.executable``).

Its site-packages come from running the interpreter (``python -I -c 'import sysconfig
...'``, with a timeout); when that fails (missing or broken interpreter, timeout) a
virtualenv's layout is read instead (``pyvenv.cfg`` next to ``lib/pythonX.Y/
site-packages`` or ``Lib/site-packages``). A broken candidate is logged and the next one
is tried: nothing here raises for a bad environment.

**What is read**: the ``*.py`` sources of each installed distribution, without tests,
vendored copies, generated files, installer tooling and editable installs (see
:mod:`indexer.packages`).

**Persistence and incremental rebuild**: per-package shards (:mod:`indexer.shards`)
under ``cache_root()/deps/<hash of the environment path>-<tokenizer fingerprint>/``
(a folder: ``manifest.json``, ``shard-*.fcds``, ``merged-*.fcds``; every file written
atomically). When packages change (names and versions of the dist-infos, recorded in
every shard's header meta), only the shards holding a changed package are rebuilt, and
only the changed packages are tokenized; a corrupt shard is detected on load (CRC) and
rebuilt. The search runs on one suffix array over all shards (``merged-*.fcds``,
re-sorted after a change: no tokenizing, ~0.4 s per million tokens), which is several
times faster than searching the shards one by one.

What the server uses::

    handle = start_deps(workspace_root, tokenizer, python=config.pythonPath)
    sources = Sources(dr=..., dc=..., dd=handle.source)   # empty until ready
    handle.future.result()  # the ShardedStore, when one must wait
    handle.restart(python=new_path)   # the configured interpreter changed
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from fastcoder.datastore import Retrieval
from fastcoder.errors import FastCoderError
from indexer.packages import PackageSource, list_distributions
from indexer.priority import lower_thread_priority

log = logging.getLogger(__name__)

INTERPRETER_TIMEOUT_S = 10.0
"""How long the workspace's interpreter may take to print its paths."""

_PATHS_SCRIPT = (
    "import json, sys, sysconfig; "
    "print(json.dumps({'paths': sysconfig.get_paths(), 'prefix': sys.prefix, "
    "'version': '%d.%d.%d' % sys.version_info[:3]}))"
)


# --------------------------------------------------------------------------------------
# the environment
# --------------------------------------------------------------------------------------


@dataclass
class PythonEnv:
    """A Python environment whose packages feed D_d.

    ``origin``: how it was found (``pythonPath``, ``.venv``, ``venv``, ``server``).
    ``key``: the path that identifies it in the cache (the virtualenv folder, else the
    interpreter). ``problems``: what went wrong on the way (for the log / status).
    """

    origin: str
    site_dirs: list[Path]
    python: str | None = None
    prefix: Path | None = None
    version: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return os.path.realpath(str(self.prefix or self.python or (self.site_dirs[0] if self.site_dirs else "")))

    @property
    def key_hash(self) -> str:
        return hashlib.sha256(self.key.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def venv_python(venv: Path) -> Path | None:
    """The interpreter of a virtualenv folder (posix ``bin/python``, Windows
    ``Scripts/python.exe``), or None."""
    for rel in ("bin/python", "bin/python3", "Scripts/python.exe", "python.exe"):
        p = venv / rel
        if p.exists():
            return p
    return None


def interpreter_paths(python: str | os.PathLike[str], timeout: float = INTERPRETER_TIMEOUT_S) -> dict[str, Any]:
    """``{'paths': sysconfig.get_paths(), 'prefix': ..., 'version': ...}`` as the
    interpreter reports them (run isolated: ``-I``, no PYTHON* variables, no user site).

    Raises :class:`FastCoderError` when it is missing, fails, times out or prints junk.
    """
    cmd = [os.fspath(python), "-I", "-c", _PATHS_SCRIPT]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise FastCoderError(f"interpreter {python} does not exist") from exc
    except subprocess.TimeoutExpired as exc:
        raise FastCoderError(f"interpreter {python} did not answer within {timeout:g} s") from exc
    except OSError as exc:
        raise FastCoderError(f"cannot run interpreter {python}: {exc}") from exc
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or "").strip().splitlines()[-2:])
        raise FastCoderError(f"interpreter {python} failed (exit {proc.returncode}): {tail}")
    try:
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        if not isinstance(info.get("paths"), dict):
            raise ValueError("no paths")
    except (ValueError, IndexError, AttributeError) as exc:
        raise FastCoderError(f"interpreter {python} printed no usable paths ({exc})") from exc
    return info


def layout_site_dirs(venv: Path) -> list[Path]:
    """site-packages folders of a virtualenv, found from its layout alone."""
    out = sorted(venv.glob("lib/python*/site-packages")) + sorted(venv.glob("lib64/python*/site-packages"))
    out += [p for p in (venv / "Lib" / "site-packages",) if p.is_dir()]
    seen: list[Path] = []
    for p in out:
        if p.is_dir() and p.resolve() not in {s.resolve() for s in seen}:
            seen.append(p)
    return seen


def _site_dirs_of(info: dict[str, Any]) -> list[Path]:
    out: list[Path] = []
    for key in ("purelib", "platlib"):
        value = info["paths"].get(key)
        if value and Path(value).is_dir() and Path(value).resolve() not in {p.resolve() for p in out}:
            out.append(Path(value))
    return out


def _probe(origin: str, python: Path | None, venv: Path | None, timeout: float) -> PythonEnv:
    """An environment from an interpreter and/or a virtualenv folder; ``site_dirs``
    empty when nothing usable was found (``problems`` says why)."""
    env = PythonEnv(origin=origin, site_dirs=[], python=str(python) if python else None, prefix=venv)
    if python is not None:
        try:
            info = interpreter_paths(python, timeout)
            env.site_dirs = _site_dirs_of(info)
            prefix = info.get("prefix") or venv
            env.prefix = Path(prefix) if prefix else None
            env.version = str(info.get("version", ""))
            if env.site_dirs:
                return env
            env.problems.append(f"interpreter {python} reports no existing site-packages folder")
        except FastCoderError as exc:
            env.problems.append(str(exc))
    elif venv is not None:
        env.problems.append(f"{venv} has no interpreter (bin/python or Scripts/python.exe)")
    if venv is not None:
        dirs = layout_site_dirs(venv)
        if dirs:
            env.site_dirs = dirs
            env.prefix = venv
            env.problems.append(f"using the layout of {venv} instead")
    return env


def find_environment(
    workspace: str | os.PathLike[str] | None,
    python: str | os.PathLike[str] | None = None,
    *,
    timeout: float = INTERPRETER_TIMEOUT_S,
    fallback: str | None = sys.executable,
) -> PythonEnv | None:
    """The environment whose packages feed D_d (see the module doc for the order).

    Parameters:
        workspace: the workspace root (``.venv/`` and ``venv/`` are looked for there).
        python: the configured interpreter, or a virtualenv folder; relative paths are
            taken from the workspace root.
        timeout: seconds the interpreter may take to answer.
        fallback: the last resort (default: the interpreter running this code; None:
            no fallback).

    Returns None only when no candidate gives a site-packages folder. Every problem is
    logged (a warning for a configured interpreter that does not work).
    """
    root = Path(workspace) if workspace is not None else None
    candidates: list[tuple[str, Path | None, Path | None]] = []
    if python:
        p = Path(os.path.expanduser(os.fspath(python)))
        if not p.is_absolute() and root is not None:
            p = root / p
        if p.is_dir():
            candidates.append(("pythonPath", venv_python(p), p))
        else:
            venv = p.parent.parent if (p.parent.parent / "pyvenv.cfg").is_file() else None
            candidates.append(("pythonPath", p, venv))
    if root is not None:
        for name in (".venv", "venv"):
            v = root / name
            if v.is_dir() and ((v / "pyvenv.cfg").is_file() or venv_python(v) is not None):
                candidates.append((name, venv_python(v), v))
    if fallback:
        candidates.append(("server", Path(fallback), None))
    for origin, py, venv in candidates:
        env = _probe(origin, py, venv, timeout)
        level = logging.WARNING if origin == "pythonPath" or not env.site_dirs else logging.INFO
        for problem in env.problems:
            log.log(level, "D_d environment (%s): %s", origin, problem)
        if env.site_dirs:
            log.info("D_d environment: %s (%s), site-packages %s", env.key, origin, ", ".join(map(str, env.site_dirs)))
            return env
    log.warning("D_d: no usable Python environment found; D_d stays empty")
    return None


# --------------------------------------------------------------------------------------
# building D_d
# --------------------------------------------------------------------------------------


def deps_dir(env: PythonEnv, fingerprint: str) -> Path:
    """``cache_root()/deps/<hash of the environment path>-<tokenizer fingerprint>/``."""
    from fastcoder.models import cache_root

    return cache_root() / "deps" / f"{env.key_hash}-{fingerprint}"


@dataclass
class DepsResult:
    """A built or loaded D_d: the searchable store, the environment, the shard report
    (what was rebuilt) and the distributions left out."""

    store: Any  # indexer.shards.ShardedStore
    env: PythonEnv | None
    report: Any = None  # indexer.shards.ShardReport
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def build_deps(
    workspace: str | os.PathLike[str] | None,
    tokenizer: Any,
    *,
    python: str | os.PathLike[str] | None = None,
    fingerprint: str | None = None,
    directory: str | os.PathLike[str] | None = None,
    target_tokens: int | None = None,
    progress: Callable[..., None] | None = None,
    cancel: threading.Event | None = None,
    env: PythonEnv | None = None,
    fallback: str | None = sys.executable,
    merge: bool = True,
) -> DepsResult:
    """Build or update (incrementally) the D_d of a workspace, synchronously.

    Parameters:
        workspace: the workspace root (for ``.venv``/``venv``).
        tokenizer: the model's fast tokenizer.
        python: the configured interpreter or virtualenv (``pythonPath``).
        fingerprint: the tokenizer fingerprint (computed when None).
        directory: where the shards live (default :func:`deps_dir`).
        target_tokens: shard size (default :data:`indexer.shards.TARGET_TOKENS`).
        progress: ``progress(done, total, extra=str)`` while tokenizing.
        cancel: set it to stop between packages (raises FastCoderError).
        env: an environment already found (skips :func:`find_environment`).
        fallback: passed to :func:`find_environment`.
        merge: search one suffix array over all shards (built once per set of shard
            files, see :meth:`indexer.shards.ShardSet.merged`) instead of the shards.

    Returns an empty store (no environment) rather than raising for a broken
    environment; raises :class:`FastCoderError` only when cancelled.
    """
    from fastcoder.models import tokenizer_fingerprint
    from indexer.persist import dir_lock
    from indexer.shards import TARGET_TOKENS, ShardedStore, ShardSet

    t0 = time.perf_counter()
    fp = fingerprint or tokenizer_fingerprint(tokenizer)
    if env is None:
        env = find_environment(workspace, python, fallback=fallback)
    if env is None:
        return DepsResult(ShardedStore([]), None, seconds=time.perf_counter() - t0)
    pkgs, skipped = list_distributions(env.site_dirs)
    folder = Path(directory) if directory is not None else deps_dir(env, fp)
    shard_set = ShardSet(folder, fp, kind="deps", info={"env": env.key, "origin": env.origin, "python": env.python,
                                                        "site_dirs": [str(s) for s in env.site_dirs]})
    with dir_lock(folder):
        store, report = shard_set.update(
            tokenizer, pkgs, target_tokens=target_tokens or TARGET_TOKENS, progress=progress, cancel=cancel
        )
        if merge and len(store.shards) > 1:
            merged = shard_set.merged(store.shards)
            if merged is not None:
                store = ShardedStore([merged])
    res = DepsResult(store, env, report, skipped, time.perf_counter() - t0)
    log.info(
        "D_d: %d packages, %d tokens in %d shards (%d rebuilt, %d packages tokenized) in %.1f s",
        len(pkgs), store.n_tokens, len(store.shards), report.rebuilt_shards, len(report.tokenized), res.seconds,
    )
    return res


class _EmptyUntilReady:
    """A RetrievalSource that answers nothing until the store is set (lock-free reads
    of one attribute; swapping it is atomic)."""

    def __init__(self) -> None:
        self.store: Any = None

    def retrieve(self, context: Sequence[int], **kw: Any) -> Retrieval:
        store = self.store
        if store is None:
            return Retrieval()
        return store.retrieve(context, **kw)

    @property
    def n_tokens(self) -> int:
        store = self.store
        return int(store.n_tokens) if store is not None else 0


class DepsHandle:
    """D_d being built in a background thread.

    ``source``: a RetrievalSource usable at once (empty until the build is done, then
    the ShardedStore). ``future``: resolves to the :class:`DepsResult` (or its
    exception). ``status``: ``"building"``, ``"ready"``, ``"empty"`` (no environment),
    ``"error"`` or ``"cancelled"``; ``message`` says more. ``on_status(status,
    message)`` is called from the build thread.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None,
        tokenizer: Any,
        *,
        python: str | os.PathLike[str] | None = None,
        fingerprint: str | None = None,
        on_status: Callable[[str, str], None] | None = None,
        on_progress: Callable[..., None] | None = None,
        **build_kw: Any,
    ) -> None:
        self.workspace = workspace
        self.tokenizer = tokenizer
        self.python = python
        self.fingerprint = fingerprint
        self.on_status = on_status
        self.on_progress = on_progress
        self.build_kw = build_kw
        self.source = _EmptyUntilReady()
        self.status = "idle"
        self.message = ""
        self.future: Future = Future()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None

    def _set(self, status: str, message: str) -> None:
        self.status, self.message = status, message
        if self.on_status is not None:
            try:
                self.on_status(status, message)
            except Exception:  # noqa: BLE001 - a callback must not kill the build
                log.exception("D_d status callback failed")

    def start(self) -> "DepsHandle":
        """Start the build thread (once) and return self."""
        if self._thread is not None:
            return self
        fut = self.future
        cancel = self._cancel

        def work() -> None:
            lower_thread_priority()
            self._set("building", "indexing the workspace's dependencies")
            try:
                res = build_deps(
                    self.workspace, self.tokenizer, python=self.python, fingerprint=self.fingerprint,
                    progress=self.on_progress, cancel=cancel, **self.build_kw,
                )
            except BaseException as exc:  # noqa: BLE001 - reported through the future
                if cancel.is_set():
                    self._set("cancelled", "D_d build cancelled")
                else:
                    log.error("D_d build failed: %s", exc, exc_info=not isinstance(exc, FastCoderError))
                    self._set("error", f"D_d build failed: {exc}")
                fut.set_exception(exc)
                return
            if cancel.is_set():
                self._set("cancelled", "D_d build cancelled")
                fut.set_exception(FastCoderError("D_d build cancelled"))
                return
            self.source.store = res.store
            if res.env is None:
                self._set("empty", "no Python environment found; D_d is empty")
            else:
                self._set("ready", f"D_d: {res.store.n_tokens:,} tokens from {len(res.store.packages())} packages ({res.env.origin})")
            fut.set_result(res)

        self._thread = threading.Thread(target=work, name="fastcoder-deps", daemon=True)
        self._thread.start()
        return self

    def cancel(self, wait: bool = True) -> None:
        """Stop the build between packages (the store stays as it was)."""
        self._cancel.set()
        if wait and self._thread is not None:
            self._thread.join()

    def restart(self, python: str | os.PathLike[str] | None = None) -> "DepsHandle":
        """A new handle for another configured interpreter; this one is cancelled. The
        old store keeps answering in the new handle's ``source`` until the new build
        is done."""
        self.cancel(wait=False)
        new = DepsHandle(self.workspace, self.tokenizer, python=python, fingerprint=self.fingerprint,
                         on_status=self.on_status, on_progress=self.on_progress, **self.build_kw)
        new.source.store = self.source.store
        return new.start()

    def wait(self, timeout: float | None = None) -> DepsResult:
        """The result (blocks); raises what the build raised."""
        return self.future.result(timeout)


def start_deps(workspace: str | os.PathLike[str] | None, tokenizer: Any, **options: Any) -> DepsHandle:
    """Start building/updating the workspace's D_d in a background thread and return
    its :class:`DepsHandle` at once (see the module doc); ``options`` are the keyword
    arguments of :class:`DepsHandle` (``python``, ``fingerprint``, ``on_status``, ...)."""
    return DepsHandle(workspace, tokenizer, **options).start()


def iter_env_packages(python: str | os.PathLike[str], *, timeout: float = INTERPRETER_TIMEOUT_S) -> Iterator[PackageSource]:
    """The packages of an interpreter's (or virtualenv's) site-packages, for
    ``build-common --from-env``. Raises FastCoderError when it has none."""
    env = find_environment(None, python, timeout=timeout, fallback=None)
    if env is None:
        raise FastCoderError(f"{python}: not a usable Python environment")
    pkgs, _ = list_distributions(env.site_dirs)
    yield from pkgs
