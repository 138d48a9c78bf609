"""Grouped-query attention that never expands the keys/values: ``fastcoder_gqa``.

What: an attention function registered with transformers' ``AttentionInterface`` (and
``AttentionMaskInterface``, mask creation as for ``sdpa``) under :data:`NAME`. For a
model whose query heads share key/value heads (GQA: Qwen2.5-Coder-0.5B has 14 query
heads on 2 KV heads) it *folds* the ``groups`` query heads that share one KV head into
rows of that head::

    q (batch, kv_heads * groups, q_len, d) -> (batch, kv_heads, groups * q_len, d)

repeats the mask over the groups (mask rows, ``groups * q_len * kv_len`` elements,
once per forward, not once per layer), runs one ``scaled_dot_product_attention``
against the unexpanded keys/values ``(batch, kv_heads, kv_len, d)`` and unfolds the
output to what transformers expects from an attention function:
``(batch, q_len, heads, d)``, contiguous (as ``integrations/sdpa_attention.py``).

Why: with a mask, transformers' ``sdpa`` (and ``eager``) attention calls
``repeat_kv``, which copies K and V once per query head over the whole attended width,
in every layer: for Qwen2.5-Coder-0.5B in bf16 at a 3,072-row cache that is ~265 MB
written and read again per tree step, for nothing (attention rows are independent, so
the fold computes the same numbers; bit-identical in single-call probes on the CPU).
Measured (2-core AMD EPYC, avx512_bf16, no AMX; ``tests/folded_attention_bench.py``),
whole ``Verifier.step`` at a 1,500-token cache: 6-14% faster for buckets 4..64 in bf16
and fp32, bucket 1 unchanged (transformers already packs one query row without a copy).
SDPA's own ``enable_gqa=True`` also avoids the copy, but with a mask CUDA runs it on the
math kernel (which expands K/V itself; transformers does not use it there either), and
on the CPU it was no faster than the fold (slower in bf16 at 4 and 64..128 rows).

Padding rows: a forward may pass ``fastcoder_query_rows=n`` (:data:`ROWS_KWARG`;
transformers hands a model's extra forward keywords down to its attention function):
only the first ``n`` query rows are computed, the others (rows that pad a verifier
bucket) get zeros. No real row attends to a padding row (the tree mask), so nothing
else changes; the verifier asks for it on eager steps only.

Scope (anything else goes to transformers' ``sdpa_attention_forward`` unchanged):

* no mask (prefill without a past: SDPA's causal kernel, which transformers already
  runs with ``enable_gqa`` and no copy);
* softcapping, attention sinks (``s_aux``), position bias, a paged cache,
  ``output_attentions``, dropout while training, a mask whose shape the fold does not
  know (per-head masks are folded too).

:func:`enable` switches a model to it only where that is safe (``sdpa`` now, GQA,
full attention only, no softcapping, no sinks) and otherwise leaves it as it was.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

log = logging.getLogger(__name__)

NAME = "fastcoder_gqa"
"""The name the attention function is registered under (``config._attn_implementation``)."""

ROWS_KWARG = "fastcoder_query_rows"
"""A forward keyword: only the first this many query rows are real (the rest pad a
bucket); attention computes those and gives the padding rows zeros."""

EXPLICIT_KWARG = "fastcoder_explicit"
"""A forward keyword: compute the folded attention with :func:`explicit_attention`
instead of SDPA (the verifier asks for it where :func:`explicit_consistent_from` found
it batch-invariant; see there)."""

PATHS_KWARG = "fastcoder_paths"
"""A forward keyword: a :class:`PathPlan`; the attention is :func:`path_attention` (every
query row attends its own path, laid out as an AR step lays it out)."""

_UNSUPPORTED_KWARGS = ("softcap", "s_aux", "sinks", "position_bias", "cache")

# The folded mask of the forward in progress, per thread: (source mask, groups, folded,
# layer index). Reused by the later layers of the same forward only: recomputed when a
# new forward starts (a caller may rewrite a mask buffer in place between forwards, as
# CUDA-graph code does) and dropped after the last layer.
_fold_cache = threading.local()


def _fold_mask(module, mask: torch.Tensor, groups: int, heads: int, q_len: int, real: int | None = None) -> torch.Tensor | None:
    """``mask`` (b, 1 | heads, q_len | 1, kv_len) as rows of the folded query
    (b, 1 | kv_heads, groups * real | 1, kv_len) for its first ``real`` query rows
    (default all), or None when the shape is not one the fold knows."""
    if mask.dim() != 4 or mask.shape[2] not in (1, q_len) or mask.shape[1] not in (1, heads):
        return None
    real = q_len if real is None else real
    if mask.shape[2] == 1:  # one row for every query row: broadcasts as it is
        if mask.shape[1] == 1:
            return mask
        b, kv = mask.shape[0], mask.shape[-1]
        return mask.reshape(b, heads // groups, groups, 1, kv).expand(-1, -1, -1, real, -1).reshape(b, heads // groups, groups * real, kv)
    layer = getattr(module, "layer_idx", None)
    cacheable = isinstance(layer, int) and not torch.compiler.is_compiling()
    if cacheable:
        hit = getattr(_fold_cache, "entry", None)
        # layers run in increasing order: a layer index not above the cached one means
        # a new forward, whose mask may have been rewritten in place
        if hit is not None and hit[0] is mask and hit[1] == (groups, real) and hit[3] < layer:
            _fold_cache.entry = (mask, (groups, real), hit[2], layer)
            return hit[2]
    source = mask
    if real < q_len:
        mask = mask[:, :, :real]
    b, h, _, kv = mask.shape
    if h == 1:
        folded = mask.unsqueeze(2).expand(b, 1, groups, real, kv).reshape(b, 1, groups * real, kv)
    else:
        folded = mask.reshape(b, h // groups, groups * real, kv)
    if cacheable:
        last = getattr(getattr(module, "config", None), "num_hidden_layers", None)
        _fold_cache.entry = None if (last is not None and layer >= last - 1) else (source, (groups, real), folded, layer)
    return folded


def folded_gqa_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """A transformers attention function (the ``sdpa`` signature): query (b, heads,
    q_len, d), key/value (b, kv_heads, kv_len, d) -> ((b, q_len, heads, d_v), None)."""
    plan = kwargs.get(PATHS_KWARG)
    if plan is not None and not module.training:
        return path_attention(query, key, value, plan, scaling), None
    groups = getattr(module, "num_key_value_groups", 1)
    b, heads, q_len, d = query.shape
    kv_heads = key.shape[1]
    folded = None
    rows = kwargs.get(ROWS_KWARG)
    real = q_len if rows is None else max(1, min(q_len, int(rows)))
    if (
        groups > 1
        and attention_mask is not None
        and heads == kv_heads * groups
        and value.shape[1] == kv_heads
        and not (dropout and module.training)
        and not kwargs.get("output_attentions", False)
        and all(kwargs.get(k) is None for k in _UNSUPPORTED_KWARGS)
    ):
        folded = _fold_mask(module, attention_mask, groups, heads, q_len, real)
    if folded is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    # (b, kv_heads * groups, q_len, d) -> (b, kv_heads, groups * q_len, d): query heads
    # h = kv * groups + g use kv head kv (repeat_kv's order); a copy only if the query
    # is not laid out head-major (a few KB)
    q = (query if real == q_len else query[:, :, :real]).reshape(b, kv_heads, groups * real, d)
    if kwargs.get(EXPLICIT_KWARG) and not module.training:
        out = explicit_attention(q, key, value, folded, scaling)
    else:
        out = torch.nn.functional.scaled_dot_product_attention(
            q, key, value, attn_mask=folded, dropout_p=dropout if module.training else 0.0, scale=scaling
        )
    # (b, kv_heads, groups * real, d_v) -> (b, heads, real, d_v) -> (b, real, heads, d_v)
    out = out.reshape(out.shape[0], heads, real, value.shape[-1]).transpose(1, 2)
    if real == q_len:
        return out.contiguous(), None
    full = out.new_zeros(out.shape[0], q_len, heads, out.shape[-1])
    full[:, :real] = out
    return full, None


def _gather(key: torch.Tensor, value: torch.Tensor, plan: "PathPlan") -> tuple[torch.Tensor, torch.Tensor]:
    """``key``/``value`` (1, kv_heads, width, d), views of the verifier's cache: the rows
    ``plan.tail_idx`` of every head, each (kv_heads, rows * T, d). One index over the
    cache's rows where the layout allows it (a layer's values follow its keys in the
    stacked buffer: ``plan.flat_idx``); ``index_select`` on the narrowed views copies
    all of each first (42 us a layer at 1,536 columns)."""
    kv, d = key.shape[1], key.shape[-1]
    cap = plan.capacity
    if (plan.flat_idx is not None and key.stride(-1) == 1 and key.stride(-2) == d and key.stride(1) == cap * d
            and value.stride() == key.stride() and value.shape[-1] == d
            and value.storage_offset() - key.storage_offset() == kv * cap * d
            and value.untyped_storage().data_ptr() == key.untyped_storage().data_ptr()):
        rows = key[0].as_strided((2 * kv * cap, d), (d, 1))
        both = rows.index_select(0, plan.flat_idx).view(2, kv, -1, d)
        return both[0], both[1]
    return key[0].index_select(1, plan.tail_idx), value[0].index_select(1, plan.tail_idx)


@dataclass
class PathPlan:
    """Where every query row of one forward finds its keys (:func:`path_attention`): built
    once per step by the verifier, used by every layer.

    ``groups``: (bulk width S, the rows that use it: a row index tensor, None for all
    rows); a row's *bulk* is cache columns ``[0, S)``, S a multiple of the verifier's
    path block and at most its own position. ``tail_idx`` (rows * T,): each row's *tail*,
    the cache columns of the keys after its bulk in the order an AR step holds them (for a
    tree node: the prompt columns from S on, then its ancestors and itself);
    ``tail_mask`` (rows, 1, 1, T): additive, 0 on a row's tail entries, the dtype's
    minimum on the padding after them."""

    groups: list[tuple[int, torch.Tensor | None]]
    tail_idx: torch.Tensor
    tail_mask: torch.Tensor
    capacity: int = 0
    """Rows per head of the cache the keys/values are views of (0: not known)."""
    flat_idx: torch.Tensor | None = None
    """``tail_idx`` as rows of a layer's keys then values, (2 * kv_heads * capacity, d):
    keys of head h, column c at row ``h * capacity + c``, values at ``(kv_heads + h) *
    capacity + c`` (None: not known)."""


_flash_cpu = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def path_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, plan: PathPlan,
                   scaling: float | None) -> torch.Tensor:
    """Attention in which every query row sees its own path exactly as an AR step would
    lay it out, whatever tree row it is: query (1, heads, rows, d), key/value (1,
    kv_heads, width, d) (the cache, every row of this forward written) -> (1, rows,
    heads, d_v).

    A row at position p attends two parts, merged by their log-sum-exp: its *bulk*, the
    cache columns [0, S) with S = p rounded down to the path block (one call for all the
    rows sharing S, no mask: PyTorch's CPU flash kernel, row-invariant), and its *tail*,
    at most T keys gathered in AR's order (one batched call, a row per batch entry, the
    padding masked at the end). Both parts, and so the row's bits, depend only on p and
    on the keys of its path: a tree node off the path of first children gets the very
    bits an AR step gets (the verifier checks which rows' bulks hold only their own
    ancestors: :meth:`fastcoder.verifier.Verifier.step`). The merge is ``lerp(bulk, tail,
    sigmoid(lse_tail - lse_bulk))`` in float32, the sigmoid over a buffer padded to 32
    floats: PyTorch's vectorised loop leaves a remainder to the scalar function, which
    may round otherwise."""
    _, heads, rows, d = query.shape
    kv_heads = key.shape[1]
    g = heads // kv_heads
    t = plan.tail_mask.shape[-1]
    dv = value.shape[-1]
    # tail: (rows, kv_heads, t, d) gathered from the cache, the queries as (rows, kv_heads, g, d)
    kt, vt = _gather(key, value, plan)
    kt = kt.view(kv_heads, rows, t, d).transpose(0, 1)
    vt = vt.view(kv_heads, rows, t, dv).transpose(0, 1)
    qt = query[0].view(kv_heads, g, rows, d).permute(2, 0, 1, 3)
    o2, lse2 = _flash_cpu(qt, kt, vt, attn_mask=plan.tail_mask, scale=scaling)
    o2 = o2.permute(1, 2, 0, 3)  # (kv_heads, g, rows, d_v)
    lse2 = lse2.permute(1, 2, 0)  # (kv_heads, g, rows)
    # the result in the layout transformers wants, (1, rows, heads, d_v), seen as (kv_heads, g, rows, d_v)
    res = torch.empty(1, rows, heads, dv, dtype=torch.float32, device=query.device)
    out = res[0].view(rows, kv_heads, g, dv).permute(1, 2, 0, 3)
    for width, idx in plan.groups:
        o2g = o2 if idx is None else o2.index_select(2, idx)
        if width == 0:  # nothing before the tail
            merged = o2g.float()
        else:
            qg = query if idx is None else query.index_select(2, idx)
            n = qg.shape[2]
            o1, lse1 = _flash_cpu(qg.reshape(1, kv_heads, g * n, d), key[:, :, :width], value[:, :, :width], scale=scaling)
            l2 = lse2 if idx is None else lse2.index_select(2, idx)
            # the tail's share of the softmax mass: sigmoid(lse2 - lse1), over a buffer padded
            # to 32 floats (vectorised for every element; the padding is never read)
            m = l2.numel()
            w = _scratch_view("merge", (32 * math.ceil(m / 32),), torch.float32, query.device)
            wv = w[:m].view(kv_heads, g, n)
            torch.sub(l2, lse1.view(kv_heads, g, n), out=wv)
            w.sigmoid_()
            args = (o1.view(kv_heads, g, n, dv).float(), o2g.float(), wv.unsqueeze(-1))
            if idx is None:
                torch.lerp(*args, out=out)
                continue
            merged = torch.lerp(*args)
        if idx is None:
            out.copy_(merged)
        else:
            out.index_copy_(2, idx, merged)
    return res.to(query.dtype)


# per thread: the explicit attention's float32 scores and keys and its rounded
# probabilities (one layer at a time), kept between forwards: a fresh multi-MB tensor per
# layer costs page faults (a 16-row call at 1,916 columns took 1.43 ms with a fresh
# scores tensor, 0.50 ms with this)
_scratch = threading.local()


def explicit_attention(q: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor, scaling: float | None) -> torch.Tensor:
    """Folded attention as two matrix products: q (b, kv_heads, rows, d), key/value
    (b, kv_heads, width, d), an additive ``mask`` broadcasting to (b, kv_heads, rows,
    width) -> (b, kv_heads, rows, d_v) in ``value``'s dtype.

    Scores in float32 (Q and K converted; a bf16 product would round every score to 8
    bits, as transformers' eager attention does: 5-8x SDPA's error in a probe), the mask
    added and the softmax taken in float32 in one reused buffer, the probabilities
    rounded to ``value``'s dtype for the second product (as PyTorch's CPU flash kernel
    rounds them for its own).

    Why: PyTorch's CPU SDPA kernel runs a tree step's folded rows far below the CPU's
    matrix speed. 2-vCPU AMD EPYC (avx512_bf16, no AMX), Qwen2.5-Coder-0.5B's shapes
    (2 KV heads x 7 folded query heads, d 64), bf16, ms per layer, SDPA / this: 16 tree
    rows at 1,024 columns 0.41 / 0.31, at 2,048 0.82 / 0.57, at 3,072 1.21 / 0.82; 4
    rows at 2,048 0.21 / 0.20; but 1 row at 512 columns 0.028 / 0.056 and at 2,048
    0.096 / 0.120 (a fixed cost of its eight small operations), so the verifier uses it
    only from a width on (:func:`explicit_consistent_from`)."""
    b, h, r, d = q.shape
    w = key.shape[-2]
    scale = d ** -0.5 if scaling is None else scaling
    scores = _scratch_view("scores", (b, h, r, w), torch.float32, q.device)
    keys = _scratch_view("keys", (b, h, w, d), torch.float32, q.device)
    keys.copy_(key)
    torch.matmul(q.float().mul_(scale), keys.transpose(-1, -2), out=scores)
    if mask.dtype == torch.bool:  # True: attend
        scores.masked_fill_(~mask, float("-inf"))
    else:
        scores += mask
    torch.softmax(scores, -1, out=scores)
    probs = _scratch_view("probs", (b, h, r, w), value.dtype, q.device)
    probs.copy_(scores)
    return torch.matmul(probs, value)


def _scratch_view(name: str, shape: tuple[int, ...], dtype: torch.dtype, device) -> torch.Tensor:
    """A contiguous ``shape`` view of this thread's scratch buffer ``name`` (grown when too
    small, never shrunk)."""
    n = math.prod(shape)
    buf = getattr(_scratch, name, None)
    if buf is None or buf.numel() < n or buf.dtype != dtype or buf.device != device:
        with torch.inference_mode(False):  # a normal tensor: written in place in and out of inference mode
            buf = torch.empty(max(n, 1 << 16), dtype=dtype, device=device)
        setattr(_scratch, name, buf)
    return buf[:n].view(shape)


EXPLICIT_PROBE_WIDTHS = tuple(range(512, 16384 + 1, 512))
"""Attended widths :func:`explicit_consistent_from` checks (the verifier's eager widths are
multiples of 512; prompts past 16,384 tokens are beyond what the probe saw)."""


def explicit_consistent_from(kv_heads: int, head_dim: int, groups: int, dtype: torch.dtype, device="cpu",
                             widths: tuple[int, ...] = EXPLICIT_PROBE_WIDTHS, first_rows: int | None = None) -> int | None:
    """The smallest of ``widths`` from which :func:`explicit_attention` is batch-invariant
    on this machine: a query row's output comes out bit for bit the same for any number of
    rows computed with it (``first_rows``, default ``groups``: the fewest folded rows a
    forward runs, .. 64 tokens' folded rows) and any attended width
    from there on (the columns past its own masked), or None where no width is.

    Why a probe: the matrix kernels choose their blocking by shape. On a 2-vCPU AMD EPYC
    (avx512_bf16) the scores and the softmax came out the same at every row count and
    width, the bf16 product of probabilities and values the same at every row count and
    between any two widths except 1,024 -> 1,536 columns (another split of its 1,024+
    column sums): so from 1,536 columns on."""
    gen = torch.Generator().manual_seed(0)
    top = widths[-1]
    rows = sorted({first_rows or groups} | {groups * t for t in (4, 16, 64)})
    q = (torch.randn(1, kv_heads, rows[-1], head_dim, generator=gen) * 2).to(dtype).to(device)
    k = (torch.randn(1, kv_heads, top, head_dim, generator=gen) * 2).to(dtype).to(device)
    v = torch.randn(1, kv_heads, top, head_dim, generator=gen).to(dtype).to(device)
    neg = torch.finfo(dtype).min
    good_from, previous = None, None
    with torch.inference_mode():
        for w in widths:
            seen = w - 256  # columns the rows see; the rest masked as a wider step's are
            col = torch.arange(w, device=device)
            mask = torch.where(col < seen, 0.0, neg).to(dtype).view(1, 1, 1, w)
            # the most rows (64 tokens) up to 4,096 columns, 16 tokens' beyond (cheaper)
            outs = [explicit_attention(q[:, :, :m], k[:, :, :w], v[:, :, :w], mask, None)
                    for m in rows if m <= groups * 16 or w <= 4096]
            same_rows = all(torch.equal(o, outs[-1][:, :, : o.shape[2]]) for o in outs)
            same_width = True
            if previous is not None:  # the previous width's columns, attended at this width
                pw, pout = previous
                pmask = torch.where(col < pw - 256, 0.0, neg).to(dtype).view(1, 1, 1, w)
                wide = explicit_attention(q[:, :, : pout.shape[2]], k[:, :, :w], v[:, :, :w], pmask, None)
                same_width = torch.equal(wide, pout)
            if not same_rows:
                good_from = None
            elif not same_width or good_from is None:
                good_from = w
            previous = (w, outs[-1])
    return good_from


def explicit_speed(kv_heads: int, head_dim: int, groups: int, dtype: torch.dtype, tokens: int = 16,
                   width: int = 2048, rounds: int = 7) -> tuple[float, float]:
    """Seconds per call of SDPA and of :func:`explicit_attention` for ``tokens`` tree rows
    folded at ``width`` columns (best of ``rounds``, interleaved), on the CPU: whether the
    explicit path pays on this machine is measured, not assumed from its flags."""
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, kv_heads, groups * tokens, head_dim, generator=gen).to(dtype)
    k = torch.randn(1, kv_heads, width, head_dim, generator=gen).to(dtype)
    v = torch.randn(1, kv_heads, width, head_dim, generator=gen).to(dtype)
    mask = torch.zeros(1, 1, groups * tokens, width, dtype=dtype)
    best = [float("inf"), float("inf")]
    calls = (lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask),
             lambda: explicit_attention(q, k, v, mask, None))
    with torch.inference_mode():
        for _ in range(rounds):
            for i, call in enumerate(calls):
                t0 = time.perf_counter()
                call()
                best[i] = min(best[i], time.perf_counter() - t0)
    return best[0], best[1]


AttentionInterface.register(NAME, folded_gqa_attention_forward)
AttentionMaskInterface.register(NAME, sdpa_mask)  # 2D / no masks are built as for sdpa


def groups(model: torch.nn.Module) -> int:
    """Query heads per key/value head of ``model`` (1 without GQA or a config)."""
    config = getattr(model, "config", None)
    if config is None:
        return 1
    cfg = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    heads = getattr(cfg, "num_attention_heads", None) or 1
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    return max(1, heads // kv_heads)


def unsupported(model: torch.nn.Module) -> str | None:
    """Why ``model`` must keep its attention (None: the fold applies)."""
    config = getattr(model, "config", None)
    if config is None:
        return "no config"
    impl = getattr(config, "_attn_implementation", None)
    if impl == NAME:
        return None
    if impl != "sdpa":
        return f"attention {impl!r} (the fold replaces sdpa only)"
    cfg = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    heads = getattr(cfg, "num_attention_heads", None)
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    if not heads or kv_heads >= heads or heads % kv_heads:
        return "no grouped-query attention"
    types = getattr(cfg, "layer_types", None)
    if types is not None:
        if any(t != "full_attention" for t in types):
            return "sliding-window or other non-full attention layers"
    elif getattr(cfg, "sliding_window", None) is not None and getattr(cfg, "use_sliding_window", True):
        return "sliding-window attention"
    if getattr(cfg, "attn_logit_softcapping", None):
        return "attention logit softcapping"
    if any(hasattr(m, "sinks") for m in model.modules()):
        return "attention sinks"
    if not hasattr(model, "set_attn_implementation") or not model._can_set_attn_implementation():
        return "the model cannot switch its attention implementation"
    return None


def enable(model: torch.nn.Module) -> bool:
    """Switch ``model`` (in place, for every user of it) to :data:`NAME` where that is
    safe; returns whether it now runs the fold. Never raises: on any doubt the model
    keeps its attention."""
    why = unsupported(model)
    if why is None and model.config._attn_implementation != NAME:
        try:
            model.set_attn_implementation(NAME)
        except Exception as exc:  # keep the original attention
            why = f"set_attn_implementation failed ({exc})"
    if why is not None:
        log.debug("folded GQA attention not used: %s", why)
        return False
    return model.config._attn_implementation == NAME
