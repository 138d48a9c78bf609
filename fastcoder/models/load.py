"""Load a model for inference: device and dtype resolution, the one tokenizer path, FIM tokens.

torch and transformers are imported lazily: ``fastcoder models list`` stays fast.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastcoder.errors import ModelError
from fastcoder.models.convert import _no_transformers_bars
from fastcoder.models.registry import DEFAULT_MODEL
from fastcoder.models.resolve import resolve_model

if TYPE_CHECKING:
    import torch


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
    matmul: dict | None = None
    """The CPU matmul path (:mod:`fastcoder.matmul`): ``packed`` (linear layers), the
    probe's ``timings`` and ``why``; None on CUDA."""


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


def _cpu_has_bf16() -> bool:
    """Whether the CPU has bf16 matmul instructions (AMX-BF16 or AVX512-BF16)."""
    from fastcoder.matmul import cpu_flags

    return bool(cpu_flags() & {"amx_bf16", "avx512_bf16"})


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

    ``auto`` is bfloat16 on CUDA and on a CPU with AMX/AVX512-BF16, float32 elsewhere
    (without a probe); :func:`load_model` decides a CPU's ``auto`` by a measured probe
    instead (:mod:`fastcoder.matmul`). bfloat16 is faster but only lossless up to
    numerical ties; float32 is exact.
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
    pack: str = "auto",
    progress: bool = True,
) -> LoadedModel:
    """Resolve ``spec`` (fetching/converting once) and load it for inference.

    ``pack`` (CPU only): ``auto`` packs the linear weights for oneDNN where a probe
    measured it faster (:mod:`fastcoder.matmul`), ``on`` / ``off`` force it."""
    path = resolve_model(spec, progress=progress)
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    if pack not in ("auto", "on", "off"):
        raise ModelError(f"unknown pack {pack!r}: use auto, on or off")
    matmul_path = _cpu_matmul(path, dev, dtype, torch_dtype, pack)
    if matmul_path is not None:
        import torch

        torch_dtype = getattr(torch, matmul_path["dtype"])

    from transformers import AutoModelForCausalLM

    tokenizer = _tokenizer_from(path)
    model: Any
    try:
        with _no_transformers_bars():
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, attn_implementation="sdpa")
    except (OSError, ValueError, KeyError) as exc:
        raise ModelError(f"could not load the model in {path}: {exc}") from exc
    model = model.to(dev).eval()
    if matmul_path is not None and matmul_path["packed"]:
        from fastcoder.matmul import FusedPackedLinear, pack_linears

        matmul_path["layers"] = pack_linears(model)
        matmul_path["fused"] = sum(isinstance(m, FusedPackedLinear) for m in model.modules())
    from fastcoder.tokens import plain_twin

    plain_twin(tokenizer)  # made now, not in the first completion (see fastcoder.tokens)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        device=dev,
        dtype=torch_dtype,
        name=spec,
        path=path,
        fingerprint=tokenizer_fingerprint(tokenizer),
        fim=detect_fim(tokenizer),
        matmul=matmul_path,
    )


def _cpu_matmul(path: Path, dev: torch.device, dtype: str, torch_dtype: torch.dtype, pack: str) -> dict | None:
    """On the CPU: the dtype (``auto``: float32 unless bfloat16 measured clearly faster)
    and whether to pack, from :func:`fastcoder.matmul.choose` where ``auto`` leaves a
    choice (None on CUDA). A model whose largest matmul is
    under :data:`fastcoder.matmul.PROBE_MIN_ELEMENTS` (a toy) is not probed: plain."""
    import torch

    if dev.type != "cpu":
        return None
    from fastcoder import matmul

    name = str(torch_dtype).removeprefix("torch.")
    # auto: measured, whatever the flags say (a bf16 step on an AVX2-only CPU can even
    # beat fp32 at one row and lose 2.5x at 16)
    names = ("float32", "bfloat16") if str(dtype).strip().lower() == "auto" else (name,)
    shape = _largest_matmul(path)
    big = shape[0] * shape[1] >= matmul.PROBE_MIN_ELEMENTS
    if (pack == "auto" and big) or len(names) > 1:
        choice = matmul.choose(names, *shape, allow_pack=pack != "off")
    else:
        choice = matmul.MatmulChoice(name, False, {}, "not probed")
    packed = (choice.packed and big) if pack == "auto" else (pack == "on" and matmul.can_pack(getattr(torch, choice.dtype)))
    return {"dtype": choice.dtype, "packed": packed, "pack": pack, "why": choice.why, "timings": choice.timings}


def _largest_matmul(path: Path) -> tuple[int, int]:
    """(vocab, hidden) of the model in ``path``: its lm_head, the largest matmul."""
    try:
        cfg = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return (0, 0)
    text = cfg.get("text_config") or cfg
    return int(text.get("vocab_size") or 0), int(text.get("hidden_size") or 0)
