"""Statistics of one generation."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field


@dataclass
class GenStats:
    method: str = ""
    prompt_tokens: int = 0
    prefill_tokens: int = 0  # tokens actually run through the model (after KV prefix reuse)
    new_tokens: int = 0
    forward_steps: int = 0  # decode forwards (prefill excluded)
    draft_tokens: int = 0  # draft nodes verified in total
    prefill_s: float = 0.0
    merged_tail: int = 0  # prompt tokens run in the first decode step with the first draft (0: the prefill gave the first token)
    # the decode phase's time split; with other_s they sum to decode_s exactly
    retrieval_s: float = 0.0  # drafting (retrieval, CACHE, trie)
    tree_s: float = 0.0  # budget trim of the tree
    prep_s: float = 0.0  # step inputs: host buffer + one host->device copy
    forward_s: float = 0.0  # device-side mask + forward + the one device->host copy
    walk_s: float = 0.0  # greedy acceptance walk over the tree
    compact_s: float = 0.0  # KV compaction (accepted rows moved into place)
    accept_s: float = 0.0  # commit (stop rules) + drafter update (CACHE, live context)
    total_s: float = 0.0
    # a step stopped between layers when the generation was cancelled (interrupt_steps):
    # its seconds, drafting included, outside decode_s and its split (no step, no token)
    stopped_s: float = 0.0
    # the caller's other jobs run between two steps (``on_step``: the server runs the
    # completions asked meanwhile inside a function body's generation): outside decode_s
    # and the time budget
    yielded_s: float = 0.0
    setup_s: float = 0.0  # the caller's work before the engine (the server: prompt, draft sources)
    queue_s: float = 0.0  # the caller's wait for the model thread before that
    # bucket (query rows) -> [steps, seconds of whole steps: draft .. commit]
    step_by_bucket: dict[int, list] = field(default_factory=dict)
    # tokens accepted from drafts, by source (cache / context / D_r / D_c / D_d / reuse / prompt)
    accepted_by_source: Counter = field(default_factory=Counter)
    # drafts at which the source gate did not ask a source (it did not pay here), by source
    gated: Counter = field(default_factory=Counter)
    # retrieval success by position within the line: pos -> [attempts, hits]
    retrieval_by_line_pos: dict[int, list[int]] = field(default_factory=dict)
    accept_lengths: list[int] = field(default_factory=list)  # accepted draft tokens per step
    draft_sizes: list[int] = field(default_factory=list)
    # parallel search: sum of single-source search times vs wall time of the parallel search
    search_serial_s: float = 0.0
    search_wall_s: float = 0.0
    searches: int = 0
    skipped_retrievals: int = 0
    missing_hits: int = 0
    cache_hits: int = 0
    stop_reason: str = ""
    # ran as plain AR because the engine's cost curve was still being measured (Engine.defer_cost_curve)
    curve_pending: bool = False
    margins: list[float] = field(default_factory=list)

    @property
    def decode_s(self) -> float:
        """The steps' seconds (what per-step and per-token costs divide): the decode
        phase without a step stopped by a cancellation."""
        return self.total_s - self.prefill_s - self.stopped_s - self.yielded_s

    @property
    def other_s(self) -> float:
        """Decode time outside the measured parts (loop checks, final detokenising)."""
        parts = self.retrieval_s + self.tree_s + self.prep_s + self.forward_s + self.walk_s + self.compact_s + self.accept_s
        return self.decode_s - parts

    def note_step(self, bucket: int, seconds: float) -> None:
        slot = self.step_by_bucket.setdefault(int(bucket), [0, 0.0])
        slot[0] += 1
        slot[1] += seconds

    @property
    def mean_accept_len(self) -> float:
        """Tokens committed per decode forward (the paper's L/F; >= 1)."""
        steps = self.forward_steps
        # the first token comes from the prefill forward, or (merged_tail) from the first step
        return self.decoded_tokens / steps if steps else float(self.new_tokens > 0)

    @property
    def decoded_tokens(self) -> int:
        """Output tokens the decode steps gave: all but the prefill's one (all of them
        when the prompt's tail ran in the first step)."""
        return self.new_tokens if self.merged_tail else max(self.new_tokens - 1, 0)

    @property
    def ms_per_token(self) -> float:
        """Decode-phase ms per token (prefill excluded, as in the paper)."""
        toks = max(self.decoded_tokens, 1)
        return 1000.0 * self.decode_s / toks

    @property
    def search_overlap(self) -> float:
        """How much the parallel datastore searches overlapped: 0 = serial, 1 = fully."""
        if self.searches == 0 or self.search_serial_s <= 0:
            return 0.0
        saved = self.search_serial_s - self.search_wall_s
        return max(0.0, saved / self.search_serial_s)

    def note_line_pos(self, pos: int, hit: bool) -> None:
        slot = self.retrieval_by_line_pos.setdefault(min(pos, 31), [0, 0])
        slot[0] += 1
        slot[1] += int(hit)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["accepted_by_source"] = dict(self.accepted_by_source)
        d["gated"] = dict(self.gated)
        d["retrieval_by_line_pos"] = {str(k): v for k, v in sorted(self.retrieval_by_line_pos.items())}
        d["step_by_bucket"] = {str(k): v for k, v in sorted(self.step_by_bucket.items())}
        d.update(
            decode_s=self.decode_s,
            decoded_tokens=self.decoded_tokens,
            mean_accept_len=self.mean_accept_len,
            ms_per_token=self.ms_per_token,
            search_overlap=self.search_overlap,
            other_s=self.other_s,
        )
        d.pop("margins", None)
        return d

    def summary(self) -> str:
        src = ", ".join(f"{k}={v}" for k, v in sorted(self.accepted_by_source.items())) or "-"
        return (
            f"{self.method}: {self.new_tokens} tokens, {self.forward_steps} forwards, "
            f"accept len {self.mean_accept_len:.2f}, decode {self.ms_per_token:.1f} ms/token, "
            f"prefill {self.prefill_s * 1000:.0f} ms ({self.prefill_tokens} tok), "
            f"time split: retrieval {self.retrieval_s * 1000:.0f} ms, tree {self.tree_s * 1000:.0f} ms, "
            f"inputs {self.prep_s * 1000:.0f} ms, forward {self.forward_s * 1000:.0f} ms, walk {self.walk_s * 1000:.0f} ms, "
            f"KV compaction {self.compact_s * 1000:.0f} ms, commit {self.accept_s * 1000:.0f} ms, "
            f"other {self.other_s * 1000:.0f} ms; "
            f"accepted by source: {src}; stop: {self.stop_reason}"
        )
