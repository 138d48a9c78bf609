"""The CPU matmul path, chosen by measurement: oneDNN-packed linear weights, and the
dtype ``auto`` picks.

What: :class:`PackedLinear` replaces an ``nn.Linear`` with the same layer whose weight
is reordered once into oneDNN's blocked layout (``torch.ops.mkldnn._reorder_linear_weight``)
and multiplied with ``torch.ops.mkldnn._linear_pointwise``, the kernel pair inductor's
CPU freezing uses. :func:`choose` decides, per machine, whether to pack and (for
``--dtype auto``) whether bfloat16 pays, by timing the model's largest matmul (its
``lm_head`` shape, capped at :data:`PROBE_MAX_OUT` output rows: well beyond any cache)
at :data:`PROBE_ROWS` query rows, plain and packed, in each candidate dtype. The
probe's timings are cached on disk per CPU, torch version, thread count and shape;
the choice and its timings are reported (``fastcoder.stats``, bench reports).

Why (measured 2026-11-24 on a 2-vCPU AMD EPYC with AVX512-BF16, no AMX, torch 2.13.0
CPU, Qwen2.5-Coder-0.5B, whole ``Verifier.step`` at a 512-row cache, 1 / 4 / 8 / 16 /
32 rows, the four paths side by side in one process: ``tests/matmul_bench.py``):

=============== ============================= ============================
dtype           plain ``F.linear``, ms        packed, ms
=============== ============================= ============================
bfloat16        83 / 90 / 100 / 140 / 179     55 / 58 / 71 / 89 / 138
float32         153 / 292 / 281 / 302 / 431   101 / 90 / 120 / 136 / 226
=============== ============================= ============================

and a 512-token prefill: float32 3.46 s -> 2.61 s, bfloat16 1.50 s -> 1.38 s. The
probe on the same machine ranks the four the same way (``lm_head`` at 1 / 16 rows:
float32 plain 40 / 102 ms, packed 19 / 29; bfloat16 plain 16 / 25, packed 12 / 17).

Numerics: packing changes the order of the sums, not what is computed: float32
outputs differ from ``F.linear`` by rounding (~1e-6 relative), bfloat16 ones were
bit-identical in our probes. AR and the tree steps run the same packed model, so
FastCoder's output stays identical to greedy decoding of that model (tested in
float32 against the unpacked model too).

Not packed: CUDA (cuBLAS is used as is), a dtype oneDNN cannot pack here (float16
without AVX512-FP16), and a weight shared with another module (tied embeddings) is
kept as it is besides the packed copy; every other plain weight is dropped once
packed, so memory does not grow.
"""

from __future__ import annotations

import json
import math
import logging
import os
import platform
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch

log = logging.getLogger(__name__)

PROBE_ROWS = (1, 16)
"""Query rows timed: an AR step and a typical tree step."""
PROBE_MAX_OUT = 65536
"""Output rows of the probe matrix at most (a 151,936-row lm_head is cut to this: the
probe stays far beyond the caches, and the float32 copy stays < 250 MB)."""
PROBE_REPS = 5
PROBE_MIN_ELEMENTS = 8 * 2**20
"""``auto`` probes (and may pack) only a model whose largest matmul has at least this
many weights; below it (test-sized models) the weights stay in the caches: plain."""
PACK_GAIN = 0.9
"""Pack where packed costs (sum over PROBE_ROWS) less than this times plain."""
BF16_GAIN = 0.8
"""``auto`` picks bfloat16 on the CPU only where its best path costs less than this
times float32's best: bfloat16 computes other logits than float32 (each is decoded exactly
as greedy AR in its own dtype: the verifier's CPU steps are batch-invariant), so float32 is
kept where bfloat16 does not pay."""
PROBE_VERSION = 1


KERNEL_FLAGS = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_fp16"})
"""The CPU flags that decide which matmul kernels run (part of the probe's and the cost
curve's cache keys)."""


