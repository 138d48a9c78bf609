"""Draft budget from the hardware: the cost of a whole step per bucket.

With graphs or a compiled step the verifier pads every tree to a bucket of query rows
(1, 4, 8, ..., 128; row 0 is the root), so a step costs the same for every tree size in
one bucket; eager steps run the rows they have (``Verifier.step_rows``), and their cost
is taken as linear between the measured sizes (:attr:`CostCurve.padded` False). We measure the
whole step per bucket (host buffers, the device-side mask, the forward, the one
device->host copy, the acceptance walk and the KV compaction: ``Verifier.step``),
once per model, device and dtype, cache it as JSON, and at each step keep the prefix
of the best-first draft that maximises expected tokens per second::

    rate(k) = (1 + sum_{i<k} P_i) / (c(k) + draft_s)

(c(k): the step time of k nodes, i.e. of the bucket holding k + 1 rows where steps are
padded)

where P_i is the chance that the path to node i is accepted and ``draft_s`` is an
optional drafting cost per step (the decode loop passes none to the trim). What the
drafter is asked for does depend on timing: :class:`DraftCost` learns the measured
drafting time and :meth:`StepBudget.request` sizes the request by it, so an offline
replay takes the same steps as a run only with the same drafting-cost model (a test pins
one on both). k = 0 (bucket 1, an AR step) wins whenever no tree pays for
itself; then :class:`StepBudget` drafts nothing for the next 1, 2, 4, then 8 steps.

P_i comes from :class:`AcceptanceModel`: the product, along the path, of each node's
chance of being accepted once its parent was, learned per session from what the model
accepted, by depth and by the node's share of its parent's retrieved continuations.
The trie's own weight share of a path is no such probability: a chain that only one
source drafted has share 1 at every depth, while on 20 repository tasks (qwen2.5-coder
0.5B) such nodes were accepted 57% of the time at depth 1, 54-57% at depth 2-3 and 93%
from depth 6 on, once their parent was.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from time import monotonic as _wall_clock, process_time as _cpu_clock  # a unit's share of the CPU (not the steps' timer)
from dataclasses import dataclass, field
from pathlib import Path

import torch

from fastcoder.trie import DraftTree
from fastcoder.verifier import PREFILL_CHUNKS_CPU, KVState, Verifier

log = logging.getLogger(__name__)

CURVE_VERSION = 13  # bump when the measurement changes, so old curves are re-measured (8: AR steps run 1 row; 9: q/k/v and gate/up fused; 10: each timed step after one of its size; 11: prefill chunks timed; 12: lengths interleaved, short held below long; 13: prefill pieces timed in every chunk)
LENGTHS = (512, 2048)
"""Attended lengths (cached rows) the curve is measured at."""
CONTENDED = 0.7
"""A measurement counts as taken under load when the process got less than this share of
its threads' wall time on the CPU (other processes took the rest)."""
PREFILL_HOLD_STEPS = 8
"""The longest a prefill chunk's forward may take for :meth:`CostCurve.prefill_chunk` to
choose it, in 1-row steps at the curve's longest measured context: what a superseded
request's prefill can keep the model thread (a request for the same document loses nothing
by it: its prompt starts with what the chunk prefills; one elsewhere waits), counted in the
machine's own step so that a fast or slow phase of a shared machine moves both alike. A
2-vCPU AMD EPYC with AVX512-BF16: the default 128-row chunk ~7.5 steps (0.22 s / 29 ms), a
256-row one ~14; a 2-vCPU Intel Xeon with AMX (forty-fourth session): a 256-row chunk 3.6-4.8
steps, in a fast phase (0.42 s / 102-118 ms) and a slow one (0.57 s / 118 ms) alike, where
an absolute bound of 0.5 s first chose 256 and then, in the slow phase, 128."""
PREFILL_GAIN = 0.95
"""A larger prefill chunk is chosen only where it costs at most this fraction of the
smallest chunk's time per token. 0.9 while the chunks were timed on different pieces (a
margin against that noise); with pieces timed in both (:func:`paired_prefill`) the median
ratio's own spread is ~0.02 on the AMX Xeon (true ratio ~0.88), so 0.95 keeps its choice
steady there; a CPU near 0.95 gains ~5% by either choice."""


