"""D_c: corpus selection, JSONL input, provenance, and the cached default store."""

from __future__ import annotations

import gzip
import json

import pytest

import indexer.common as common
from fastcoder.datastore import TokenDatastore
from fastcoder.errors import FastCoderError
from fastcoder.models import tokenizer_fingerprint
from test_indexer_support import isolated_cache, write  # noqa: F401 - fixture


def test_source_selection_skips_tests_and_idlelib(tmp_path):
    write(tmp_path / "a.py", "x")
    write(tmp_path / "pkg" / "b.py", "x")
    write(tmp_path / "pkg" / "data.txt", "x")
    for d in ("test", "tests", "idlelib", "site-packages", "__pycache__"):
        write(tmp_path / d / "c.py", "x")
    assert [p.relative_to(tmp_path).as_posix() for p in common.iter_source_files(tmp_path)] == ["a.py", "pkg/b.py"]


def test_jsonl_and_gzip(tmp_path, caplog):
    rows = [{"content": "a = 1\n"}, {"content": ""}, {"nope": 1}, {"content": "b = 2\n"}]
    p = tmp_path / "x.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
        fh.write("{broken\n")
    with caplog.at_level("WARNING"):
        assert list(common.iter_jsonl(p)) == ["a = 1\n", "b = 2\n"]
    assert "3 lines" in caplog.text
    with pytest.raises(FastCoderError):
        list(common.iter_jsonl(tmp_path / "missing.jsonl"))


def test_build_common_matches_its_documents(tmp_path, tiny_tokenizer):
    texts = ["def f(x):\n    return x + 1\n", "def g(y):\n    return y + 1\n"]
    for i, t in enumerate(texts):
        write(tmp_path / "src" / f"m{i}.py", t)
    store, rep = common.build_common(tiny_tokenizer, sources=[tmp_path / "src"], out=tmp_path / "o.fcds")
    assert rep.documents == 2 and rep.tokens == store.n_tokens and rep.file_bytes > 0
    ids = [tiny_tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert [store.doc_tokens(i).tolist() for i in range(2)] == ids
    loaded = TokenDatastore.load(tmp_path / "o.fcds", expected_fingerprint=tokenizer_fingerprint(tiny_tokenizer))
    assert loaded.meta["kind"] == "common" and loaded.meta["files"] == 2
    with pytest.raises(FastCoderError):
        common.build_common(tiny_tokenizer, sources=[tmp_path / "missing"])


def test_ensure_common_builds_once_and_rebuilds_corrupt(tmp_path, tiny_tokenizer, isolated_cache, monkeypatch):
    lib = tmp_path / "fake-stdlib"
    write(lib / "os_like.py", "def join(a, b):\n    return a + '/' + b\n")
    write(lib / "test" / "test_x.py", "def test(): pass\n")
    monkeypatch.setattr(common, "stdlib_dir", lambda: lib)
    path = common.default_common_path(tiny_tokenizer)
    assert path.parent == isolated_cache / "common" and path.name.endswith("-stdlib.fcds")
    store = common.ensure_common(tiny_tokenizer, progress=False)
    assert store.n_docs == 1 and path.is_file()
    assert str(lib) in store.meta["sources"][0]

    calls = []
    real = common.build_common
    monkeypatch.setattr(common, "build_common", lambda *a, **k: calls.append(1) or real(*a, **k))
    common.ensure_common(tiny_tokenizer, progress=False)
    assert calls == []  # cached
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    store = common.ensure_common(tiny_tokenizer, progress=False)
    assert calls == [1] and store.n_docs == 1
