"""The other open documents as a draft source.

The editor's buffers are fresher than the disk (D_r catches up after a debounce and a
rebuild of its delta) and they are what the user works on right now: a function being
written in one file is often called, mirrored or tested in another open one. This
module keeps their tokens, re-tokenizing a document only when its version changed,
and one small in-memory n-gram index over all of them except the document being
completed (that one is the live context already). FastCoder drafts from it as the
``buffers`` source (``Sources.buffers``); like every source it only proposes drafts,
so the output stays greedy AR's.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

from fastcoder.ngram import NgramIndex

MAX_DOCUMENTS = 8
MAX_TOKENS_PER_DOCUMENT = 16384
_CHARS_PER_TOKEN = 12  # never tokenize more text than this many chars per token kept


class OpenBuffers:
    """Tokens of the open documents and an index over all but one of them.

    Parameters
    ----------
    max_documents: documents indexed at most (the first ones of the mapping given).
    max_tokens_per_document: tokens kept from the start of each document.
    """

    def __init__(self, max_documents: int = MAX_DOCUMENTS, max_tokens_per_document: int = MAX_TOKENS_PER_DOCUMENT) -> None:
        self.max_documents = max_documents
        self.max_tokens = max_tokens_per_document
        self._tokens: dict[str, tuple[Any, list[int]]] = {}  # uri -> (version, ids)
        self._key: tuple | None = None
        self._index: NgramIndex | None = None
        self._lock = threading.Lock()

    def source(self, tokenizer: Any, documents: Mapping[str, tuple[Any, str]], exclude: str, key_len: int = 2) -> NgramIndex | None:
        """The index over ``documents`` (uri -> (version, text)) without ``exclude``;
        None when there is no other document."""
        from lsp_server.prompt import encode

        with self._lock:
            others = [(u, v, t) for u, (v, t) in documents.items() if u != exclude][: self.max_documents]
            for stale in set(self._tokens) - set(documents):
                del self._tokens[stale]
            if not others:
                return None
            key = tuple((u, v) for u, v, _ in others) + (key_len,)
            if key == self._key and self._index is not None:
                return self._index
            for uri, version, text in others:
                cached = self._tokens.get(uri)
                if cached is None or cached[0] != version:
                    ids = encode(tokenizer, text[: self.max_tokens * _CHARS_PER_TOKEN])[: self.max_tokens]
                    self._tokens[uri] = (version, ids)
            index = NgramIndex(key_len=key_len, max_sequences=len(others) + 1, max_candidates=64)
            for uri, _, _ in others:
                index.add(self._tokens[uri][1])
            self._key, self._index = key, index
            return index
