"""Per-tokenizer facts the engine needs: which ids contain a newline and which are
pure whitespace (for skip tokens and position-in-line statistics), and which ids'
text starts with a given string (token healing: the first generated token must start
with the text taken back from the end of the prompt).

Computed once per tokenizer from its decoded vocabulary and kept in memory.

And the one text-to-ids path: :func:`encode` (one text), :func:`encode_with_offsets`
(and where each token starts) and :func:`encode_batch` (many texts, int32 arrays).
None adds BOS/EOS; each says what becomes of text that spells a special token.
"""

from __future__ import annotations

import bisect
import copy
import functools
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Sequence

import numpy as np

Special = Literal["parse", "plain"]
"""What becomes of text that spells a special token (``<|fim_prefix|>``,
``<|im_start|>``, ``<|endoftext|>``): ``"parse"`` makes it that token (a chat
template's output, a prompt given to ``fastcoder generate``, files to index);
``"plain"`` keeps it plain text (an editor's document: a file that mentions
``<|endoftext|>`` must not end the prompt there)."""

_LOCK = threading.Lock()
_CACHE: dict[int, "TokenInfo"] = {}


@dataclass
class TokenInfo:
    has_newline: np.ndarray  # bool[vocab]
    is_space: np.ndarray  # bool[vocab]: only whitespace (newline included)
    # (text, id) of every ordinary token (special and empty ones left out), sorted by text
    by_text: list[tuple[str, int]] = field(default_factory=list)
    ids_by_text: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # their ids, same order

    @classmethod
    def for_tokenizer(cls, tokenizer) -> "TokenInfo":
        key = id(tokenizer)
        with _LOCK:
            info = _CACHE.get(key)
            if info is None:
                info = _CACHE[key] = cls._build(tokenizer)
            return info

    @classmethod
    def _build(cls, tokenizer) -> "TokenInfo":
        size = len(tokenizer)
        texts = decode_each(tokenizer, range(size))
        nl = np.fromiter(("\n" in t for t in texts), dtype=bool, count=size)
        sp = np.fromiter(((t != "" and t.isspace()) for t in texts), dtype=bool, count=size)
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        for i, tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
            if getattr(tok, "special", False):
                special.add(int(i))
        by_text = sorted((t, i) for i, t in enumerate(texts) if t and i not in special and "\ufffd" not in t)
        ids = np.fromiter((i for _, i in by_text), dtype=np.int64, count=len(by_text))
        return cls(has_newline=nl, is_space=sp, by_text=by_text, ids_by_text=ids)

    def starting_with(self, prefix: str) -> np.ndarray:
        """Ids of the ordinary tokens whose text starts with ``prefix``: a binary search
        over the sorted texts gives one contiguous range (every text in
        ``[prefix, prefix + U+10FFFF)`` starts with ``prefix``), returned as a view (a
        single space matches ~50k tokens of a 151k vocabulary: no Python list)."""
        lo = bisect.bisect_left(self.by_text, (prefix, -1))
        hi = bisect.bisect_left(self.by_text, (prefix + "\U0010ffff", -1), lo)
        return self.ids_by_text[lo:hi]

    def line_position(self, ids: list[int]) -> int:
        """Non-whitespace tokens since the last newline at the end of ``ids``
        (0 means the next token is a skip token: the first non-whitespace of a line)."""
        n = 0
        for t in reversed(ids):
            if t < self.has_newline.size and self.has_newline[t]:
                # a token like "x\n" ends the line; "\n    " starts an indent
                return n
            if t < self.is_space.size and not self.is_space[t]:
                n += 1
        return n


def decode_each(tokenizer: Any, ids: Iterable[int]) -> list[str]:
    """Each token's own text, as ``tokenizer.decode([i], skip_special_tokens=False)``
    gives it. Through the Rust backend where transformers would only pass the call on
    (a fast tokenizer that cleans up no spaces): its ``batch_decode`` spends most of its
    time converting the argument (151,936 ids of Qwen2.5-Coder: 1.13 s, the backend
    0.15 s, the same strings; 2-vCPU Intel Xeon with AMX, forty-ninth session)."""
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or not hasattr(backend, "decode") or getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return tokenizer.batch_decode([[int(i)] for i in ids], skip_special_tokens=False)
    decode = backend.decode
    return [decode([int(i)], skip_special_tokens=False) for i in ids]


_TWIN_ATTR = "_fastcoder_plain_twin"


