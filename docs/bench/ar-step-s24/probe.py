"""What an AR step pays for batch invariance on this CPU, and what skipping the padding
rows' attention gives back (twenty-fourth session)::

    python docs/bench/ar-step-s24/probe.py [CONTEXT ...]     # needs qwen2.5-coder-0.5b fetched

One process, one packed bf16 model, one cache per variant prefilled with the same random
prompt; each round runs one AR step (no draft) per variant, rolled back after it, the
order alternating; median of 24 rounds. Variants:

- ``invariant``: the verifier as it ships (2 query rows, width rounded up to 512, the
  padding row skips attention);
- ``invariant, padding row attends``: the same without the skip;
- ``invariant, width not rounded``: 2 rows, the width left at past + 2 (not invariant);
- ``1 row, masked``: a plain verifier's step through the masked path (not invariant);
- ``1 row``: a plain verifier's AR step, no mask (not invariant);
- ``hf static``: the model's own forward on a transformers ``StaticCache``, one row
  (what ``hf-static`` runs per token).

Then the linear layers' self time under ``torch.profiler`` for the 2-row and the 1-row
step: oneDNN's 1-row matmul is its own (faster) kernel, and it rounds differently from
2..2,048 rows, which is why invariant AR steps carry a padding row.
"""

from __future__ import annotations

import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import StaticCache

from fastcoder.models import load_model
from fastcoder.trie import DraftTree
from fastcoder.verifier import KVState, Verifier
from fastcoder_bench.probes.timing import interleaved_ms


def run(model, ctx: int, rounds: int = 24) -> None:
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(200, 20000, (ctx,), generator=g).tolist()
    empty = DraftTree()
    variants = {
        "invariant": Verifier(model, invariant=True),
        "invariant, padding row attends": Verifier(model, invariant=True),
        "invariant, width not rounded": Verifier(model, invariant=True),
        "1 row, masked": Verifier(model, invariant=False),
        "1 row": Verifier(model, invariant=False),
    }
    variants["invariant, padding row attends"].folded_attention = False  # never passes the row count
    variants["invariant, width not rounded"]._eager_width = lambda cache, rows: rows
    masked = variants["1 row, masked"]
    plain_forward = masked._forward
    masked._forward = lambda cache, b, width, fixed, real=None: plain_forward(cache, b, width, True if b == 1 else fixed, real)
    fns = {}
    for name, v in variants.items():
        kv = KVState()
        first, _, _ = v.prefill(kv, prompt, reserve=256)

        def step(v=v, kv=kv, first=first):
            v.step(kv, first, empty)
            kv.truncate(ctx)
            kv.cache.length = ctx

        fns[name] = step
    cache = StaticCache(config=model.config, max_cache_len=ctx + 256)
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([prompt]), past_key_values=cache, use_cache=True, cache_position=torch.arange(ctx))
    tok, pos = out.logits[0, -1].argmax().view(1, 1), torch.tensor([ctx])

    def hf() -> None:
        with torch.inference_mode():
            int(model(input_ids=tok, past_key_values=cache, use_cache=True, cache_position=pos).logits[0, -1].argmax())

    fns["hf static"] = hf
    times = interleaved_ms(fns, rounds, warmup=2)
    base = statistics.median(times["hf static"])
    print(f"\n{ctx} cached rows, load {os.getloadavg()[0]:.2f}")
    print("| AR step | ms (median) | vs hf static |")
    print("|---|---:|---:|")
    for name, t in times.items():
        print(f"| {name} | {statistics.median(t):.1f} | {statistics.median(t) / base:.3f} |")
    for name in ("invariant", "1 row"):
        with profile(activities=[ProfilerActivity.CPU]) as p:
            for _ in range(10):
                fns[name]()
        lin = sum(e.self_cpu_time_total for e in p.key_averages() if "linear" in e.key) / 10 / 1e3
        print(f"linear layers (profiler self time), {name}: {lin:.1f} ms")


def main() -> None:
    contexts = [int(a) for a in sys.argv[1:]] or [700, 2048]
    loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack="on", progress=False)
    flags = sorted({f for l in open("/proc/cpuinfo") if l.startswith("flags") for f in l.split()} & {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU flags {' '.join(flags)}")
    for ctx in contexts:
        run(loaded.model, ctx)


if __name__ == "__main__":
    main()
