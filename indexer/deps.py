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

**What is read** (:func:`list_distributions`, :func:`keep_path`, :func:`read_package`):
every ``*.dist-info`` (its ``METADATA`` name and version, its ``RECORD`` file list;
``*.egg-info`` with ``installed-files.txt`` or ``top_level.txt`` too), and of each
distribution's files only ``*.py``, without

* tests: ``test/``, ``tests/`` folders, ``test_*.py``, ``*_test.py``, ``conftest.py``;
* vendored copies: ``_vendor/``, ``vendor/``, ``vendored/``, ``_vendored/``,
  ``_distutils/`` (setuptools' copy of the stdlib's distutils) — the same code is
  usually installed in its own right, and it would count twice;
* generated files: over 1 MiB, or with a line over 2,000 characters (tables, minified
  data), or not UTF-8;
* :data:`SKIP_DISTRIBUTIONS`: ``pip``, ``setuptools`` (with ``pkg_resources`` and
  ``_distutils_hack``), ``wheel``, ``distribute``: installer tooling that is in every
  virtualenv and that projects rarely import; about half of it is vendored code;
* editable installs (``direct_url.json`` says ``editable``): that is the workspace's
  own code, which D_r already holds.

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

import csv
import hashlib
import io
import json
import logging
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Iterator, Sequence

from fastcoder.datastore import Retrieval
from fastcoder.errors import FastCoderError

log = logging.getLogger(__name__)

INTERPRETER_TIMEOUT_S = 10.0
"""How long the workspace's interpreter may take to print its paths."""

MAX_FILE_BYTES = 1 << 20
"""Larger ``.py`` files are generated (tables, bindings) and left out."""

MAX_LINE_CHARS = 2000
"""A ``.py`` file with a longer line is generated or minified and left out."""

SKIP_DISTRIBUTIONS = frozenset({"pip", "setuptools", "wheel", "distribute"})
"""Distributions (normalized names) never read: installer tooling, see the module doc."""

SKIP_TOP_LEVEL = frozenset({"_distutils_hack", "pkg_resources", "__editable__", "__pycache__"})
"""Top-level names never read, whoever owns them."""

SKIP_DIRS = frozenset(
    {"test", "tests", "_vendor", "vendor", "vendored", "_vendored", "_distutils", "__pycache__", "site-packages", "node_modules"}
)
"""Folder names left out anywhere in a package (tests and vendored copies)."""

_PATHS_SCRIPT = (
    "import json, sys, sysconfig; "
    "print(json.dumps({'paths': sysconfig.get_paths(), 'prefix': sys.prefix, "
    "'version': '%d.%d.%d' % sys.version_info[:3]}))"
)


def normalize(name: str) -> str:
    """PEP 503 normalized distribution name."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


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
# distributions and their files
# --------------------------------------------------------------------------------------


@dataclass
class PackageSource:
    """One package's ``*.py`` files: (absolute path, path shown in provenance) pairs."""

    name: str
    version: str
    files: list[tuple[Path, str]] = field(default_factory=list)
    origin: str = ""

    @property
    def key(self) -> str:
        return normalize(self.name)

    def source_bytes(self) -> int:
        total = 0
        for p, _ in self.files:
            try:
                total += p.stat().st_size
            except OSError:
                pass
        return total


def keep_path(rel: str) -> bool:
    """Whether a package-relative posix path is worth reading (see the module doc)."""
    p = PurePosixPath(rel)
    if p.suffix != ".py" or not p.parts:
        return False
    if p.parts[0] in SKIP_TOP_LEVEL or p.parts[0].startswith("__editable__"):
        return False
    if any(part in SKIP_DIRS or part.endswith((".dist-info", ".egg-info")) for part in p.parts[:-1]):
        return False
    name = p.name
    if name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py":
        return False
    return True


def _metadata(meta_dir: Path) -> tuple[str, str] | None:
    for fname in ("METADATA", "PKG-INFO"):
        try:
            text = (meta_dir / fname).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        name = version = ""
        for line in text.splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            if key.lower() == "name" and not name:
                name = value.strip()
            elif key.lower() == "version" and not version:
                version = value.strip()
        if name:
            return name, version or "0"
    return None


def _editable(meta_dir: Path) -> bool:
    try:
        info = json.loads((meta_dir / "direct_url.json").read_text())
        return bool(info.get("dir_info", {}).get("editable"))
    except (OSError, ValueError, AttributeError):
        return False


def _record_files(meta_dir: Path) -> list[str] | None:
    """Site-relative posix paths listed by RECORD / installed-files.txt, or None."""
    rec = meta_dir / "RECORD"
    if rec.is_file():
        try:
            rows = csv.reader(io.StringIO(rec.read_text(encoding="utf-8", errors="replace")))
            return [row[0].replace("\\", "/") for row in rows if row]
        except (OSError, csv.Error):
            return None
    inst = meta_dir / "installed-files.txt"  # legacy egg-info, relative to the egg-info dir
    if inst.is_file():
        try:
            out = []
            for line in inst.read_text(encoding="utf-8", errors="replace").splitlines():
                p = os.path.normpath(os.path.join(meta_dir.name, line.strip())).replace("\\", "/")
                if line.strip():
                    out.append(p)
            return out
        except OSError:
            return None
    return None