def can_pack(dtype: torch.dtype) -> bool:
    """Whether oneDNN can pack a CPU weight of ``dtype`` on this machine."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(8, 8, dtype=dtype), None)
    except (RuntimeError, AttributeError):
        return False
    return True


class PackedLinear(torch.nn.Module):
    """``nn.Linear`` over a oneDNN-packed weight (CPU, no autograd)."""

    def __init__(self, linear: torch.nn.Linear, keep_weight: bool = False) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), None)
        self.bias = linear.bias
        self._weight = linear.weight if keep_weight else None
        # a 1-row call runs as 2 rows (the row twice) where oneDNN rounds a 1-row call
        # differently from a many-row one (:func:`mark_one_row_rounding`)
        self.pad_one_row = False

    @property
    def weight(self) -> torch.Tensor:
        """The weight in the plain layout (the kept one, or unpacked on demand)."""
        return self._weight if self._weight is not None else self.packed.to_dense()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pad_one_row and x.shape[-2] == 1:
            return torch.ops.mkldnn._linear_pointwise(torch.cat([x, x], dim=-2), self.packed, self.bias, "none", [], "")[..., :1, :]
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        pad = ", 1-row calls as 2" if self.pad_one_row else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, packed=onednn{pad}"


FUSED_GROUPS: dict[tuple[str, ...], str] = {
    ("q_proj", "k_proj", "v_proj"): "qkv_proj",
    ("gate_proj", "up_proj"): "gate_up_proj",
}
"""Sibling linear layers that read the same input, in the order a forward calls them
(transformers' Llama / Qwen2 / Mistral attention and MLP), and the name their fused layer
is registered under (:func:`pack_linears`)."""


class FusedPackedLinear(PackedLinear):
    """Sibling linear layers that read one input (q/k/v, gate/up) as one packed matmul
    whose output columns are theirs side by side; the siblings become :class:`FusedPart`
    views of it.

    Why: one oneDNN call for q, k and v (896 -> 1,152 for Qwen2.5-Coder-0.5B) and one for
    gate and up (896 -> 9,728) instead of five calls reads the same weights with fewer,
    larger kernels: the 24 layers' linear time of a 1-row step 13.9 -> 12.8 ms, 1-16 rows
    0.91-0.95x; whole batch-invariant steps 0.94-0.99x at 1-16 rows, 500 and 1,900 cached
    rows (2-vCPU AMD EPYC avx512_bf16, no AMX; ``docs/bench/fuse-s27``). The logits were
    bit-identical to the separate calls' there, in bf16 and in float32 (the kernels sum
    each output column over the same inputs in the same order); another CPU's kernels may
    round them otherwise, which changes no guarantee: AR and the trees run the same fused
    model, and batch invariance is probed on the fused shapes like any other
    (:func:`mark_one_row_rounding`).

    How the siblings share one call: the forward calls them in order on the same tensor
    (``self.q_proj(h)``, ``self.k_proj(h)``, ``self.v_proj(h)``). The first part computes
    the fused output and keeps it, with its input, until the last part has taken its
    columns; a part called on another tensor than the kept one (another model's forward
    order, a stray call) computes the fused output itself: always right, slower only. The
    kept pair is per thread."""

    def __init__(self, linears: list[torch.nn.Linear]) -> None:
        first = linears[0]
        weight = torch.cat([m.weight.detach() for m in linears])
        bias = torch.cat([m.bias.detach() for m in linears]) if first.bias is not None else None
        joined = torch.nn.Linear(first.in_features, weight.shape[0], bias=bias is not None, device="meta")
        joined.weight = torch.nn.Parameter(weight, requires_grad=False)
        if bias is not None:
            joined.bias = torch.nn.Parameter(bias, requires_grad=False)
        super().__init__(joined)
        bounds = [0]
        for m in linears:
            bounds.append(bounds[-1] + m.out_features)
        self.bounds = bounds
        self._kept = threading.local()

    def part(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """The output columns of sibling ``index`` for input ``x`` (a view)."""
        kept = getattr(self._kept, "pair", None)
        if kept is not None and kept[0] is x and index > 0:
            out = kept[1]
        else:
            out = self(x)
        last = index == len(self.bounds) - 2
        self._kept.pair = None if last else (x, out)
        return out[..., self.bounds[index] : self.bounds[index + 1]]

    def extra_repr(self) -> str:
        return super().extra_repr() + f", fused parts {[b - a for a, b in zip(self.bounds, self.bounds[1:])]}"


class FusedPart(torch.nn.Module):
    """One sibling of a :class:`FusedPackedLinear`: its columns of the fused output."""

    def __init__(self, fused: FusedPackedLinear, index: int) -> None:
        super().__init__()
        self.__dict__["fused"] = fused  # not a submodule: registered once, under the parent
        self.index = index
        self.in_features = fused.in_features
        self.out_features = fused.bounds[index + 1] - fused.bounds[index]

    @property
    def weight(self) -> torch.Tensor:
        return self.fused.weight[self.fused.bounds[self.index] : self.fused.bounds[self.index + 1]]

    @property
    def bias(self) -> torch.Tensor | None:
        b = self.fused.bias
        return None if b is None else b[self.fused.bounds[self.index] : self.fused.bounds[self.index + 1]]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fused.part(self.index, x)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, part {self.index} of a fused packed layer"


def _fuse_siblings(parent: torch.nn.Module, shared: set[int]) -> int:
    """Fuse each :data:`FUSED_GROUPS` group among ``parent``'s children that are plain CPU
    ``nn.Linear`` layers with one input size, dtype and bias kind and no shared weight;
    returns how many linear layers were fused."""
    count = 0
    for names, fused_name in FUSED_GROUPS.items():
        kids = [getattr(parent, n, None) for n in names]
        if not all(type(m) is torch.nn.Linear for m in kids) or hasattr(parent, fused_name):
            continue
        first = kids[0]
        if any(
            m.in_features != first.in_features
            or m.weight.dtype != first.weight.dtype
            or m.weight.device.type != "cpu"
            or (m.bias is None) != (first.bias is None)
            or id(m.weight) in shared
            for m in kids
        ):
            continue
        fused = FusedPackedLinear(kids)
        setattr(parent, fused_name, fused)
        for i, n in enumerate(names):
            setattr(parent, n, FusedPart(fused, i))
        count += len(kids)
    return count


ONE_ROW_PROBE_ROWS = 64
"""Random rows a :func:`mark_one_row_rounding` probe multiplies, one at a time and together.
A kernel that sums in another order shows it on some rows only (the bf16 outputs differ
where the float32 sums straddle a rounding boundary): Qwen2.5-Coder-0.5B's
``mlp.down_proj`` on 21% of random rows, so 6 rows missed it in one draw of two; 64 rows
miss it with probability ~3e-7."""
ONE_ROW_PROBE_BLOCK = 16
"""Rows per call of the 'together' side of that probe: a tree step's size. Not all 64 in one
call: on an Intel Xeon with AMX (forty-third session) oneDNN's packed bf16 kernel for calls
of more than 32 rows rounds otherwise than for 2-32 rows, whose rows equal 1-row calls there;
a 64-row call marked every layer of the model for nothing (:func:`uniform_rows` finds that
limit)."""
UNIFORM_PROBE_PAIRS = 8
"""2-row calls :func:`uniform_rows` compares per (shape, row count): spread over the rows."""
PROBE_OUTPUTS = ONE_ROW_PROBE_ROWS * 896
"""Output elements a rounding probe compares per shape, at least (the rows above times
Qwen2.5-Coder-0.5B's narrowest output, 896). A wider shape needs fewer rows for as many
elements: a kernel that sums in another order moves each element across a bf16 rounding
boundary about independently (``mlp.down_proj``'s 21% of 896-wide rows is ~2.6e-4 an
element), so one 151,936-wide ``lm_head`` row compares more elements than 64 rows of 896.
The probes' time is mostly the ``lm_head``'s one-row calls, each reading its whole 272 MB
weight: 64 of them took 1.39 s of a server start (2-vCPU Intel Xeon with AMX, forty-ninth
session)."""
MIN_PROBE_ROWS = 4
"""Rows (one-row probe) or 2-row pairs (:func:`uniform_rows`) per shape at least, however
wide: spread over the call's rows (a kernel may treat its last rows otherwise)."""


def probe_rows(out_features: int, most: int) -> int:
    """How many rows (or 2-row pairs, counted as rows) a rounding probe compares for a shape
    of ``out_features`` outputs: :data:`PROBE_OUTPUTS` elements, within
    [:data:`MIN_PROBE_ROWS`, ``most``]."""
    return min(most, max(MIN_PROBE_ROWS, math.ceil(PROBE_OUTPUTS / max(1, out_features))))


def _spread(n: int, total: int) -> list[int]:
    """``n`` indices spread evenly over ``range(total)``, the first and the last included."""
    if n >= total:
        return list(range(total))
    return sorted({round(i * (total - 1) / (n - 1)) for i in range(n)}) if n > 1 else [0]


def mark_one_row_rounding(model: torch.nn.Module) -> list[str] | None:
    """Find the linear layers whose 1-row call rounds differently and make them run 1 row
    as 2 (:attr:`PackedLinear.pad_one_row`); returns their names, or ``None`` where a
    linear layer of ``model`` is not packed (a plain ``F.linear`` takes other kernels per
    row count: the caller keeps its steps at 2 rows or more).

    Why: a batch-invariant verifier needs a token's logits to come out bit for bit the same
    whether its row was computed alone (an AR step) or among others (a tree step). oneDNN
    picks its packed bf16 kernel by shape, and one shape's 1-row call may sum in another
    order than its many-row calls, which agree row for row with each other. Padding
    every forward to 2 rows made that moot at the price of a whole second row (an AR step
    of Qwen2.5-Coder-0.5B 36.8 -> 35.9 ms at 512 cached rows without it, 2-vCPU AMD EPYC
    avx512_bf16, docs/bench/ar1-s26); padding only the layers that need it costs one row
    of those alone: on that CPU only ``mlp.down_proj`` (4,864 -> 896), whose 1-row call
    differed on ~21% of random rows. The probe: per distinct (in, out, bias, dtype) shape, up to ``ONE_ROW_PROBE_ROWS``
    random rows (:func:`probe_rows`: fewer for a wide shape) multiplied one at a time must equal the same rows multiplied together,
    bit for bit; the kernel choice depends on the shape only, so one layer of a shape
    answers for all of them. It runs under ``torch.inference_mode``, as the verifier's
    forwards do: outside it (a bias that requires grad) the q projection's 1-row call
    (896 -> 896 with bias) rounded otherwise too, on ~1 element in 5,000."""
    linears = [(n, m) for n, m in model.named_modules() if isinstance(m, (torch.nn.Linear, PackedLinear))]
    if any(not isinstance(m, PackedLinear) for _, m in linears):
        return None
    verdict: dict[tuple, bool] = {}
    marked = []
    gen = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for name, m in linears:
            dtype = m.packed.dtype
            key = (m.in_features, m.out_features, m.bias is not None, dtype)
            if key not in verdict:
                m.pad_one_row = False
                n = probe_rows(m.out_features, ONE_ROW_PROBE_ROWS)
                total = ONE_ROW_PROBE_BLOCK * math.ceil(n / ONE_ROW_PROBE_BLOCK)  # whole tree-step blocks
                x = (torch.randn(total, m.in_features, generator=gen) * torch.rand(total, 1, generator=gen) * 3).to(dtype)
                together = torch.cat([m(x[i : i + ONE_ROW_PROBE_BLOCK].unsqueeze(0))[0] for i in range(0, total, ONE_ROW_PROBE_BLOCK)])
                verdict[key] = any(not torch.equal(m(x[i : i + 1].unsqueeze(0))[0, 0], together[i]) for i in _spread(n, total))
            m.pad_one_row = verdict[key]
            if m.pad_one_row:
                marked.append(name)
    return marked


def uniform_rows(model: torch.nn.Module, sizes: Sequence[int]) -> int:
    """The largest of ``sizes`` up to which a call of that many rows gives every row the bits
    a 2-row call gives it, for every linear layer shape of ``model`` (packed or plain) and
    every tested size up to it; 2 when the smallest tested size already differs.

    Why: batch-invariant steps (:class:`fastcoder.verifier.Verifier`) need a token's row to
    come out the same in an AR step, a tree step of any size and a prefill chunk. On a
    2-vCPU AMD EPYC with AVX512-BF16 oneDNN's calls of 2 to 2,048 rows agree row for row; on
    an Intel Xeon with AMX (forty-third session, every Qwen2.5-Coder-0.5B shape) calls of more
    than 32 rows take the AMX kernel and round otherwise
    (``docs/bench/probes-s43/amx_rows_threshold-output.txt``): there the verifier keeps its
    tree steps at 32 rows and says its prefill chunks are not invariant. Each (shape, size)
    compares up to :data:`UNIFORM_PROBE_PAIRS` 2-row calls spread over the rows (fewer for a
    wide shape, :data:`MIN_PROBE_ROWS` at least: :func:`probe_rows`), under
    ``torch.inference_mode`` as the forwards run."""
    shapes: dict[tuple, torch.nn.Module] = {}
    for m in model.modules():
        if isinstance(m, PackedLinear):
            shapes.setdefault((m.in_features, m.out_features, m.bias is not None, m.packed.dtype), m)
        elif isinstance(m, torch.nn.Linear):
            shapes.setdefault((m.in_features, m.out_features, m.bias is not None, m.weight.dtype, "plain"), m)
    gen = torch.Generator().manual_seed(0)
    best = 2
    with torch.inference_mode():
        for size in sorted({int(s) for s in sizes if int(s) > 2}):
            for key, m in shapes.items():
                x = (torch.randn(size, m.in_features, generator=gen) * 3).to(key[3])
                full = m(x.unsqueeze(0))[0]
                step = max(2, (size // 2) // probe_rows(2 * m.out_features, UNIFORM_PROBE_PAIRS) * 2)
                for i in range(0, size - 1, step):
                    if not torch.equal(m(x[i : i + 2].unsqueeze(0))[0], full[i : i + 2]):
                        return best
            best = size
    return best


def pack_linears(model: torch.nn.Module, fuse: bool = True) -> int:
    """Replace every ``nn.Linear`` of a CPU ``model`` by a :class:`PackedLinear`, in
    place; returns how many. With ``fuse``, siblings that read one input (q/k/v and
    gate/up, :data:`FUSED_GROUPS`) become one :class:`FusedPackedLinear`. A weight another
    module also uses (tied embeddings) is kept; the others are dropped (the packed copy
    replaces them)."""
    linears = {id(m) for m in model.modules() if type(m) is torch.nn.Linear}
    shared = {id(p) for m in model.modules() if id(m) not in linears for p in m.parameters(recurse=False)}
    count = 0
    for parent in list(model.modules()):
        if fuse:
            count += _fuse_siblings(parent, shared)
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear and child.weight.device.type == "cpu":
                setattr(parent, name, PackedLinear(child, keep_weight=id(child.weight) in shared))
                count += 1
    if count:
        _trim_heap()
    return count


def _trim_heap() -> None:
    """Give the freed plain weights back to the OS: glibc keeps them in its heap
    otherwise (Qwen2.5-Coder-0.5B bf16: resident 1.73 GB unpacked, 2.43 GB packed
    before the trim, 1.73 GB after)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the memory is reused, just not returned
        pass


def is_packed(model: torch.nn.Module) -> bool:
    return any(isinstance(m, PackedLinear) for m in model.modules())


# --------------------------------------------------------------------- the choice
@dataclass
class MatmulChoice:
    """What :func:`choose` picked and the timings it picked from (ms per call of the
    probe matmul, by ``"<dtype>/<plain|packed>"`` and rows)."""

    dtype: str
    packed: bool
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    why: str = ""

    def to_json(self) -> dict:
        return {"dtype": self.dtype, "packed": self.packed, "timings": self.timings, "why": self.why}


def _score(rows: dict[str, float]) -> float:
    return sum(rows.values())


def decide(timings: dict[str, dict[str, float]], dtypes: tuple[str, ...]) -> tuple[str, bool, str]:
    """From probe ``timings`` (``"<dtype>/<path>" -> {rows: ms}``), the dtype among
    ``dtypes`` (first = the exact one, preferred) and whether to pack, with why."""
    best: dict[str, tuple[float, bool]] = {}
    for dt in dtypes:
        plain = timings.get(f"{dt}/plain")
        packed = timings.get(f"{dt}/packed")
        if plain is None:
            continue
        use = packed is not None and _score(packed) < PACK_GAIN * _score(plain)
        best[dt] = (_score(packed) if use else _score(plain), use)
    if not best:
        raise ValueError("no probe timings")
    first = next(dt for dt in dtypes if dt in best)
    pick = first
    for dt in dtypes:
        if dt in best and dt != first and best[dt][0] < BF16_GAIN * best[first][0]:
            pick = dt
    use = best[pick][1]
    parts = [f"{dt} {'packed' if p else 'plain'} {c:.1f} ms" for dt, (c, p) in best.items()]
    return pick, use, "probe (1 + 16 rows): " + ", ".join(parts)


def probe(out_features: int, in_features: int, dtypes: tuple[str, ...], rows=PROBE_ROWS, reps=PROBE_REPS) -> dict:
    """Median ms of one ``out_features x in_features`` matmul at each of ``rows``, plain
    and packed (where oneDNN can pack), per dtype; plain and packed interleaved."""
    out_features = min(int(out_features), PROBE_MAX_OUT)
    timings: dict[str, dict[str, float]] = {}
    with torch.inference_mode():
        for name in dtypes:
            dt = getattr(torch, name)
            w = torch.empty(out_features, in_features, dtype=dt).uniform_(-0.05, 0.05)
            paths = {"plain": lambda x, w=w: torch.nn.functional.linear(x, w)}
            if can_pack(dt):
                p = torch.ops.mkldnn._reorder_linear_weight(w, None)
                paths["packed"] = lambda x, p=p: torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "")
            for m in rows:
                x = torch.empty(m, in_features, dtype=dt).uniform_(-1, 1)
                seen: dict[str, list[float]] = {k: [] for k in paths}
                for f in paths.values():  # warm-up
                    f(x)
                for _ in range(reps):
                    for k, f in paths.items():
                        t0 = time.perf_counter()
                        f(x)
                        seen[k].append((time.perf_counter() - t0) * 1e3)
                for k, ts in seen.items():
                    timings.setdefault(f"{name}/{k}", {})[str(m)] = round(sorted(ts)[len(ts) // 2], 3)
            del w, paths
    return timings


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else what the platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_key() -> str:
    """The CPU as the caches of measured timings know it: its name and the flags its
    matmul kernels depend on (:data:`KERNEL_FLAGS`)."""
    return f"{cpu_name()}|{','.join(sorted(cpu_flags() & KERNEL_FLAGS))}"


def _cache_file(key: str) -> Path:
    from fastcoder.models.cache import cache_root

    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in key)
    return cache_root() / "matmul" / f"{safe[:180]}.json"


def choose(dtypes: tuple[str, ...], out_features: int, in_features: int, allow_pack: bool = True) -> MatmulChoice:
    """The CPU dtype (among ``dtypes``, the first preferred) and packing (only where
    ``allow_pack``) for a model whose largest matmul is ``out_features x in_features``,
    decided from the probe's timings: cached per machine, else probed (a few seconds)."""
    key = f"{cpu_key()}|torch{torch.__version__}|t{torch.get_num_threads()}|{out_features}x{in_features}|{'+'.join(dtypes)}"
    path = _cache_file(key)
    try:
        data = json.loads(path.read_text())
        timings = data["timings"] if data.get("version") == PROBE_VERSION and data.get("key") == key else None
    except (OSError, ValueError, KeyError):
        timings = None
    if timings is None:
        t0 = time.perf_counter()
        timings = probe(out_features, in_features, dtypes)
        log.info("matmul probe for %s: %s (%.1f s)", key, timings, time.perf_counter() - t0)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                json.dump({"key": key, "version": PROBE_VERSION, "timings": timings}, fh)
            os.replace(tmp, path)
        except OSError as exc:  # a read-only cache costs a probe per load, nothing else
            log.warning("could not cache the matmul probe: %s", exc)
    if not allow_pack:
        timings = {k: v for k, v in timings.items() if not k.endswith("/packed")}
    dtype, packed, why = decide(timings, dtypes)
    log.info("matmul path: %s%s (%s)", dtype, " packed" if packed else "", why)
    return MatmulChoice(dtype, packed, timings, why)