@dataclass
class CostCurve:
    """Measured whole-step time (seconds) per bucket: ``ks[j]`` is the most draft nodes
    bucket j holds (bucket rows - 1), ``seconds[j]`` its step time. c(k) is the time of
    the smallest bucket holding k nodes (a step function), or, for a verifier that does
    not pad (``padded`` False), linear between the measured sizes."""

    ks: list[int]
    seconds: list[float]
    context_len: int = 512
    """The attended length ``seconds`` was measured at."""
    by_length: dict[int, list[float]] = field(default_factory=dict)
    """Step times per bucket at other attended lengths (measured)."""
    padded: bool = True
    """Steps run a whole bucket of rows (graphs, compiled steps); False: they run the rows
    they have (eager), so a size between two measured ones costs in between."""
    prefill: dict[int, float] = field(default_factory=dict)
    """Prefill seconds per token by chunk rows (CPU: :data:`~fastcoder.verifier.PREFILL_CHUNKS_CPU`,
    each piece of the measurement's contexts timed in every chunk: :func:`paired_prefill`);
    empty: not measured."""

    def at(self, length: int) -> "CostCurve":
        """The curve for a step attending ``length`` cached rows: per bucket, linear in
        the length between the two nearest measured lengths (beyond the longest, the
        last segment's slope, never negative; below the shortest, the shortest)."""
        table = {self.context_len: self.seconds, **self.by_length}
        if len(table) < 2:
            return self
        lens = sorted(table)
        if length <= lens[0]:
            return CostCurve(self.ks, list(table[lens[0]]), lens[0], padded=self.padded)
        i = next((i for i in range(1, len(lens)) if length <= lens[i]), len(lens) - 1)
        lo, hi = lens[i - 1], lens[i]
        f = (length - lo) / (hi - lo)
        seconds = [a + (max(0.0, b - a) if f > 1 else b - a) * f for a, b in zip(table[lo], table[hi])]
        for j in range(1, len(seconds)):  # non-decreasing in k, as measured
            seconds[j] = max(seconds[j], seconds[j - 1])
        return CostCurve(self.ks, seconds, length, padded=self.padded)

    def to_json(self) -> dict:
        return {"ks": list(self.ks), "seconds": [float(x) for x in self.seconds], "context_len": self.context_len,
                "by_length": {str(n): [float(x) for x in v] for n, v in sorted(self.by_length.items())},
                "padded": self.padded, "prefill": {str(n): float(x) for n, x in sorted(self.prefill.items())}}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> "CostCurve":
        """From :meth:`to_json` (or an older report's ``{"ks", "seconds"}``: padded)."""
        return cls(list(data["ks"]), [float(x) for x in data["seconds"]], int(data.get("context_len", 512)),
                   {int(n): [float(x) for x in v] for n, v in (data.get("by_length") or {}).items()},
                   bool(data.get("padded", True)), {int(n): float(x) for n, x in (data.get("prefill") or {}).items()})  # fmt: skip

    def prefill_chunk(self, default: int) -> int:
        """The prefill chunk this machine should run: the largest timed one whose forward
        takes at most :data:`PREFILL_HOLD_STEPS` 1-row steps at the longest measured context
        (a superseded request's prefill keeps the model thread until its chunk ends) and
        costs at most :data:`PREFILL_GAIN` of the smallest timed chunk's time per token;
        ``default`` when none was timed."""
        if len(self.prefill) < 2:
            return default
        step = max([self.seconds[0]] + [v[0] for v in self.by_length.values()])  # c(0) at the longest context
        smallest = min(self.prefill)
        best = smallest
        for rows, per_token in sorted(self.prefill.items()):
            if rows * per_token <= PREFILL_HOLD_STEPS * step and per_token <= PREFILL_GAIN * self.prefill[smallest]:
                best = rows
        return best

    def cost(self, k: int) -> float:
        for j, (kk, s) in enumerate(zip(self.ks, self.seconds)):
            if k <= kk:
                if self.padded or j == 0 or k == kk:
                    return s
                k0, s0 = self.ks[j - 1], self.seconds[j - 1]
                return s0 + (s - s0) * (k - k0) / (kk - k0)
        slope = (self.seconds[-1] - self.seconds[-2]) / max(self.ks[-1] - self.ks[-2], 1)  # past the largest bucket
        return self.seconds[-1] + slope * (k - self.ks[-1])

    def best_size(self, probs: list[float], draft_s: float = 0.0, extra_rows: int = 0, per_node_s: float = 0.0) -> int:
        """Number of leading nodes to verify (0..len(probs)): for each bucket the most
        nodes it holds, the bucket with the best expected tokens per second. ``probs``:
        each node's chance that its path is accepted, best-first.
        ``extra_rows``: rows the step holds besides the root and the nodes (the prompt
        tokens a generation's first step runs): they take bucket room and yield nothing.
        ``draft_s + per_node_s * k``: drafting time charged to a step of k nodes
        (``per_node_s`` > 0, or a curve that is not ``padded``: every size k is tried,
        not only each bucket's largest)."""
        best_k, best_rate = 0, 1.0 / self.cost(extra_rows)  # k = 0: no tree, nothing drafted
        prefix = [0.0]
        for p in probs:
            prefix.append(prefix[-1] + p)
        if per_node_s > 0 or not self.padded:
            for k in range(1, len(probs) + 1):
                rate = (1.0 + prefix[k]) / (self.cost(k + extra_rows) + draft_s + per_node_s * k)
                if rate > best_rate:
                    best_k, best_rate = k, rate
            return best_k
        for kk, s in zip(self.ks, self.seconds):
            k = min(kk - extra_rows, len(probs))
            if k <= 0:
                continue
            rate = (1.0 + prefix[k]) / (s + draft_s)
            if rate > best_rate:
                best_k, best_rate = k, rate
            if kk - extra_rows >= len(probs):
                break
        return best_k


