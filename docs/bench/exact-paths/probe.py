"""FastCoder with and without exact paths (``Verifier.exact_paths``), side by side in one
process, against AR, on the repo suite's prompts of an earlier suite run.

    python docs/bench/exact-paths/probe.py MODEL SUITE_DIR/tasks.jsonl [N_TASKS | I,J,...]

(``N_TASKS``: the first N, default 10; ``I,J,...``: those task indices.)

Per task and method (order rotating): a fresh session, greedy generation of 128 tokens
(no stop rule: the suite's stop rule is not applied here), decode time (the whole
``generate`` less its prefill), forward steps; then tokens per step, ms per token and
whether the output is AR's token for token. bf16 on the CPU (batch-invariant steps).
"""

from __future__ import annotations

import json
import os
import sys
import time

from fastcoder.config import DecodeConfig
from fastcoder.engine import Engine
from fastcoder.models.load import load_model

name, tasks_path = sys.argv[1], sys.argv[2]
pick = sys.argv[3] if len(sys.argv) > 3 else "10"
records = [json.loads(line) for line in open(tasks_path)]
records = [records[int(i)] for i in pick.split(",")] if "," in pick else records[: int(pick)]
loaded = load_model(name, dtype="auto")
engine = Engine(loaded.model, loaded.tokenizer, name=name)
verifier = engine.verifier
print(f"{name} {loaded.dtype} invariant={verifier.invariant}; load {os.getloadavg()}", flush=True)
methods = ["ar", "exact", "side"]
tot = {m: {"tokens": 0, "steps": 0, "s": 0.0, "same": 0} for m in methods}
engine.generate(records[0]["prompt_ids"][:64], DecodeConfig(method="ar", max_new_tokens=8))  # warm-up
for t, rec in enumerate(records):
    ids = rec["prompt_ids"]
    out = {}
    for m in methods[t % 3:] + methods[: t % 3]:
        verifier.exact_paths = m != "side"
        cfg = DecodeConfig(method="ar" if m == "ar" else "fastcoder", max_new_tokens=128)
        t0 = time.perf_counter()
        gen = engine.generate(ids, cfg)
        wall = time.perf_counter() - t0
        out[m] = list(gen.tokens)
        tot[m]["tokens"] += len(gen.tokens)
        tot[m]["steps"] += gen.stats.forward_steps
        tot[m]["s"] += wall - gen.stats.prefill_s
    for m in methods:
        tot[m]["same"] += out[m] == out["ar"]
    print(f"task {t}: " + ", ".join(f"{m} {len(out[m])} tokens" + ("" if out[m] == out["ar"] else " (differs)") for m in methods), flush=True)
verifier.exact_paths = verifier.invariant
print(f"load {os.getloadavg()}")
for m in methods:
    d = tot[m]
    print(f"{m:6s} tokens/step {d['tokens'] / max(d['steps'], 1):.2f}  ms/token {1000 * d['s'] / max(d['tokens'], 1):.1f}  "
          f"vs AR {tot['ar']['s'] / max(tot['ar']['tokens'], 1) / (d['s'] / max(d['tokens'], 1)):.2f}x  "
          f"identical to AR {d['same']}/{len(records)}")
