"""The greedy choice and the top-4 over a Qwen2.5-sized vocabulary, alone (forty-seventh session).

``verifier.first_argmax`` / ``verifier.top_ids`` against PyTorch's ``max(dim=-1)``,
``argmax`` and ``topk``, for 1 / 5 / 17 / 33 rows of 151,936 logits in bf16, fp16 and
fp32 (random, with forced ties); each answer checked against ``argmax`` / ``topk``'s values.
Prints median ms of 40 calls.

    python docs/bench/probes-s47/reductions_micro.py
"""
import statistics as st
import time

import torch

from fastcoder.verifier import first_argmax, top_ids

V = 151936


def ms(fn, n=40):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return 1e3 * st.median(ts)


print("torch threads", torch.get_num_threads())
for dt in (torch.bfloat16, torch.float16, torch.float32):
    for rows in (1, 5, 17, 33):
        y = (torch.randn(rows, V) * 3).to(dt)
        y[:, 7] = y.max()
        y[0, 300] = y.max()
        assert torch.equal(first_argmax(y), torch.argmax(y.float(), -1)), (dt, rows)
        assert torch.equal(torch.gather(y, 1, top_ids(y, 4)), torch.topk(y, 4, -1).values)
        print(f"{str(dt):15s} {rows:3d} rows  first_argmax {ms(lambda: first_argmax(y)):5.2f}  max {ms(lambda: y.max(-1)):5.2f}  "
              f"argmax {ms(lambda: torch.argmax(y, -1)):5.2f}  |  top_ids {ms(lambda: top_ids(y, 4)):5.2f}  topk {ms(lambda: torch.topk(y, 4, -1)):5.2f}")
