"""The CPU's greedy choice and top-k over a vocabulary by 128-entry chunks
(``verifier.first_argmax``, ``verifier.top_ids``): the same answers as ``argmax`` and
``topk``, ties included. Nothing here is timed."""

from __future__ import annotations

import pytest
import torch

from fastcoder.verifier import LOGIT_CHUNK, Verifier, first_argmax, top_ids


def _logits(rows: int, vocab: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, vocab, generator=g) * 4).to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("vocab", [151936, 640, 600, 100])
def test_first_argmax_is_argmax_ties_and_all(dtype, vocab):
    x = _logits(9, vocab, dtype)
    top = x.max()
    x[1, vocab - 1] = top  # a maximum in the last chunk only
    x[2, 3], x[2, vocab - 2] = top, top  # two equal maxima in different chunks: the first wins
    x[3, 5], x[3, 6] = top, top  # in one chunk
    x[4] = top  # all equal: index 0
    x[5] = float("-inf")  # a row all -inf: index 0, as argmax
    x[6, : vocab // 2] = float("-inf")
    want = torch.argmax(x.float(), dim=-1)
    assert torch.equal(first_argmax(x), want)
    assert torch.equal(first_argmax(x[2:5]), want[2:5])  # a slice of rows (contiguous)
    assert torch.equal(first_argmax(x[:, : vocab - 1]), torch.argmax(x[:, : vocab - 1].float(), dim=-1))  # rows not contiguous: fallback


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("k", [1, 4, 16])
def test_top_ids_hold_the_k_largest_entries_largest_first(dtype, k):
    vocab = 151936
    x = _logits(17, vocab, dtype, seed=k)
    x[0, 10 * LOGIT_CHUNK : 10 * LOGIT_CHUNK + k + 2] = x.max() + 1  # more than k of the largest in one chunk
    got = top_ids(x, k)
    want = torch.topk(x, k, dim=-1)
    assert got.shape == (17, k)
    # the same values, largest first (which of equal values comes first may differ)
    assert torch.equal(torch.gather(x, 1, got), want.values)
    assert all(len(set(r)) == k for r in got.tolist())  # k distinct entries per row
    if dtype == torch.float32:  # no ties in random float32 values: the very same ids
        assert torch.equal(got[1:], want.indices[1:])
    small = _logits(3, 600, dtype)  # 600 entries: not whole chunks, topk itself
    assert torch.equal(top_ids(small, k), torch.topk(small, k, dim=-1).indices)


def test_the_cpu_verifier_picks_greedy_tokens_through_first_argmax(tiny_model):
    """``Verifier._greedy`` on the CPU: 2-D rows and a single 1-D row give argmax's answer
    (the prefill's first token and token healing's sub-vocabulary take the 1-D way)."""
    v = Verifier(tiny_model)
    x = _logits(5, 640, torch.float32)
    x[0, 1], x[0, 500] = x.max() + 1, x.max() + 1
    assert torch.equal(v._greedy(x), torch.argmax(x, dim=-1))
    assert int(v._greedy(x[0])) == 1 and int(v._greedy(x[3, :77])) == int(torch.argmax(x[3, :77]))