class AcceptanceModel:
    """How likely the model is to accept a draft node once it accepted the node's
    parent, learned from the steps of one session (a document, a benchmark task group).

    A node's *share* is its trie weight over its parent's (over all depth-1 weight for a
    child of the root): the fraction of the retrieved continuations that go on with its
    token. A node's *agreement* is how many sources drafted the path to it
    (:attr:`DraftTree.agree`). Nodes are counted in cells by depth (1 .. :data:`DEPTHS`,
    deeper ones with the last), share (:data:`SHARE_BUCKETS` equal bins) and agreement
    (1, 2, 3 or more: :data:`AGREE`); a cell's estimate is::

        q = (accepted + PRIOR_WEIGHT * PRIOR_SCALES[agreement] * share) / (seen + PRIOR_WEIGHT)

    so a fresh session starts from ``PRIOR_SCALES[agreement] * share`` and follows what
    its own steps show. Only nodes whose parent was accepted (or the root's children) are
    counted: the others were never tested. Counts are halved once a cell has seen
    :data:`MAX_SEEN` nodes, so the estimate keeps following the document.

    Agreement (twenty-eighth session): at the same share, a node that several sources
    drafted is far likelier to be accepted. Depth-1 nodes of 16-node trees in the offline
    replay of 20 repository tasks (qwen2.5-coder-0.5b): share >= 0.8, 1 / 2 / 3+ sources:
    accepted 18% / 42% / 67%; share 0.4-0.6: 8% / 40% / 32%. The prior scales come from
    another 20 tasks (the suite's ``--seed 1``: least squares 0.49 / 0.74 / 0.94), rounded
    to (0.4, 0.7, 0.9) with weight 8 after six variants were compared on both task sets;
    the replay's estimated speedup over AR went 1.56x -> 1.65x on the suite's default 20
    tasks, 1.52x -> 1.57x on the seed-1 ones (the run's own, corrected cost curve); in the
    suite, interleaved: FastCoder 1.55x -> 1.60x AR (``agreement=False`` is the model
    before, the ``fastcoder-no-agree`` ablation).

    Measured with the offline simulator (``fastcoder bench --simulate`` machinery, real
    decode loop over recorded greedy outputs, 20 repository tasks, qwen2.5-coder-0.5b,
    the run's own cost curve), against the trie share times one learned scalar (the
    budget before): estimated speedup over AR 1.41 -> 1.67 (bf16, AVX512-BF16 CPU, where
    a 4-row step costs what a 1-row step does), 1.51 -> 1.78 (fp32, 8 tasks), and with
    other CPUs' curves put in the same records 1.11 -> 1.15 (AVX2, fp32: 4 rows cost 2.1x
    one) and 1.49 -> 1.71 (a flat AMX-like curve). A prior scale between 0.4 and 0.8 gave
    the same within 1%; 1.0 (trusting the share) 1.11, which learning pulls back only
    slowly: the scale matters, the learning refines it. Keying the cells by draft source
    too, or by whether the last step accepted anything, changed the estimate by < 0.5%.
    Then measured (``fastcoder bench --suite repo --limit 20``, the same CPU, bf16): FastCoder
    1.28x -> 1.87x AR, 1.12x -> 1.62x ``hf-pld``.
    """

    DEPTHS = 6
    SHARE_BUCKETS = 5
    AGREE = 3
    """Cells apart for nodes drafted by 1, 2 and 3 or more sources."""
    PRIOR_SCALES = (0.4, 0.7, 0.9)
    """The prior's share scale for 1, 2 and 3+ agreeing sources."""
    PRIOR_WEIGHT = 8.0
    UNAGREED = (0.6, 4.0)
    """Prior scale and weight of the model before agreement (``agreement=False``)."""
    MAX_SEEN = 400

    def __init__(self, agreement: bool = True) -> None:
        self.agreement = agreement
        self.cells: dict[tuple[int, int, int], list[float]] = {}  # (depth, share bin, agreement) -> [seen, accepted]

    def _cell(self, depth: int, share: float, agree: int = 1) -> tuple[int, int, int]:
        return (min(depth, self.DEPTHS), min(self.SHARE_BUCKETS - 1, int(share * self.SHARE_BUCKETS)),
                max(1, min(agree, self.AGREE)) if self.agreement else 1)  # fmt: skip

    def q(self, depth: int, share: float, agree: int = 1) -> float:
        """The chance a node at ``depth`` with ``share``, drafted by ``agree`` sources, is
        accepted, its parent being so."""
        cell = self._cell(depth, share, agree)
        seen, hits = self.cells.get(cell, (0.0, 0.0))
        scale, weight = (self.PRIOR_SCALES[cell[2] - 1], self.PRIOR_WEIGHT) if self.agreement else self.UNAGREED
        return (hits + weight * scale * share) / (seen + weight)

    def observe(self, depths: list[int], parents: list[int], shares: list[float], accepted: list[int],
                agree: list[int] | None = None) -> None:  # fmt: skip
        """Count one verified tree: node i (``depths``/``parents``/``shares``/``agree``) was
        tested when its parent was the root or accepted, and passed when it is in ``accepted``."""
        ok = set(accepted)
        agree = agree or [1] * len(depths)
        for i, (d, par, sh, ag) in enumerate(zip(depths, parents, shares, agree)):
            if par < 0 or par in ok:
                cell = self.cells.setdefault(self._cell(d, sh, ag), [0.0, 0.0])
                cell[0] += 1
                cell[1] += i in ok
                if cell[0] >= self.MAX_SEEN:
                    cell[0] /= 2
                    cell[1] /= 2

    def rescore(self, tree: DraftTree) -> tuple[DraftTree, list[float]]:
        """``tree`` reordered best-first by the chance its paths are accepted (its
        ``probs`` become those chances; parents still come before children), and the
        nodes' shares in the new order (for :meth:`observe`)."""
        n = len(tree)
        shares = [min(1.0, tree.probs[i] / tree.probs[p]) if p >= 0 and tree.probs[p] > 0 else min(1.0, tree.probs[i])
                  for i, p in enumerate(tree.parents)]  # fmt: skip
        agree = tree.agree or [1] * n
        path = [0.0] * n
        kids: list[list[int]] = [[] for _ in range(n + 1)]
        for i, p in enumerate(tree.parents):  # parents come before children
            path[i] = self.q(tree.depths[i], shares[i], agree[i]) * (path[p] if p >= 0 else 1.0)
            kids[p + 1].append(i)
        order: list[int] = []
        heap = [(-path[i], i) for i in kids[0]]
        heapq.heapify(heap)
        while heap:
            _, i = heapq.heappop(heap)
            order.append(i)
            for c in kids[i + 1]:
                heapq.heappush(heap, (-path[c], c))
        new = {old: j for j, old in enumerate(order)}
        out = DraftTree(
            [tree.tokens[i] for i in order],
            [new[tree.parents[i]] if tree.parents[i] >= 0 else -1 for i in order],
            [tree.depths[i] for i in order],
            [tree.sources[i] for i in order],
            [path[i] for i in order],
            [agree[i] for i in order],
        )
        return out, [shares[i] for i in order]


