"""The one configuration object of the engine.

Every tunable of FastCoder decoding lives here, with the paper's default and what
it does. The server and the CLIs build one of these (``DecodeConfig.from_dict``)
and pass it down; nothing else carries engine parameters.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

METHODS = ("ar", "pld", "rest", "fastcoder", "reuse")


LEGACY_WEIGHTS = {
    "alpha": "D_r", "beta": "D_c", "gamma": "D_d", "context_weight": "context", "cache_weight": "cache",
    "reference_weight": "reference", "buffers_weight": "buffers",
}
"""Old config keys of the source weights -> the source's name in ``source_weights``."""


@dataclass
class DecodeConfig:
    # --- what to run -------------------------------------------------------------
    method: str = "fastcoder"
    """Drafter: ar (no draft), pld (prompt lookup), rest (D_c only),
    fastcoder (CACHE + D_r + D_c + live context, skip tokens, missing table), reuse."""
    max_new_tokens: int = 512
    """Hard cap on generated tokens."""
    stop_strings: tuple[str, ...] = ()
    """Generation stops once the decoded output contains one of these (output is cut before it)."""
    time_budget_s: float | None = None
    """Stop (keeping what was generated) once this many seconds of decoding have passed
    after the prompt's prefill (which gives the first token): a prefill longer than the
    budget (a long file's cold prompt on a CPU) no longer leaves a one-token answer."""

    # --- retrieval -----------------------------------------------------------------
    n_max: int = 16
    """Longest context suffix tried for an exact match."""
    n_min: int = 1
    """Shortest suffix tried; below this nothing is retrieved. 1: where no two-token
    suffix occurs anywhere, the continuations of the last token still draft (as
    prompt lookup falls back from 2 tokens to 1). Measured in the offline replay of two
    20-task repository runs (2026-11-24, bf16 curve): mean accepted length 1.81 -> 2.07
    and 1.92 -> 2.19, est. speedup vs AR 1.73 -> 1.92 and 1.83 -> 2.05, for 0.5-0.9 ms
    more drafting per step; both the in-memory sources and the datastores gain. Then
    measured side by side (``fastcoder bench --suite repo --limit 20 --methods
    ...,fastcoder,fastcoder-n2``, bf16, 2-vCPU AVX512-BF16): 1.74x vs 1.66x AR (+5%)."""
    max_draft_tokens: int | None = None
    """Nodes in the draft tree. None = choose from the measured verify-cost curve c(k),
    the drafter asked for 8..64 nodes by the measured drafting cost
    (``budget.StepBudget.request``)."""
    max_draft_depth: int = 16
    """Longest root-to-leaf path in a draft tree."""
    side_branches: bool = False
    """Verify the nodes off the path of first children too where the verifier accepts along
    that path only (batch-invariant CPU bf16 steps without path attention,
    ``Verifier.exact_paths``; with it, the default, any path is accepted). There such a
    node can never be accepted (where the model picks it, that pick is the bonus token
    anyway), so by default the tree is cut to that path (``budget.StepBudget``). True only
    to measure what the cut gives."""
    source_agreement: bool = True
    """The draft budget's acceptance model tells nodes that several sources drafted from
    those one source drafted (``budget.AcceptanceModel``). False only to measure what it
    gives."""
    step_calibration: bool = False
    """True: the draft budget prices trees by the verify steps this process has timed, not
    by the cost curve alone: the curve's 1-row cost and its extra cost per tree row are
    each scaled by what the steps measured (:class:`fastcoder.budget.StepCalibration`).
    Off by default (thirty-fourth session, 2-vCPU AMD EPYC): in the language server it
    learned that a tree's rows cost ~3x the curve's, but that came from the steps that
    run after an early answer, while the server handles the next keystrokes beside them;
    before the answer, the curve was about right (1-2 nodes 1.08x a 1-row step, the
    curve ~1.13x). Priced so, the budget drafted less where drafts paid: typing replay
    FastCoder 1.02x its time without it on the same requests, live typing 264 vs 237 ms
    where the model ran, and the repo suite 1.61x AR against 1.64x / 1.66x without it
    (two runs). The output does not depend on it."""
    prune_at_line_end: bool = True
    """Draft nothing below a token that holds a newline while the stop rule ends the
    output at a newline (single-line completions). False only to measure what it gives."""
    merge_prompt_tail: int = 8
    """When at most this many prompt tokens are not in the session's KV cache (a
    keystroke in a document the session holds), they go into the first verification
    step together with the first draft (one forward instead of a prefill and then a
    step; the output is the same). 0 = always prefill first (to measure what it gives)."""
    source_weights: dict[str, float] = field(default_factory=dict)
    """Trie weight of each draft source by name (``D_r``, ``D_c``, ``D_d``, ``context``,
    ``reference`` (the text after the cursor), ``buffers`` (the other open documents),
    ``cache``, and any registered source): overrides the source's own default (1.0 for
    all of these); 0 turns a source off. See :mod:`fastcoder.sources`."""
    weighting: str = "freq"
    """How a source's counts enter the trie: 'count' (raw, as the paper) or 'freq'
    (each source's counts scaled to frequencies first; measured slightly better)."""
    use_context: bool = True
    """Use the live context (prompt + output so far) as a draft source (fastcoder)."""
    use_datastores: bool = True
    """Search D_r / D_c / D_d (ablation: fastcoder without D_r is datastores with D_r removed)."""
    context_recency: float = 0.3
    """In the small in-memory sources (live context, CACHE, the text after the cursor,
    other open documents) the i-th most recent occurrence of the matched suffix counts
    ``context_recency ** i``: 1.0 = plain counts (the paper), below 1 the most recent
    match's continuation leads (prompt lookup's best variant)."""
    learn_weights: bool = True
    """Scale each source's trie weight by the tokens it would have had accepted recently,
    learned online per session (= per document in the server); see
    :mod:`fastcoder.source_weights`. False = the fixed weights above (the paper)."""
    weight_decay: float = 0.9
    """Decay of the learned source weights per observation (0.9 ≈ the last 10 steps)."""
    source_gate: bool = True
    """Search a datastore (D_r, D_c, D_d) only while its search pays for itself at this
    device's step cost, learned online per session (:class:`fastcoder.source_weights.SourceGate`):
    on a GPU, whose steps cost a few ms, one that seldom adds a token the other sources do
    not is searched only every 8th draft; on a CPU every one pays. Needs a cost curve."""

    interrupt_steps: bool = False
    """True: a cancelled generation (superseded by a newer request, or background work a
    request preempts) stops its running step between two decoder layers, committing
    nothing of it, when another job waits for the model thread (``generate(preempt=...)``;
    the server's: :meth:`lsp_server.model_host.ModelHost.awaited`): that request waits for
    about one layer, not a whole forward. Eager steps only (CUDA graphs run whole). Off by
    default: it took the typing replay's model-run p50 13-15% down (its compressed clock
    always finds the old block mid-forward), but in real-time typing it changed nothing
    with the 0.5B model and, with the 1.5B, FastCoder's felt latency where the model ran
    went from 375 to 497 ms (one run): a stopped step's work and its tokens for the
    document's CACHE are lost (docs/BENCHMARKS.md, thirty-second session)."""

    # --- CACHE -----------------------------------------------------------------------
    use_cache: bool = True
    cache_min_sequences: int = 0
    """l: the CACHE is searched once it holds at least this many sequences. 0 (the
    editor's default): from the first one, so a document's previous suggestions draft
    the next request at once; the paper's l = 50 (:meth:`paper`) suits long generations."""
    cache_output_chunk: int = 20
    """The model's output is added to the CACHE every this many tokens."""
    cache_max_sequences: int = 2000
    """Bound on CACHE sequences; the oldest are evicted first."""
    cache_exclusive: bool = False
    """The paper's rule: when the CACHE has a draft, D_r / D_c / D_d are not searched.
    False = the CACHE is one more source in the trie next to them."""

    # --- token recycling ---------------------------------------------------------------
    recycle_k: int | None = None
    """Token recycling (Luo et al., 2024, "Turning Trash into Treasure"): after every step
    the top ``recycle_k`` next tokens the model gave at each verified row, rejected rows
    too, are kept per input token in the session (its latest row wins), and the
    ``recycle`` source drafts from that table (:mod:`fastcoder.sources.recycle`): the
    model's own recent predictions after the same token, no match in any text needed.
    None (auto): 4 where the verifier accepts any path of a tree (CUDA, fp32, CPU bf16 with
    path attention), off where it accepts along the path of first children only
    (batch-invariant steps without path attention: ``Verifier.exact_paths``), where its
    extra branches cannot be accepted: there the repo suite measured it neutral (AMX Xeon:
    1.78x vs 1.73x AR, accepted length 2.01 vs 2.00).
    0 = off; no top-k is computed then."""

    # --- skip tokens and missing table -------------------------------------------------
    use_skip: bool = False
    """Skip tokens (the paper's rule; :meth:`paper`). Off by default: on a CPU a search
    is ~1% of a step, and skipping lost 0.1-0.3 accepted tokens per step in the offline
    replay (docs/bench/repo-bf16/simulate.md)."""
    skip_probability: float = 0.5
    """p: at a skip token (first non-whitespace token of a line) retrieve with this probability."""
    use_missing_table: bool = True
    missing_table_size: int = 4096
    """Bound on remembered suffixes that found nothing (LRU)."""
    seed: int = 0
    """Seed of the skip-token RNG, so runs are reproducible."""

    # --- reuse (EfficientEdit) ------------------------------------------------------------
    reuse_resync_tokens: int = 4
    """Tokens of recent output used to re-sync to the reference text."""
    reuse_max_tokens: int = 96
    """Longest linear draft taken from the reference text in one step."""

    parallel_search: bool = False
    """Search the datastore sources of a draft side by side in the engine's search threads.
    Off by default since the twentieth session: Python holds the GIL through most of a
    search, so the threads overlap little and their hand-offs cost more than they save
    (2-vCPU AMD EPYC: ``fastcoder_bench.probes.host_overhead --pool`` 2.6 ms per editor
    generation serial against 3.7-4.6 ms pooled; the repo suite's drafting 0.82-0.87
    against 0.90-1.12 ms a step, ``fastcoder_bench.probes.draft_cost``)."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.n_min < 1 or self.n_max < self.n_min:
            raise ValueError("need 1 <= n_min <= n_max")
        if self.weighting not in ("count", "freq"):
            raise ValueError("weighting must be 'count' or 'freq'")
        if not 0.0 <= self.skip_probability <= 1.0:
            raise ValueError("skip_probability must be in [0, 1]")
        if not 0.0 < self.context_recency <= 1.0:
            raise ValueError("context_recency must be in (0, 1]")
        if not 0.0 <= self.weight_decay < 1.0:
            raise ValueError("weight_decay must be in [0, 1)")
        if self.max_draft_tokens is not None and self.max_draft_tokens < 0:
            raise ValueError("max_draft_tokens must be >= 0")
        k = self.recycle_k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 16):
            raise ValueError("recycle_k must be null (auto) or an integer in [0, 16]")
        tail = self.merge_prompt_tail
        if isinstance(tail, bool) or not isinstance(tail, int) or not 0 <= tail <= 64:
            raise ValueError("merge_prompt_tail must be an integer in [0, 64]")
        self.stop_strings = tuple(self.stop_strings)
        self.source_weights = {str(k): float(v) for k, v in dict(self.source_weights or {}).items()}

    @classmethod
    def paper(cls, **changes: Any) -> "DecodeConfig":
        """The FastCoder paper's fixed settings, for a paper-faithful run: D_r + D_c +
        CACHE only (no live context, editor sources or token recycling), raw counts with α = β = 1, the
        CACHE searched first once it holds l = 50 sequences and then exclusively, skip
        tokens with p = 0.5, 64 draft tokens, no learned weights."""
        base: dict[str, Any] = dict(
            method="fastcoder", n_max=16, max_draft_tokens=64, source_weights={"D_r": 1.0, "D_c": 1.0}, weighting="count",
            use_context=False, context_recency=1.0, learn_weights=False, cache_min_sequences=50,
            cache_exclusive=True, cache_output_chunk=20, use_skip=True, skip_probability=0.5, recycle_k=0,
        )
        base.update(changes)
        return cls(**base)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "DecodeConfig":
        """Build from a dict (e.g. LSP initializationOptions); camelCase keys work too.
        The weight keys of earlier versions (``alpha``/``beta``/``gamma`` for D_r/D_c/D_d,
        ``context_weight``, ``cache_weight``, ``reference_weight``, ``buffers_weight``)
        still set ``source_weights``."""
        data = dict(data or {})
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        legacy: dict[str, float] = {}
        for key, value in data.items():
            snake = "".join("_" + c.lower() if c.isupper() else c for c in key)
            if snake in names:
                kwargs[snake] = value
            elif snake in LEGACY_WEIGHTS:
                legacy[LEGACY_WEIGHTS[snake]] = float(value)
        if legacy:
            kwargs["source_weights"] = {**dict(kwargs.get("source_weights") or {}), **legacy}
        return cls(**kwargs)

    def replace(self, **changes: Any) -> "DecodeConfig":
        return dataclasses.replace(self, **changes)
