"""One decode step of our AR against one of transformers' static-cache decode, sample by
sample (fiftieth session). The suite's aggregate has had our AR 3-6% slower than
``hf-static`` over the tasks both wrote alike (four runs, s46-s49), while per task (median)
and in the direct ``generate()`` probe the two were equal: one sample per method per task in
a VM that swings +-25% between tasks. Here each sample is a single 1-row forward at a fixed
attended length, the variants rotating sample by sample, so a drift of the machine falls on
all alike: our verifier's step as AR runs it (batch-invariant, path attention), the same
without path attention (``path_attention=False``), without batch invariance (``invariant=
False``: plain attention width, no 1-row rules) and transformers' own forward over a
``StaticCache`` (what ``generate(cache_implementation="static")`` runs per token; its
argmax on the host as ours is). The same loaded model (auto dtype, packed weights).

    python docs/bench/probes-s50/ar_step_vs_hf.py [SAMPLES] [CTX]
"""
import os
import statistics as st
import sys
import time

import torch

from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
from fastcoder_bench.probes.inputs import bench_source, real_prompt

SAMPLES = int(sys.argv[1]) if len(sys.argv) > 1 else 120
CTX = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
model = loaded.model
variants = {"ours": Verifier(model), "ours-no-paths": Verifier(model, path_attention=False),
            "ours-not-invariant": Verifier(model, invariant=False)}
from fastcoder.engine import Engine  # noqa: E402 (real_prompt wants an engine)

ids = real_prompt(Engine.from_loaded(loaded), CTX)
n = len(ids)
print(f"# {loaded.name} {loaded.dtype}, prompt {n} tokens from {bench_source()}; load {os.getloadavg()[0]:.2f}")
for name, v in variants.items():
    print(f"#   {name}: invariant {v.invariant}, paths {v.paths}, folded {v.folded_attention}")
kvs = {}
for name, v in variants.items():
    kv = KVState()
    v.prefill(kv, ids[:-1], reserve=64)
    kvs[name] = kv

from transformers import StaticCache  # noqa: E402

cache = StaticCache(config=model.config, max_cache_len=n + 64)
with torch.inference_mode():
    model(input_ids=torch.tensor([ids[:-1]]), past_key_values=cache, cache_position=torch.arange(n - 1), use_cache=True)
last = torch.tensor([[ids[-1]]])
pos = torch.tensor([n - 1])


def hf_step() -> int:
    with torch.inference_mode():
        out = model(input_ids=last, past_key_values=cache, cache_position=pos, use_cache=True)
        return int(out.logits[0, -1].argmax())


def hf_rewind() -> None:
    """(Untimed.) transformers 5's StaticCache writes at its own running length: back to the prompt's."""
    for layer in cache.layers:
        layer.cumulative_length.fill_(n - 1)


def our_step(name: str) -> int:
    v, kv = variants[name], kvs[name]
    res = v.step(kv, ids[-1], DraftTree.chain([], "probe"))
    kv.truncate(n - 1)  # the same attended length every sample
    return res


tokens = {k: our_step(k).bonus for k in variants}
tokens["hf-static"] = hf_step()
hf_rewind()
print(f"#   next token: {tokens}")
names = list(variants) + ["hf-static"]
times = {k: [] for k in names}
for _ in range(3):  # warm
    for k in names:
        hf_step() if k == "hf-static" else our_step(k)
        hf_rewind()
for i in range(SAMPLES):
    order = names[i % len(names):] + names[: i % len(names)]
    for k in order:
        t0 = time.perf_counter()
        hf_step() if k == "hf-static" else our_step(k)
        times[k].append(time.perf_counter() - t0)
        hf_rewind()
base = times["hf-static"]
print(f"--- one 1-row step at {n - 1} cached rows, ms: median (p10-p90) over {SAMPLES} samples, variants rotating; "
      f"ratio to hf-static: median of the samples' paired ratios; load {os.getloadavg()[0]:.2f}")
for k in names:
    xs = sorted(1e3 * x for x in times[k])
    r = st.median(a / b for a, b in zip(times[k], base))
    print(f"{k:20s} {st.median(xs):7.1f} ({xs[len(xs) // 10]:6.1f}-{xs[9 * len(xs) // 10]:6.1f})  x hf-static {r:.3f}")
