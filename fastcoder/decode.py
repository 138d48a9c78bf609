"""The decode loop: one loop, every drafter.

Read top to bottom::

    first = prefill(prompt)                      # KV prefix reuse via the session (its cache or
                                                 # its spare, whichever holds more); or, when at
                                                 # most merge_prompt_tail tokens are not cached,
                                                 # no prefill: they ride in the first step
    while not stopped:
        tree  = drafter.draft(tokens)            # may be empty (AR)
        tree  = what could be committed          # depth <= tokens left, nothing after a stop id
        tree  = trim(tree, cost curve)           # the bucket with the best expected tokens/s
        step  = verifier.step(kv, last, tree)    # one fixed-shape forward, acceptance, KV compaction
                                                 # (first step: forced prompt rows, then the tree)
        new   = accepted tokens + bonus token
        commit new tokens one by one, stopping exactly where AR would stop
        drafter.update(...)                      # CACHE, live context, re-sync

Stopping rules (checked token by token, so every method cuts at the same token):
stop ids (EOS and the caller's, e.g. FIM end tokens), ``max_new_tokens``, stop strings
and the caller's stop rule on the decoded text (:mod:`fastcoder.stops`: only the new
tokens are decoded and only the new text is matched), the time budget and a
cancellation event (checked between forward passes, and by eager steps between decoder
layers: a step stopped there commits nothing).

The loop reads what a drafter declares (``adaptive_budget``, ``needs_token_info``,
``drafts_at_zero_budget``), never its name.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Collection, Sequence

from fastcoder.budget import CostCurve, StepBudget, StepCalibration
from fastcoder.config import DecodeConfig
from fastcoder.drafters import DraftState, Drafter
from fastcoder.session import Session
from fastcoder.stats import GenStats
from fastcoder.stops import IncrementalDecoder, StopFn, StopLike, StopStrings, any_of, as_rule  # noqa: F401 (StopFn re-exported)
from fastcoder.tokens import TokenInfo
from fastcoder.trie import DraftTree
from fastcoder.verifier import Interrupted, Verifier, read_margins

StepCallback = Callable[[list[int], GenStats], None]


@dataclass
class Generation:
    tokens: list[int]
    text: str
    stats: GenStats
    cancelled: bool = False
    margins: list[float] = field(default_factory=list)


def generate(
    verifier: Verifier,
    tokenizer,
    drafter: Drafter,
    prompt_ids: Sequence[int],
    config: DecodeConfig,
    *,
    session: Session | None = None,
    stop_fn: StopLike | None = None,
    stop_ids: Collection[int] = (),
    cancel: threading.Event | None = None,
    on_step: StepCallback | None = None,
    cost_curve: CostCurve | None = None,
    first_allowed: Sequence[int] | None = None,
    preempt: Callable[[], bool] | None = None,
    calibration: StepCalibration | None = None,
) -> Generation:
    """Greedy generation of up to ``config.max_new_tokens`` tokens after ``prompt_ids``.

    The output equals plain greedy decoding for every drafter (lossless).
    ``first_allowed``: the first generated token is the greedy choice among these ids
    only (token healing); every method gets it from the same prefill, so the output is
    still one procedure's greedy output.
    ``stop_fn``: a :class:`fastcoder.stops.StopRule` (or a plain predicate on the whole
    text); ``stop_ids``: ids that end the output (not part of it), besides EOS.
    ``cancel``: checked between steps; with ``config.interrupt_steps`` also between the
    decoder layers of an eager step, which then stops and commits nothing; ``preempt``:
    that stop mid-step only while it returns True (the server: another job waits for the
    model thread; otherwise the step ends and its tokens reach the CACHE). None: at once.
    ``calibration``: the engine's :class:`~fastcoder.budget.StepCalibration`; with
    ``config.step_calibration`` (off by default) the budget prices trees by the steps
    timed here, and every verify step feeds it.
    """
    t_start = time.perf_counter()
    session = session or Session(config)
    stats = GenStats(method=drafter.name, prompt_tokens=len(prompt_ids))
    eos = _eos_ids(tokenizer, verifier.model)
    ends = set(stop_ids) - eos
    stops = frozenset(ends | eos)
    rule = any_of(StopStrings(config.stop_strings) if config.stop_strings else None, as_rule(stop_fn))
    matcher = rule.matcher() if rule is not None else None
    text_so_far = IncrementalDecoder(tokenizer) if matcher is not None else None
    info = TokenInfo.for_tokenizer(tokenizer) if drafter.needs_token_info else None
    margins: list = []  # floats and per-step Margins, read once at the end (no sync per step)
    out: list[int] = []
    cut_text: int | None = None

    def commit(new: Sequence[int]) -> bool:
        """Append tokens one by one; True when generation must stop."""
        nonlocal cut_text
        for tok in new:
            if tok in eos:
                stats.stop_reason = "eos"
                return True
            if tok in ends:
                stats.stop_reason = "stop_id"
                return True
            out.append(tok)
            if matcher is not None:
                cut = matcher.feed(text_so_far.add(tok))
                if cut is None and text_so_far.pending:  # an incomplete character, as U+FFFD
                    cut = matcher.peek(text_so_far.pending)
                if cut is not None:
                    cut_text = cut
                    stats.stop_reason = "stop"
                    return True
            if len(out) >= config.max_new_tokens:
                stats.stop_reason = "max_new_tokens"
                return True
        return False

    cancelled = False
    with session.lock:
        t0 = time.perf_counter()
        # the last prompt tokens go with the first draft into the first step (one forward,
        # not a prefill and then a step) when only a few are not cached (a keystroke in a
        # document whose prompt the session holds); otherwise the prefill runs them all
        # and its last row gives the first token, as AR's
        tail: list[int] = []
        session.take_longest(list(prompt_ids))  # its spare cache may hold more of this prompt
        if config.max_new_tokens > 0 and config.merge_prompt_tail > 0:
            uncached = verifier.begin(session.kv, prompt_ids, reserve=config.max_new_tokens)
            straddles = getattr(verifier, "straddles", None)
            n = len(prompt_ids)
            if uncached <= config.merge_prompt_tail and not (straddles and straddles(n - uncached, n - 1)):
                tail = [int(t) for t in prompt_ids[len(prompt_ids) - uncached :]]
        if tail:
            first, prefilled, margin = None, len(tail), None
            stats.merged_tail = len(tail)
        else:
            extra = {k: v for k, v in (("allowed", first_allowed), ("cancel", cancel)) if v is not None}
            first, prefilled, margin = verifier.prefill(session.kv, prompt_ids, reserve=config.max_new_tokens, **extra)
        stats.prefill_s = time.perf_counter() - t0
        stats.prefill_tokens = prefilled
        if first is None and not tail:  # cancelled between prefill chunks (what was prefilled stays cached)
            stats.stop_reason = "cancelled"
            stats.new_tokens = 0
            stats.total_s = time.perf_counter() - t_start
            drafter.close()
            return Generation(tokens=[], text="", stats=stats, cancelled=True, margins=read_margins(margins))
        if margin is not None and verifier.record_margins:
            margins.append(margin)
        chain_only = getattr(verifier, "exact_paths", False) and not config.side_branches
        st = DraftState(list(prompt_ids), len(prompt_ids), config, session, stats, info, chain_only=chain_only)
        drafter.start(st)
        done = config.max_new_tokens <= 0 or (first is not None and commit([first]))
        st.tokens.extend(out)
        if out:  # the prefill's token is output too: drafters must see it
            drafter.update(st, DraftTree(), [], list(out))
        budget = StepBudget(cost_curve, config.max_draft_tokens is None and drafter.adaptive_budget, session.acceptance,
                            session.draft_cost, chain_only=chain_only,
                            calibration=calibration if config.step_calibration else None)  # fmt: skip
        split = getattr(verifier, "last_split", None) is not None
        t_decode = time.perf_counter()  # the time budget counts from here: a cold prefill is not decoding
        while not done:
            if cancel is not None and cancel.is_set():
                cancelled = True
                stats.stop_reason = "cancelled"
                break
            if config.time_budget_s is not None and time.perf_counter() - t_decode - stats.yielded_s > config.time_budget_s:
                stats.stop_reason = "time_budget"
                break
            # 1. draft (nothing while backing off after trees that did not pay)
            t0 = time.perf_counter()
            max_nodes = config.max_draft_tokens if config.max_draft_tokens is not None else 64
            drafting = (max_nodes > 0 or drafter.drafts_at_zero_budget) and budget.should_draft()
            asked = budget.request(max_nodes) if drafting else 0  # fewer where drafting costs more than it brings
            tree = drafter.draft(st, asked) if drafting else DraftTree()
            t1 = time.perf_counter()
            if asked:
                budget.observe_drafting(asked, t1 - t0)
            stats.retrieval_s += t1 - t0
            # 2. what could still be committed (nothing past max_new_tokens, nothing after a
            # stop id, nor after a line end where one ends the output), then the budget: the
            # best-first prefix of that with the best expected tokens/s (so a 2-token answer
            # left does not pay for a 16-row step)
            if len(tree):  # (AR never builds the token table for the newline check)
                ending = _ending(stops, matcher, tokenizer, info) if config.prune_at_line_end else stops
                tree = tree.limit_depth(config.max_new_tokens - len(out) - 1, ending)
            forced = tail[1:]  # the first step's prompt rows after its root (then none)
            tree = budget.trim(tree, len(prompt_ids) + len(out), extra_rows=len(forced))  # rows the step attends
            st.step_s = budget.step_s
            if len(tree) > verifier.max_nodes - len(forced):  # the largest bucket (best-first: still a tree)
                tree = tree.truncate(verifier.max_nodes - len(forced))
            t2 = time.perf_counter()
            stats.tree_s += t2 - t1
            # 3. verify: inputs, forward, acceptance walk, KV compaction
            stop = None  # may stop the step between layers
            if config.interrupt_steps and cancel is not None:
                stop = cancel.is_set if preempt is None else (lambda: cancel.is_set() and preempt())
            topk = {"topk": drafter.topk_rows} if drafter.topk_rows else {}  # rows' top tokens, for the drafter
            root = st.tokens[-1]  # the input of the tree's root row (with a tail: its last token)
            try:
                if tail:  # the first step: the prompt's uncached tail, then the draft
                    step = verifier.step(session.kv, tail[0], tree, forced=forced, allowed=first_allowed, stop=stop, **topk)
                    tail = []
                else:
                    step = verifier.step(session.kv, root, tree, stop=stop, **topk)
            except Interrupted:  # cancelled mid-forward: nothing of this step is committed
                cancelled = True
                stats.stop_reason = "cancelled"
                stats.retrieval_s -= t1 - t0  # its seconds count apart (no step ran)
                stats.tree_s -= t2 - t1
                stats.stopped_s = time.perf_counter() - t0
                break
            t3 = time.perf_counter()
            budget.observe_step(len(tree) + len(forced), t3 - t2)
            if split:
                prep, fwd, walk, compact = verifier.last_split
                stats.prep_s += prep
                stats.walk_s += walk
                stats.compact_s += compact
                stats.forward_s += (t3 - t2) - prep - walk - compact
            else:
                stats.forward_s += t3 - t2
            stats.forward_steps += 1
            stats.draft_tokens += len(tree)
            stats.draft_sizes.append(len(tree))
            # 4. accept and commit
            new = [tree.tokens[i] for i in step.accepted] + [step.bonus]
            if isinstance(step.margins, list):
                margins.extend(step.margins)
            elif step.margins is not None:
                margins.append(step.margins)
            for i in step.accepted:
                stats.accepted_by_source[tree.sources[i]] += 1
            stats.accept_lengths.append(len(step.accepted))
            budget.observe(tree, step.accepted)
            n_before = len(out)
            done = commit(new)
            committed = out[n_before:]
            st.tokens.extend(committed)
            st.step_topk = list(zip([root] + tree.tokens, step.topk)) if step.topk else None
            drafter.update(st, tree, step.accepted, committed)
            t4 = time.perf_counter()
            stats.accept_s += t4 - t3
            rows = len(tree) + 1 + len(forced)
            stats.note_step(verifier.bucket(rows) if hasattr(verifier, "bucket") else rows, t4 - t0)
            if on_step is not None:
                on_step(committed, stats)
        if not stats.stop_reason:
            stats.stop_reason = "max_new_tokens"
    drafter.close()
    text = tokenizer.decode(out, skip_special_tokens=True)
    if cut_text is not None:
        text = text[:cut_text]
    stats.new_tokens = len(out)
    stats.total_s = time.perf_counter() - t_start
    return Generation(tokens=out, text=text, stats=stats, cancelled=cancelled, margins=read_margins(margins))


class _EndingIds:
    """Token ids after which nothing can be committed: ``ids`` (EOS, stop ids), and every
    token whose text holds a newline (``has_newline``) when the stop rule ends the output
    at a newline (a single-line completion)."""

    def __init__(self, ids: frozenset[int], has_newline) -> None:
        self.ids = ids
        self.has_newline = has_newline

    def __contains__(self, token: object) -> bool:
        if token in self.ids:
            return True
        try:
            t = int(token)  # type: ignore[call-overload]  # a Python or a numpy integer
        except (TypeError, ValueError):
            return False
        return 0 <= t < len(self.has_newline) and bool(self.has_newline[t])


def _ending(stops: frozenset[int], matcher, tokenizer, info: "TokenInfo | None"):
    """What :meth:`DraftTree.limit_depth` cuts below: ``stops``, plus the newline tokens
    while ``matcher`` says a newline ends the output (its state: a rule judging the text
    after a healed prefix starts only once that prefix is out)."""
    if matcher is None or not matcher.newline_ends():
        return stops
    info = info or TokenInfo.for_tokenizer(tokenizer)  # built once per tokenizer
    return _EndingIds(stops, info.has_newline)


def _eos_ids(tokenizer, model) -> set[int]:
    ids: set[int] = set()
    for src in (getattr(model, "generation_config", None), model.config, tokenizer):
        val = getattr(src, "eos_token_id", None)
        if val is None:
            continue
        if isinstance(val, int):
            ids.add(val)
        else:
            ids.update(int(v) for v in val)
    return ids
