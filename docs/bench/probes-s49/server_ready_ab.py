"""A server start, old code against new, interleaved (forty-ninth session): `fastcoder serve`
over real stdio from two checkouts (PYTHONPATH), alternately, ROUNDS times; per start the
seconds from the process's launch to the `initialize` answer and to the model's "ready"
status (its cost curve cached: both read the same cache), and what the server said.

    python docs/bench/probes-s49/server_ready_ab.py OLD_CHECKOUT NEW_CHECKOUT [ROUNDS]

Run it from a directory that is neither checkout (``python -m`` puts the working
directory first on the path).
"""
import os
import statistics as st
import sys
import tempfile
import time
from pathlib import Path

old, new = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
sys.path.insert(0, str(new))
from fastcoder_bench.lsp_client import StdioClient  # noqa: E402

work = Path(tempfile.mkdtemp(prefix="ready-ab-"))
(work / "pkg").mkdir()
(work / "pkg" / "mod.py").write_text("def add(a, b):\n    return a + b\n")
cmd = [sys.executable, "-m", "fastcoder_cli", "serve", "--model", "qwen2.5-coder-0.5b", "--dtype", "auto", "--device", "cpu"]
res: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
for r in range(rounds):
    order = [("old", old), ("new", new)] if r % 2 == 0 else [("new", new), ("old", old)]
    for name, path in order:
        t0 = time.perf_counter()
        c = StdioClient(cmd, work / f"{name}-{r}.log", env={"PYTHONPATH": str(path)})
        try:
            c.initialize(work, {"debounceMs": 0}, timeout=120)
            t_init = time.perf_counter() - t0
            c.wait_status("ready", timeout=300)
            t_ready = time.perf_counter() - t0
            said = [s.get("message", "") for s in c.statuses() if s.get("state") == "ready"][-1:]
        finally:
            c.shutdown()
            c.close()
        res[name].append((t_init, t_ready))
        print(f"round {r} {name}: initialize answered {t_init:5.2f} s, ready {t_ready:5.2f} s  ({said[0] if said else ''}) "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
print("--- median over rounds (min)")
for name, xs in res.items():
    i, rd = [x[0] for x in xs], [x[1] for x in xs]
    print(f"{name}: initialize {st.median(i):.2f} ({min(i):.2f}) s, ready {st.median(rd):.2f} ({min(rd):.2f}) s")
ratios = [n[1] / o[1] for n, o in zip(res["new"], res["old"])]
print(f"new / old ready, per round: {', '.join(f'{x:.3f}' for x in ratios)}; median {st.median(ratios):.3f}")
