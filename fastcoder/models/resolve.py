"""Resolve a ``--model`` spec to a local Hugging Face folder, fetching and converting once.

A spec is a builtin name, a local HF folder, a ``.gguf`` file or a hub id (see the
package doc).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from fastcoder.errors import ModelError
from fastcoder.models.cache import _sha256_file
from fastcoder.models.convert import _converted, _find_converted, _resolve_gguf_file
from fastcoder.models.fetch import _fetch_gguf
from fastcoder.models.registry import BUILTIN_MODELS

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
