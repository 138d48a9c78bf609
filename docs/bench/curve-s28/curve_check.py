"""The warm-up cost curve against the steps it prices (twenty-eighth session).

Qwen2.5-Coder-0.5B bf16 (oneDNN-packed, batch-invariant steps, as the suite runs it) at 512
and 2,048 cached rows, one process: the curve as `fastcoder.budget.measure` took it before
(every size timed right after the previous size's step, so c(0) right after c(127)), as it
takes it now (each timed step right after an untimed one of its size), and the "steady" cost:
the median of 10 steps of one size in a row, as a decode runs them. Ratios are c(k) / c(0)
within each curve. Then the same sizes right after a 128-row step::

    python docs/bench/curve-s28/curve_check.py
"""
import os, statistics, sys, time
sys.path.insert(0, os.getcwd())
import torch
from fastcoder import budget
from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier


def old_measure(verifier, context_len, rounds=5):
    """budget.measure before this session: round 0 the warm-up, sizes in order in every round."""
    ks = sorted(set(b - 1 for b in verifier.buckets) | {k for k in budget.UNPADDED_POINTS if k < verifier.buckets[-1] - 1})
    ids = torch.randint(10, 150000, (context_len + 1 + max(ks),), generator=torch.Generator().manual_seed(0)).tolist()
    kv = KVState(); verifier.prefill(kv, ids[:context_len], reserve=max(ks) + 1); base = len(kv.ids)
    best = [float("inf")] * len(ks)
    for rnd in range(rounds + 1):
        for j, k in enumerate(ks):
            tree = DraftTree.chain(ids[context_len + 1: context_len + 1 + k], "probe")
            t0 = time.perf_counter(); verifier.step(kv, ids[context_len], tree); dt = time.perf_counter() - t0
            if rnd > 0:
                best[j] = min(best[j], dt)
            kv.truncate(base)
    return ks, best


def steady(verifier, context_len, ks, n=10, after=None):
    ids = torch.randint(10, 150000, (context_len + 1 + 128,), generator=torch.Generator().manual_seed(1)).tolist()
    kv = KVState(); verifier.prefill(kv, ids[:context_len], reserve=129); base = len(kv.ids)
    out = []
    for k in ks:
        tree = DraftTree.chain(ids[context_len + 1: context_len + 1 + k], "probe")
        big = DraftTree.chain(ids[context_len + 1: context_len + 1 + 127], "probe")
        ts = []
        for i in range(n + 1):
            if after:
                verifier.step(kv, ids[context_len], big); kv.truncate(base)
            t0 = time.perf_counter(); verifier.step(kv, ids[context_len], tree); dt = time.perf_counter() - t0
            kv.truncate(base)
            if i:
                ts.append(dt)
        out.append(statistics.median(ts))
    return out


def show(name, ks, secs):
    print(f"  {name:22s} " + " ".join(f"{k}:{1000 * s:5.1f}" for k, s in zip(ks, secs))
          + "   ratios " + " ".join(f"{s / secs[0]:.2f}" for s in secs), flush=True)


v = Verifier(load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False).model)
print("torch threads", torch.get_num_threads(), "load", os.getloadavg(), v.graph_status())
for ctx in (512, 2048):
    print(f"{ctx} cached rows (ms per step, draft nodes k:ms)")
    for rep in range(2):
        ks, old = old_measure(v, ctx)
        show(f"old measure (run {rep + 1})", ks, old)
        new = budget.measure(v, ctx)
        show(f"new measure (run {rep + 1})", new.ks, new.seconds)
    show("steady, median of 10", ks, steady(v, ctx, ks))
    show("after a 128-row step", ks[:5], steady(v, ctx, ks[:5], n=5, after=True))
print("load", os.getloadavg())
