"""A repository for the benchmark: its files (the indexer's workspace scan), their
tokens, the function-body tasks in it, and D_r without the answer.

D_r for a task = every scanned file of the project except the target file, plus the
target file with the body removed (:attr:`BenchTask.masked`). The other files are
tokenized once per project; one suffix-array build per task (a fraction of a second
for a project of a few 100k tokens) gives a store with no trace of the body.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from fastcoder_bench.suite.tasks import BenchTask, FunctionSpan, functions_in_file, is_test_path, make_repo_task, normalize_newlines
from fastcoder.datastore import TokenDatastore

log = logging.getLogger(__name__)


class RepoCorpus:
    """The indexable files of one repository, as the editor's D_r would see them."""

    def __init__(self, root: str | Path, name: str | None = None) -> None:
        from indexer.scan import WorkspaceFilter, read_source

        self.root = Path(root)
        self.name = name or self.root.name
        self.texts: dict[str, str] = {}
        wf = WorkspaceFilter(self.root)
        for f in wf.walk():
            src = read_source(f.path, wf.max_bytes)
            if src is not None and src.text.strip():
                self.texts[f.relpath] = normalize_newlines(src.text)
        self._tokens: dict[str, np.ndarray] | None = None
        self._fingerprint = ""

    # ------------------------------------------------------------------ tasks
    def functions(self) -> list[FunctionSpan]:
        """Selectable functions outside tests, sorted by (path, line)."""
        out: list[FunctionSpan] = []
        for rel in sorted(self.texts):
            if rel.endswith(".py") and not is_test_path(rel):
                out.extend(functions_in_file(rel, self.texts[rel]))
        return out

    def task(self, span: FunctionSpan, suite: str = "repo") -> BenchTask:
        return make_repo_task(
            f"{self.name}/{span.path}::{span.qualname}@{span.def_line}",
            self.root,
            span.path,
            self.texts[span.path],
            span.body_start,
            span.body_end,
            group=self.name,
            suite=suite,
            meta={"function": span.qualname},
        )

    # ------------------------------------------------------------------ D_r
    def tokenize(self, tokenizer: Any, fingerprint: str = "") -> None:
        """Tokenize every file once (batched, the indexer's encoder)."""
        if self._tokens is not None and fingerprint == self._fingerprint:
            return
        from fastcoder.tokens import encode_batch
        from indexer.tokenizing import batched

        rels = sorted(self.texts)
        toks: dict[str, np.ndarray] = {}
        for batch in batched(rels, lambda r: len(self.texts[r])):
            for rel, ids in zip(batch, encode_batch(tokenizer, [self.texts[r] for r in batch], special="parse")):
                toks[rel] = ids
        self._tokens = toks
        self._fingerprint = fingerprint

    @property
    def n_tokens(self) -> int:
        return sum(int(a.size) for a in (self._tokens or {}).values())

    def dr_for(self, task: BenchTask, tokenizer: Any, fingerprint: str = "") -> TokenDatastore:
        """D_r for ``task``: all files but the target, plus the masked target file."""
        self.tokenize(tokenizer, fingerprint)
        assert self._tokens is not None
        docs = [ids for rel, ids in sorted(self._tokens.items()) if rel != task.path]
        if task.masked is not None:
            from fastcoder.tokens import encode_batch

            docs.append(encode_batch(tokenizer, [task.masked], special="parse")[0])
        return TokenDatastore.build(docs, fingerprint=fingerprint, meta={"kind": "bench-dr", "task": task.id})