class DraftCost:
    """What drafting a tree of ``m`` requested nodes costs, ``a + b * m`` seconds, fitted
    online from the decode loop's measured drafting times (exponentially weighted least
    squares; proportional to ``m`` until two request sizes were seen). Drafting runs on
    the host in Python: on a 2-vCPU AMD EPYC, 0.5 ms for 8 nodes and 1.7 ms for 64 on the
    repo suite (+0.45 ms of budget rescoring), about 3% of a CPU step but 40-50% of an
    H100 step (4 ms)."""

    DECAY = 0.95

    def __init__(self, fixed: tuple[float, float] | None = None) -> None:
        self.fixed = fixed  # (a, b) given, nothing learned: steps that do not depend on timing
        self.n = self.sm = self.st = self.smm = self.smt = 0.0

    def observe(self, m: int, seconds: float) -> None:
        if m <= 0 or seconds < 0 or self.fixed is not None:
            return
        d = self.DECAY
        self.n, self.sm, self.st = d * self.n + 1, d * self.sm + m, d * self.st + seconds
        self.smm, self.smt = d * self.smm + m * m, d * self.smt + m * seconds

    def coefficients(self) -> tuple[float, float] | None:
        """(a, b) in seconds and seconds per node, or None before any observation."""
        if self.fixed is not None:
            return self.fixed
        if self.n <= 0 or self.sm <= 0:
            return None
        mm, mt = self.sm / self.n, self.st / self.n
        var = self.smm / self.n - mm * mm
        if var > 1e-6 * mm * mm:
            b = max(0.0, (self.smt / self.n - mm * mt) / var)
            return max(0.0, mt - b * mm), b
        return 0.0, mt / mm


class StepCalibration:
    """The cost curve against the steps the decode loop times: the budget prices a tree
    with ``f0 * (c(0) + r * (c(k) - c(0)))``, where ``f0`` is what the 1-row steps (no
    draft) cost against the curve's ``c(0)`` and ``r`` what a tree's rows beyond the root
    cost against the curve's ``c(k) - c(0)`` once both are scaled by ``f0``, learned online
    per engine from exponentially weighted sums (:data:`DECAY` per step). ``f0`` starts at
    1 (a prior worth :data:`PRIOR_STEPS` steps that decays with the data); ``r`` keeps a
    prior of 1 worth :data:`RATIO_PRIOR_STEPS` steps that does not decay, so it moves only
    on evidence that persists: a tree's extra rows are a few ms against a step of ~30, and
    a 5% error in ``f0`` alone moves their estimate by a third (two suite runs with a
    fresh curve learned 0.78 and 1.26 for what is, there, the curve's own ratio). Each
    factor is kept within :data:`LIMITS`.

    Why (thirty-fourth session, typing replay through the real server on a 2-vCPU AMD EPYC,
    qwen2.5-coder-0.5b bf16, prompts of ~1,650 tokens): the steps the server ran cost
    43.7 ms with no draft, 50.0 ms with 1-2 nodes and 56.1 with 3-4 (least squares over 79
    generations), where the cached curve priced them ~29 / ~33 / ~35 ms: that curve had
    been measured on another day's machine of the same name (a 3-node tree +3.8 ms at
    2,048 rows; the same session's fresh curve +8 ms), and the server's steps share two
    cores with its own threads and the editor. Only ``r`` changes which tree the budget
    picks; ``f0`` also reaches :attr:`StepBudget.step_s` (the source gate weighs a
    datastore's search against it). The output does not depend on it (every tree is
    verified exactly); an offline simulation that must take a run's steps passes none.

    Not used by default (:attr:`~fastcoder.config.DecodeConfig.step_calibration`): with a
    fresh curve the server still learned ``r`` ~2.8-3.7, from the steps that run after an
    early answer while the server handles the next keystrokes beside them; the steps
    before the answer cost about what the curve says (1-2 nodes 1.08x a 1-row step, the
    curve ~1.13x), and trees priced by ``r`` there paid less (docs/BENCHMARKS.md,
    thirty-fourth session)."""

    DECAY = 0.97
    """Per observed step (~33 steps of memory)."""
    PRIOR_STEPS = 8.0
    RATIO_PRIOR_STEPS = 30.0
    LIMITS = (0.5, 4.0)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # decayed sums: 1-row steps [observed s, curve s, steps] (seeded at the first one
        # with the prior, which decays with them); tree steps [observed - f0 * c(0),
        # f0 * (c(k) - c(0)), steps] (the prior added when read, never decayed)
        self._base = [0.0, 0.0, 0.0]
        self._tree = [0.0, 0.0, 0.0]
        self._extra = 0.0  # the last f0 * (c(k) - c(0)): the ratio prior's scale

    def factors(self) -> tuple[float, float]:
        """``(f0, r)``."""
        with self._lock:
            return self._factors()

    def _factors(self) -> tuple[float, float]:
        lo, hi = self.LIMITS
        obs, pred, _ = self._base
        f0 = min(hi, max(lo, obs / pred)) if pred > 0 else 1.0
        w = self.RATIO_PRIOR_STEPS * self._extra
        obs, pred, _ = self._tree
        r = min(hi, max(lo, (obs + w) / (pred + w))) if pred + w > 0 else 1.0
        return f0, r

    def observe(self, curve: CostCurve, k: int, seconds: float) -> None:
        """A step of ``k`` draft nodes (and forced rows) that the curve ``curve`` (at the
        step's attended length, uncalibrated) priced took ``seconds``."""
        if seconds <= 0:
            return
        c0, ck = curve.cost(0), curve.cost(k)
        d = self.DECAY
        with self._lock:
            f0, _ = self._factors()
            if k <= 0:
                b = self._base
                if b[2] == 0:
                    b[:] = [self.PRIOR_STEPS * c0, self.PRIOR_STEPS * c0, self.PRIOR_STEPS]
                b[:] = [d * b[0] + seconds, d * b[1] + c0, d * b[2] + 1]
            elif ck > c0:
                self._extra = f0 * (ck - c0)
                t = self._tree
                t[:] = [d * t[0] + (seconds - f0 * c0), d * t[1] + self._extra, d * t[2] + 1]

    def adjust(self, curve: CostCurve) -> CostCurve:
        """``curve`` (at one attended length) as the steps measured it."""
        f0, r = self.factors()
        if f0 == 1.0 and r == 1.0:
            return curve
        s0 = curve.seconds[0]
        return CostCurve(curve.ks, [f0 * (s0 + r * (s - s0)) for s in curve.seconds], curve.context_len, padded=curve.padded)

    def to_json(self) -> dict:
        with self._lock:
            f0, r = self._factors()
            return {"base": round(f0, 3), "tree": round(r, 3), "steps": [round(self._base[2], 1), round(self._tree[2], 1)]}


