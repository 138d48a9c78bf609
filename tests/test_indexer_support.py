"""Helpers shared by the indexer tests (no tests here)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import pytest


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """A private FASTCODER_CACHE, so tests never touch the user's cache."""
    cache = tmp_path / "fc-cache"
    monkeypatch.setenv("FASTCODER_CACHE", str(cache))
    return cache


def wait_until(pred: Callable[[], object], timeout: float = 15.0, what: str = "condition") -> object:
    """Poll ``pred`` until it returns something truthy; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def phrase(tag: str, n: int = 8) -> str:
    """A line of space-separated made-up words (stable BPE boundaries at the spaces)."""
    return " ".join(f"{tag}w{i}" for i in range(n))


def finds(source, tokenizer, prefix: str, continuation: str) -> bool:
    """Whether ``source`` matches all of ``prefix`` (up to 16 tokens) and drafts
    ``continuation`` after it."""
    ctx = tokenizer(prefix, add_special_tokens=False)["input_ids"]
    r = source.retrieve(ctx, n_max=16, n_min=2, max_nodes=64, max_depth=16)
    if r.match_len != min(len(ctx), 16):
        return False
    return any(tokenizer.decode(list(p)).startswith(continuation) for p, _ in r.nodes)


def has_phrase(source, tokenizer, tag: str) -> bool:
    """Whether the line :func:`phrase` (tag) is searchable: its first words draft the next."""
    words = phrase(tag).split(" ")
    return finds(source, tokenizer, " ".join(words[:4]), " " + words[4])