def _top_level_files(site: Path, meta_dir: Path) -> list[str]:
    try:
        tops = [t.strip() for t in (meta_dir / "top_level.txt").read_text().splitlines() if t.strip()]
    except OSError:
        return []
    out: list[str] = []
    for top in tops:
        if (site / f"{top}.py").is_file():
            out.append(f"{top}.py")
        d = site / top
        if d.is_dir() and not d.is_symlink():
            for dirpath, dirnames, filenames in os.walk(d):
                dirnames[:] = sorted(n for n in dirnames if n not in SKIP_DIRS)
                for f in sorted(filenames):
                    if f.endswith(".py"):
                        out.append((Path(dirpath) / f).relative_to(site).as_posix())
    return out


def list_distributions(site_dirs: Sequence[Path], *, skip: Iterable[str] = SKIP_DISTRIBUTIONS) -> tuple[list[PackageSource], dict[str, str]]:
    """The installed distributions of ``site_dirs`` (earlier folders win on a name
    clash) with their readable ``*.py`` files, sorted by name; and the distributions
    left out, with the reason."""
    skip_set = {normalize(s) for s in skip}
    found: dict[str, PackageSource] = {}
    skipped: dict[str, str] = {}
    for site in site_dirs:
        try:
            entries = sorted(os.listdir(site))
        except OSError as exc:
            log.warning("cannot list %s: %s", site, exc)
            continue
        for entry in entries:
            if not entry.endswith((".dist-info", ".egg-info")):
                continue
            meta_dir = site / entry
            if not meta_dir.is_dir():
                continue
            nv = _metadata(meta_dir)
            if nv is None:
                skipped[entry] = "no METADATA"
                continue
            name, version = nv
            key = normalize(name)
            if key in found or key in skipped:
                continue
            if key in skip_set:
                skipped[key] = "installer tooling (SKIP_DISTRIBUTIONS)"
                continue
            if _editable(meta_dir):
                skipped[key] = "editable install (the workspace's own code, in D_r)"
                continue
            rels = _record_files(meta_dir)
            if rels is None:
                rels = _top_level_files(site, meta_dir)
            files = []
            for rel in sorted(set(rels)):
                if rel.startswith("../") or not keep_path(rel):
                    continue
                path = site / rel
                if path.is_file():
                    files.append((path, rel))
            pkg = PackageSource(name, version, files, origin=str(site))
            if not files:
                skipped[key] = "no Python source"
                continue
            found[key] = pkg
    return [found[k] for k in sorted(found)], skipped


def package_from_tree(name: str, version: str, root: Path) -> PackageSource:
    """A package whose files are a folder tree (an extracted wheel or sdist)."""
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(n for n in dirnames if n not in SKIP_DIRS and not n.startswith(".") and n not in ("docs", "doc"))
        for f in sorted(filenames):
            p = Path(dirpath) / f
            rel = p.relative_to(root).as_posix()
            if keep_path(rel) and not p.is_symlink():
                files.append((p, rel))
    return PackageSource(name, version, files, origin=str(root))


def read_text(path: Path) -> str | None:
    """A ``.py`` file's text, or None when it is unreadable, binary, not UTF-8, over
    :data:`MAX_FILE_BYTES` or has a line over :data:`MAX_LINE_CHARS`."""
    from indexer.scan import read_source

    src = read_source(path, MAX_FILE_BYTES)
    if src is None or not src.text.strip():
        return None
    text = src.text
    if len(text) > MAX_LINE_CHARS and max((len(line) for line in text.splitlines()), default=0) > MAX_LINE_CHARS:
        return None
    return text


def read_package(pkg: PackageSource) -> list[tuple[str, str]]:
    """(provenance path, text) of the package's readable files."""
    out = []
    for path, rel in pkg.files:
        text = read_text(path)
        if text is not None:
            out.append((rel, text))
    return out


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


def start_deps(
    workspace: str | os.PathLike[str] | None,
    tokenizer: Any,
    *,
    python: str | os.PathLike[str] | None = None,
    fingerprint: str | None = None,
    on_status: Callable[[str, str], None] | None = None,
    on_progress: Callable[..., None] | None = None,
    **build_kw: Any,
) -> DepsHandle:
    """Start building/updating the workspace's D_d in a background thread and return
    its :class:`DepsHandle` at once (see the module doc)."""
    return DepsHandle(workspace, tokenizer, python=python, fingerprint=fingerprint, on_status=on_status,
                      on_progress=on_progress, **build_kw).start()


def iter_env_packages(python: str | os.PathLike[str], *, timeout: float = INTERPRETER_TIMEOUT_S) -> Iterator[PackageSource]:
    """The packages of an interpreter's (or virtualenv's) site-packages, for
    ``build-common --from-env``. Raises FastCoderError when it has none."""
    env = find_environment(None, python, timeout=timeout, fallback=None)
    if env is None:
        raise FastCoderError(f"{python}: not a usable Python environment")
    pkgs, _ = list_distributions(env.site_dirs)
    yield from pkgs