class StepBudget:
    """The budget state shared by the decode loop and the offline simulator: the
    session's :class:`AcceptanceModel` (carried across a document's generations by
    ``Session.acceptance``, since one generation is too short to learn it), the
    session's :class:`DraftCost`, and the back-off that drafts nothing for a while (1,
    2, 4, then 8 steps) after a tree that did not pay.

    :meth:`request` sizes what the drafter is asked for: after each trim, the number of
    nodes worth *drafting* is the best prefix when every node also costs its drafting
    time (``b`` per node; the fixed part is paid anyway); the next request is
    :data:`SLACK` times that (rounded up to 8, 16, 32, 64), twice the last request when
    all of it was worth it.
    Where steps are cheap and drafting is not (a GPU), this asks for fewer nodes; on a
    CPU, where the trim keeps few nodes, it saves most of the drafting of nodes the trim
    throws away.

    ``curve`` None (or ``adaptive`` False) keeps trees as drafted (and learns nothing), cut to
    the path below where ``chain_only``. ``calibration``: the engine's
    :class:`StepCalibration`, which prices trees by the steps measured in this process
    (:meth:`observe_step` feeds it); None prices them by the curve alone.

    ``chain_only`` (the verifier's :attr:`~fastcoder.verifier.Verifier.exact_paths`: CPU
    bf16, batch-invariant steps without path attention): the verifier accepts along the path of first children
    only, and where the model's choice is another child that choice is the bonus token it
    would be without that child; so every node off that path is a row verified for
    nothing. :meth:`trim` then keeps the path of first children of the rescored tree (the
    likeliest child at each depth) and prices and learns from that chain alone."""

    MAX_BACKOFF = 8
    REQUEST_SIZES = (8, 16, 32, 64)
    SLACK = 3.0
    """The request is this many times the nodes worth drafting. Offline replay of 20 repo
    tasks (sim over recorded AR outputs, drafting timed on a 2-vCPU AMD EPYC): with the
    H100's flat curve (4-5 ms for 1..128 rows) est. 1.43x AR always asking 64 -> 1.63x
    (slack 2) / 1.60x (slack 3); with the CPU's bf16 curve 1.96x -> 1.93x (2) / 1.96x (3)."""

    def __init__(
        self,
        curve: CostCurve | None,
        adaptive: bool = True,
        acceptance: AcceptanceModel | None = None,
        draft_cost: DraftCost | None = None,
        chain_only: bool = False,
        calibration: StepCalibration | None = None,
    ) -> None:
        self.curve = curve if adaptive else None
        self.chain_only = chain_only
        self.calibration = calibration
        self._priced: CostCurve | None = None  # the uncalibrated curve at the last trim's length
        self.acceptance = acceptance if acceptance is not None else AcceptanceModel()
        self.draft_cost = draft_cost if draft_cost is not None else DraftCost()
        self._want: int | None = None  # nodes worth drafting, judged on the last tree
        self._asked = 0  # the last request
        self._backoff = 0
        self._idle = 0
        self._shares: list[float] = []  # of the last tree trim() returned, node by node
        self.step_s: float | None = None  # what the curve says the step trim() sized costs

    def should_draft(self) -> bool:
        """False while backing off (the step runs as bucket 1 without drafting)."""
        if self._idle > 0:
            self._idle -= 1
            return False
        return True

    def trim(self, tree: DraftTree, length: int | None = None, extra_rows: int = 0) -> DraftTree:
        """The best-first prefix of ``tree`` (reordered by the acceptance model) with the
        best expected tokens per second, for a step attending ``length`` cached rows
        (None: the curve as measured) and holding ``extra_rows`` rows besides the root and
        the nodes (forced prompt tokens)."""
        self._shares = []
        self.step_s = None
        self._priced = None
        if self.curve is None:
            return self._chain(tree, [])[0] if len(tree) else tree
        self._priced = curve = self.curve if length is None else self.curve.at(length)
        if self.calibration is not None:
            curve = self.calibration.adjust(curve)
        if not len(tree):
            self.step_s = curve.cost(extra_rows)
            return tree
        tree, shares = self._chain(*self.acceptance.rescore(tree))
        k = curve.best_size(tree.probs, extra_rows=extra_rows)
        ab = self.draft_cost.coefficients()
        if ab is not None:  # how many of these nodes were worth drafting at all
            self._want = curve.best_size(tree.probs, extra_rows=extra_rows, draft_s=ab[0], per_node_s=ab[1])
        tree, self._shares = tree.truncate(k), shares[:k]
        self.step_s = curve.cost(len(tree) + extra_rows)
        if len(tree):
            self._backoff = 0
        else:  # no tree paid: draft nothing for the next steps
            self._backoff = min(self.MAX_BACKOFF, max(1, 2 * self._backoff))
            self._idle = self._backoff
        return tree

    def _chain(self, tree: DraftTree, shares: list[float]) -> tuple[DraftTree, list[float]]:
        """``tree`` cut to its path of first children where :attr:`chain_only`."""
        if not self.chain_only:
            return tree, shares
        path = tree.first_path()
        if len(path) == len(tree):
            return tree, shares
        return tree.permute(path), ([shares[i] for i in path] if shares else [])  # no shares: no curve

    def request(self, limit: int) -> int:
        """How many nodes to ask the drafter for (at most ``limit``)."""
        if self.curve is None or self._want is None:
            asked = limit
        else:
            want = 2 * self._asked if self._want >= self._asked else int(self.SLACK * self._want + 0.999)
            asked = next((m for m in self.REQUEST_SIZES if m >= want), self.REQUEST_SIZES[-1])
        self._asked = min(limit, asked)
        return self._asked

    def observe_drafting(self, requested: int, seconds: float) -> None:
        """The measured drafting time of a request (feeds :class:`DraftCost`)."""
        if self.curve is not None:
            self.draft_cost.observe(requested, seconds)

    def observe_step(self, k: int, seconds: float) -> None:
        """The verify step of ``k`` rows beyond the root (draft nodes and forced prompt
        rows) that the last :meth:`trim` priced took ``seconds`` (feeds the calibration)."""
        if self.calibration is not None and self._priced is not None:
            self.calibration.observe(self._priced, k, seconds)

    def observe(self, tree: DraftTree, accepted: list[int]) -> None:
        """Learn from the step that verified ``tree`` (what :meth:`trim` returned, or a
        prefix of it) and accepted the nodes ``accepted``."""
        if self.curve is not None and len(tree) and len(self._shares) >= len(tree):
            self.acceptance.observe(tree.depths, tree.parents, self._shares[: len(tree)], accepted, tree.agree)


