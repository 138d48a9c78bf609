"""Counters reported by the ``fastcoder.stats`` command."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from fastcoder.stats import GenStats


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    idx = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[idx]


@dataclass
class MethodCounters:
    generations: int = 0
    new_tokens: int = 0
    decoded_tokens: int = 0  # new tokens the decode steps gave (all but the prefill's first, if it gave one)
    forward_steps: int = 0
    draft_tokens: int = 0
    accepted_draft_tokens: int = 0
    prompt_tokens: int = 0
    prefill_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    queue_s: float = 0.0  # waiting for the model thread before the generation began
    stopped_s: float = 0.0  # steps stopped between layers by a cancellation (no token)
    stop_reasons: dict[str, int] = field(default_factory=dict)

    def add(self, st: GenStats) -> None:
        self.generations += 1
        self.new_tokens += st.new_tokens
        self.decoded_tokens += st.decoded_tokens
        self.forward_steps += st.forward_steps
        self.draft_tokens += st.draft_tokens
        self.accepted_draft_tokens += sum(st.accept_lengths)
        self.prompt_tokens += st.prompt_tokens
        self.prefill_tokens += st.prefill_tokens
        self.prefill_s += st.prefill_s
        self.decode_s += st.decode_s
        self.queue_s += st.queue_s
        self.stopped_s += st.stopped_s
        self.stop_reasons[st.stop_reason or "?"] = self.stop_reasons.get(st.stop_reason or "?", 0) + 1

    def to_json(self) -> dict[str, Any]:
        decoded = self.decoded_tokens  # a generation cancelled in its prefill has no token at all
        return {
            "generations": self.generations,
            "newTokens": self.new_tokens,
            "decodedTokens": decoded,
            "forwardSteps": self.forward_steps,
            "draftTokens": self.draft_tokens,
            "acceptedDraftTokens": self.accepted_draft_tokens,
            "meanAcceptLength": (decoded / self.forward_steps) if self.forward_steps else None,
            "msPerToken": (1000.0 * self.decode_s / decoded) if decoded else None,
            "promptTokens": self.prompt_tokens,
            "prefillTokens": self.prefill_tokens,
            "prefillSaving": (1.0 - self.prefill_tokens / self.prompt_tokens) if self.prompt_tokens else None,
            "prefillMs": 1000.0 * self.prefill_s,
            "decodeMs": 1000.0 * self.decode_s,
            "queueMs": 1000.0 * self.queue_s,
            "stoppedMs": 1000.0 * self.stopped_s,
            "stopReasons": dict(self.stop_reasons),
        }


class ServerMetrics:
    """Thread-safe counters: requests by kind and outcome, engine work by method."""

    def __init__(self, keep_latencies: int = 500) -> None:
        self._lock = threading.Lock()
        self.requests: dict[str, int] = {}
        self.outcomes: dict[str, int] = {}
        self.methods: dict[str, MethodCounters] = {}
        # background suggestions (prefetch) are counted apart: ``methods``, ``total`` and
        # ``last`` describe the generations that answered requests
        self.prefetch = MethodCounters()
        # idle-time prefills of a document's next prompt window (prepareWindow)
        self.window = {"prefills": 0, "prefillTokens": 0, "prefillMs": 0.0}
        # warm-ups of opened documents (warmOnOpen): what they prefilled (rows restored from
        # disk, kvDiskMb, are not prefilled again)
        self.warm = {"documents": 0, "prefillTokens": 0}
        self.latencies: deque[float] = deque(maxlen=keep_latencies)
        self.last: dict[str, Any] | None = None
        self.last_early: dict[str, Any] | None = None  # the last early answer (early_answer)
        self.early_seq = 0

    def request(self, kind: str) -> None:
        with self._lock:
            self.requests[kind] = self.requests.get(kind, 0) + 1

    def outcome(self, name: str) -> None:
        with self._lock:
            self.outcomes[name] = self.outcomes.get(name, 0) + 1

    def latency(self, seconds: float) -> None:
        with self._lock:
            self.latencies.append(seconds)

    def warm_prefill(self, tokens: int) -> None:
        """A document's warm-up ended, having prefilled ``tokens``."""
        with self._lock:
            self.warm["documents"] += 1
            self.warm["prefillTokens"] += tokens

    def window_prefill(self, tokens: int, seconds: float) -> None:
        """An idle-time prefill of a next prompt window (complete or paused)."""
        with self._lock:
            self.window["prefills"] += 1
            self.window["prefillTokens"] += tokens
            self.window["prefillMs"] += 1000.0 * seconds

    def generation(self, st: GenStats, kind: str, context_tokens: int = 0) -> None:
        with self._lock:
            if kind == "prefetch":
                self.prefetch.add(st)
                return
            self.methods.setdefault(st.method or "?", MethodCounters()).add(st)
            self.last = {
                "kind": kind,
                "method": st.method,
                "promptTokens": st.prompt_tokens,
                "contextTokens": context_tokens,
                "prefillTokens": st.prefill_tokens,
                "newTokens": st.new_tokens,
                "forwardSteps": st.forward_steps,
                "meanAcceptLength": st.mean_accept_len,
                "prefillMs": 1000.0 * st.prefill_s,
                "totalMs": 1000.0 * st.total_s,
                "setupMs": 1000.0 * st.setup_s,
                "queueMs": 1000.0 * st.queue_s,
                "stopReason": st.stop_reason,
                "acceptedBySource": dict(st.accepted_by_source),
                "sourcesGated": dict(st.gated),
            }

    def early_answer(self, st: GenStats, engine_s: float, setup_s: float) -> None:
        """A block answered early with its first lines, ``engine_s`` after the engine
        began (``st``: the generation's stats as of that step): what the user waited for,
        split as ``last`` splits a whole generation (``lastEarly``)."""
        with self._lock:
            self.early_seq += 1
            self.last_early = {
                "seq": self.early_seq,
                "method": st.method,
                "engineMs": 1000.0 * engine_s,
                "prefillMs": 1000.0 * st.prefill_s,
                "setupMs": 1000.0 * setup_s,
                "forwardSteps": st.forward_steps,
                "tokens": sum(st.accept_lengths) + st.forward_steps,  # the steps' (the prefill's one aside)
                "draftMs": 1000.0 * (st.retrieval_s + st.tree_s),
                "forwardMs": 1000.0 * st.forward_s,
                "draftSizes": list(st.draft_sizes),  # per step, nodes verified
                "acceptLengths": list(st.accept_lengths),  # per step, of them accepted
            }

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            total = MethodCounters()
            for m in self.methods.values():
                for name in ("generations", "new_tokens", "decoded_tokens", "forward_steps", "draft_tokens", "accepted_draft_tokens",
                             "prompt_tokens", "prefill_tokens", "prefill_s", "decode_s", "queue_s", "stopped_s"):  # fmt: skip
                    setattr(total, name, getattr(total, name) + getattr(m, name))
                for k, v in m.stop_reasons.items():
                    total.stop_reasons[k] = total.stop_reasons.get(k, 0) + v
            lat = list(self.latencies)
            return {
                "requests": dict(self.requests),
                "outcomes": dict(self.outcomes),
                "methods": {k: v.to_json() for k, v in self.methods.items()},
                "total": total.to_json(),
                "prefetch": self.prefetch.to_json(),
                "window": dict(self.window),
                "warm": dict(self.warm),
                "latencyMs": {
                    "count": len(lat),
                    "p50": None if not lat else 1000.0 * _percentile(lat, 0.5),
                    "p95": None if not lat else 1000.0 * _percentile(lat, 0.95),
                },
                "last": self.last,
                "lastEarly": self.last_early,
            }