def plain_twin(tokenizer: Any) -> Any:
    """The tokenizer ``"plain"`` calls go through: a shallow copy of ``tokenizer`` with a
    Rust backend of its own, made once per tokenizer and kept on it (~0.5 s for a 151k
    vocabulary: :func:`fastcoder.models.load.load_model` makes it at load).

    Why a twin: transformers keeps ``split_special_tokens`` of the last call as the
    shared backend's ``encode_special_tokens`` and sets it again at every call, so with
    one backend a ``"parse"`` call on the indexing thread between a ``"plain"`` call's
    setting and its encoding (model thread) would turn ``<|endoftext|>`` in a document
    into the special token. Each backend now only ever holds one value. None: the
    tokenizer has no Rust backend to copy (the call itself is then the only state)."""
    own = getattr(tokenizer, "__dict__", {})  # its own: a wrapper that forwards attributes gets its own twin
    twin = own.get(_TWIN_ATTR)
    if twin is not None:
        return twin
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or not hasattr(backend, "to_str"):
        return None
    from tokenizers import Tokenizer

    with _LOCK:
        twin = own.get(_TWIN_ATTR)
        if twin is None:
            twin = copy.copy(tokenizer)
            twin._tokenizer = Tokenizer.from_str(backend.to_str())
            twin._tokenizer.encode_special_tokens = True
            setattr(tokenizer, _TWIN_ATTR, twin)
    return twin


def _call(tokenizer: Any, text: Any, special: Special, **kwargs: Any) -> Any:
    """The tokenizer's own call, with no BOS/EOS added and ``special`` applied."""
    if special == "plain":
        twin = plain_twin(tokenizer) or tokenizer
        try:
            return twin(text, add_special_tokens=False, split_special_tokens=True, **kwargs)
        except TypeError:  # a tokenizer without split_special_tokens
            return twin(text, add_special_tokens=False, **kwargs)
    if special != "parse":
        raise ValueError(f"special must be 'parse' or 'plain', not {special!r}")
    return tokenizer(text, add_special_tokens=False, **kwargs)


def encode(tokenizer: Any, text: str, *, special: Special) -> list[int]:
    """Token ids of ``text`` (see :data:`Special`)."""
    return list(_call(tokenizer, text, special)["input_ids"])


def encode_with_offsets(tokenizer: Any, text: str, *, special: Special) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids of ``text`` and each token's (start, end) character offsets in it."""
    enc = _call(tokenizer, text, special, return_offsets_mapping=True)
    return list(enc["input_ids"]), enc["offset_mapping"]


def encode_batch(tokenizer: Any, texts: Sequence[str], *, special: Special) -> list[np.ndarray]:
    """Token ids (int32 arrays) of ``texts`` in one batched call: for each text exactly
    what :func:`encode` gives. With ``"parse"``, through the Rust
    ``encode_batch_fast`` when the tokenizer has it: it skips the character offsets
    nobody needs here and is about 20% faster. (Not while the Rust tokenizer is left
    splitting special tokens by a caller outside this module: ``"plain"`` calls go
    through :func:`plain_twin` and never touch it.)"""
    if not texts:
        return []
    backend = getattr(tokenizer, "backend_tokenizer", None)
    fast = getattr(backend, "encode_batch_fast", None)
    if (special == "parse" and fast is not None and not getattr(backend, "encode_special_tokens", False)
            and type(tokenizer).__call__ is _hf_call()):
        ids = [e.ids for e in fast(list(texts), add_special_tokens=False)]
    else:
        ids = _call(tokenizer, list(texts), special, return_attention_mask=False)["input_ids"]
    return [np.asarray(x, dtype=np.int32) for x in ids]


@functools.lru_cache(maxsize=1)
def _hf_call() -> Any:
    """transformers' own ``__call__``: a subclass that overrides it is not bypassed."""
    try:
        from transformers import PreTrainedTokenizerBase
    except ImportError:  # pragma: no cover - transformers is a dependency
        return None
    return PreTrainedTokenizerBase.__call__


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share (compared in slices, at C speed)."""
    n, lo = min(len(a), len(b)), 0
    while lo < n:
        hi = min(n, lo + 256)
        x, y = list(a[lo:hi]), list(b[lo:hi])
        if x != y:
            return lo + next(i for i, (p, q) in enumerate(zip(x, y)) if p != q)
        lo = hi
    return n