UNPADDED_POINTS = (5, 11)
"""Tree sizes measured besides the buckets' for a verifier that runs the rows it has (6
and 12 rows): on a 2-vCPU AMD EPYC at 2,048 cached rows a step of 5-6 rows cost 44 ms
between 4 rows' 37 and 8 rows' 51, above the straight line between them."""


def measure(verifier: Verifier, context_len: int = 512, rounds: int = 5) -> CostCurve:
    """Time one whole verification step (``Verifier.step``) per bucket on a
    ``context_len`` cache, with a full chain of bucket - 1 nodes (and of
    UNPADDED_POINTS nodes where the verifier does not pad to buckets).

    The sizes are interleaved over ``rounds`` rounds and each keeps its minimum: load
    from other processes only ever adds time, so the minimum is the least disturbed
    sample. Each timed step follows an untimed step of the same size, as a decode's steps
    follow steps of about their own size: a step right after a much larger one costs more
    (glibc gives the larger step's temporaries back to the system and the next step
    faults its pages in again: the penalty vanished with glibc's mmap and trim thresholds
    raised). Measured on a 2-vCPU AMD EPYC (avx512_bf16, Qwen2.5-Coder-
    0.5B bf16, 1,900 cached rows): 1 row 31.3 ms after 1-row steps, 35.7 ms right after a
    128-row step; 4 rows 34.8 vs 38.9. Before this warm step every round timed c(0) right
    after c(127), and the curve priced 4 rows at 1.00-1.03x one row where runs of 4-row
    steps cost 1.1-1.25x runs of 1-row ones (twenty-eighth session, ``docs/bench/curve-s28``).
    The warm steps make a measurement dearer: :func:`measure_lengths` 20.3-20.5 s against
    13.9-14.3 s before, there (paid once per model, device and dtype: the curve is cached).
    The curve is then made non-decreasing (c(k) = max over j <= k of c(j)).
    """
    return CurveMeasurement(verifier, (context_len,), rounds).finish()


PREFILL_PIECE = 256
"""Tokens of a measurement's context prefilled per unit (:class:`CurveMeasurement`); on the
CPU each piece is prefilled once in each of :data:`~fastcoder.verifier.PREFILL_CHUNKS_CPU`
(a unit each), the cache rolled back to the piece's start in between."""


def paired_prefill(pieces: Sequence[Mapping[int, float]]) -> dict[int, float]:
    """Prefill seconds a token by chunk rows from pieces each timed in every chunk
    (``{rows: seconds a token}`` per piece): the smallest chunk's best piece (as the
    curve's steps are each size's best round: :meth:`CostCurve.prefill_chunk` weighs a
    chunk's forward against a step), and each larger chunk's as that times the median of
    its ratio to the smallest chunk on the same piece. Empty when no piece was timed in
    two chunks.

    Why paired (forty-eighth session, 2-vCPU Intel Xeon with AMX): the pieces were timed in
    one chunk each, alternately, and the choice compared the sums; a slow spell over a few
    pieces moved it, and 256-row chunks cost 0.87-0.97x a token of 128-row ones in
    successive measurements, so the chunk chosen flipped between runs (and with it the
    first request's latency and, where long chunks round otherwise, AR's output). The same
    256 tokens re-prefilled as 2 x 128 and 1 x 256 rows in turn gave 256/128 = 0.878 as
    the median of 48 pairs (quartiles 0.857 / 0.910; ``docs/bench/probes-s48/chunk_rows_paired.py``).
    Why the best piece: a first version took the median, and one of three measurements in
    a row (``docs/bench/probes-s48/curve_prefill_choice.py``) met its prefill in a slow spell
    (2.51 ms a token at 128 rows against 1.83-1.89 in the others) and its steps in a fast one
    (a 1-row step 73 ms against 106-118): a 256-row chunk came to 8.2 steps, past
    :data:`PREFILL_HOLD_STEPS`, and the choice fell back to 128 rows."""
    both = [p for p in pieces if len(p) >= 2]
    if not both:
        return {}
    smallest = min(both[0])
    out = {smallest: min(p[smallest] for p in both)}
    for rows in both[0]:
        if rows != smallest:
            out[rows] = out[smallest] * statistics.median(p[rows] / p[smallest] for p in both if rows in p)
    return out


