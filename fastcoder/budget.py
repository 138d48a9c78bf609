"""Draft budget from the hardware.

Verifying k draft nodes costs c(k) (one forward of k + 1 tokens on a cached past).
We measure c(k) once per model, device and dtype, cache it as JSON, and at each step
keep the prefix of the best-first draft (nodes in decreasing weight) that maximises

    expected committed tokens / cost = (1 + sum_{i<k} p_i) / c(k)

where p_i is the node's estimated acceptance probability (its trie weight share,
scaled by a calibration factor learned from what was actually accepted).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier

log = logging.getLogger(__name__)

KS = (0, 1, 3, 7, 15, 31, 47, 63, 95)
CURVE_VERSION = 3  # bump when the measurement changes, so old curves are re-measured


@dataclass
class CostCurve:
    """Measured forward time (seconds) for k draft nodes, interpolated linearly."""

    ks: list[int]
    seconds: list[float]

    def cost(self, k: int) -> float:
        ks, s = self.ks, self.seconds
        if k <= ks[-1]:
            return float(np.interp(k, ks, s))
        slope = (s[-1] - s[-2]) / max(ks[-1] - ks[-2], 1)  # extrapolate linearly
        return s[-1] + slope * (k - ks[-1])

    def best_size(self, probs: list[float], calibration: float = 1.0) -> int:
        """Number of leading nodes to verify (0..len(probs))."""
        best_k, best_rate = 0, 1.0 / self.cost(0)
        expected = 1.0
        for k, p in enumerate(probs, start=1):
            expected += p * calibration
            rate = expected / self.cost(k)
            if rate > best_rate:
                best_k, best_rate = k, rate
        return best_k

    def best_fixed(self, expected_accept) -> int:
        """Best k for an acceptance model ``expected_accept(k)`` (for reports)."""
        return max(range(0, self.ks[-1] + 1), key=lambda k: (1 + expected_accept(k)) / self.cost(k))


def measure(verifier: Verifier, context_len: int = 512, rounds: int = 5, ks=KS) -> CostCurve:
    """Time one verification forward for each k on a ``context_len`` cache.

    The ks are interleaved over ``rounds`` rounds and each k keeps its minimum: load
    from other processes only ever adds time, so the minimum is the least disturbed
    sample. The curve is then made non-decreasing (c(k) = max over j <= k of c(j)).
    """
    vocab = int(getattr(verifier.model.config, "vocab_size", 1000))
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(10, max(11, vocab - 10), (context_len + 1 + max(ks),), generator=gen).tolist()
    kv = KVState()
    verifier.prefill(kv, ids[:context_len])
    base_ids = list(kv.ids)
    best = [float("inf")] * len(ks)
    for rnd in range(rounds + 1):
        for j, k in enumerate(ks):
            tree = DraftTree.chain(ids[context_len + 1 : context_len + 1 + k], "probe")
            t0 = time.perf_counter()
            verifier.step(kv, ids[context_len], tree)
            dt = time.perf_counter() - t0
            if rnd > 0:  # round 0 is the warm-up
                best[j] = min(best[j], dt)
            kv.truncate(len(base_ids))  # roll back whatever the step kept
    for j in range(1, len(best)):  # non-decreasing: a lucky low sample at a large k must
        best[j] = max(best[j], best[j - 1])  # not make the smaller ks look as cheap
    return CostCurve(list(ks), best)


def _cache_file(key: str) -> Path:
    from fastcoder.models import cache_root

    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in key)
    return cache_root() / "costs" / f"{safe}.json"


def load_or_measure(verifier: Verifier, key: str) -> CostCurve:
    """The cached curve for ``key`` (model|device|dtype), measuring it the first time."""
    path = _cache_file(key)
    try:
        data = json.loads(path.read_text())
        if data.get("version") == CURVE_VERSION:
            return CostCurve(data["ks"], data["seconds"])
    except (OSError, ValueError, KeyError):
        pass
    log.info("measuring verification cost curve c(k) for %s", key)
    curve = measure(verifier)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump({"ks": curve.ks, "seconds": curve.seconds, "key": key, "version": CURVE_VERSION}, fh)
    os.replace(tmp, path)
    return curve
