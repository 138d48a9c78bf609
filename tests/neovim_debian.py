"""Newer Neovim releases for the client tests, unpacked from Debian's own packages.

This machine's Debian (bookworm) ships Neovim 0.7.2; the plugin also runs on 0.10 (inline
virtual text) and 0.12 (native LSP inline completion, ``vim.lsp.inline_completion``), which
Debian ships in trixie (0.10) and forky / sid (0.12). They need a newer C library than
bookworm's, so they are not installed: the packages of ``neovim`` and of everything it
depends on (libc6 included) are downloaded from deb.debian.org, checked against the
SHA256 sums of the suite's package index, unpacked with ``dpkg-deb -x`` into a private
root, and the unpacked ``nvim`` is pointed at that root's own dynamic loader and libraries
(``patchelf --set-interpreter <root>/usr/lib/<triplet>/ld-linux-*.so.* --force-rpath
--set-rpath <root>/usr/lib/<triplet>``; patchelf itself from the system's own Debian suite
when it is not installed). Starting it through the loader (``ld.so --library-path ... nvim``)
is not enough: the terminal UI starts ``nvim --embed`` again from its own executable's path,
which would be the loader's.

A wrapper script ``<cache>/neovim/<version>/nvim`` sets ``VIMRUNTIME`` and runs it; it is
what the tests run. Nothing outside the cache directory is touched, and processes Neovim
starts (the language server) run on the system's own libraries.

    python tests/neovim_debian.py 0.12      # prints the wrapper's path (downloads once)

Which suite: the first of :data:`SUITES` whose ``neovim`` has the wanted ``major.minor``
(suites move on: when none has it any more, :class:`Unavailable` says so and the tests that
want it skip, naming the reason).
"""

from __future__ import annotations

import hashlib
import lzma
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

MIRROR = "http://deb.debian.org/debian"

SUITES = {"0.10": ("trixie",), "0.12": ("forky", "sid")}
"""Neovim ``major.minor`` -> the Debian suites that ship it, first choice first."""

# Packages a Debian system always has and that an unpacked Neovim never needs.
_SKIP = {"debconf", "dpkg", "perl-base", "install-info", "base-files"}

_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


class Unavailable(RuntimeError):
    """This Neovim cannot be had here (no network, no dpkg-deb, no suite ships it)."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fastcoder" / "neovim"


def _fetch(url: str, timeout: float = 60.0) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.read()
    except OSError as exc:
        raise Unavailable(f"cannot download {url}: {exc}") from exc


def _index(suite: str, arch: str) -> dict[str, dict[str, str]]:
    """``Packages`` of ``suite``/main: package name (and every name it provides) -> fields."""
    text = lzma.decompress(_fetch(f"{MIRROR}/dists/{suite}/main/binary-{arch}/Packages.xz")).decode("utf-8", "replace")
    packages: dict[str, dict[str, str]] = {}
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if "Package" not in fields:
            continue
        packages.setdefault(fields["Package"], fields)
        for provided in fields.get("Provides", "").split(","):
            name = provided.strip().split(" ")[0]
            if name:
                packages.setdefault(name, fields)
    return packages


def _closure(packages: dict[str, dict[str, str]], root: str) -> list[dict[str, str]]:
    """``root`` and everything it depends on (first alternative of each dependency)."""
    todo, seen, out = [root], set(), {}
    while todo:
        name = todo.pop()
        if name in seen or name in _SKIP:
            continue
        seen.add(name)
        if name not in packages:
            raise Unavailable(f"{root} depends on {name}, which the package index does not have")
        fields = packages[name]
        out[fields["Package"]] = fields
        for dep in (fields.get("Depends", "") + "," + fields.get("Pre-Depends", "")).split(","):
            first = dep.split("|")[0].strip().split(" ")[0].split(":")[0]
            if first:
                todo.append(first)
    return list(out.values())


def _unpack(debs: list[Path], root: Path) -> None:
    for deb in debs:
        proc = subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise Unavailable(f"dpkg-deb -x {deb.name} failed: {proc.stderr.strip()[-300:]}")


def _download(fields: dict[str, str], folder: Path) -> Path:
    """The package ``fields`` describes, downloaded into ``folder`` and checked against the
    index's SHA256."""
    data = _fetch(f"{MIRROR}/{fields['Filename']}")
    if hashlib.sha256(data).hexdigest() != fields.get("SHA256"):
        raise Unavailable(f"{fields['Filename']}: SHA256 differs from the package index")
    folder.mkdir(parents=True, exist_ok=True)
    deb = folder / Path(fields["Filename"]).name
    deb.write_bytes(data)
    return deb


