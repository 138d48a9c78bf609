"""Whole verify steps of 1 / 4 / 16 rows at 512 cached rows, Qwen2.5-Coder-0.5B bf16
(packed or plain), under the oneDNN ISA cap given by the environment
(ONEDNN_MAX_CPU_ISA, read once by oneDNN at its first use), forty-third session::

    python docs/bench/probes-s43/isa_steps.py            # runs itself per ISA cap, alternating
    python docs/bench/probes-s43/isa_steps.py --one      # one process: the caller's environment

Prints median ms per step for each row count, and the linear layers' share from a
profile of the 1-row step.
"""
import os
import statistics
import subprocess
import sys
import time

CAPS = ["DEFAULT", "AVX512_CORE_BF16", "AVX512_CORE_AMX"]


def one(pack: str) -> None:
    import torch
    from fastcoder.models import load_model
    from fastcoder.trie import DraftTree
    from fastcoder.verifier import KVState, Verifier
    loaded = load_model("qwen2.5-coder-0.5b", dtype="bfloat16", device="cpu", pack=pack, progress=False)
    v = Verifier(loaded.model)
    ctx = 512
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(200, 20000, (ctx,), generator=g).tolist()
    kv = KVState()
    t = time.perf_counter(); first, _, _ = v.prefill(kv, prompt, reserve=256); pre = time.perf_counter() - t
    out = {}
    for rows in (1, 4, 16, 1):
        tree = DraftTree.chain(list(range(300, 300 + rows - 1)), "probe")
        times = []
        for i in range(12):
            t = time.perf_counter(); v.step(kv, first, tree); times.append(time.perf_counter() - t)
            kv.truncate(ctx); kv.cache.length = ctx
        out[rows] = statistics.median(times[2:]) * 1e3
    from torch.profiler import profile, ProfilerActivity
    tree = DraftTree.chain([], "probe")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            v.step(kv, first, tree); kv.truncate(ctx); kv.cache.length = ctx
    tot = sum(e.self_cpu_time_total for e in prof.key_averages()) / 5e3
    lin = sum(e.self_cpu_time_total for e in prof.key_averages() if "linear" in e.key or "mm" in e.key) / 5e3
    top = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:6]
    print(f"cap={os.environ.get('ONEDNN_MAX_CPU_ISA', 'DEFAULT')} pack={pack} prefill {pre*1e3:.0f} ms; "
          f"steps ms 1/4/16 rows: {out[1]:.1f} / {out[4]:.1f} / {out[16]:.1f} (16/1 {out[16]/out[1]:.2f}x); "
          f"profiled 1-row step {tot:.1f} ms, linear/mm {lin:.1f}; top: "
          + ", ".join(f"{e.key} {e.self_cpu_time_total/5e3:.1f}" for e in top), flush=True)


if __name__ == "__main__":
    if "--one" in sys.argv:
        one(sys.argv[sys.argv.index("--one") + 1] if len(sys.argv) > sys.argv.index("--one") + 1 else "on")
        sys.exit()
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    packs = sys.argv[2].split(",") if len(sys.argv) > 2 else ["on"]
    for r in range(rounds):
        for cap in (CAPS if r % 2 == 0 else CAPS[::-1]):
            for pack in packs:
                env = dict(os.environ)
                env.pop("ONEDNN_MAX_CPU_ISA", None)
                if cap != "DEFAULT":
                    env["ONEDNN_MAX_CPU_ISA"] = cap
                subprocess.run([sys.executable, __file__, "--one", pack], env=env, check=False)
        print(f"load {os.getloadavg()}", flush=True)
