"""Tree-attention verification over a static KV cache, with fixed shapes.

State: the KV cache holds every committed token but the last one (``root``), whose
logits are computed by the next forward together with the draft tree. A generation's
first step may also carry *forced* rows: the few prompt tokens after ``root`` that the
cache does not hold yet (``step(..., forced=...)``), committed whatever the model says,
with the tree below the last of them. One step:

1. the rows: row 0 the root, rows 1..n the nodes; graphs and compiled steps pad them to
   a *bucket* of query rows (1, 4, 8, 16, 32, 64, 128), eager steps run the rows they
   have (:meth:`Verifier.step_rows`: batch-invariant ones at least ``min_rows``, and a
   few more where the attention kernel's last block of query rows would be tiny); padding rows
   see only themselves;
2. token ids, parent rows, depths and the past length go to the device in ONE copy into
   a preallocated buffer; on the device: positions ``past + depth``, cache positions
   ``past + row`` (where the rows' keys/values are written, in place) and the additive
   float tree mask (every row sees the past; a node sees its ancestors and itself),
   the ancestor relation computed from the parent rows by pointer jumping;
3. one forward; the greedy token of every row comes back in ONE device->host copy;
4. greedy acceptance on the host: walk from the root, following the child whose token
   equals the argmax at its parent; the argmax at the last accepted node is the bonus;
5. KV compaction: only the <= depth accepted rows move, in one gather + one copy over
   the stacked keys/values of all layers. Nothing else in the cache moves.

:class:`StaticKV` is the cache: ONE tensor ``(layers, 2, 1, kv_heads, capacity, head_dim)``
allocated once per session (prompt + max new tokens + the largest bucket, rounded up),
whose per-layer keys/values are views. :class:`KVState` (the cache plus the ids it
holds) belongs to a session, so the next request keeps the longest common token prefix
in place and prefills only the delta.

On CUDA the steps run as CUDA graphs captured ONCE, when the verifier is built (the
model load), never inside a request: one graph per (bucket, attended width) over ONE
shared cache, the *work area* (:meth:`Verifier.capture_graphs`), largest first into one
shared memory pool. Sessions take turns in the work area: the session that steps or
prefills claims it, and the rows of the one that held it are *parked* in its own
buffer (one device-to-device copy of its live rows; sessions switch per request, not
per step), so graphs never depend on sessions and a new document costs no capture.
The attended width is the smallest class (1,024, 2,048, 4,096, ... up to the work
area's capacity) holding the past and the step's rows: a short context does not pay
attention over the whole area. A request longer than the area grows it once (and
recaptures, logged). Capture never changes the output (the same kernels run). A
(bucket, width) whose capture fails runs the same fixed shapes eagerly, the others keep
their graphs, and :meth:`Verifier.graph_status` says which (the server's
``fastcoder.stats`` and the benchmark reports carry it). On the CPU the same code runs
eagerly (``compile="inductor"`` runs it through ``torch.compile`` instead; a test
checks its logits against eager).
The prefill stays eager.

Batch-invariant steps (``Verifier.invariant``; on by default on the CPU in bf16,
eager; ``invariant=True`` asks for them in another dtype, unprobed there): a token's logits and keys/values come out bit for bit the same whether a
1-row AR step, any tree bucket or a prefill chunk computed them, so FastCoder's bf16
output is exactly AR's (in fp32 it always was, up to 1e-5 that never flipped a token).
Three rules make it so on PyTorch's CPU kernels (``docs/bench/bf16-rows/probe.py``):
a 1-row call of a linear layer whose oneDNN kernel rounds 1 row differently from
2..2,048 rows (which agree with each other row for row) runs as 2 rows: probed per
layer shape when the verifier is built (:func:`fastcoder.matmul.mark_one_row_rounding`;
Qwen2.5-Coder-0.5B on a 2-vCPU AMD EPYC with AVX512-BF16: ``mlp.down_proj`` only), the
rest of an AR step runs its 1 row (before the twenty-sixth session the whole forward was
padded to 2 rows: AR steps 2.5-5% slower, docs/bench/ar1-s26); where a linear layer is not packed every
forward runs at least 2 rows (:attr:`Verifier.min_rows`); every forward
attends a width rounded up to WIDTH_ALIGN = 512 columns (SDPA's CPU kernel works in
512-column blocks and a partial last block rounds by its length; extra, fully masked
columns add exact zeros); and the attention's query rows never end in a block of 1-3
rows (:func:`attention_rows`: the kernel cuts a head's query rows into blocks of 32,
64 or 256 and computes a block of fewer than 4 rows with other rounding; chains of 5
and 14 rows of Qwen2.5-Coder-0.5B, 35 and 98 folded rows, gave other bits than AR's on
113 of 120 and 33 of 84 rows, every other length from 2 to 16 the same bits; SmolLM2-135M's
AR step, 3 folded rows, differed from every chain until its AR step attended 2 rows). Cost, measured on a 2-vCPU AMD EPYC with AVX512-BF16 (plain
and invariant verifiers interleaved in one process): AR steps +4-11% while they were padded
to 2 rows, +0-3% since (docs/bench/ar1-s26), 16-row steps +0-9%
(most where the width just passes a multiple of 512), a 1,900-token prefill +4%.

Path attention (``Verifier.paths``; on by default wherever the steps are batch-invariant,
unless the explicit attention is on; :func:`fastcoder.attention.path_attention`): with
the rules above only a chain's rows sit in the columns an AR step gives them, so a
tree node off the path of first children could differ from AR's by an ulp and the walk
accepted along that path alone (``exact_paths``). With path attention every forward,
AR steps and prefill chunks included, computes a row at position p as two parts merged
by their log-sum-exp: the cache columns [0, S), S = p rounded down to PATH_BLOCK = 64,
in one call shared by the rows with that S, and the row's *tail*, the columns from S to
p in AR's order (for a tree node: the prompt columns from S on, its ancestors, itself),
gathered into a row of its own. Both parts depend only on p and on the keys of the
row's path, so any node whose bulk holds only its own ancestors (every node whose path
does not cross a PATH_BLOCK boundary after leaving the first children) gets AR's bits,
and the walk accepts any path up to the first node that does not. The suite on a
2-vCPU Intel Xeon with AMX (forty-sixth session): see docs/BENCHMARKS.md.

The model is called through its public forward only: a 4D
additive float mask and explicit position ids (transformers 5.x returns a 4D mask
as-is; a boolean mask gave wrong logits under eager attention, max |Δlogit| 7.24 in
our check, while an additive float mask reproduced the plain causal call exactly).
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import threading
import time
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from fastcoder import attention, matmul
from fastcoder.tokens import common_prefix
from fastcoder.trie import DraftTree

log = logging.getLogger(__name__)

BUCKETS = (1, 4, 8, 16, 32, 64, 128)
"""Query-row sizes a graph or compiled step is padded to (row 0 is the root; eager steps
run their own rows, :meth:`Verifier.step_rows`): at most 127 draft nodes."""
CAPACITY_STEP = 512
"""Static caches are sized in multiples of this many tokens."""
DEFAULT_RESERVE = 512
"""Room for new tokens kept after a prompt when the caller does not say (warm-up prefill)."""
EXPLICIT_MIN_WIDTH = 1536
"""The fewest attended columns a forward computes with the explicit attention
(:meth:`Verifier._explicit_boundary`): below it a 1-row step pays its fixed cost (1 row at
512 columns 0.056 vs SDPA's 0.028 ms per layer, 2-vCPU AMD EPYC avx512_bf16) and trees
gain little."""
EXPLICIT_MIN_GAIN = 0.9
"""The explicit attention is used only where its 16-row call takes at most this fraction
of SDPA's on this machine."""
_EXPLICIT_PROBES: dict[tuple, tuple] = {}
"""Per process: (kv heads, head dim, groups, first rows, dtype, threads) -> (the width the
explicit attention is invariant from, SDPA's and its seconds per 16-row call)."""
GRAPH_CAPACITY = 4096
"""Rows of the CUDA work area the graphs address (prompt + new tokens + the largest
bucket of the requests it serves: 2,048 + 512 + 128 for the benchmark suite's defaults).
Qwen2.5-Coder-0.5B in bf16: 12 KB per row, 48 MiB."""
GRAPH_WIDTH = 1024
"""The smallest attended width a graph is captured for; the others double up to the
work area's capacity."""
PATH_BLOCK = 64
"""Path attention (:attr:`Verifier.paths`, :func:`fastcoder.attention.path_attention`): a
row at position p attends cache columns [0, S), S = p rounded down to this, in one call,
and the rest of its path, gathered, in another. Larger: longer tails gathered per row;
smaller: more trees whose paths cross a block boundary (a side branch whose bulk would
hold tree columns cannot be accepted)."""
PATH_PREFILL_ROWS = 32
"""Path attention: prefill forwards of at most this many rows run it too (a keystroke's
few new tokens: their rows are then the steps' bits); longer chunks attend the plain way.
Path attention over 128-row chunks cost +46% prefill time in the AMX suite (forty-sixth
session: 6.1 vs 4.2 s per 2,048-token prompt), a per-row gather of every row's tail."""
WIDTH_ALIGN = 512
"""Batch-invariant steps (:attr:`Verifier.invariant`): every eager forward attends a width
rounded up to this many columns (the extra columns masked): the block size of PyTorch's
CPU attention kernel, so a partial last block never differs in length between a row's
AR step and its tree step."""
ATTENTION_Q_BLOCKS = ((768, 256), (192, 64), (0, 32))
"""PyTorch's CPU attention kernel (``aten/src/ATen/native/cpu/FlashAttentionKernel.cpp``):
(at least this many query rows per head, query rows per block)."""
MIN_Q_TAIL = 4
"""The fewest query rows the kernel's last block may have for its rows to round as in any
other block (1, 2 or 3 rows did not, in bf16 on a 2-vCPU AMD EPYC with AVX512-BF16)."""
PREFILL_CHUNK_CPU = 128
PREFILL_CHUNK_CUDA = 512
"""Prompt tokens per prefill forward. A superseded request's prefill stops at the next
chunk boundary (on a 2-vCPU AMD EPYC in bf16, 116-130 tokens of Qwen2.5-Coder-0.5B
took 0.5-0.6 s in the typing replay), and the chunks already done stay in the
session's cache for the next prompt. On the CPU the cost curve's measurement times
:data:`PREFILL_CHUNKS_CPU` and the engine may raise it (:meth:`Verifier.set_prefill_chunk`,
:meth:`fastcoder.budget.CostCurve.prefill_chunk`)."""
PREFILL_CHUNKS_CPU = (PREFILL_CHUNK_CPU, 256)
"""The CPU prefill chunks the cost curve's measurement times. On a 2-vCPU Intel Xeon with
AMX (forty-fourth session) 2,048 tokens took 2.3-2.8 s in 128-row chunks and 1.8-2.5 s in
256-row ones (``docs/bench/probes-s44/prefill_gemm-output.txt``); on a 2-vCPU AMD EPYC with
AVX512-BF16 3.5 s against 3.2 s in 512-row chunks (thirty-fifth session), where a 256-row
chunk would keep the model thread ~0.4 s."""


def attention_rows(rows: int, groups: int = 1) -> int:
    """The fewest query rows >= ``rows`` whose attention rounds every row as any other
    count does: ``groups * rows`` query rows per KV head (the folded attention puts a KV
    head's ``groups`` query heads in rows) must not leave the kernel a last block of 1 to
    MIN_Q_TAIL - 1 rows. The extra rows are padding (they see only themselves)."""
    r = max(1, int(rows))
    while True:
        m = groups * r
        block = next(size for least, size in ATTENTION_Q_BLOCKS if m >= least)
        if not 0 < m % block < MIN_Q_TAIL:
            return r
        r += 1


@functools.lru_cache(maxsize=None)
def _cache_kwarg_of(cls: type) -> str:
    try:
        params = inspect.signature(cls.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def cache_kwarg(module: torch.nn.Module) -> str:
    """The keyword a transformers model's forward takes its KV cache by: ``cache`` from
    transformers 5.2x on (``past_key_values`` still works there with a FutureWarning per
    call, and goes in 5.40), ``past_key_values`` before."""
    return _cache_kwarg_of(type(module))


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList | None:
    """The model's decoder layers: the module list with ``num_hidden_layers`` entries."""
    n = getattr(model.config, "num_hidden_layers", None)
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n:
            return module
    return None


def _watch_layers(model: torch.nn.Module, verifier: "Verifier") -> bool:
    """Before each decoder layer, stop the forward (:class:`Interrupted`) when the
    running step's ``stop`` says so. The hooks hold the verifier weakly and cost a call
    per layer (24 for Qwen2.5-Coder-0.5B, ~1 us each against a ~30 ms CPU step)."""
    layers = decoder_layers(model)
    if layers is None:
        return False
    ref = weakref.ref(verifier)

    def check(module, args):
        v = ref()
        stop = v._stop if v is not None else None
        if stop is not None and stop():
            raise Interrupted

    handles = [layer.register_forward_pre_hook(check) for layer in layers]
    weakref.finalize(verifier, lambda: [h.remove() for h in handles])
    return True


def kv_bytes_per_token(config, dtype: torch.dtype) -> int:
    """Bytes of keys + values one token takes in the cache (all layers)."""
    layers, heads, dim = _kv_shape(config)
    return layers * 2 * heads * dim * torch.empty((), dtype=dtype).element_size()


def _kv_shape(config) -> tuple[int, int, int]:
    cfg = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    heads = int(getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads)
    dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
    return int(cfg.num_hidden_layers), heads, dim


class _SlotLayer(CacheLayerMixin):
    """One layer of :class:`StaticKV`: views into the stacked buffer; ``update`` writes
    the new keys/values in place at the cache's ``slots`` (cache positions)."""

    is_compileable = True
    is_sliding = False

    def __init__(self, owner: "StaticKV", index: int) -> None:
        super().__init__()
        self.owner = owner
        self.keys = owner.buf[index, 0]
        self.values = owner.buf[index, 1]
        self.is_initialized = True

    def lazy_initialization(self, key_states, value_states) -> None:  # allocated up front
        pass

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        slots = self.owner.slots
        self.keys.index_copy_(2, slots, key_states)
        self.values.index_copy_(2, slots, value_states)
        n = self.owner.view_len
        if n is None:
            return self.keys, self.values
        return self.keys[:, :, :n], self.values[:, :, :n]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        n = self.owner.view_len
        return (self.owner.capacity if n is None else n), 0

    def get_seq_length(self) -> int:
        return self.owner.length

    def get_max_length(self) -> int:
        return self.owner.capacity


class StaticKV(Cache):
    """A preallocated KV cache: ``buf[layer, 0 = keys | 1 = values]`` of shape
    ``(1, kv_heads, capacity, head_dim)``. Rows ``[0, length)`` hold the committed
    tokens; the verifier sets ``slots`` (where the next forward writes) and
    ``view_len`` (how many rows attention reads; None = all, for fixed shapes)."""

    def __init__(self, config, capacity: int, dtype: torch.dtype, device: torch.device) -> None:
        layers, heads, dim = _kv_shape(config)
        types = getattr(config.get_text_config(decoder=True), "layer_types", None) or []
        if any(t != "full_attention" for t in types):
            raise ValueError("the static tree verifier supports full-attention layers only (no sliding window)")
        self.capacity = int(capacity)
        self.buf = torch.zeros((layers, 2, 1, heads, self.capacity, dim), dtype=dtype, device=device)
        self.slots: torch.Tensor | None = None
        self.view_len: int | None = None
        self.length = 0
        self.graphs: dict[tuple[int, int], tuple] = {}  # (bucket, width) -> (CUDA graph, its output)
        self.shared = False  # the verifier's CUDA work area (no session owns its bytes)
        super().__init__(layers=[_SlotLayer(self, i) for i in range(layers)])

    def move_rows(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """Copy rows ``src`` to rows ``dst`` in every layer, keys and values: one gather
        of ``len(src)`` rows and one copy (never the whole cache)."""
        self.buf.index_copy_(4, dst, self.buf.index_select(4, src))


@dataclass
class KVState:
    """A session's KV cache and the token ids whose keys/values it holds, in order."""

    cache: StaticKV | None = None
    ids: list[int] = field(default_factory=list)
    parked: torch.Tensor | None = None
    """With CUDA graphs: this session's rows ``(layers, 2, 1, kv_heads, len(ids), dim)``
    while another session holds the verifier's work area (``cache`` is then None)."""

    def reset(self) -> None:
        """Forget the held tokens; the buffer stays for reuse."""
        self.ids = []

    def release(self) -> None:
        """Free the buffer (LRU eviction of a session's static cache)."""
        self.cache = None
        self.parked = None
        self.ids = []

    def detach(self) -> "KVState":
        """What this cache holds, handed to a new state (the buffer freed once that one
        goes); this one then holds nothing, as after :meth:`release`. Eviction keeps the
        rows a moment longer this way, to store them (:meth:`Verifier.export_rows`)."""
        held = KVState(self.cache, self.ids, self.parked)
        self.cache, self.parked, self.ids = None, None, []
        return held

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` held tokens (rows beyond are simply overwritten later)."""
        del self.ids[n:]

    def common(self, ids: Sequence[int]) -> int:
        """How many of ``ids``, from the first, this cache holds already."""
        return common_prefix(self.ids, ids)


class Margins:
    """The top-2 logit margins of the tokens one step emitted, still where the step
    computed them: on a GPU reading them waits for the step, so the decode loop reads
    them once, after the generation (:func:`read_margins`), not inside the timed steps.

    ``gaps``: a margin per row of ``gaps`` (a tensor); ``rows``: the emitted tokens'
    rows among them (None: all, in order); ``first``: replaces the first margin (token
    healing: the margin among the allowed ids, already on the host)."""

    __slots__ = ("gaps", "rows", "first")

    def __init__(self, gaps: torch.Tensor, rows: list[int] | None = None, first: float | None = None) -> None:
        self.gaps, self.rows, self.first = gaps, rows, first

    def tolist(self) -> list[float]:
        g = self.gaps.tolist()
        out = [g[r] for r in self.rows] if self.rows is not None else g
        if self.first is not None and out:
            out[0] = self.first
        return out

    def __getitem__(self, i: int) -> float:
        return self.tolist()[i]

    def __len__(self) -> int:
        return len(self.rows) if self.rows is not None else int(self.gaps.numel())


def read_margins(parts: Sequence["float | Margins | None"]) -> list[float]:
    """Host floats from the margins a generation collected (floats as they are)."""
    out: list[float] = []
    for p in parts:
        if isinstance(p, Margins):
            out.extend(p.tolist())
        elif p is not None:
            out.append(float(p))
    return out


def top2_gaps(logits: torch.Tensor) -> torch.Tensor:
    """Top-2 logit margin of every row of ``logits`` (float32, on its device, no sync)."""
    top = torch.topk(logits, 2, dim=-1).values.float()
    return top[..., 0] - top[..., 1]


LOGIT_CHUNK = 128
"""Vocabulary entries per chunk of :func:`_chunked` (Qwen2.5's 151,936 = 1,187 x 128)."""


def _chunked(logits: torch.Tensor, k: int = 1) -> tuple[torch.Tensor, torch.Tensor] | None:
    """2-D ``logits`` (rows, vocab) as (rows, chunks, LOGIT_CHUNK) and the chunks'
    maxima (``amax``: vectorised, unlike ``max``'s index tracking), or None where the
    vocabulary does not split into at least ``k`` whole chunks (or the rows are not
    contiguous)."""
    if logits.dim() != 2 or not logits.is_contiguous():
        return None
    r, v = logits.shape
    if v % LOGIT_CHUNK or v // LOGIT_CHUNK < k:
        return None
    c = logits.view(r, v // LOGIT_CHUNK, LOGIT_CHUNK)
    return c, c.amax(-1)


def first_argmax(logits: torch.Tensor) -> torch.Tensor:
    """The index of the first maximum of every row of 2-D ``logits`` (``argmax``'s
    answer), through the chunks' maxima: the first chunk holding the row's maximum, then
    the first entry of it equal to the maximum (the ``argmax`` of a 0/1 mask, which
    returns the first). Exact: a maximum is compared, never computed. 2-vCPU Intel Xeon
    with AMX, 17 rows of a 151,936-token vocabulary in bf16: 1.4-1.6 ms against 2.3-3.0
    for ``max(dim=-1)`` (the fastest of PyTorch's own; 6.9-7.3 for ``argmax``), float32
    0.6 against 2.4 (forty-seventh session, ``docs/bench/probes-s47/reductions_micro.py``).
    Falls back to ``max`` where the vocabulary does not split into chunks."""
    split = _chunked(logits)
    if split is None:
        return logits.max(dim=-1).indices
    c, cm = split
    top = cm.amax(-1, keepdim=True)
    chunk = (cm == top).to(torch.uint8).argmax(-1)
    rows = torch.arange(c.shape[0], device=c.device)
    within = (c[rows, chunk] == top).to(torch.uint8).argmax(-1)
    return chunk * LOGIT_CHUNK + within


def top_ids(logits: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` largest entries' indices of every row of 2-D ``logits``, largest first
    (``torch.topk(...).indices`` up to the order of equal values): the k chunks with the
    largest maxima hold them, so ``topk`` runs over the chunk maxima and then over those
    k chunks' entries only. 17 rows of 151,936 in bf16, k = 4: 1.35-1.7 against 3.9-4.9 ms
    (same machine and probe). Token recycling's source (drafts only: the output never
    depends on it)."""
    split = _chunked(logits, k)
    if split is None:
        return torch.topk(logits, k, dim=-1).indices
    c, cm = split
    r = c.shape[0]
    chunks = torch.topk(cm, k, dim=-1).indices  # (rows, k)
    cand = torch.gather(c, 1, chunks.unsqueeze(-1).expand(r, k, LOGIT_CHUNK)).reshape(r, k * LOGIT_CHUNK)
    at = torch.topk(cand, k, dim=-1).indices
    return torch.gather(chunks, 1, at // LOGIT_CHUNK) * LOGIT_CHUNK + at % LOGIT_CHUNK


class Interrupted(Exception):
    """A step's forward stopped between two decoder layers because its ``stop`` said so
    (:meth:`Verifier.step`; in the decode loop: its generation was cancelled while another
    job waited for the thread). Nothing was committed: the session's cache holds the rows
    it held before the step (the rows the stopped layers wrote lie past its length and are
    overwritten by the next forward)."""


@dataclass
class StepResult:
    accepted: list[int]  # node indices along the accepted path
    bonus: int  # the model's token after the accepted path
    margins: Margins | list[float] | None = None  # top-2 logit margin per emitted token (when asked)
    # (step(topk=k)) the top k next tokens at each row, best first: row 0 the tree's root (the
    # last forced token or the root), row i + 1 node i of the tree as given
    topk: list[list[int]] | None = None


class Verifier:
    """Runs prefill and fixed-shape tree-verification steps for one model.

    ``graphs``: run the steps as CUDA graphs, all captured here over a shared work area
    of ``graph_capacity`` rows (default: on when the model is on CUDA).
    ``compile``: a ``torch.compile`` backend for the step ("inductor",
    "aot_eager"; default None = eager), mainly to check the compiled path on the CPU.
    ``fold_gqa``: switch a GQA model (in place) to :mod:`fastcoder.attention`'s folded
    attention, which never expands K/V (default on; models it does not suit keep theirs).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        record_margins: bool = False,
        buckets: Sequence[int] = BUCKETS,
        graphs: bool | None = None,
        compile: str | None = None,
        fold_gqa: bool = True,
        graph_capacity: int = GRAPH_CAPACITY,
        invariant: bool | None = None,
        explicit_attention: bool | None = False,
        path_attention: bool | None = None,
    ) -> None:
        self.model = model
        # GQA attention that never copies K/V per query head (fastcoder/attention.py);
        # switches the model in place, models it does not suit keep their attention
        self.folded_attention = bool(fold_gqa) and attention.enable(model)
        param = next(model.parameters())
        self.device = param.device
        self.dtype = param.dtype
        self.record_margins = record_margins
        self.buckets = tuple(sorted(int(b) for b in buckets))
        if self.buckets[0] != 1:
            raise ValueError("the smallest bucket must be 1 (AR)")
        self.use_graphs = (self.device.type == "cuda") if graphs is None else bool(graphs)
        self.graph_captured: set[tuple[int, int]] = set()
        # (bucket, width) -> why its capture failed (those shapes run eagerly)
        self.graph_failures: dict[tuple[int, int], str] = {}
        self.graph_capture_s = 0.0
        if self.use_graphs and self.device.type != "cuda":
            raise ValueError("CUDA graphs need a CUDA device")
        self.work: StaticKV | None = None  # graphs: the one cache they address
        self._owner: KVState | None = None  # the session whose rows are in ``work``
        self._widths: list[int] = []  # graph widths of ``work`` (graph_widths of its capacity)
        self.compile = compile
        self._compiled = None
        # batch-invariant steps (CPU, eager, bf16 by default; probed and tested for bf16
        # only): see the module docstring
        if invariant is None:
            invariant = self.device.type == "cpu" and not compile and self.dtype == torch.bfloat16
        self.invariant = bool(invariant) and not self.use_graphs and not compile
        # batch-invariant: the fewest query rows a forward runs. 1 where every linear layer
        # is packed and those whose 1-row call rounds differently run it as 2 rows
        # (matmul.mark_one_row_rounding); 2 otherwise (the whole forward padded)
        self.min_rows = 1
        self.one_row_padded: list[str] = []
        # prompt tokens per prefill forward: a cancelled request stops within one chunk
        self.prefill_chunk = PREFILL_CHUNK_CUDA if self.device.type == "cuda" else PREFILL_CHUNK_CPU
        # batch-invariant: the most rows a forward's linear layers round as every smaller
        # call of 2+ rows does (matmul.uniform_rows); tree steps stay within it (buckets above
        # it are dropped) and prefill chunks of more rows are faster but not invariant
        self.uniform_rows: int | None = None
        self.prefill_invariant = self.invariant
        if self.invariant:
            marked = matmul.mark_one_row_rounding(model)
            self.min_rows = 1 if marked is not None else 2
            self.one_row_padded = marked or []
            self.uniform_rows = matmul.uniform_rows(model, (*self.buckets[1:], self.prefill_chunk))
            if self.uniform_rows < self.buckets[-1]:
                self.buckets = tuple(b for b in self.buckets if b <= self.uniform_rows)
                # only the 1-row bucket left: every drafter runs as AR (say so louder)
                (log.warning if len(self.buckets) == 1 else log.info)(
                    "batch-invariant steps: linear calls of more than %d rows round otherwise on this CPU; "
                    "tree steps up to %d rows%s", self.uniform_rows, self.buckets[-1],
                    " (no draft can be verified: FastCoder runs as AR; --dtype float32 avoids it)" if len(self.buckets) == 1 else "",
                )  # fmt: skip
            self.prefill_invariant = self.uniform_rows >= self.prefill_chunk
        # eager steps run the rows they have, graphs and compiled steps a bucket's (fixed
        # shapes); query heads per KV head in the attention kernel's rows (attention_rows)
        self.padded = self.use_graphs or bool(compile)
        self._groups = attention.groups(model) if self.folded_attention else 1
        # the first cache row from which forwards compute attention as two matrix products
        # (attention.explicit_attention) instead of SDPA; None: never (see _explicit_boundary;
        # off by default: measured no faster end to end, docs/BENCHMARKS.md, thirty-third session)
        self.explicit_from: int | None = self._explicit_boundary(explicit_attention)
        # batch-invariant steps whose every row attends its own path as AR lays it out
        # (attention.path_attention): any path of a tree is then exact, not only the first
        # children's. None (auto) or True: wherever the steps are batch-invariant, eager and
        # folded on the CPU (bf16 by default), unless the explicit attention is on; False: never
        self.paths = path_attention is not False and self.invariant and self.folded_attention \
            and self.explicit_from is None and attention._flash_cpu is not None and self.device.type == "cpu"
        # accept along the depth-first path of first children only (see :meth:`step`): what
        # keeps a tree's output AR's bit for bit where the steps are batch-invariant but the
        # attention is not path attention
        self.exact_paths = self.invariant and not self.paths
        if self.paths:  # longer prefill chunks attend the plain way (PATH_PREFILL_ROWS)
            self.prefill_invariant = self.prefill_invariant and self.prefill_chunk <= PATH_PREFILL_ROWS
        # path attention: a tail holds the columns after a row's bulk (< PATH_BLOCK) and its path
        self._tail_len = 16 * math.ceil((PATH_BLOCK + self.buckets[-1] + MIN_Q_TAIL) / 16)
        self._plan: attention.PathPlan | None = None
        self._plan_ok: list[bool] = []
        bmax = self.buckets[-1] + MIN_Q_TAIL  # room for attention_rows' padding
        # the one host->device copy per step: ids | parent rows | depths | past
        pin = self.device.type == "cuda"
        self._host_in = torch.zeros(3 * bmax + 1, dtype=torch.long, pin_memory=pin)
        self._dev_in = torch.zeros(3 * bmax + 1, dtype=torch.long, device=self.device)
        # KV compaction's row indices (src | dst), the same way: pinned host -> device, one copy
        self._host_mv = torch.zeros(2 * bmax, dtype=torch.long, pin_memory=pin)
        self._dev_mv = torch.zeros(2 * bmax, dtype=torch.long, device=self.device)
        self._rows = torch.arange(bmax, device=self.device)
        self._neg = torch.finfo(self.dtype).min
        # rows [root] + nodes of the last step; after a prefill, its last position's
        self.last_logits: torch.Tensor | None = None
        # the last step's time split (seconds): host buffers + copy in, forward (+ the
        # sync of the one copy out), acceptance walk, KV compaction
        self.last_split = (0.0, 0.0, 0.0, 0.0)
        # the step buffers are shared by all sessions: one forward at a time
        self._lock = threading.RLock()
        # the running step's ``stop``: eager steps stop between decoder layers when it says
        # so (a newer request waits ~one layer for the model thread, not a whole forward);
        # graphs and compiled steps run whole. The layer hooks go in with the first step
        # given a ``stop`` (none otherwise: ``interrupt_steps`` is off by default)
        self._stop: Callable[[], bool] | None = None
        self._watched = False
        self.interruptible = not self.use_graphs and not compile and decoder_layers(model) is not None
        if self.use_graphs:
            self.capture_graphs(graph_capacity)

    def _explicit_boundary(self, wanted: bool | None) -> int | None:
        """Where forwards switch to :func:`fastcoder.attention.explicit_attention`: the
        first cache row from which a forward whose first query row sits there runs it.

        ``wanted`` None (auto), with batch-invariant steps: from the width
        :func:`~fastcoder.attention.explicit_consistent_from` finds it invariant from on
        this machine (at least EXPLICIT_MIN_WIDTH columns, where it pays for trees and
        costs a 1-row step little), and only if it is faster than SDPA here
        (:func:`~fastcoder.attention.explicit_speed`, 16 tree rows at 2,048 columns, by
        at least EXPLICIT_MIN_GAIN); otherwise never. A forward whose rows straddle the
        boundary runs SDPA (:meth:`prefill` splits its chunks there, a step trusts only
        its rows before it), so a row is computed by the same path whatever computes it.
        ``wanted`` True: as auto without the speed check, and without batch-invariant
        steps every masked forward (tests). False (the default): never. Off by default
        because it did not pay end to end: in the CPU suite (2-vCPU AMD EPYC, avx512_bf16)
        its 16-row steps at 2,048 cached rows cost 63 vs 71 ms, but FastCoder's real steps
        (mostly 2-8 rows) 44.5 vs 44.3 ms and AR's 1-row steps 36.5 vs 35.6 ms."""
        self.explicit_probe: dict | None = None
        if wanted is False or not self.folded_attention or self.device.type != "cpu":
            return None
        if not self.invariant:
            return 0 if wanted else None
        cfg = self.model.config.get_text_config(decoder=True) if hasattr(self.model.config, "get_text_config") else self.model.config
        heads = cfg.num_attention_heads
        kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
        first = attention_rows(self.min_rows, self._groups) * self._groups
        key = (kv_heads, head_dim, self._groups, first, self.dtype, torch.get_num_threads())
        found = _EXPLICIT_PROBES.get(key)
        if found is None:  # the speed first: no probe where it does not pay
            sdpa_s, explicit_s = attention.explicit_speed(kv_heads, head_dim, self._groups, self.dtype)
            width = None
            if wanted or explicit_s <= EXPLICIT_MIN_GAIN * sdpa_s:
                width = attention.explicit_consistent_from(kv_heads, head_dim, self._groups, self.dtype, first_rows=first)
            found = _EXPLICIT_PROBES[key] = (width, sdpa_s, explicit_s)
        width, sdpa_s, explicit_s = found
        self.explicit_probe = {"consistent_from": width, "sdpa_ms": round(1e3 * sdpa_s, 3), "explicit_ms": round(1e3 * explicit_s, 3)}
        if width is None or (not wanted and explicit_s > EXPLICIT_MIN_GAIN * sdpa_s):
            return None
        return max(width, EXPLICIT_MIN_WIDTH) - WIDTH_ALIGN

    def _explicit_here(self, first_row: int) -> bool:
        """Whether a forward whose first query row is cache row ``first_row`` runs the
        explicit attention."""
        return self.explicit_from is not None and first_row >= self.explicit_from

    def straddles(self, first_row: int, last_row: int) -> bool:
        """Whether rows ``first_row``..``last_row`` (cache rows) lie on both sides of
        :attr:`explicit_from`: such a forward computes its later rows otherwise than
        any forward starting at or after it would (the decode loop does not merge a
        prompt tail that would; the verifier's steps trust only the rows before it)."""
        b = self.explicit_from
        return b is not None and b > 0 and first_row < b <= last_row

    @property
    def max_nodes(self) -> int:
        """Most draft nodes one step verifies (the largest bucket minus the root)."""
        return self.buckets[-1] - 1

    def bucket(self, rows: int) -> int:
        """The smallest bucket holding ``rows`` query rows."""
        for b in self.buckets:
            if b >= rows:
                return b
        raise ValueError(f"{rows} rows exceed the largest bucket {self.buckets[-1]}")

    def step_rows(self, rows: int) -> int:
        """Query rows a step of ``rows`` real rows runs: its bucket for graphs and compiled
        steps (fixed shapes); eager, the rows themselves, batch-invariant ones at least
        :attr:`min_rows` and padded by :func:`attention_rows`. At 2,048 cached rows on a
        2-vCPU AMD EPYC (avx512_bf16, Qwen2.5-Coder-0.5B bf16) a 9-row step took 52 ms
        instead of the 16-row bucket's 73 (docs/BENCHMARKS.md)."""
        bucket = self.bucket(rows)  # raises past the largest bucket
        if self.padded:
            return bucket
        if not self.invariant:
            return rows
        return attention_rows(max(self.min_rows, rows), self._groups)

    # ---------------------------------------------------------------- cache
    def _ensure(self, kv: KVState, common: int, needed: int) -> None:
        """Give ``kv`` a cache of at least ``needed`` rows, keeping its first ``common``."""
        if self.work is not None:
            return self._claim(kv, common, needed)
        if kv.cache is not None and kv.cache.capacity >= needed:
            return
        cap = CAPACITY_STEP * math.ceil(needed / CAPACITY_STEP)
        new = StaticKV(self.model.config, cap, self.dtype, self.device)
        if kv.cache is not None and common:
            new.buf[:, :, :, :, :common].copy_(kv.cache.buf[:, :, :, :, :common])
        kv.cache = new

    def _claim(self, kv: KVState, common: int, needed: int) -> None:
        """Graphs: put ``kv``'s first ``common`` rows in the work area (parking the rows
        of the session that held it), growing the area if ``needed`` exceeds it."""
        if needed > self.work.capacity:
            self._park()
            log.warning("a request needs %d cache rows, more than the CUDA work area's %d: growing it and "
                        "capturing the graphs again", needed, self.work.capacity)  # fmt: skip
            self.capture_graphs(CAPACITY_STEP * math.ceil(needed / CAPACITY_STEP))
        if kv.cache is self.work:
            return
        self._park()
        if common and kv.parked is not None:
            self.work.buf[:, :, :, :, :common].copy_(kv.parked[:, :, :, :, :common])
        kv.parked = None
        kv.cache = self.work
        self._owner = kv

    def _park(self) -> None:
        """Copy the work area's owner's live rows out to its own buffer."""
        owner, self._owner = self._owner, None
        if owner is not None and owner.cache is self.work:
            n = len(owner.ids)
            owner.parked = self.work.buf[:, :, :, :, :n].clone() if n else None
            owner.cache = None

    def set_prefill_chunk(self, rows: int) -> int:
        """Prefill in chunks of ``rows`` tokens from now on (the CPU's cost curve chose it:
        :meth:`fastcoder.budget.CostCurve.prefill_chunk`); returns the chunk in force. With
        batch-invariant steps whose prefill chunks were invariant, a larger chunk is taken
        only where its linear calls round as the smaller calls do
        (:func:`~fastcoder.matmul.uniform_rows`): bits before speed. CUDA keeps its own."""
        rows = int(rows)
        with self._lock:
            if self.device.type != "cpu" or rows < 1 or rows == self.prefill_chunk:
                return self.prefill_chunk
            if self.invariant and self.prefill_invariant and rows > self.prefill_chunk:
                uniform = matmul.uniform_rows(self.model, (self.prefill_chunk, rows))
                if uniform < rows:
                    log.info("prefill stays in %d-row chunks: %d-row calls round otherwise on this CPU", self.prefill_chunk, rows)
                    return self.prefill_chunk
                self.uniform_rows = max(self.uniform_rows or 0, uniform)
            self.prefill_chunk = rows
            if self.invariant:
                self.prefill_invariant = (self.uniform_rows or 0) >= rows and (not self.paths or rows <= PATH_PREFILL_ROWS)
            return rows

    def _prefill_paths(self, rows: int) -> bool:
        """Whether a prefill forward of ``rows`` query rows runs path attention: with it on,
        a chunk of at most PATH_PREFILL_ROWS rows whose linear calls round as a step's
        (its rows then come out as the steps would compute them); longer chunks attend the
        plain way (faster; their rows differ from a step's anyway where the linear calls
        round otherwise, as on AMX)."""
        return self.paths and rows <= min(PATH_PREFILL_ROWS, self.uniform_rows or 0)

    # ---------------------------------------------------------------- graphs
    def graph_widths(self, capacity: int) -> list[int]:
        """Attended widths a graph is captured for: GRAPH_WIDTH doubling, up to and
        including ``capacity``."""
        widths, w = [], GRAPH_WIDTH
        while w < capacity:
            widths.append(w)
            w *= 2
        return widths + [capacity]

    def capture_graphs(self, capacity: int) -> dict:
        """Allocate the work area (``capacity`` rows, rounded up) and capture every
        (bucket, width) step into one memory pool, largest first. A failed capture is
        recorded (``graph_status``, logged) and those shapes run eagerly."""
        with self._lock, torch.inference_mode():
            t0 = time.perf_counter()
            cap = CAPACITY_STEP * math.ceil(max(int(capacity), self.buckets[-1] + 1) / CAPACITY_STEP)
            self._park()
            self.work = None  # drop the old graphs (and their pool) before new ones
            self.graph_captured.clear()
            self.graph_failures.clear()
            work = StaticKV(self.model.config, cap, self.dtype, self.device)
            work.shared = True
            pool = torch.cuda.graph_pool_handle() if self.device.type == "cuda" else None
            self._widths = self.graph_widths(cap)  # looked up at every step: computed once here
            for w in reversed(self._widths):
                for b in reversed(self.buckets):
                    try:
                        self._capture(work, b, w, pool)
                        self.graph_captured.add((b, w))
                    except Exception as exc:  # capture must never cost correctness: eager
                        self.graph_failures[(b, w)] = f"{type(exc).__name__}: {exc}"
            if self.graph_failures:
                log.warning("CUDA graph capture failed for %d of %d (bucket, width) shapes; they run eagerly: %s",
                            len(self.graph_failures), len(self.graph_failures) + len(self.graph_captured),
                            next(iter(self.graph_failures.values())))  # fmt: skip
            self.work = work
            self.graph_capture_s = time.perf_counter() - t0
            log.info("CUDA graphs: %d captured over a %d-row work area in %.1f s",
                     len(self.graph_captured), cap, self.graph_capture_s)  # fmt: skip
            return self.graph_status()

    def _capture(self, cache: StaticKV, b: int, w: int, pool) -> None:
        d = self._dev_in
        d.zero_()  # a valid step: every row its own parent at depth 0, past 0
        d[b : 2 * b].copy_(self._rows[:b])
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up outside the capture
            for _ in range(2):
                self._forward(cache, b, w, True)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            out = self._forward(cache, b, w, True)
        cache.graphs[(b, w)] = (graph, out)

    def _width(self, cache: StaticKV, rows: int) -> int:
        """The smallest graph width holding ``rows`` attended rows."""
        for w in self._widths:
            if w >= rows:
                return w
        return cache.capacity

    # ---------------------------------------------------------------- prefill
    def prefill(
        self,
        kv: KVState,
        ids: Sequence[int],
        reserve: int | None = None,
        *,
        allowed: Sequence[int] | None = None,
        cancel: "threading.Event | None" = None,
        chunk: int | None = None,
    ) -> tuple[int | None, int, float | None]:
        """Make ``kv`` hold ``ids`` and compute the greedy next token.

        Keeps the longest common prefix already in ``kv`` in place (at least one token
        is fed so there are logits) and runs only the rest, in chunks of
        ``prefill_chunk`` tokens. ``reserve``: new tokens the caller may generate after
        ``ids`` (the cache is sized for them plus the largest bucket). ``allowed``: the
        next token is the greedy choice among these ids only (token healing: the first
        generated token must start with the text taken back from the prompt).
        ``cancel``: checked between chunks; when set, the chunks done so far stay in
        ``kv`` (a later prompt with the same start reuses them) and the token is None.
        ``chunk``: tokens per forward (default ``prefill_chunk``): a background prefill
        that a request may have to wait for takes smaller bites; the cost curve's
        measurement times the CPU's :data:`PREFILL_CHUNKS_CPU`.
        Returns (next token, tokens actually prefilled, margin).
        """
        with self._lock, torch.inference_mode():
            return self._prefill(kv, ids, reserve, allowed, cancel, chunk)

    def export_rows(self, kv: KVState) -> tuple[list[int], torch.Tensor] | None:
        """The ids ``kv`` holds and a copy of their rows, ``(layers, 2, 1, kv_heads, n,
        head_dim)`` on the CPU (:mod:`fastcoder.kv_disk` stores them); None for an empty
        cache or one in the CUDA graphs' shared work area."""
        with self._lock, torch.inference_mode():
            n = len(kv.ids)
            if not n or kv.cache is None or kv.cache is self.work:
                return None
            return list(kv.ids), kv.cache.buf[:, :, :, :, :n].to("cpu", copy=True)

    def import_rows(self, kv: KVState, ids: Sequence[int], rows: torch.Tensor, reserve: int | None = None) -> int:
        """Put ``rows`` (as :meth:`export_rows` gave them, for ``ids``) into ``kv`` while it
        holds nothing, sized for ``reserve`` more tokens; returns the tokens it then holds
        (0: not taken: ``kv`` holds tokens already, the verifier runs CUDA graphs, or the
        rows have another layout or dtype). A later prefill keeps the prefix its prompt
        shares with ``ids`` and runs the rest, as after any earlier prompt."""
        n = len(ids)
        layers, heads, dim = _kv_shape(self.model.config)
        with self._lock, torch.inference_mode():
            if kv.ids or self.work is not None or n == 0:
                return 0
            if tuple(rows.shape) != (layers, 2, 1, heads, n, dim) or rows.dtype != self.dtype:
                return 0
            reserve = DEFAULT_RESERVE if reserve is None else max(0, int(reserve))
            self._ensure(kv, 0, n + reserve + self.buckets[-1])
            kv.cache.buf[:, :, :, :, :n].copy_(rows)
            kv.cache.length = n
            kv.ids = [int(t) for t in ids]
            return n

    def begin(self, kv: KVState, ids: Sequence[int], reserve: int | None = None) -> int:
        """Keep the longest common prefix of ``kv`` and ``ids`` in place (at most all but
        the last of ``ids``: a forward needs at least one new token), size the cache for
        ``ids`` + ``reserve`` new tokens + the largest bucket, and return how many of
        ``ids`` are not cached. Host-side work only, no forward."""
        with self._lock:
            return self._begin(kv, [int(t) for t in ids], reserve)

    def _begin(self, kv: KVState, ids: list[int], reserve: int | None) -> int:
        if not ids:
            raise ValueError("empty prompt")
        common = min(kv.common(ids), len(ids) - 1)
        kv.truncate(common)
        reserve = DEFAULT_RESERVE if reserve is None else max(0, int(reserve))
        self._ensure(kv, common, len(ids) + reserve + self.buckets[-1])
        kv.cache.length = common
        return len(ids) - common

    def _prefill(self, kv: KVState, ids: Sequence[int], reserve: int | None, allowed=None, cancel=None, chunk=None):
        ids = [int(t) for t in ids]
        size = self.prefill_chunk if chunk is None else max(1, int(chunk))
        n = self._begin(kv, ids, reserve)
        common = len(ids) - n
        cache = kv.cache
        start = common
        logits = None
        while start < len(ids):
            if cancel is not None and cancel.is_set() and start > common:
                return None, start - common, None
            end = min(len(ids), start + size)
            if self.straddles(start, end - 1):  # a chunk never straddles the attention paths' boundary
                end = self.explicit_from
            cache.length = start
            logits = self._prefill_chunk(cache, ids, start, end)
            kv.ids = ids[:end]  # what is prefilled stays, even if the next chunk is cancelled
            cache.length = end
            start = end
        # the cache now holds all of ids; the decode loop's convention is that the
        # last committed token (the first generated one) is *not* in the cache.
        self.last_logits = logits.unsqueeze(0)
        if allowed is not None:
            tok, margin = self._healed(logits, allowed)
            return tok, n, margin
        return int(self._greedy(logits)), n, (self._margin(logits) if self.record_margins else None)

    def _prefill_chunk(self, cache: StaticKV, ids: list[int], start: int, end: int) -> torch.Tensor | None:
        """Run ``ids[start:end]`` into the cache; returns the last token's logits when
        ``end`` is the prompt's end (earlier chunks skip the 151k-vocab head: ~5 ms
        each for Qwen2.5-Coder-0.5B on the CPU).

        Plain: no mask of our own: transformers builds the causal one from the cache's
        length (or, with no past, lets SDPA run its causal kernel without a mask).
        ``invariant``: the chunk is computed as the steps compute their rows: at least
        :attr:`min_rows` query rows and padded by :func:`attention_rows` (padding rows are
        written past the held rows and overwritten later), our own additive causal mask
        over a width rounded up to WIDTH_ALIGN, and the head over the last real row and
        the padding (at least :attr:`min_rows` rows)."""
        last = end == len(ids)
        pad = attention_rows(max(self.min_rows, end - start), self._groups) - (end - start) if self.invariant else 0
        slots = torch.arange(start, end + pad, device=self.device)
        cache.slots = slots
        kwargs = {}
        if self.invariant:
            width = self._eager_width(cache, end + pad)
            col = torch.arange(width, device=self.device)
            mask = torch.where(col.unsqueeze(0) <= slots.unsqueeze(1), 0.0, self._neg).to(self.dtype)
            kwargs["attention_mask"] = mask.view(1, 1, len(slots), width)
            att = attention_rows(end - start, self._groups)
            if self._prefill_paths(len(slots)):
                # the chunk's rows as a chain: each attends its path as an AR step does
                n = len(slots)
                self._path_plan(start, n, [0, *range(n - 1)], list(range(n)), cache)
                kwargs[attention.PATHS_KWARG] = self._plan
            elif att < end - start + pad and self.folded_attention:  # a 1-token chunk's padding row needs no attention
                kwargs[attention.ROWS_KWARG] = att
            if self._explicit_here(start):
                kwargs[attention.EXPLICIT_KWARG] = True
            cache.view_len = width
        else:
            cache.view_len = end
        model = self.model if last else self.model.base_model
        if last:
            kwargs["logits_to_keep"] = max(self.min_rows, pad + 1) if self.invariant else 1  # the last real row's and the padding's
        out = model(
            input_ids=torch.tensor([ids[start:end] + [0] * pad], dtype=torch.long, device=self.device),
            position_ids=slots.unsqueeze(0),
            use_cache=True,
            **{cache_kwarg(model): cache},
            **kwargs,
        )
        if not last:
            return None
        return out.logits[0, -1 - pad]

    def _eager_width(self, cache: StaticKV, rows: int) -> int:
        """Columns an eager forward attends for ``rows`` cache rows: exactly those, or
        (``invariant``) rounded up to WIDTH_ALIGN. Why: PyTorch's CPU attention works in
        512-column blocks and gives a row other bits when the last block's length differs
        (probe: widths rounded up to 16, 64, 128 or 256 columns still differed on 0.2-0.5%
        of rows; to 512, on none); masked columns add exact zeros."""
        if not self.invariant:
            return rows
        return min(cache.capacity, WIDTH_ALIGN * math.ceil(rows / WIDTH_ALIGN))

    def _healed(self, logits: torch.Tensor, allowed: Sequence[int]) -> tuple[int, float | None]:
        """Token healing: the greedy token of one row's ``logits`` among the ``allowed``
        ids only, and its top-2 margin among them (when margins are recorded)."""
        allowed_t = torch.as_tensor(np.asarray(allowed, dtype=np.int64), device=self.device)
        if allowed_t.numel() == 0:
            raise ValueError("no allowed token for the first position")
        sub = logits.index_select(0, allowed_t)
        tok = int(allowed_t[int(self._greedy(sub))])
        return tok, (self._margin(sub) if self.record_margins and sub.numel() > 1 else None)

    # ---------------------------------------------------------------- one step
    def _prepare(self, b: int, ancestors: bool = True):
        """Device side of a step: inputs, positions, cache positions and the tree mask
        from the device buffer ``_dev_in`` (fixed addresses, fixed shapes); without
        ``ancestors`` (path attention: no mask) no ancestor relation."""
        d = self._dev_in
        ids, parents, depths, past = d[:b], d[b : 2 * b], d[2 * b : 3 * b], d[3 * b]
        rows = self._rows[:b]
        slots = past + rows
        if not ancestors:
            return ids, past + depths, slots, None, past
        # ancestor-or-self: start from {self, parent}, square log2(b) times
        reach = (rows.unsqueeze(1) == rows.unsqueeze(0)) | (parents.unsqueeze(1) == rows.unsqueeze(0))
        reach = reach.to(torch.float32)
        for _ in range(max(0, math.ceil(math.log2(b)))):
            reach = ((reach @ reach) > 0).to(torch.float32)
        return ids, past + depths, slots, reach > 0, past

    def _forward(self, cache: StaticKV, b: int, width: int, fixed: bool, real: int | None = None, explicit: bool = False) -> torch.Tensor:
        """Prepare + forward + argmax for ``b`` query rows (a bucket, or an eager step's
        :meth:`step_rows`) attending the first ``width`` cache rows (captured / compiled
        as a unit): returns the logits (b, vocab) and their argmax (b,). ``fixed``:
        nothing may depend on the host's idea of the past (graphs, compile): the mask is
        built on the device over the whole width; eager steps pass width = past + b.
        ``explicit``: the attention as two matrix products (:attr:`explicit_from`; eager
        only). ``real``: only the first this many rows are the step's (the rest pad): with the
        folded attention the padding rows past :func:`attention_rows` skip attention
        (eager steps only: a fixed shape cannot depend on it). At 2,048 cached rows on a
        2-vCPU AMD EPYC (avx512_bf16, Qwen2.5-Coder-0.5B bf16) an AR step (padded to 2
        rows) 34.9 -> 33.4 ms."""
        paths = self.paths and not fixed
        ids, pos, slots, anc, past = self._prepare(b, ancestors=not paths)
        cache.slots = slots
        cache.view_len = width
        if b == 1 and not fixed and not self.invariant:  # AR, eager: the root sees everything, no mask needed
            cache.length = width - 1
            out = self.model(input_ids=ids.view(1, 1), position_ids=pos.view(1, 1), use_cache=True, **{cache_kwarg(self.model): cache})
            logits = out.logits[0]
            return logits, self._greedy(logits)
        rows = {}
        if paths:  # the attention reads the step's PathPlan; transformers passes a 4D mask on as it is
            mask = torch.zeros(b, 1, dtype=self.dtype, device=self.device)
            rows[attention.PATHS_KWARG] = self._plan
        else:
            col = torch.arange(width, device=self.device)
            rel = col.unsqueeze(0) - past  # column relative to the first tree row
            in_tree = (rel >= 0) & (rel < b)
            tree_ok = torch.gather(anc, 1, rel.clamp(0, b - 1).expand(b, width)) & in_tree
            allowed = (rel < 0) | tree_ok
            mask = torch.where(allowed, 0.0, self._neg).to(self.dtype)
            if real is not None and self.folded_attention and not fixed:
                # the real rows, padded where the kernel's last block of query rows would be
                # tiny (its bits differ there; AR's 1 row is 1 token's folded rows)
                att = attention_rows(real, self._groups)
                if att < b:
                    rows[attention.ROWS_KWARG] = att
        if explicit and self.folded_attention and not fixed:
            rows[attention.EXPLICIT_KWARG] = True
        out = self.model(
            input_ids=ids.view(1, b),
            position_ids=pos.view(1, b),
            attention_mask=mask.view(1, 1, b, -1),
            use_cache=True,
            **{cache_kwarg(self.model): cache},
            **rows,
        )
        logits = out.logits[0]
        return logits, self._greedy(logits)

    def _run_step(self, cache: StaticKV, b: int, past_len: int, real: int | None = None):
        if self.use_graphs:
            w = self._width(cache, past_len + b)
            entry = cache.graphs.get((b, w))
            if entry is None:  # its capture failed: the same fixed shapes, eagerly
                return self._forward(cache, b, w, True)
            entry[0].replay()
            return entry[1]
        if self.compile:
            if self._compiled is None:
                self._compiled = torch.compile(self._forward, backend=self.compile, dynamic=False)
            return self._compiled(cache, b, cache.capacity, True)
        return self._forward(cache, b, self._eager_width(cache, past_len + b), False, real, self._explicit_here(past_len))

    def graph_status(self) -> dict:
        """What the steps run as: ``mode`` (``cuda-graphs`` or ``eager``), the buckets
        captured at every width, the widths and the work area's rows, the capture time,
        and each ``bucket@width`` whose capture failed with its error (it runs eagerly;
        the others keep their graphs); eager: whether the steps are batch-invariant
        (``invariant``) and, if so, the fewest rows a forward runs (``min_rows``) and the
        linear layers that run a 1-row call as 2 rows (``one_row_as_two``: layer name ->
        how many layers, e.g. ``{"down_proj": 24}``), the most rows a linear call rounds as
        a 2-row call does (``uniform_rows``; tree steps stay within it: ``buckets``) and whether
        prefill chunks are invariant too (``prefill_invariant``); eager, the prompt tokens per
        prefill forward (``prefill_chunk``); where the explicit attention was
        probed, the first cache row it runs from (``explicit_attention_from``, None: not
        used) and the probe's figures (``explicit_probe``). Reported by the server's
        ``fastcoder.stats`` and the benchmark reports."""
        if not self.use_graphs:
            status = {"mode": "eager", "captured": [], "failed": {}, "batch_invariant": self.invariant,
                      "exact_paths": self.exact_paths, "path_attention": self.paths,
                      "prefill_chunk": self.prefill_chunk}
            if self.invariant:
                kinds = Counter(name.rsplit(".", 1)[-1] for name in self.one_row_padded)
                status.update(min_rows=self.min_rows, one_row_as_two=dict(kinds), uniform_rows=self.uniform_rows,
                              prefill_invariant=self.prefill_invariant, buckets=list(self.buckets))
            if self.explicit_from is not None or self.explicit_probe is not None:
                status["explicit_attention_from"] = self.explicit_from  # None: probed, not used
                if self.explicit_probe is not None:
                    status["explicit_probe"] = self.explicit_probe
            return status
        widths = self._widths if self.work is not None else []
        full = [b for b in self.buckets if widths and all((b, w) in self.graph_captured for w in widths)]
        return {"mode": "cuda-graphs", "captured": full, "widths": widths,
                "work_rows": self.work.capacity if self.work is not None else 0,
                "capture_s": round(self.graph_capture_s, 2),
                "failed": {f"{b}@{w}": e for (b, w), e in sorted(self.graph_failures.items())}}  # fmt: skip

    def step(
        self,
        kv: KVState,
        root: int,
        tree: DraftTree,
        *,
        forced: Sequence[int] = (),
        allowed: Sequence[int] | None = None,
        stop: Callable[[], bool] | None = None,
        topk: int = 0,
    ) -> StepResult:
        """Verify ``tree`` below ``root`` (the last committed token, not yet in kv).

        ``forced``: tokens that follow ``root`` and are committed whatever the model says
        (the last prompt tokens, when the first step of a generation runs them together
        with the first draft: one forward instead of a prefill and a step); the tree
        hangs below the last of them. ``allowed``: the first token after ``root`` and
        ``forced`` is the greedy choice among these ids only (token healing, as in
        :meth:`prefill`). ``StepResult.accepted`` holds tree nodes only (indices of
        ``tree``).

        The rows are laid out depth first (:meth:`DraftTree.depth_first`): the path of
        first children sits in the columns an AR step would give it. PyTorch's CPU
        attention rounds by column position, so with batch-invariant steps (CPU bf16)
        those rows carry AR's bits exactly, while a node off that path (its ancestors not
        contiguous) can differ from AR's by an ulp (docs/BENCHMARKS.md, sixteenth
        session); without path attention (:attr:`paths`) the walk accepts along that
        path only, and where the model's choice leaves it, that choice is the bonus. With
        path attention every node gets AR's bits except one whose path crosses a
        PATH_BLOCK boundary after leaving the first children (the module docstring): the
        walk accepts any path up to such a node, whose token is then the bonus.

        ``stop``: called before each decoder layer of an eager step
        (:attr:`interruptible`); when it returns True the forward stops there and
        :class:`Interrupted` is raised; nothing is committed (``kv`` holds what it held).

        ``topk``: also return the top this many next tokens of every row (``StepResult.topk``,
        for token recycling), read with the greedy tokens in the step's one device-to-host
        copy."""
        order = tree.depth_first()
        moved = order != list(range(len(tree)))
        with self._lock, torch.inference_mode():
            if stop is not None and self.interruptible and not self._watched:
                self._watched = _watch_layers(self.model, self)
            self._stop = stop
            try:
                res = self._step(kv, root, tree.permute(order) if moved else tree, [int(t) for t in forced], allowed, topk)
            except Interrupted:
                if kv.cache is not None:
                    kv.cache.length = len(kv.ids)
                raise
            finally:
                self._stop = None
            if moved:
                self._last_order = order
        if moved:
            res.accepted = [order[i] for i in res.accepted]
            if res.topk is not None:  # row j + 1 is node order[j] of the tree as given
                rows = [res.topk[0]] + [None] * len(order)
                for j, i in enumerate(order):
                    rows[i + 1] = res.topk[j + 1]
                res.topk = rows
        return res

    @property
    def last_logits(self) -> torch.Tensor | None:
        """The last step's logits: row 0 the tree's root (the last forced token or the
        root), row i + 1 node i of the tree as given; after a prefill, its last position."""
        raw, order = self._last_logits, self._last_order
        if raw is None or order is None:
            return raw
        rows = [0] * (len(order) + 1)
        for j, i in enumerate(order):
            rows[i + 1] = j + 1
        return raw[rows]

    @last_logits.setter
    def last_logits(self, value: torch.Tensor | None) -> None:
        self._last_logits, self._last_order = value, None

    def _step(self, kv: KVState, root: int, tree: DraftTree, forced: list[int] = (), allowed=None, topk: int = 0) -> StepResult:
        t0 = time.perf_counter()
        if self.work is not None and kv.cache is not self.work and kv.parked is not None:
            # graphs: another session's step ran since this one's last (their generations
            # interleave): bring this session's rows back into the work area
            self._claim(kv, len(kv.ids), len(kv.ids) + self.buckets[-1])
        cache = kv.cache
        if cache is None:
            raise ValueError("prefill first")
        past = len(kv.ids)
        f = len(forced)  # rows 1..f: the forced chain; rows f+1..f+n: the tree's nodes
        n = len(tree)
        if self.straddles(past, past + f):
            raise ValueError(f"forced rows {past}..{past + f} straddle the attention paths' boundary at row "
                             f"{self.explicit_from}: prefill them (Verifier.straddles)")
        # rows from this cache row on are computed by the path a forward starting there
        # would not take (a step straddling explicit_from runs SDPA): not accepted
        trusted_to = self.explicit_from if self.straddles(past, past + f + n) else None
        b = self.step_rows(f + n + 1)
        if past + b > cache.capacity:
            self._ensure(kv, past, past + b + DEFAULT_RESERVE)
            cache = kv.cache
        # fill the host buffer: ids | parent rows | depths | past (padding rows: own parent)
        h = self._host_in
        h[: 3 * b].zero_()
        h[0] = root
        if f:
            h[1 : f + 1] = torch.tensor(forced, dtype=torch.long)
            h[b + 1 : b + f + 1] = torch.arange(0, f)
            h[2 * b + 1 : 2 * b + f + 1] = torch.arange(1, f + 1)
        if n:
            h[f + 1 : f + n + 1] = torch.tensor(tree.tokens, dtype=torch.long)
            h[b + f + 1 : b + f + n + 1] = torch.tensor(tree.parents, dtype=torch.long) + (f + 1)
            h[2 * b + f + 1 : 2 * b + f + n + 1] = torch.tensor(tree.depths, dtype=torch.long) + f
        h[b + f + n + 1 : 2 * b] = torch.arange(f + n + 1, b)
        h[3 * b] = past
        if self.paths:
            self._path_plan(past, b, h[b : 2 * b].tolist(), h[2 * b : 3 * b].tolist(), cache)
        self._dev_in[: 3 * b].copy_(h[: 3 * b], non_blocking=True)
        self._dev_in[3 * b].copy_(h[3 * b], non_blocking=True)
        t1 = time.perf_counter()
        logits, greedy_dev = self._run_step(cache, b, past, f + n + 1)
        # margins (when asked): on a GPU every row's, queued behind the step before the
        # one sync below (reading them later waits for nothing); on the CPU the emitted
        # rows' only, after the walk
        gaps = top2_gaps(logits) if self.record_margins and self.device.type != "cpu" else None
        top = None
        if topk:  # the tree's rows' top tokens travel with the greedy ones
            k = min(int(topk), logits.shape[-1])
            rows = logits[f : f + n + 1]
            ids = top_ids(rows, k) if self.device.type == "cpu" else torch.topk(rows, k, dim=-1).indices
            both = torch.cat([greedy_dev, ids.flatten()]).tolist()
            greedy = both[:b]  # the one device->host transfer
            top = [both[b + r * k : b + (r + 1) * k] for r in range(n + 1)]
        else:
            greedy = greedy_dev.tolist()  # the one device->host transfer
        t2 = time.perf_counter()
        self.last_logits = logits[f : f + n + 1]  # rows: the tree's root (the last forced token or root), its nodes
        first_margin = None
        if allowed is not None:  # token healing: the first new token among the allowed ids only
            greedy[f], first_margin = self._healed(logits[f], allowed)
        # walk the tree: tree row t (0 = its root, i + 1 = node i) is input row t + f
        children = tree.children()
        accepted: list[int] = []
        row = 0
        while True:
            nxt = children[row].get(greedy[row + f]) if row < len(children) else None
            if nxt is None:
                break
            if trusted_to is not None and past + f + 1 + nxt >= trusted_to:
                break  # its row straddles into the other attention path: the bonus comes from the row before
            if self.paths and not self._plan_ok[f + 1 + nxt]:
                # path attention: this row's bulk holds tree columns that are not its own
                # ancestors at AR's columns (its path crosses a PATH_BLOCK boundary after
                # leaving the first children): its choice, exact, is the bonus
                break
            if self.exact_paths and nxt != len(accepted):
                # off the depth-first path of first children: that row's ancestors are not
                # the contiguous columns an AR step sees, so its logits (and its keys and
                # values, kept for later steps) may differ from AR's by an ulp. Stop here:
                # this row's choice, exact, is the bonus and the next step's root.
                break
            accepted.append(nxt)
            row = nxt + 1
        bonus = greedy[row + f]
        margins = None
        if self.record_margins:
            rows = [f] + [i + 1 + f for i in accepted]
            if gaps is None:
                margins = Margins(top2_gaps(logits[rows]), None, first_margin)
            else:
                margins = Margins(gaps, rows, first_margin)
        t3 = time.perf_counter()
        # KV compaction: root and forced rows stay at rows past..past+f; accepted node rows
        # move up behind them
        src = [past + f + 1 + i for i in accepted]
        dst = list(range(past + f + 1, past + f + 1 + len(accepted)))
        if src != dst:
            k = len(src)
            hm = self._host_mv
            hm[: 2 * k] = torch.tensor(src + dst, dtype=torch.long)
            # one non-blocking copy from pinned memory (the next step's result read syncs
            # the stream before this host buffer is written again)
            self._dev_mv[: 2 * k].copy_(hm[: 2 * k], non_blocking=True)
            cache.move_rows(self._dev_mv[:k], self._dev_mv[k : 2 * k])
        kv.ids = kv.ids + [root] + forced + [tree.tokens[i] for i in accepted]
        cache.length = len(kv.ids)
        self.last_split = (t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t3)
        return StepResult(accepted=accepted, bonus=int(bonus), margins=margins, topk=top)

    def _path_plan(self, past: int, b: int, parents: list[int], depths: list[int], cache: "StaticKV") -> None:
        """The step's :class:`~fastcoder.attention.PathPlan` (``self._plan``) and which of
        its rows are exact (``self._plan_ok``): rows are laid out depth first, row r in
        cache column ``past + r``, at position ``past + depths[r]``; padding rows are
        their own parents. A row at position p has its bulk up to S = p rounded down to
        PATH_BLOCK; an AR step at p has the same bulk, so the row is exact where every
        tree column in its bulk (S > past) is its own ancestor at AR's column, i.e. its
        path runs through the first children up to S. A row that is not gets the bulk of
        a row at the past instead and the rest of its path in its tail: its attention is
        still the model's (its top tokens feed token recycling), only not AR's bits."""
        paths: list[list[int]] = []
        widths, ok = [], []
        tail_len = self._tail_len
        idx = np.full((b, tail_len), past, dtype=np.int64)
        mask = np.full((b, 1, 1, tail_len), float(self._neg), dtype=np.float32)
        first = PATH_BLOCK * (past // PATH_BLOCK)  # the bulk of a row at the past
        for r in range(b):
            par = parents[r]
            path = paths[par] + [r] if 0 < r and par < r else [r]
            paths.append(path)
            s = PATH_BLOCK * ((past + depths[r]) // PATH_BLOCK)
            exact = all(a == depths[a] for a in path if past + depths[a] < s)
            if not exact:  # its bulk would hold tree columns not its own: the past's bulk (right, not AR's bits)
                s = first
            widths.append(s)
            ok.append(exact)
            tail = list(range(s, past)) + [past + a for a in path if past + depths[a] >= s]
            idx[r, : len(tail)] = tail
            mask[r, 0, 0, : len(tail)] = 0.0
        groups: list[tuple[int, torch.Tensor | None]] = []
        kinds = sorted(set(widths))
        for s in kinds:
            if len(kinds) == 1:
                groups.append((s, None))
                break
            rows = [r for r in range(b) if widths[r] == s]
            rows += [rows[-1]] * (attention_rows(len(rows), self._groups) - len(rows))  # no tiny query block
            groups.append((s, torch.tensor(rows, dtype=torch.long, device=self.device)))
        flat = idx.reshape(-1)
        cap = cache.capacity
        heads = np.arange(2 * cache.buf.shape[3], dtype=np.int64).reshape(-1, 1) * cap  # keys', then values' heads
        self._plan = attention.PathPlan(
            groups, torch.from_numpy(flat).to(self.device), torch.from_numpy(mask).to(device=self.device, dtype=self.dtype),
            capacity=cap, flat_idx=torch.from_numpy((heads + flat.reshape(1, -1)).reshape(-1)).to(self.device))
        self._plan_ok = ok

    def _greedy(self, logits: torch.Tensor) -> torch.Tensor:
        """The argmax over the last dimension (the first index among equal maxima, as
        ``argmax``). On the CPU through :func:`first_argmax` (``max`` had been 2.2 vs 4.9
        ms for ``argmax``, 16 rows of a 151,936-token vocabulary in bf16 on a 2-vCPU AMD
        EPYC)."""
        if self.device.type == "cpu":
            return first_argmax(logits) if logits.dim() == 2 else first_argmax(logits.reshape(1, -1))[0]
        return torch.argmax(logits, dim=-1)

    @staticmethod
    def _margin(logits: torch.Tensor) -> float | None:
        """One row's top-2 margin on the host (prefill and token healing: once per
        generation)."""
        return float(top2_gaps(logits))
