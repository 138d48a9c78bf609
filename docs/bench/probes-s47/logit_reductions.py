"""What do the greedy choice and the recycling top-k cost a verify step? (forty-seventh session)

Qwen2.5-Coder-0.5B as the server loads it, a real prompt of CTX tokens prefilled, steps of
1 and 16 rows (chains) with ``topk=4`` (token recycling's rows, on by default on the CPU
with path attention), timed as the cost curve times them, alternating round by round
between the verifier's chunked reductions (``verifier.first_argmax`` / ``top_ids``) and
PyTorch's own (``max(dim=-1)`` / ``topk``), and the same without ``topk``. Prints min /
median ms per variant, the ratio of medians and the median of the paired differences (the
two variants' steps of one round run back to back: a shared VM's swings of +-40% between
rounds cancel); the greedy tokens of both agree (checked).

    python docs/bench/probes-s47/logit_reductions.py [CTX] [ROUNDS]
"""
import statistics as st
import sys
import time

import torch

import fastcoder.verifier as V
from fastcoder.trie import DraftTree
from fastcoder_bench.probes.inputs import prefilled_step

ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
at = prefilled_step(ctx)
loaded, prompt, v, kv = at.loaded, at.prompt, at.verifier, at.kv
chunked = (V.first_argmax, V.top_ids)
torch_own = (lambda x: x.max(dim=-1).indices, lambda x, k: torch.topk(x, k, dim=-1).indices)


def use(fns):
    V.first_argmax, V.top_ids = fns


def timed(n, topk):
    tree = DraftTree.chain(prompt[100 : 100 + n - 1], "probe")
    base = len(kv.ids)
    v.step(kv, prompt[99], tree, topk=topk)
    kv.truncate(base)
    t0 = time.perf_counter()
    res = v.step(kv, prompt[99], tree, topk=topk)
    dt = time.perf_counter() - t0
    kv.truncate(base)
    return dt, (res.accepted, res.bonus, res.topk)


times = {}
print("cpu threads", torch.get_num_threads(), "ctx", ctx, "vocab", loaded.model.config.vocab_size)
for r in range(rounds):
    for n in (1, 16):
        for topk in (0, 4):
            outs = {}
            for name, fns in (("chunked", chunked), ("torch", torch_own))[:: 1 if r % 2 == 0 else -1]:
                use(fns)
                dt, outs[name] = timed(n, topk)
                times.setdefault((n, topk, name), []).append(dt)
            assert outs["chunked"][:2] == outs["torch"][:2], "greedy choices differ"
use(chunked)
for n in (1, 16):
    for topk in (0, 4):
        a, b = times[(n, topk, "chunked")], times[(n, topk, "torch")]
        paired = sorted(1e3 * (y - x) for x, y in zip(a, b))
        q1, q3 = paired[len(paired) // 4], paired[(3 * len(paired)) // 4]
        print(f"{n:3d} rows topk {topk}:  chunked {1e3 * min(a):6.1f} / {1e3 * st.median(a):6.1f}   torch {1e3 * min(b):6.1f} / {1e3 * st.median(b):6.1f} ms"
              f"   chunked/torch median {st.median(a) / st.median(b):.3f}   torch - chunked, paired: median {st.median(paired):+.1f} ms (quartiles {q1:+.1f} / {q3:+.1f})")
