"""Python distributions on disk: their names, their files, and reading their sources.

Shared by D_d (:mod:`indexer.deps`, the installed packages of an environment), the
package D_c builders (:mod:`indexer.common`, :mod:`indexer.pypi`) and the per-package
shards (:mod:`indexer.shards`).

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
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterable, Sequence

log = logging.getLogger(__name__)

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


def normalize(name: str) -> str:
    """PEP 503 normalized distribution name."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


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
