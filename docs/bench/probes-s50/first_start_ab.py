"""A first start, as a new user meets it: the live-typing bench with ``--first-start`` (the
server types at once, no cost curve cached) for the code before and after a change,
alternately, each server with a cache folder of its own that holds no cost curve (every
other entry of the real cache linked: models, D_c, indexes).

    cd /tmp && python /path/to/first_start_ab.py OLD_CHECKOUT NEW_CHECKOUT OUT_DIR [ROUNDS]

Per run: model-run latency at pauses (p50), keys with a suggestion before the next,
the server's generations that ran as plain AR because no curve prices trees yet
(``outcomes.ar_until_curve``) against all its generations, and its curve's state at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

OLD, NEW, OUT = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 1
FIRST = int(os.environ.get("FIRST_ROUND", "0"))  # a later round: the other order
PY = "/work/main/.venv/bin/python"
CACHE = Path(os.environ.get("FASTCODER_CACHE") or Path.home() / ".cache" / "fastcoder")
SRC = CACHE / "bench" / "src"
FILES = [
    (SRC / "requests-2.32.3/src/requests/cookies.py", "cookiejar_from_dict"),
    (SRC / "more-itertools-10.7.0/more_itertools/more.py", "split_into"),
]


def fresh_cache() -> Path:
    root = Path(tempfile.mkdtemp(prefix="fs-cache-"))
    for entry in CACHE.iterdir():
        if entry.name not in ("costs", "kv"):
            (root / entry.name).symlink_to(entry)
    return root


def one(code: Path, path: Path, function: str, out: Path) -> dict:
    cache = fresh_cache()
    env = dict(os.environ, PYTHONPATH=str(code), FASTCODER_CACHE=str(cache))
    cmd = [PY, "-m", "fastcoder_cli", "bench", "live", "--file", str(path), "--function", function, "--max-keys", "150",
           "--methods", "fastcoder", "--first-start", "--first-pause", "5", "--out", str(out)]
    subprocess.run(cmd, env=env, cwd="/tmp", check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(cache)
    report = json.loads((out / "report.json").read_text())["results"]
    m = report["methods"]["fastcoder"]
    run = report["runs"]["fastcoder"][0]
    after = run["after"]
    outcomes = after.get("outcomes") or {}
    gens = sum(((after.get(part) or {}).get("generations") or 0) for part in ("total", "prefetch"))
    return {"pause_model_p50_ms": m["pauses_model"]["p50_ms"], "pauses_model": m["pauses_model"]["n"],
            "keys_shown": m["keys_shown_share"], "ar_until_curve": outcomes.get("ar_until_curve", 0), "generations": gens,
            "curve": (after.get("model") or {}).get("costCurve"), "ready_s": run["ready_s"], "first_ms": run["first_ms"]}


rows = []
for r in range(FIRST, FIRST + ROUNDS):
    for i, (path, function) in enumerate(FILES):
        order = [("old", OLD), ("new", NEW)] if (r + i) % 2 == 0 else [("new", NEW), ("old", OLD)]
        for name, code in order:
            load = os.getloadavg()[0]
            res = one(code, path, function, OUT / f"r{r}-{i}-{name}")
            rows.append({"round": r, "file": f"{path.name}::{function}", "code": name, "load": round(load, 2), **res})
            print(json.dumps(rows[-1]), flush=True)
print("--- per code")
for name in ("old", "new"):
    mine = [x for x in rows if x["code"] == name]
    p50 = [x["pause_model_p50_ms"] for x in mine if x["pause_model_p50_ms"] is not None]
    print(f"{name}: pauses where the model ran, p50 of runs' p50 {statistics.median(p50) if p50 else None} ms; "
          f"keys shown {statistics.median(x['keys_shown'] for x in mine):.2f}; "
          f"as AR for want of a curve {sum(x['ar_until_curve'] for x in mine)} of {sum(x['generations'] or 0 for x in mine)} generations")