def _system_suite() -> str:
    for line in Path("/etc/os-release").read_text().splitlines() if Path("/etc/os-release").exists() else []:
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    raise Unavailable("cannot tell this system's Debian suite (/etc/os-release has no VERSION_CODENAME)")


def _patchelf(arch: str) -> str:
    """``patchelf`` from PATH, else unpacked from the system's own suite into the cache."""
    found = shutil.which("patchelf")
    if found:
        return found
    local = cache_root() / "patchelf" / "usr" / "bin" / "patchelf"
    if not local.exists():
        fields = _index(_system_suite(), arch).get("patchelf")
        if fields is None:
            raise Unavailable("patchelf is neither installed nor in this system's Debian suite")
        cache_root().mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache_root()) as tmp:
            _unpack([_download(fields, Path(tmp))], cache_root() / "patchelf")
    return str(local)


def _wrapper(root: Path, path: Path, arch: str) -> None:
    loaders = sorted(root.glob("usr/lib/*/ld-linux*.so.*"))
    if not loaders:
        raise Unavailable(f"no dynamic loader in the unpacked libc6 under {root}")
    loader = loaders[0]
    nvim = root / "usr" / "bin" / "nvim"
    proc = subprocess.run([_patchelf(arch), "--set-interpreter", str(loader), "--force-rpath", "--set-rpath",
                           str(loader.parent), str(nvim)], capture_output=True, text=True)  # fmt: skip
    if proc.returncode != 0:
        raise Unavailable(f"patchelf failed on {nvim}: {proc.stderr.strip()[-300:]}")
    path.write_text(
        "#!/bin/sh\n"
        "# Neovim unpacked from Debian packages, on its own C library (tests/neovim_debian.py)\n"
        f'export VIMRUNTIME="{root}/usr/share/nvim/runtime"\n'
        f'exec "{nvim}" "$@"\n'
    )
    path.chmod(0o755)


def cached(minor: str) -> Path | None:
    """The wrapper of a Neovim ``minor`` unpacked and checked before, newest first; None."""
    def version(ok: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in ok.parent.name.split(".") if part.isdigit())

    found = sorted(cache_root().glob(f"{minor}.*/ok"), key=version)
    return found[-1].parent / "nvim" if found else None


def ensure(minor: str) -> Path:
    """The wrapper of a Neovim ``minor`` (e.g. ``"0.12"``), downloaded and unpacked on first
    use. Raises :class:`Unavailable` with the reason when it cannot be had."""
    if minor not in SUITES:
        raise Unavailable(f"no Debian suite is known for Neovim {minor} (known: {', '.join(SUITES)})")
    arch = _ARCH.get(platform.machine())
    if arch is None or not sys.platform.startswith("linux"):
        raise Unavailable(f"Debian's Neovim packages are used on Linux amd64/arm64 only, not {platform.machine()}")
    if shutil.which("dpkg-deb") is None:
        raise Unavailable("dpkg-deb is not installed")
    done = cached(minor)
    if done is not None:
        return done  # unpacked before: used as it is (no network needed)
    reasons = []
    for suite in SUITES[minor]:
        packages = _index(suite, arch)
        nvim = packages.get("neovim")
        if nvim is None or not nvim.get("Version", "").startswith(minor + "."):
            reasons.append(f"{suite} has neovim {nvim.get('Version') if nvim else 'none'}")
            continue
        version = nvim["Version"].split("-")[0]
        target = cache_root() / version
        cache_root().mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=cache_root()))
        try:
            _unpack([_download(fields, work / "debs") for fields in _closure(packages, "neovim")], work / "root")
            shutil.rmtree(work / "debs")
            if target.exists():
                shutil.rmtree(target)
            work.rename(target)
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
        wrapper = target / "nvim"
        _wrapper(target / "root", wrapper, arch)
        proc = subprocess.run([str(wrapper), "--version"], capture_output=True, text=True, timeout=60)
        first = (proc.stdout.splitlines() or [""])[0]
        if proc.returncode != 0 or not first.startswith(f"NVIM v{minor}."):
            raise Unavailable(f"the unpacked Neovim does not start: rc {proc.returncode}, {first!r} {proc.stderr[-300:]!r}")
        (target / "ok").write_text(f"{first} from {suite}\n")
        return wrapper
    raise Unavailable(f"no Debian suite ships Neovim {minor} now ({'; '.join(reasons)})")


if __name__ == "__main__":
    for wanted in sys.argv[1:] or list(SUITES):
        try:
            print(ensure(wanted))
        except Unavailable as exc:
            print(f"Neovim {wanted}: {exc}", file=sys.stderr)
            sys.exit(1)
