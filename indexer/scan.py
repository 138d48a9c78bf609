"""Workspace scan: which files of a workspace go into the repository datastore D_r.

A file is indexed when all of these hold:

* no directory on its way from the root is excluded: a default-excluded name
  (:data:`EXCLUDED_DIRS`: ``.git``, virtualenvs, ``node_modules``, ``build``, caches ...),
  a directory holding a ``pyvenv.cfg`` (any virtualenv), or a directory ignored by a
  ``.gitignore`` / ``.fastcoderignore`` (nested ones included, with git's semantics:
  the deepest file that has a matching pattern decides, ``!`` re-includes, and
  nothing inside an ignored directory comes back);
* the file itself is not ignored by those files, nor by ``.git/info/exclude``;
* its name is not a secret (:data:`SECRET_PATTERNS`: ``.env*``, ``*.pem``, ``id_rsa*`` ...);
* its extension (or its whole name, e.g. ``Makefile``) is a source/text type;
* it is a regular file (symlinks are not followed), at most ``max_bytes`` large,
  without a NUL byte in its first 8 KiB and valid UTF-8 (the last two are checked
  when it is read: :func:`read_source`).

Nothing here raises for a bad file or directory: unreadable directories, files that
vanish mid-scan, permission errors and undecodable files are skipped with a log line.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from pathspec import GitIgnoreSpec

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 1 << 20
"""Files larger than this (1 MiB) are not indexed: generated or data files."""

BINARY_SNIFF_BYTES = 8192
"""A NUL byte within this many leading bytes marks a file as binary."""

IGNORE_FILES = (".gitignore", ".fastcoderignore")
"""Per-directory ignore files, read with gitignore semantics."""

EXCLUDED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", ".jj",
        ".venv", "venv", ".virtualenv", "virtualenv", ".conda",
        "node_modules", "bower_components",
        "build", "dist", "__pycache__", ".eggs",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".pytype", ".hypothesis",
        ".tox", ".nox", ".cache", ".gradle", ".next", ".nuxt", ".parcel-cache",
        ".idea", ".ipynb_checkpoints", ".terraform", ".direnv",
    }
)
"""Directory names never descended into."""

EXCLUDED_DIR_SUFFIXES = (".egg-info", ".dist-info")

SECRET_PATTERNS = (
    ".env*", "*.pem", "*.key", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    "*.p12", "*.pfx", "credentials*", ".netrc", ".pgpass", "*.keystore", "*.jks",
)
"""File-name patterns (case-insensitive) that may hold secrets: never read."""

SOURCE_EXTENSIONS = frozenset(
    """
    py pyi pyx pxd js mjs cjs ts mts cts tsx jsx vue svelte go rs java kt kts scala sc
    groovy gradle swift m mm c h cc cpp cxx hpp hh hxx inl cs fs fsx vb rb php pl pm lua
    r jl dart ex exs erl hrl hs ml mli clj cljs elm nim zig v sol
    sh bash zsh fish ps1 bat cmd
    toml yaml yml json jsonc json5 ini cfg conf properties xml proto graphql gql
    md markdown rst txt adoc tex sql html htm css scss sass less tf hcl cmake mk
    """.split()
)
"""Extensions (lower case, without the dot) of the files worth indexing."""

SOURCE_FILENAMES = frozenset(
    {"Makefile", "makefile", "GNUmakefile", "Dockerfile", "Containerfile", "Jenkinsfile",
     "Rakefile", "Gemfile", "Vagrantfile", "Justfile", "justfile", "CMakeLists.txt"}
)
"""Whole file names without a useful extension that are still source."""


# --------------------------------------------------------------------------------------
# reading one file
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceText:
    """The decoded text of one file and what identifies that version of it.

    ``sha256``: hex digest of the raw bytes; ``size``: bytes; ``mtime_ns``: modification
    time of the file when it was read (-1 for text that did not come from disk).
    """

    text: str
    sha256: str
    size: int
    mtime_ns: int

    @classmethod
    def of_buffer(cls, text: str) -> "SourceText":
        """An editor buffer's text: not from disk (``mtime_ns`` -1)."""
        return cls(text, sha256_text(text), len(text.encode("utf-8", "surrogatepass")), -1)


