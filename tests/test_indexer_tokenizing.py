"""Batched encoding gives exactly the tokenizer's own ids."""

from __future__ import annotations

import numpy as np

from indexer.tokenizing import batched, encode


def test_encode_equals_tokenizer_call(tiny_tokenizer):
    texts = [
        "def f(x):\n    return x\n",
        "",
        "special <|endoftext|> and <|fim_prefix|> tokens",
        "caf\u00e9 \u4e2d\u6587 \U0001f600\r\n\ttabs",
        "x" * 5000,
    ]
    got = encode(tiny_tokenizer, texts)
    want = tiny_tokenizer(texts, add_special_tokens=False)["input_ids"]
    assert [a.tolist() for a in got] == want
    assert all(a.dtype == np.int32 for a in got)
    assert encode(tiny_tokenizer, []) == []


def test_batched_respects_budget():
    items = ["a" * n for n in (3, 3, 3, 10, 1)]
    assert [[len(x) for x in b] for b in batched(items, len, budget=6)] == [[3, 3], [3], [10], [1]]
