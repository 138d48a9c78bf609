"""What would accepting any path of the tree give on the CPU in bf16? (forty-sixth session)

On the CPU in bf16 the verifier's steps are batch-invariant and it accepts along the
depth-first path of first children only (``Verifier.exact_paths``): a side-branch row's
ancestors are not at the columns an AR step puts them, so its logits may differ from AR's
in the last bits. Here the suite's tasks run ``ar``, ``fastcoder`` (exact, chain-only) and
``fastcoder-branches`` with the verifier's ``exact_paths`` switched off for its calls: the
whole tree verified and any path accepted (token recycling on by auto, as on CUDA), so
its output equals AR's only up to numerical near-ties. The upper bound of what an exact
whole-tree verifier could bring here, and how often the near-ties bite.

    python docs/bench/probes-s46/any_path.py [TASKS] [MAX_NEW] [OUT]
"""
import json
import sys
from pathlib import Path

from fastcoder_bench.probes.inputs import suite_harness
from fastcoder_bench.suite.cli import write_report
from fastcoder_bench.suite.runner import machine_info

n_tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 20
max_new = int(sys.argv[2]) if len(sys.argv) > 2 else 512
out = Path(sys.argv[3] if len(sys.argv) > 3 else "/tmp/any-path")
out.mkdir(parents=True, exist_ok=True)
# the verifier as it was before path attention (run before it existed; it is the default now)
engine, h, tasks, curve = suite_harness(["ar", "fastcoder", "fastcoder-branches"], n_tasks, max_new, path_attention=False)
print("curve", {n: [round(1e3 * s, 1) for s in secs] for n, secs in {curve.context_len: curve.seconds, **curve.by_length}.items()}, curve.ks)
ver = engine.verifier
exact = ver.exact_paths
orig = engine.generate


def generate(ids, config=None, **kw):
    ver.exact_paths = exact and not (config is not None and config.side_branches)
    try:
        return orig(ids, config, **kw)
    finally:
        ver.exact_paths = exact


engine.generate = generate
records = []
with open(out / "tasks.jsonl", "w") as f:
    for i, task in enumerate(tasks):
        rec = h.run_task(task, i)
        records.append(rec)
        f.write(json.dumps(rec) + "\n")
        f.flush()
        r = rec["results"]
        print(i, task.id, {k: (len(v["tokens"]), v["stats"].get("forward_steps")) for k, v in r.items()},
              "same" if r["fastcoder-branches"]["tokens"] == r["ar"]["tokens"] else "DIFFERS", flush=True)
rep = write_report(out, records, [v.name for v in h.variants], machine_info(), "qwen2.5-coder-0.5b", str(engine.verifier.dtype).replace("torch.", ""),
                   {"probe": "any_path", "exact_paths": exact}, decode_token=None, plots=False)
for name, m in rep["methods"].items():
    print(f"{name:22} ms/tok {m['ms_per_token']:.1f} speedup {m['speedup_vs_ar']:.2f} accept {m['mean_accept_len']:.2f} ident {m['identical_to_ar']:.2f}")
