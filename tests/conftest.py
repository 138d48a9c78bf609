"""Shared fixtures: a tokenizer trained here on real code and tiny random models.

Nothing is downloaded: the tokenizer is a byte-level BPE trained in a second on a few
standard-library files, the models are randomly initialised from a config.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SPECIAL = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"]


def _corpus() -> list[str]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for name in ("textwrap.py", "shlex.py", "fnmatch.py", "bisect.py", "heapq.py", "glob.py"):
        p = lib / name
        if p.exists():
            texts.append(p.read_text(encoding="utf-8"))
    return texts


def build_tokenizer(vocab_size: int = 600, extra_special: tuple[str, ...] = ()):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": [*SPECIAL[1:], *extra_special]})
    return fast


def random_tree(rng, n: int, vocab: int):
    """A random draft tree of ``n`` nodes (each node's parent is an earlier node or the root)."""
    from fastcoder.trie import DraftTree

    parents = [rng.randrange(-1, i) for i in range(n)]
    depths: list[int] = []
    for p in parents:
        depths.append(1 if p < 0 else depths[p] + 1)
    return DraftTree([rng.randrange(vocab) for _ in range(n)], parents, depths, ["x"] * n, [1.0] * n)


def build_model(arch: str, vocab_size: int, seed: int = 0, layers: int = 2):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    torch.manual_seed(seed)
    common = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=0,
        bos_token_id=0,
        pad_token_id=0,
    )
    if arch == "llama":
        cfg = LlamaConfig(**common, tie_word_embeddings=True)
    elif arch == "qwen2":
        cfg = Qwen2Config(**common, tie_word_embeddings=False)
    else:
        raise ValueError(arch)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    # random init gives near-uniform logits; sharpen them so greedy paths are stable
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    return model.eval()


def build_scripted_model(tokenizer, after: str, answer: str, seed: int = 1, again: bool = False,
                         more: tuple[tuple[str, str], ...] = ()):  # fmt: skip
    """A tiny Qwen2 whose greedy continuation of any prompt ending in ``after``'s last
    token is ``answer`` and then the end of text (``again``: ``answer`` again and again):
    every layer's attention and MLP write nothing (their output projections are zero), so
    the hidden state at a position is its token's embedding, and the LM head maps each
    token of the chain to the next (a bigram table). ``answer``'s tokens must all differ
    from one another and from that token. ``more``: further (after, answer) chains, each
    ending in the end of text, with tokens of their own. For what a random model does only
    by chance: end an edit at its end of turn, loop for good, or write a given completion."""
    import torch

    from fastcoder.tokens import encode

    chains = []
    for i, (start, text) in enumerate(((after, answer), *more)):
        written = encode(tokenizer, text, special="parse")
        chain = [encode(tokenizer, start, special="parse")[-1], *written]
        chain.append(written[0] if again and i == 0 else tokenizer.eos_token_id)
        chains.append(chain)
    sources = [t for chain in chains for t in chain[:-1]]
    assert len(set(sources)) == len(sources), "a bigram table needs distinct tokens"
    model = build_model("qwen2", len(tokenizer), seed=seed)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.lm_head.weight.zero_()
        for chain in chains:
            hidden = model.model.norm(model.model.embed_tokens.weight[chain[:-1]])  # what the head sees
            for i, nxt in enumerate(chain[1:]):
                h = hidden[i]
                model.lm_head.weight[nxt] += h / h.norm()
    return model


EDIT_ANSWER = "return sum(values)"
"""What the scripted edit model (``edit_model_dir``) answers to every edit."""


@pytest.fixture(scope="session")
def edit_model_dir(tmp_path_factory, tiny_tokenizer):
    """A local HF folder of a tiny model whose every edit answer (the tokens after the
    edit prompt's opening fence line) is :data:`EDIT_ANSWER` and then the end of text."""
    path = tmp_path_factory.mktemp("tiny-qwen2-edit")
    build_scripted_model(tiny_tokenizer, "```python\n", EDIT_ANSWER).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def looping_edit_model_dir(tmp_path_factory, tiny_tokenizer):
    """A local HF folder of a tiny model whose every edit answer is a line written again
    and again (``total = sum(xs)``, never ended): the loop rule ends it, unfinished."""
    path = tmp_path_factory.mktemp("tiny-qwen2-edit-loop")
    build_scripted_model(tiny_tokenizer, "```python\n", "total = sum(xs)", again=True).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


DOCSTRING = 'def mean(xs):\n    """"""\n    return sum(xs) / len(xs)\n'
"""A document with an empty docstring, the cursor to go between its triple quotes."""
DOCSTRING_ANSWER = "\n    Return the mean.\n"
"""What the scripted docstring model (``docstring_model_dir``) writes there, on lines of
its own, then the end of text."""


