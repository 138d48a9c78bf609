"""The real peer as bench rows: transformers' own ``generate()`` on the same task.

``hf-ar`` (plain greedy, DynamicCache), ``hf-static`` (``cache_implementation="static"``;
transformers compiles it on CUDA by itself) and ``hf-pld``
(``prompt_lookup_num_tokens=10``). Same prompt ids, ``max_new_tokens``, EOS and stop rule
as our methods: the stop predicate runs on the decoded output after each step (a
``StoppingCriteria``), and the kept output is cut at exactly the token where our loop
(token by token) would have stopped, so outputs compare one to one.

Timing: a streamer stamps the time of every ``put``; the first put of new tokens ends
the prefill (TTFT), every later put is one decode forward. transformers' step is not
split further: the whole decode time is reported as ``forward``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from fastcoder.stats import GenStats


class _Clock:
    """A generate() streamer that only records when tokens arrive."""

    def __init__(self) -> None:
        self.puts: list[tuple[float, int]] = []
        self._prompt_seen = False

    def put(self, value) -> None:
        if not self._prompt_seen:  # the first put is the prompt
            self._prompt_seen = True
            return
        self.puts.append((time.perf_counter(), int(value.numel())))

    def end(self) -> None:
        pass


def hf_generate(
    model: Any,
    tokenizer: Any,
    prompt_ids: Sequence[int],
    *,
    max_new_tokens: int,
    stop_fn: Callable[[str], int | None] | None,
    eos: set[int],
    name: str,
    kwargs: dict,
) -> dict[str, Any]:
    """One ``generate()`` call; returns the result record shape the bench stores."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    n_prompt = len(prompt_ids)

    class StopRule(StoppingCriteria):
        def __call__(self, input_ids, scores, **kw):
            if stop_fn is None:
                return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
            text = tokenizer.decode(input_ids[0, n_prompt:].tolist(), skip_special_tokens=True)
            hit = stop_fn(text) is not None
            return torch.full((input_ids.shape[0],), hit, dtype=torch.bool, device=input_ids.device)

    device = next(model.parameters()).device
    input_ids = torch.tensor([list(prompt_ids)], dtype=torch.long, device=device)
    clock = _Clock()
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            eos_token_id=sorted(eos) or None,
            pad_token_id=(sorted(eos)[0] if eos else None),
            stopping_criteria=StoppingCriteriaList([StopRule()]),
            streamer=clock,
            **kwargs,
        )
    total = time.perf_counter() - t0
    new = [int(t) for t in out[0, n_prompt:].tolist()]
    # cut exactly where our token-by-token loop stops: EOS (not kept), the stop rule
    # (the token that triggers it is kept, the text is cut), max_new_tokens
    tokens: list[int] = []
    cut_text, reason = None, "max_new_tokens"
    for tok in new:
        if tok in eos:
            reason = "eos"
            break
        tokens.append(tok)
        if stop_fn is not None:
            cut = stop_fn(tokenizer.decode(tokens, skip_special_tokens=True))
            if cut is not None:
                cut_text, reason = cut, "stop"
                break
        if len(tokens) >= max_new_tokens:
            break
    text = tokenizer.decode(tokens, skip_special_tokens=True)
    if cut_text is not None:
        text = text[:cut_text]
    st = GenStats(method=name, prompt_tokens=n_prompt, prefill_tokens=n_prompt)
    st.new_tokens = len(tokens)
    st.prefill_s = (clock.puts[0][0] - t0) if clock.puts else total
    st.total_s = total
    st.forward_steps = max(0, len(clock.puts) - 1)  # every put after the first is one forward
    st.forward_s = st.decode_s
    st.stop_reason = reason
    return {"tokens": tokens, "text": text, "margins": [], "stats": st.to_dict()}
