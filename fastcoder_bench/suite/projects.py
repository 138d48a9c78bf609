"""The repository suite's projects: a pinned list of pure-Python PyPI projects,
fetched as source distributions and unpacked under ``cache_root()/bench/``.

``pip download --no-deps --no-binary :all: NAME==VERSION`` is the ordinary client for
the registry; the archive is unpacked once (``tarfile`` with the ``data`` filter, so a
malicious archive cannot write outside its folder) and reused.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fastcoder.errors import FastCoderError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    kind: str = ""

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


def load_projects(path: str | os.PathLike[str] | None = None) -> tuple[list[Project], int]:
    """The pinned project list (default: the packaged ``data/repo_projects.json``) and
    its seed."""
    try:
        if path is None:
            text = resources.files("fastcoder_bench.suite").joinpath("data/repo_projects.json").read_text("utf-8")
        else:
            text = Path(path).read_text("utf-8")
        data: dict[str, Any] = json.loads(text)
        projects = [Project(p["name"], str(p["version"]), p.get("kind", "")) for p in data["projects"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FastCoderError(f"cannot read the project list {path or 'repo_projects.json'}: {exc}") from exc
    if not projects:
        raise FastCoderError("the project list is empty")
    return projects, int(data.get("seed", 0))


def bench_cache() -> Path:
    from fastcoder.models import cache_root

    return cache_root() / "bench"


def _archive_in(folder: Path, project: Project) -> Path | None:
    norm = project.name.lower().replace("-", "_").replace(".", "_")
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        stem = p.name.lower().replace("-", "_").replace(".", "_")
        if stem.startswith(f"{norm}_{project.version.replace('.', '_')}") and p.name.endswith((".tar.gz", ".zip", ".tgz")):
            return p
    return None


def _download(project: Project, folder: Path) -> Path:
    found = _archive_in(folder, project)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".dl-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "-q", project.requirement, "-d", tmp]
        log.info("fetching %s (sdist)", project.requirement)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        got = _archive_in(Path(tmp), project)
        if proc.returncode != 0 or got is None:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise FastCoderError(f"could not download the sdist of {project.requirement}: " + " | ".join(tail))
        final = folder / got.name
        os.replace(got, final)
    return final


def _unpack(archive: Path, dest: Path) -> None:
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".unpack-"))
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                for member in zf.namelist():
                    target = (tmp / member).resolve()
                    if not target.is_relative_to(tmp.resolve()):
                        raise FastCoderError(f"{archive}: member {member!r} escapes the archive")
                zf.extractall(tmp)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(tmp, filter="data")
        entries = list(tmp.iterdir())
        root = entries[0] if len(entries) == 1 and entries[0].is_dir() else tmp
        os.replace(root, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fetch_project(project: Project, cache: Path | None = None) -> Path:
    """The unpacked source tree of ``project`` (downloaded and unpacked once)."""
    cache = cache or bench_cache()
    dest = cache / "src" / project.key
    if dest.is_dir():
        return dest
    archive = _download(project, cache / "sdists")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        _unpack(archive, dest)
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise FastCoderError(f"cannot unpack {archive}: {exc}") from exc
    return dest