@pytest.fixture(scope="session")
def docstring_model_dir(tmp_path_factory, tiny_tokenizer):
    """A local HF folder of a tiny model that, at :data:`DOCSTRING`'s ``\"\"\"|\"\"\"``,
    writes :data:`DOCSTRING_ANSWER` after the opener token healing takes back: the last
    token of that completion's prompt is the cursor line's indentation."""
    from fastcoder.models.load import detect_fim
    from fastcoder.tokens import TokenInfo
    from lsp_server.prompt import CursorContext, build_prompt

    cursor = DOCSTRING.index('"""') + 3
    ctx = CursorContext(DOCSTRING[:cursor], DOCSTRING[cursor:])
    prompt = build_prompt(tiny_tokenizer, detect_fim(tiny_tokenizer), ctx, 2048, layout="anchored",
                          info=TokenInfo.for_tokenizer(tiny_tokenizer))  # fmt: skip
    after = tiny_tokenizer.decode(prompt.ids[-1:])
    path = tmp_path_factory.mktemp("tiny-qwen2-docstring")
    build_scripted_model(tiny_tokenizer, after, prompt.heal + DOCSTRING_ANSWER).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="session", params=["llama", "qwen2"])
def tiny_model(request, tiny_tokenizer):
    return build_model(request.param, len(tiny_tokenizer))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer):
    """A local HF folder (config + safetensors + tokenizer) of a tiny Qwen2-like model."""
    path = tmp_path_factory.mktemp("tiny-qwen2")
    model = build_model("qwen2", len(tiny_tokenizer), seed=1)
    model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


REPO_SPECIAL = ("<|repo_name|>", "<|file_sep|>")
"""Qwen2.5-Coder's repository-format tokens (the document header, cross-file context)."""


@pytest.fixture(scope="session")
def repo_tokenizer():
    """The test tokenizer with the repository-format tokens too."""
    return build_tokenizer(extra_special=REPO_SPECIAL)


@pytest.fixture(scope="session")
def repo_model_dir(tmp_path_factory, repo_tokenizer):
    """A local HF folder of a tiny Qwen2-like model whose tokenizer has the repository tokens."""
    path = tmp_path_factory.mktemp("tiny-qwen2-repo")
    build_model("qwen2", len(repo_tokenizer), seed=1).save_pretrained(path)
    repo_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    """Keep the tests' cost curves, indexes and datastores out of the user's cache."""
    old = os.environ.get("FASTCODER_CACHE")
    os.environ["FASTCODER_CACHE"] = str(tmp_path_factory.mktemp("fastcoder-cache"))
    yield
    if old is None:
        os.environ.pop("FASTCODER_CACHE", None)
    else:
        os.environ["FASTCODER_CACHE"] = old


# --------------------------------------------------------------------------- Neovim

NVIM_VERSIONS = ("system", "0.10", "0.12")
"""The Neovims the client tests run on: the system's (Debian bookworm: 0.7.2; installed with
apt-get when missing, as root with CI or FASTCODER_INSTALL_NVIM set) and Debian's 0.10 and 0.12,
unpacked into the user cache by tests/neovim_debian.py (downloaded under the same conditions;
used from the cache without them)."""


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _system_nvim() -> str:
    found = shutil.which("nvim")
    if found:
        return found
    allowed = _truthy("CI") or _truthy("FASTCODER_INSTALL_NVIM")
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if not (allowed and is_root and shutil.which("apt-get")):
        pytest.skip(
            "nvim is not installed; install Neovim (e.g. `apt-get install -y neovim`), or run as root "
            "with CI=1 or FASTCODER_INSTALL_NVIM=1 to let this test install Debian's neovim"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "neovim"]):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            pytest.skip(f"could not install neovim ({' '.join(cmd)} -> {proc.returncode}): {proc.stderr[-500:]}")
    found = shutil.which("nvim")
    if not found:
        pytest.skip("apt-get installed neovim but nvim is not on PATH")
    return found


def _debian_nvim(minor: str) -> str:
    import neovim_debian

    cached = neovim_debian.cached(minor)
    if cached is not None:
        return str(cached)
    if not (_truthy("CI") or _truthy("FASTCODER_INSTALL_NVIM")):
        pytest.skip(f"Neovim {minor} is not unpacked: `python tests/neovim_debian.py {minor}`, or set "
                    "CI=1 or FASTCODER_INSTALL_NVIM=1 to let the tests fetch Debian's packages")  # fmt: skip
    try:
        return str(neovim_debian.ensure(minor))
    except neovim_debian.Unavailable as exc:
        pytest.skip(f"Neovim {minor}: {exc}")


def parse_nvim_version(text: str) -> tuple[int, ...]:
    """``"0.12.4"`` (``tostring(vim.version())``, maybe ``v``-prefixed or with a ``-dev`` tail) as (0, 12, 4)."""
    core = text.strip().lstrip("v").split("-")[0].split("+")[0]
    return tuple(int(part) for part in core.split(".")[:3] if part.isdigit())


def nvim_version(nvim: str) -> tuple[int, ...]:
    """The version of the Neovim at ``nvim`` (from ``nvim --version``'s first line)."""
    proc = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=60)
    first = (proc.stdout.splitlines() or [""])[0]  # "NVIM v0.12.4"
    return parse_nvim_version(first.split(" ")[-1]) if first.startswith("NVIM ") else ()


@pytest.fixture(scope="session", params=NVIM_VERSIONS, ids=lambda v: f"nvim-{v}")
def nvim_bin(request) -> str:
    """A Neovim to drive: each test using it runs once per :data:`NVIM_VERSIONS`."""
    return _system_nvim() if request.param == "system" else _debian_nvim(request.param)