class CurveMeasurement:
    """:func:`measure` at each of ``lengths`` (the first length's curve, the others in
    ``by_length``), run in small units that can stop between any two and go on later: a
    server measures its first curve while the model thread is idle, between requests
    (:meth:`run`), instead of before its first answer. A unit is a piece of a context's
    prefill in one chunk (:data:`PREFILL_PIECE` tokens; each length's context, in a cache of
    its own, right before that length's first timed unit; on the CPU each piece in every
    prefill chunk, :func:`paired_prefill`) or one size's warm and timed step at one length; each round
    times every size at every length, the lengths interleaved, so that a slow spell of a shared
    machine falls on all of them alike. :meth:`conditions`: the process's share of its
    threads' wall time on the CPU over the units run (1.0 on a quiet machine; not judged
    on CUDA), recorded with the cached curve.

    Why the lengths interleave (forty-seventh session, 2-vCPU Intel Xeon with AMX, the
    issue's suite command): measured one after the other, the 512-row curve fell in a slow
    spell and the 2,048-row one did not: 1 row 146 ms at 512 rows against 110 at 2,048,
    16 rows 152 against 142, so trees looked almost free at short contexts (1.04x one row)
    and the run drafted 14.9 tokens a step where the forty-sixth session's drafted 7.3,
    at the same accepted length: FastCoder 2.00x AR there against 2.42x. A step attending
    fewer rows never costs more, so :meth:`curve` also holds each length's curve at or
    below every longer length's."""

    def __init__(self, verifier: Verifier, lengths: tuple[int, ...], rounds: int = 5) -> None:
        self.verifier = verifier
        self.lengths = tuple(lengths)
        self.rounds = rounds
        self.padded = bool(getattr(verifier, "padded", True))
        ks = [b - 1 for b in verifier.buckets]
        if not self.padded:
            ks = sorted(set(ks) | {k for k in UNPADDED_POINTS if k < max(ks)})
        self.ks = ks
        self.best = {n: [float("inf")] * len(ks) for n in self.lengths}
        on_cpu = getattr(getattr(verifier, "device", None), "type", "cpu") == "cpu"
        self._chunks = PREFILL_CHUNKS_CPU if on_cpu else ()
        pieces = sum(-(-n // PREFILL_PIECE) for n in self.lengths)
        self.units_total = pieces * max(1, len(self._chunks)) + len(self.lengths) * rounds * len(ks)
        self.units_done = 0
        self._filled = 0  # lengths whose context is prefilled
        self._kvs: dict[int, KVState] = {}
        self._ids: dict[int, list[int]] = {}
        self._round = self._li = self._j = 0  # the next timed unit: round, length index, size index
        self._wall = self._cpu = 0.0
        # CPU: every piece timed in each prefill chunk (seconds a token, by chunk rows); CUDA
        # prefills each piece once, in its one chunk
        self._pieces: list[dict[int, float]] = []
        self._pending: list[tuple[int, int, int | None]] = []  # the current piece's runs to go

    @property
    def done(self) -> bool:
        return self._round >= self.rounds

    def _unit(self) -> None:
        room = max(self.ks) + 1
        if self._filled <= self._li and self._filled < len(self.lengths):
            # the context of the next length to time, a piece at a time (each cache sized once
            # for all of it): each length's just before its first timed unit, so the first
            # length's first round comes before the longer contexts' prefills
            n = self.lengths[self._filled]
            if n not in self._kvs:
                vocab = int(getattr(self.verifier.model.config, "vocab_size", 1000))
                gen = torch.Generator().manual_seed(0)
                self._ids[n] = torch.randint(10, max(11, vocab - 10), (n + room,), generator=gen).tolist()
                self._kvs[n] = KVState()
            kv, ids = self._kvs[n], self._ids[n]
            if not self._pending:  # a new piece: in each CPU prefill chunk in turn, the order alternating piece to piece
                start = len(kv.ids)
                order = list(self._chunks) if self._chunks else [None]
                if len(self._pieces) % 2:
                    order.reverse()
                self._pieces.append({})
                self._pending = [(start, min(n, start + PREFILL_PIECE), c) for c in order]
            start, upto, chunk = self._pending.pop(0)
            kv.truncate(start)  # the piece once more, in the next chunk: from its start
            t0 = time.perf_counter()
            self.verifier.prefill(kv, ids[:upto], reserve=n - upto + room, chunk=chunk)
            if chunk is not None:
                self._pieces[-1][chunk] = (time.perf_counter() - t0) / (upto - start)
            if upto == n and not self._pending:
                self._filled += 1
            return
        n = self.lengths[self._li]
        kv, ids = self._kvs[n], self._ids[n]
        k = self.ks[self._j]
        tree = DraftTree.chain(ids[n + 1 : n + 1 + k], "probe")
        self.verifier.step(kv, ids[n], tree)  # untimed: the step before is of this size
        kv.truncate(n)
        t0 = time.perf_counter()
        self.verifier.step(kv, ids[n], tree)
        best = self.best[n]
        best[self._j] = min(best[self._j], time.perf_counter() - t0)
        kv.truncate(n)  # roll back whatever the step kept
        self._j += 1
        if self._j == len(self.ks):
            self._j, self._li = 0, self._li + 1
            if self._li == len(self.lengths):
                self._li, self._round = 0, self._round + 1
                if self.done:  # every length measured: the caches go
                    self._kvs, self._ids = {}, {}

    def run(self, stop: Callable[[], bool] = lambda: False) -> bool:
        """Units until the measurement is done (True) or ``stop()`` says so between two."""
        while not self.done and not stop():
            wall, cpu = _wall_clock(), _cpu_clock()
            self._unit()
            self._wall += _wall_clock() - wall
            self._cpu += _cpu_clock() - cpu
            self.units_done += 1
        return self.done

    def finish(self) -> CostCurve:
        """The rest of the units now, then the curve."""
        self.run()
        return self.curve()

    def curve(self) -> CostCurve:
        """The measured curve (made non-decreasing: a lucky low sample at a large k must not
        make the smaller ks look as cheap; and no length's step dearer than a longer
        length's at the same k)."""
        if not self.done:
            raise RuntimeError("the cost curve is not measured yet")
        return self._curve()

    @property
    def provisional_ready(self) -> bool:
        """Whether :meth:`provisional` has a curve (the first length's first round is timed)."""
        return self._round >= 1 or self._li >= 1

    def provisional(self) -> CostCurve | None:
        """The curve from the units timed so far, once every size was timed at the first
        length, else None: the lengths not timed yet are left out (the first length's
        curve then stands for every length, as :meth:`CostCurve.at` takes it). The first
        length's context and round come first (4 prefill units and 7 timed ones of the 90:
        2.8-3.5 s for Qwen2.5-Coder-0.5B on a 2-vCPU Intel Xeon with AMX, every length's
        after 10.6-12.4 s, fiftieth session); one sample a size, so a slow spell can price
        a size higher or lower than :meth:`curve` will. A server prices trees by it until
        the measurement is done, instead of drafting nothing."""
        return self._curve() if self.provisional_ready else None

    def _curve(self) -> CostCurve:
        per = {}
        for n, best in self.best.items():
            if not all(x < float("inf") for x in best):
                continue  # (provisional) not timed yet
            best = list(best)
            for j in range(1, len(best)):
                best[j] = max(best[j], best[j - 1])
            per[n] = best
        # fewer attended rows never cost more: each length at or below every longer one's
        # (the minimum of two non-decreasing curves is non-decreasing)
        longer: list[float] | None = None
        for n in sorted(per, reverse=True):
            if longer is not None:
                per[n] = [min(a, b) for a, b in zip(per[n], longer)]
            longer = per[n]
        first = self.lengths[0]
        prefill = paired_prefill(self._pieces)
        return CostCurve(self.ks, per[first], first, by_length={n: per[n] for n in self.lengths[1:] if n in per}, padded=self.padded,
                         prefill=prefill)  # fmt: skip

    def conditions(self) -> dict:
        """How contended the CPU was over the units (what the cache records with the curve)."""
        share = 1.0
        if getattr(getattr(self.verifier, "device", None), "type", "cpu") == "cpu" and self._wall > 0:
            share = min(1.0, self._cpu / (self._wall * max(1, torch.get_num_threads())))
        return {"load_per_cpu": round(_loadavg_per_cpu(), 2), "cpu_share": round(share, 2)}


def usable_lengths(verifier: Verifier, lengths: tuple[int, ...] = LENGTHS) -> tuple[int, ...]:
    """Those of ``lengths`` the model's positions allow with the largest bucket after them
    (the first always)."""
    limit = int(getattr(verifier.model.config, "max_position_embeddings", 0) or 0)
    room = verifier.buckets[-1] + 1
    return tuple(n for n in lengths if not limit or n + room <= limit) or (min(lengths),)


def measure_lengths(verifier: Verifier, lengths: tuple[int, ...] = LENGTHS, rounds: int = 5) -> CostCurve:
    """:func:`measure` at each of ``lengths`` that the model's positions allow (the
    first always), as one curve: the first length's, with the others in ``by_length``."""
    return CurveMeasurement(verifier, usable_lengths(verifier, lengths), rounds).finish()


def _loadavg_per_cpu() -> float:
    try:
        return os.getloadavg()[0] / max(1, os.cpu_count() or 1)
    except OSError:  # not available on this platform
        return 0.0


def _cache_file(key: str) -> Path:
    from fastcoder.models import cache_root

    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in key)
    return cache_root() / "costs" / f"{safe}.json"


def load_cached(key: str) -> tuple[CostCurve | None, bool]:
    """The cached curve for ``key`` (model|device|dtype|attention|graphs; what
    ``Engine.cost_curve`` measures once and caches), or None when there is none (or of
    another :data:`CURVE_VERSION`); and whether it is due to be measured again: it was
    measured under load (the process got less than ``CONTENDED`` of its CPU time) and the
    load average is now lower by at least 0.25 per CPU than it was then (a contended curve
    makes every step look dearer; still a measured one, so a server prices trees by it
    until the new one is measured)."""
    try:
        data = json.loads(_cache_file(key).read_text())
        if data.get("version") == CURVE_VERSION:
            curve = CostCurve.from_json(data)
            contended = float(data.get("cpu_share", 1.0)) < CONTENDED
            if not (contended and _loadavg_per_cpu() < float(data.get("load_per_cpu", 0.0)) - 0.25):
                return curve, False
            log.info("cost curve for %s was measured under load (CPU share %.2f, load %.2f per CPU): measuring again",
                     key, data.get("cpu_share"), data.get("load_per_cpu"))  # fmt: skip
            return curve, True
    except (OSError, ValueError, KeyError):
        pass
    return None, False


def save_measured(key: str, measurement: CurveMeasurement) -> CostCurve:
    """The curve ``measurement`` measured, written to the cache for ``key`` with how
    contended the CPU was meanwhile."""
    curve = measurement.curve()
    path = _cache_file(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump({**curve.to_json(), "key": key, "version": CURVE_VERSION, **measurement.conditions()}, fh)
    os.replace(tmp, path)
    return curve