def sha256_text(text: str) -> str:
    """The sha256 of ``text`` encoded as UTF-8 (used for editor buffers)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def read_source(path: str | os.PathLike[str], max_bytes: int = MAX_FILE_BYTES) -> SourceText | None:
    """Read ``path`` as UTF-8 source text, or None (with a log line) when it cannot or
    should not be indexed: gone, unreadable, a directory, over ``max_bytes``, binary
    (a NUL byte in the first 8 KiB) or not valid UTF-8. Never raises ``OSError``.

    Parameters:
        path: the file.
        max_bytes: the largest size accepted.
    """
    try:
        # O_NONBLOCK: opening a FIFO must not hang; fstat then rejects anything irregular
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with open(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            if st.st_size > max_bytes:
                log.debug("skipping %s: %d bytes is over the %d byte limit", path, st.st_size, max_bytes)
                return None
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        return None
    except (PermissionError, IsADirectoryError) as exc:
        log.info("skipping %s: %s", path, exc.strerror or exc)
        return None
    except OSError as exc:
        log.info("skipping %s: cannot read it (%s)", path, exc)
        return None
    if len(data) > max_bytes:
        log.debug("skipping %s: grew over the %d byte limit", path, max_bytes)
        return None
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        log.debug("skipping %s: binary", path)
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        log.info("skipping %s: not UTF-8 (%s)", path, exc.reason)
        return None
    if text.startswith("\ufeff"):
        text = text[1:]
    return SourceText(text, hashlib.sha256(data).hexdigest(), len(data), st.st_mtime_ns)


# --------------------------------------------------------------------------------------
# the filter
# --------------------------------------------------------------------------------------


def is_secret_name(name: str) -> bool:
    """True when a file name matches one of :data:`SECRET_PATTERNS`."""
    low = name.lower()
    return any(fnmatch.fnmatchcase(low, pat) for pat in SECRET_PATTERNS)


def is_source_name(name: str, extensions: frozenset[str] = SOURCE_EXTENSIONS) -> bool:
    """True when a file name has a source/text extension or is a known source name."""
    if name in SOURCE_FILENAMES:
        return True
    _, dot, ext = name.rpartition(".")
    return bool(dot) and ext.lower() in extensions


def _read_lines(path: Path) -> list[str] | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.info("cannot read ignore file %s: %s", path, exc)
        return None


class WorkspaceFilter:
    """Decides which paths under one workspace root are indexed.

    Ignore files are parsed lazily and cached per directory; call :meth:`invalidate`
    when one changes (the watcher does). Thread-safe enough for one writer: the cache
    only ever gains entries, and an invalidation replaces it whole.

    Parameters:
        root: the workspace root (made absolute; symlinks in it resolved).
        max_bytes: the largest file indexed.
        extensions: indexed extensions, lower case without the dot.
        extra_excludes: additional gitignore-style patterns relative to the root.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_bytes: int = MAX_FILE_BYTES,
        extensions: frozenset[str] = SOURCE_EXTENSIONS,
        extra_excludes: tuple[str, ...] = (),
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.max_bytes = max_bytes
        self.extensions = extensions
        self.extra_excludes = tuple(extra_excludes)
        self._specs: dict[Path, GitIgnoreSpec | None] = {}
        self._dir_ok: dict[Path, bool] = {}

    # ---------------------------------------------------------------- ignore files
    def invalidate(self) -> None:
        """Forget parsed ignore files and directory verdicts (an ignore file changed)."""
        self._specs = {}
        self._dir_ok = {}

    def _spec(self, directory: Path) -> GitIgnoreSpec | None:
        specs = self._specs
        if directory in specs:
            return specs[directory]
        lines: list[str] = []
        if directory == self.root:
            lines.extend(self.extra_excludes)
            lines.extend(_read_lines(directory / ".git" / "info" / "exclude") or [])
        for name in IGNORE_FILES:
            lines.extend(_read_lines(directory / name) or [])
        spec: GitIgnoreSpec | None = None
        if any(line.strip() and not line.lstrip().startswith("#") for line in lines):
            try:
                spec = GitIgnoreSpec.from_lines(lines)
            except Exception as exc:  # a malformed pattern must not stop indexing
                log.warning("ignoring malformed ignore patterns in %s: %s", directory, exc)
        specs[directory] = spec
        return spec

    def _ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether the ignore files of ``path``'s ancestors ignore it (deepest decides)."""
        chain: list[Path] = []
        directory = path.parent
        while True:
            chain.append(directory)
            if directory == self.root or directory == directory.parent:
                break
            directory = directory.parent
        if chain[-1] != self.root:
            return False  # outside the workspace: no ignore file applies
        verdict = False
        for directory in reversed(chain):
            spec = self._spec(directory)
            if spec is None:
                continue
            rel = path.relative_to(directory).as_posix() + ("/" if is_dir else "")
            result = spec.check_file(rel)
            if result.include is not None:
                verdict = bool(result.include)
        return verdict

    # ---------------------------------------------------------------- verdicts
    def relpath(self, path: str | os.PathLike[str]) -> str | None:
        """``path`` relative to the root (posix), or None when it is outside it."""
        p = Path(os.path.abspath(path))
        try:
            rel = p.relative_to(self.root)
        except ValueError:
            return None
        return rel.as_posix()

    def dir_excluded_by_name(self, directory: Path) -> bool:
        """Default exclusions of a directory: its name, or a ``pyvenv.cfg`` inside."""
        name = directory.name
        if name in EXCLUDED_DIRS or name.endswith(EXCLUDED_DIR_SUFFIXES):
            return True
        try:
            return (directory / "pyvenv.cfg").is_file()
        except OSError:
            return False

    def dir_allowed(self, directory: str | os.PathLike[str]) -> bool:
        """Whether files below ``directory`` may be indexed (it and every ancestor up to
        the root are neither default-excluded nor ignored). Cached."""
        d = Path(os.path.abspath(directory))
        if d == self.root:
            return True
        cached = self._dir_ok.get(d)
        if cached is not None:
            return cached
        if not d.is_relative_to(self.root):
            ok = False
        else:
            ok = self.dir_allowed(d.parent) and not self.dir_excluded_by_name(d) and not self._ignored(d, True)
        self._dir_ok[d] = ok
        return ok

    def file_allowed(self, path: str | os.PathLike[str], *, check_dirs: bool = True) -> bool:
        """Whether the file at ``path`` is one to index, judged by its name and place
        (not by its content; see :func:`read_source`).

        Parameters:
            path: an absolute path (or relative to the current directory).
            check_dirs: also check the ancestors (False when a walk already did).
        """
        p = Path(os.path.abspath(path))
        name = p.name
        if not is_source_name(name, self.extensions) or is_secret_name(name):
            return False
        if check_dirs and not self.dir_allowed(p.parent):
            return False
        return not self._ignored(p, False)

    # ---------------------------------------------------------------- the walk
    def walk(self, start: str | os.PathLike[str] | None = None) -> Iterator["ScannedFile"]:
        """All indexable files under ``start`` (default: the root), sorted per directory.

        Symlinks are never followed, and every directory is visited once by its
        (device, inode), so links and bind-mount loops terminate. Errors are logged and
        skipped; nothing raises.
        """
        top = Path(os.path.abspath(start)) if start is not None else self.root
        if not self.dir_allowed(top):
            return
        seen: set[tuple[int, int]] = set()
        stack = [top]
        while stack:
            directory = stack.pop()
            try:
                st = os.stat(directory, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                with os.scandir(directory) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.info("skipping directory %s: %s", directory, exc.strerror or exc)
                continue
            subdirs: list[Path] = []
            for entry in entries:
                try:
                    if entry.is_symlink():
                        continue
                    path = Path(entry.path)
                    if entry.is_dir(follow_symlinks=False):
                        if not self.dir_excluded_by_name(path) and not self._ignored(path, True):
                            self._dir_ok[path] = True
                            subdirs.append(path)
                        else:
                            self._dir_ok[path] = False
                        continue
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    if not self.file_allowed(path, check_dirs=False):
                        continue
                    fst = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    log.info("skipping %s: %s", entry.path, exc.strerror or exc)
                    continue
                if fst.st_size > self.max_bytes:
                    log.debug("skipping %s: %d bytes", entry.path, fst.st_size)
                    continue
                yield ScannedFile(path, path.relative_to(self.root).as_posix(), fst.st_size, fst.st_mtime_ns)
            stack.extend(reversed(subdirs))


@dataclass(frozen=True)
class ScannedFile:
    """One file found by a scan: absolute ``path``, ``relpath`` (posix, from the root),
    ``size`` in bytes and ``mtime_ns`` at the time of the scan."""

    path: Path
    relpath: str
    size: int
    mtime_ns: int


def scan_workspace(root: str | os.PathLike[str], **filter_options) -> list[ScannedFile]:
    """Every indexable file under ``root``; ``filter_options`` go to :class:`WorkspaceFilter`."""
    return list(WorkspaceFilter(root, **filter_options).walk())
