"""Convert a GGUF file once into a plain Hugging Face folder (float32 safetensors +
tokenizer) under ``converted/<label>-<sha16>/``; any spec with the same GGUF bytes reuses it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastcoder.errors import ModelError
from fastcoder.models.cache import _atomic, _locked, _progress, _sha256_file, cache_root
from fastcoder.models.registry import BUILTIN_MODELS

CONVERT_FORMAT = 1
"""Version of the converted-folder layout; a folder with another version is redone."""

MARKER_FILE = "fastcoder.json"
"""Written last into each converted folder: where it came from and how."""


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
