"""AR's own logits for a prompt, the reference that batch-invariance checks compare every
other step against (``docs/bench/bf16-rows/probe.py``, ``docs/bench/rows-s25/chains.py``,
``tests/test_batch_invariant.py``)."""

from __future__ import annotations

from typing import Sequence

import torch

from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier


def ar_logits(verifier: Verifier, ids: Sequence[int], steps: int, reserve: int = 256) -> tuple[KVState, list[int], list[torch.Tensor]]:
    """Prefill ``ids``, then ``steps`` greedy AR steps: the cache, the tokens (the
    prefill's first, then each step's) and each step's logits row (a copy, the model's
    dtype): logits[i] is what the step with root tokens[i] computed."""
    kv = KVState()
    first, _, _ = verifier.prefill(kv, list(ids), reserve=reserve)
    toks, logits = [first], []
    for _ in range(steps):
        r = verifier.step(kv, toks[-1], DraftTree())
        logits.append(verifier.last_logits[0].clone())
        toks.append(r.bonus)
    return kv, toks, logits
