"""Our AR against transformers' generate(cache_implementation="static"), step for step
(forty-fifth session). The AMX suite of s44 had our AR at 1.05x hf-static's time (per task
1.01). One process, one model (as the suite loads it: auto dtype, packed weights, the folded
attention, which hf's generate() runs too), one real prompt of CTX tokens; in each round
our AR (the suite's engine: margins recorded, as there) then hf-static (order reversed every
other round), N new tokens each (no stop rule: the same count), ms per decode token.

    python docs/bench/probes-s45/ar_vs_hf_static.py [ROUNDS] [CTX] [N]
"""
import os
import statistics as st
import sys

from fastcoder.config import DecodeConfig
from fastcoder.engine import Engine
from fastcoder.models import load_model
from fastcoder_bench.probes.inputs import bench_source, real_prompt
from fastcoder_bench.suite.hf_peer import hf_generate

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
ctx = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
n = int(sys.argv[3]) if len(sys.argv) > 3 else 48
loaded = load_model("qwen2.5-coder-0.5b", dtype="auto", device="cpu", pack="auto", progress=False)
variants = {"ar (margins)": Engine.from_loaded(loaded, record_margins=True), "ar": Engine.from_loaded(loaded)}
engine = variants["ar"]
ids = real_prompt(engine, ctx)
print(f"prompt {len(ids)} tokens from {bench_source()}; status {engine.verifier.graph_status()}")
eos = set()  # no early stop: both run n tokens


def ours(e):
    g = e.generate(ids, DecodeConfig(method="ar", max_new_tokens=n))
    return 1e3 * g.stats.decode_s / max(1, g.stats.decoded_tokens), g.tokens


def hf(kw):
    r = hf_generate(loaded.model, loaded.tokenizer, ids, max_new_tokens=n, stop_fn=None, eos=eos, name="hf", kwargs=kw)
    s = r["stats"]
    return s["ms_per_token"], r["tokens"]


runs = {"ar (margins)": lambda: ours(variants["ar (margins)"]), "ar": lambda: ours(engine),
        "hf-static": lambda: hf({"cache_implementation": "static"}), "hf-ar": lambda: hf({})}
for name, fn in runs.items():  # warm-up
    fn()
res = {k: [] for k in runs}
for r in range(rounds):
    order = list(runs) if r % 2 == 0 else list(runs)[::-1]
    line = []
    for name in order:
        ms, toks = runs[name]()
        res[name].append(ms)
        line.append(f"{name} {ms:6.1f} ({len(toks)} tok)")
    print(f"round {r}: " + ", ".join(line) + f"  load {os.getloadavg()[0]:.2f}", flush=True)
print("--- ms per decode token, median (min) over rounds; ratio to hf-static per round, median")
for k, xs in res.items():
    ratios = [a / b for a, b in zip(xs, res["hf-static"])]
    print(f"{k:14s} {st.median(xs):6.1f} ({min(xs):6.1f})  x hf-static {st.median(ratios):.3f}")
