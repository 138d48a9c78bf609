"""Fetching PyPI packages for the common-code datastore D_c.

* :func:`load_top`: the pinned ranking in ``indexer/data/pypi_top.json`` (name, version;
  see its ``comment`` for where the ranking comes from).
* :func:`parse_requirements`: the requirements a ``requirements.txt`` names (``-r``
  includes followed, ``-e``/URL/path/option lines skipped with a log line, environment
  markers evaluated for this interpreter).
* :func:`fetch_packages`: download each requirement with pip (``pip download --no-deps``:
  the wheel for this platform, else the sdist) and extract its ``*.py`` files into a
  cache folder. Everything is kept between runs (``cache_root()/pypi/dists`` for the
  archives, ``cache_root()/pypi/src/<name>-<version>/`` for the sources, with a
  ``.complete`` marker written last), so an interrupted run resumes where it stopped
  and a second build downloads nothing.

Archives are read member by member: only ``*.py`` members are written, and a member
whose path would leave the destination folder is refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Sequence

from fastcoder.errors import FastCoderError

log = logging.getLogger(__name__)

COMPLETE = ".complete"
"""Marker file of a fully extracted package (JSON: name, version, archive, files)."""

PIP_TIMEOUT_S = 600
"""Longest a single ``pip download`` may run."""


def normalize(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Requirement:
    """One thing to download: a project name and a pip version specifier (``==1.2``,
    ``>=2,<3`` or empty for the newest)."""

    name: str
    specifier: str = ""

    @property
    def pip_arg(self) -> str:
        return f"{self.name}{self.specifier}"

    @property
    def pinned(self) -> str | None:
        m = re.fullmatch(r"===?\s*([^,;\s*]+)", self.specifier.strip())
        return m.group(1) if m else None


@dataclass
class FetchedPackage:
    """An extracted package: name and version as the archive says, the folder of its
    ``*.py`` files, which archive they came from (``wheel`` or ``sdist``)."""

    name: str
    version: str
    root: Path
    archive: str = ""
    kind: str = ""


@dataclass
class FetchReport:
    """What :func:`fetch_packages` did."""

    packages: list[FetchedPackage] = field(default_factory=list)
    cached: int = 0
    downloaded: int = 0
    failed: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------------------
# lists of requirements
# --------------------------------------------------------------------------------------


def load_top(path: str | os.PathLike[str] | None = None, n: int | None = None) -> list[Requirement]:
    """The first ``n`` projects (all when None) of the ranking file (default: the
    packaged ``indexer/data/pypi_top.json``), each pinned to its version."""
    try:
        if path is None:
            text = resources.files("indexer").joinpath("data/pypi_top.json").read_text("utf-8")
        else:
            text = Path(path).read_text("utf-8")
        rows = json.loads(text)["projects"]
        reqs = [Requirement(str(r["name"]), f"=={r['version']}") for r in rows]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FastCoderError(f"cannot read the PyPI ranking {path or 'pypi_top.json'}: {exc}") from exc
    if n is not None:
        if n < 1:
            raise FastCoderError("--from-pypi-top needs a positive N")
        if n > len(reqs):
            log.warning("the ranking lists %d projects; using all of them (asked for %d)", len(reqs), n)
        reqs = reqs[:n]
    return reqs


_NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


def parse_requirements(path: str | os.PathLike[str], *, _seen: set[Path] | None = None) -> list[Requirement]:
    """The requirements named by a pip requirements file.

    Handled: comments (``#`` at a line start or after whitespace), line continuations
    (``\\``), extras (dropped: only the named project is wanted), version specifiers,
    environment markers (``; python_version < "3.8"``, evaluated here), ``-r``/
    ``--requirement`` includes (relative to the file, cycles ignored). Skipped with a
    log line: ``-e``/``--editable``, ``-c`` constraints, other options, URLs and local
    paths, ``name @ url`` references. Later duplicates of a name are dropped.

    Raises :class:`FastCoderError` when the file cannot be read.
    """
    path = Path(path)
    seen = _seen if _seen is not None else set()
    real = path.resolve()
    if real in seen:
        return []
    seen.add(real)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise FastCoderError(f"cannot read the requirements file {path}: {exc}") from exc
    text = re.sub(r"\\\r?\n", " ", text)
    out: list[Requirement] = []
    names: set[str] = set()

    def add(req: Requirement) -> None:
        key = normalize(req.name)
        if key not in names:
            names.add(key)
            out.append(req)

    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue
        where = f"{path}:{lineno}"
        if line.startswith(("-r", "--requirement")):
            target = re.sub(r"^(-r|--requirement)\s*=?\s*", "", line)
            for req in parse_requirements(path.parent / target, _seen=seen):
                add(req)
            continue
        if line.startswith("-"):
            log.info("%s: skipping %r (an option, an editable or a constraints file)", where, line)
            continue
        if "://" in line or line.startswith((".", "/", "~")) or " @ " in line or re.match(r"^[^;]*@", line):
            log.info("%s: skipping %r (a URL or a local path, not a PyPI project)", where, line)
            continue
        req_part, _, marker = line.partition(";")
        if marker.strip() and not _marker_holds(marker.strip(), where):
            continue
        m = _NAME_RE.match(req_part)
        if not m:
            log.warning("%s: cannot parse %r; skipped", where, line)
            continue
        name, spec = m.group(1), re.sub(r"\s+", "", m.group(3))
        if spec and not re.fullmatch(r"((===?|~=|!=|<=|>=|<|>)[A-Za-z0-9.*+!_-]+,?)+", spec):
            log.warning("%s: cannot parse the version specifier %r of %s; using the newest release", where, spec, name)
            spec = ""
        add(Requirement(name, spec.rstrip(",")))
    return out


def _marker_holds(marker: str, where: str) -> bool:
    try:
        from packaging.markers import InvalidMarker, Marker
    except ImportError:  # pragma: no cover - packaging ships with pip/setuptools
        return True
    try:
        return bool(Marker(marker).evaluate())
    except InvalidMarker:
        log.warning("%s: invalid environment marker %r; keeping the requirement", where, marker)
        return True


# --------------------------------------------------------------------------------------
# downloading and extracting
# --------------------------------------------------------------------------------------


def pypi_cache() -> Path:
    """``cache_root()/pypi``."""
    from fastcoder.models import cache_root

    return cache_root() / "pypi"


_WHEEL_RE = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_SDIST_RE = re.compile(r"^(?P<name>.+?)-(?P<version>\d[^-]*?)\.(tar\.gz|tgz|tar\.bz2|zip)$")


def archive_name_version(filename: str) -> tuple[str, str, str] | None:
    """(normalized name, version, kind) parsed from a wheel or sdist file name."""
    m = _WHEEL_RE.match(filename)
    if m:
        return normalize(m.group("name")), m.group("version"), "wheel"
    m = _SDIST_RE.match(filename)
    if m:
        return normalize(m.group("name")), m.group("version"), "sdist"
    return None


def _pip_download(req: Requirement, dest: Path, binary: bool) -> tuple[bool, str]:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
           "-d", str(dest), req.pip_arg]
    cmd[4:4] = ["--only-binary", ":all:"] if binary else ["--no-binary", ":all:"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"pip download timed out after {PIP_TIMEOUT_S} s"
    except OSError as exc:
        return False, str(exc)
    tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
    return proc.returncode == 0, tail


def _archives_in(folder: Path, name: str) -> list[Path]:
    key = normalize(name)
    out = []
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        parsed = archive_name_version(p.name)
        if parsed is not None and parsed[0] == key:
            out.append(p)
    return out


def _safe_member(name: str) -> PurePosixPath | None:
    p = PurePosixPath(name.replace("\\", "/"))
    if p.is_absolute() or any(part in ("..", "") for part in p.parts) or not p.parts:
        return None
    return p


def _wheel_target(p: PurePosixPath) -> PurePosixPath | None:
    """Where a wheel member lands in an installed tree: ``X.data/purelib|platlib/...``
    unpacks to site-packages itself; other ``.data`` members (scripts, headers) and the
    ``.dist-info`` folder are not code to index."""
    first = p.parts[0]
    if first.endswith(".dist-info"):
        return None
    if first.endswith(".data"):
        if len(p.parts) > 2 and p.parts[1] in ("purelib", "platlib"):
            return PurePosixPath(*p.parts[2:])
        return None
    return p


def extract_py(archive: Path, dest: Path) -> int:
    """Write the ``*.py`` members of a wheel or sdist under ``dest`` (created); the
    sdist's single top folder is stripped. Returns the number of files written.

    Raises :class:`FastCoderError` for an unreadable archive or a member that escapes.
    """
    dest.mkdir(parents=True, exist_ok=True)
    written = 0
    kind = "wheel" if archive.name.endswith(".whl") else "sdist"

    def target_of(name: str, strip_top: bool) -> Path | None:
        p = _safe_member(name)
        if p is None:
            raise FastCoderError(f"{archive}: member {name!r} escapes the archive")
        if not p.name.endswith(".py"):
            return None
        if strip_top:
            if len(p.parts) < 2:
                return None
            p = PurePosixPath(*p.parts[1:])
        elif kind == "wheel":
            p = _wheel_target(p)
            if p is None:
                return None
        return dest.joinpath(*p.parts)

    try:
        if archive.name.endswith((".whl", ".zip")):
            with zipfile.ZipFile(archive) as zf:
                infos = [i for i in zf.infolist() if not i.is_dir()]
                strip = kind == "sdist" and len({PurePosixPath(i.filename).parts[0] for i in infos}) == 1
                for info in infos:
                    target = target_of(info.filename, strip)
                    if target is None:
                        continue
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as src, open(target, "wb") as out:
                        shutil.copyfileobj(src, out)
                    written += 1
        else:
            with tarfile.open(archive) as tf:
                members = [m for m in tf.getmembers() if m.isfile()]
                strip = len({PurePosixPath(m.name).parts[0] for m in members if m.name}) == 1
                for m in members:
                    target = target_of(m.name, strip)
                    if target is None:
                        continue
                    src = tf.extractfile(m)
                    if src is None:
                        continue
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with src, open(target, "wb") as out:
                        shutil.copyfileobj(src, out)
                    written += 1
    except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise FastCoderError(f"cannot read {archive}: {exc}") from exc
    return written


def _cached_src(src_root: Path, req: Requirement) -> FetchedPackage | None:
    version = req.pinned
    if version is None:
        return None
    folder = src_root / f"{normalize(req.name)}-{version}"
    return _read_complete(folder)


def _read_complete(folder: Path) -> FetchedPackage | None:
    try:
        info = json.loads((folder / COMPLETE).read_text())
        return FetchedPackage(info["name"], info["version"], folder, info.get("archive", ""), info.get("kind", ""))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def fetch_one(req: Requirement, cache: Path | None = None) -> tuple[FetchedPackage, bool]:
    """Download (once) and extract (once) one requirement: (package, was it cached).

    Raises :class:`FastCoderError` when neither a wheel nor an sdist can be had.
    """
    cache = cache or pypi_cache()
    src_root = cache / "src"
    hit = _cached_src(src_root, req)
    if hit is not None:
        return hit, True
    key = hashlib.sha256(req.pip_arg.encode()).hexdigest()[:12]
    dl = cache / "dists" / f"{normalize(req.name)}-{key}"
    archives = _archives_in(dl, req.name)
    if not archives:
        dl.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dl, prefix=".dl-") as tmp:
            ok, why = _pip_download(req, Path(tmp), binary=True)
            if not ok:
                log.info("%s: no wheel for this platform (%s); trying the sdist", req.pip_arg, why)
                ok, why2 = _pip_download(req, Path(tmp), binary=False)
                if not ok:
                    raise FastCoderError(f"cannot download {req.pip_arg}: {why2 or why}")
            for p in Path(tmp).iterdir():
                os.replace(p, dl / p.name)
        archives = _archives_in(dl, req.name)
        if not archives:
            raise FastCoderError(f"pip downloaded no archive for {req.pip_arg}")
    archive = next((a for a in archives if a.name.endswith(".whl")), archives[0])
    name, version, kind = archive_name_version(archive.name)  # type: ignore[misc]
    folder = src_root / f"{normalize(req.name)}-{version}"
    done = _read_complete(folder)
    if done is not None:
        return done, True
    tmp_dir = Path(tempfile.mkdtemp(dir=src_root if src_root.is_dir() else _mk(src_root), prefix=".x-"))
    try:
        n = extract_py(archive, tmp_dir)
        info = {"name": req.name, "version": version, "archive": archive.name, "kind": kind, "files": n}
        (tmp_dir / COMPLETE).write_text(json.dumps(info))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp_dir, folder)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return FetchedPackage(req.name, version, folder, archive.name, kind), False


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def fetch_packages(
    reqs: Sequence[Requirement],
    *,
    cache: Path | None = None,
    jobs: int = 4,
    progress: Callable[..., None] | None = None,
    strict: bool = False,
) -> FetchReport:
    """Download and extract ``reqs`` (``jobs`` pip processes at once; the work is
    network-bound). A requirement that fails is logged and left out (``strict``: raise
    instead). Packages come back in the order of ``reqs``.
    """
    cache = cache or pypi_cache()
    report = FetchReport()
    results: dict[int, FetchedPackage] = {}
    done = 0

    def one(i: int) -> tuple[int, FetchedPackage | None, bool, str]:
        try:
            pkg, cached = fetch_one(reqs[i], cache)
            return i, pkg, cached, ""
        except FastCoderError as exc:
            return i, None, False, str(exc)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for i, pkg, cached, err in pool.map(one, range(len(reqs))):
            done += 1
            if pkg is None:
                report.failed[reqs[i].pip_arg] = err
                log.warning("%s", err)
                if strict:
                    raise FastCoderError(err)
            else:
                results[i] = pkg
                if cached:
                    report.cached += 1
                else:
                    report.downloaded += 1
            if progress is not None:
                progress(done, len(reqs), extra=f"{report.downloaded} downloaded, {report.cached} cached, {len(report.failed)} failed")
    report.packages = [results[i] for i in sorted(results)]
    return report


def exclude(reqs: Iterable[Requirement], names: Iterable[str]) -> list[Requirement]:
    """``reqs`` without the projects named (normalized comparison)."""
    drop = {normalize(n) for n in names}
    return [r for r in reqs if normalize(r.name) not in drop]


def describe(pkgs: Sequence[FetchedPackage]) -> list[dict[str, Any]]:
    return [{"name": p.name, "version": p.version, "archive": p.archive, "kind": p.kind} for p in pkgs]
