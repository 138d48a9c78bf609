"""Documents' KV caches on disk (fastcoder.kv_disk): a restored cache continues exactly as
the one it was saved from, a damaged or foreign entry is refused and deleted, and the
store keeps to its size, least recently used first."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import torch

from fastcoder.config import DecodeConfig
from fastcoder.engine import Engine
from fastcoder.kv_disk import KVDisk
from fastcoder.session import Session
from fastcoder.verifier import KVState, _kv_shape


def _identity(model, dtype="float32"):
    return {"format": 1, "model": "tiny", "dtype": dtype, "kv_shape": list(_kv_shape(model.config))}


@pytest.fixture()
def engine(tiny_model, tiny_tokenizer):
    tiny_model.float()
    return Engine(tiny_model, tiny_tokenizer, name="tiny")


def _prompt(vocab: int, n: int, seed: int = 3) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(4, vocab) for _ in range(n)]


def test_a_restored_cache_continues_as_the_saved_one(engine, tiny_model, tmp_path: Path):
    vocab = len(engine.tokenizer)
    head, tail = _prompt(vocab, 90), _prompt(vocab, 7, seed=4)
    cfg = DecodeConfig(method="fastcoder", max_new_tokens=24, max_draft_tokens=8)
    # the document's session: the head prefilled (its file as opened), then saved
    saved = Session(cfg)
    engine.verifier.prefill(saved.kv, head)
    ids, rows = engine.verifier.export_rows(saved.kv)
    assert ids == head and rows.shape[4] == len(head)
    disk = KVDisk(tmp_path, _identity(tiny_model), max_bytes=2**30)
    assert disk.save("file:///a.py", ids, rows) == rows.nbytes
    # a later run: a fresh session takes the rows, and the prompt (the head and what was
    # typed since) prefills only the tail
    restored = Session(cfg)
    got = disk.load("file:///a.py")
    assert got is not None and got[0] == head
    assert engine.verifier.import_rows(restored.kv, *got) == len(head)
    g_restored = engine.generate(head + tail, cfg, session=restored)
    g_saved = engine.generate(head + tail, cfg, session=saved)
    assert g_restored.stats.prefill_tokens == g_saved.stats.prefill_tokens == len(tail)
    assert g_restored.tokens == g_saved.tokens and g_restored.tokens
    # and both are greedy AR's output (fp32)
    ar = engine.generate(head + tail, DecodeConfig(method="ar", max_new_tokens=24))
    assert g_restored.tokens == ar.tokens
    assert disk.stats["saved"] == 1


def test_import_takes_only_an_empty_cache_of_the_same_layout(engine):
    vocab = len(engine.tokenizer)
    kv = KVState()
    engine.verifier.prefill(kv, _prompt(vocab, 20))
    ids, rows = engine.verifier.export_rows(kv)
    assert engine.verifier.import_rows(kv, ids, rows) == 0  # holds tokens already
    assert engine.verifier.import_rows(KVState(), ids, rows.to(torch.bfloat16)) == 0  # another dtype
    assert engine.verifier.import_rows(KVState(), ids[:-1], rows) == 0  # ids and rows disagree
    assert engine.verifier.export_rows(KVState()) is None


def test_a_damaged_or_foreign_entry_is_refused_and_deleted(tiny_model, tmp_path: Path):
    layers, heads, dim = _kv_shape(tiny_model.config)
    rows = torch.randn(layers, 2, 1, heads, 10, dim)
    disk = KVDisk(tmp_path, _identity(tiny_model), max_bytes=2**30)
    disk.save("a", list(range(10)), rows)
    path = next(disk.dir.glob("*.kv"))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte (inside the rows)
    path.write_bytes(bytes(data))
    assert disk.load("a") is None and not path.exists()
    assert disk.stats["rejected"] == 1
    path.write_bytes(b"not a torch file")
    assert disk.load("a") is None and not path.exists()
    assert disk.load("never saved") is None and disk.stats["missing"] == 1
    # another identity (dtype) reads another folder: never these rows
    disk.save("a", list(range(10)), rows)
    other = KVDisk(tmp_path, _identity(tiny_model, dtype="bfloat16"), max_bytes=2**30)
    assert other.dir != disk.dir and other.load("a") is None
    assert disk.load("a") is not None


def test_the_store_keeps_to_its_size_least_recently_used_first(tiny_model, tmp_path: Path):
    layers, heads, dim = _kv_shape(tiny_model.config)
    rows = torch.randn(layers, 2, 1, heads, 50, dim)
    one = rows.nbytes
    disk = KVDisk(tmp_path, _identity(tiny_model), max_bytes=int(3.5 * one))
    t = 1_000_000_000
    for i, name in enumerate("abc"):
        disk.save(name, list(range(50)), rows)
        os.utime(disk._path(name), (t + i, t + i))
    assert disk.load("a") is not None  # read: now the most recently used
    disk.save("d", list(range(50)), rows)  # over the size: the least recently used goes ("b")
    assert disk.stats["evicted"] == 1
    assert not disk._path("b").exists()
    assert all(disk._path(n).exists() for n in "acd")
    assert disk.size_bytes() <= disk.max_bytes
    # a write a killed process left behind goes at the next trim once it is stale, not before
    fresh, stale = disk.dir / "x.tmp", disk.dir / "y.tmp"
    fresh.write_bytes(b"partial")
    stale.write_bytes(b"partial")
    os.utime(stale, (t, t))
    disk.trim()
    assert fresh.exists() and not stale.exists()
