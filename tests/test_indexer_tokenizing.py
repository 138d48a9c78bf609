"""The one text-to-ids path (fastcoder.tokens) gives exactly the tokenizer's own ids."""

from __future__ import annotations

import threading

import numpy as np

from fastcoder.tokens import encode, encode_batch, encode_with_offsets
from indexer.tokenizing import batched


def test_encode_equals_tokenizer_call(tiny_tokenizer):
    texts = [
        "def f(x):\n    return x\n",
        "",
        "special <|endoftext|> and <|fim_prefix|> tokens",
        "caf\u00e9 \u4e2d\u6587 \U0001f600\r\n\ttabs",
        "x" * 5000,
    ]
    got = encode_batch(tiny_tokenizer, texts, special="parse")
    want = tiny_tokenizer(texts, add_special_tokens=False)["input_ids"]
    assert [a.tolist() for a in got] == want
    assert all(a.dtype == np.int32 for a in got)
    assert encode_batch(tiny_tokenizer, [], special="parse") == []
    assert [encode(tiny_tokenizer, t, special="parse") for t in texts] == want
    # "plain": text that spells a special token stays text
    plain = [tiny_tokenizer(t, add_special_tokens=False, split_special_tokens=True)["input_ids"] for t in texts]
    assert [encode(tiny_tokenizer, t, special="plain") for t in texts] == plain
    assert [a.tolist() for a in encode_batch(tiny_tokenizer, texts, special="plain")] == plain
    assert plain[2] != want[2]
    ids, spans = encode_with_offsets(tiny_tokenizer, texts[0], special="plain")
    assert ids == plain[0] and len(spans) == len(ids) and spans[0][0] == 0


def test_parse_after_plain_still_parses(tiny_tokenizer):
    # transformers leaves the Rust tokenizer splitting special tokens after a
    # split_special_tokens=True call; the batched fast path must not inherit that
    text = ["a <|endoftext|> b"]
    want = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    encode(tiny_tokenizer, text[0], special="plain")
    assert [a.tolist() for a in encode_batch(tiny_tokenizer, text, special="parse")] == want


def test_plain_never_changes_the_shared_tokenizer_and_threads_do_not_mix_modes(tiny_tokenizer):
    # the model thread encodes documents ("plain") while the index thread encodes files
    # ("parse") with the same tokenizer object: a per-call flag on the shared backend
    # could let one thread's setting reach the other's encoding
    backend = tiny_tokenizer.backend_tokenizer
    text = "x = '<|endoftext|>' + y"
    want_parse = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    want_plain = encode(tiny_tokenizer, text, special="plain")
    assert want_plain != want_parse
    assert backend.encode_special_tokens is False  # the plain call went through the twin
    bad: list[str] = []

    def hammer(special: str, want: list[int]) -> None:
        for _ in range(300):
            if encode(tiny_tokenizer, text, special=special) != want:
                bad.append(special)

    threads = [threading.Thread(target=hammer, args=a) for a in (("plain", want_plain), ("parse", want_parse))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_batched_respects_budget():
    items = ["a" * n for n in (3, 3, 3, 10, 1)]
    assert [[len(x) for x in b] for b in batched(items, len, budget=6)] == [[3, 3], [3], [10], [1]]


def test_decode_each_gives_every_token_the_text_decode_gives_it(tiny_tokenizer):
    import copy

    from fastcoder.tokens import decode_each

    ids = list(range(len(tiny_tokenizer)))  # special and added tokens too
    want = [tiny_tokenizer.decode([i], skip_special_tokens=False) for i in ids]
    assert decode_each(tiny_tokenizer, ids) == want
    assert any(t.startswith(" ") for t in want) and any("\n" in t for t in want)  # texts worth comparing
    # a tokenizer that cleans up spaces decodes as transformers does (no shortcut)
    cleaning = copy.copy(tiny_tokenizer)
    cleaning.clean_up_tokenization_spaces = True
    assert decode_each(cleaning, ids) == cleaning.batch_decode([[i] for i in ids], skip_special_tokens=False)
