"""The typing replay through the real server (``fastcoder bench replay``), tiny model:
from an empty cache (a first start, where the server measures its first cost curve in
idle time and runs plain AR until then) the replay waits for the curve before typing, so
that what it times is the server's steady state; ``--first-start`` types at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
SOURCE = '''def total(values):
    result = 0
    for v in values:
        result += v
    return result
'''


def _replay(tiny_model_dir: Path, tmp_path: Path, *extra: str) -> dict:
    src = tmp_path / "src"
    src.mkdir()
    (src / "mod.py").write_text(SOURCE, encoding="utf-8")
    out = tmp_path / "out"
    env = dict(os.environ, FASTCODER_CACHE=str(tmp_path / "cache"))  # nothing cached: a first start
    cmd = [sys.executable, "-m", "fastcoder_cli", "bench", "replay", "--file", str(src / "mod.py"), "--function", "total",
           "--model", str(tiny_model_dir), "--dtype", "float32", "--methods", "fastcoder", "--max-keys", "12",
           "--no-common", "--ready-timeout", "240", "--out", str(out), *extra]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((out / "report.json").read_text())["results"]["methods"]["fastcoder"]


def test_the_replay_types_once_the_first_cost_curve_is_measured(tiny_model_dir, tmp_path):
    s = _replay(tiny_model_dir, tmp_path)
    assert s["curve_at_typing"] == ["measured"], s["curve_at_typing"]
    assert s["ar_until_curve"] == 0
    assert list((tmp_path / "cache" / "costs").glob("*.json")), "the server cached the curve it measured"


def test_first_start_types_as_soon_as_the_server_is_ready(tiny_model_dir, tmp_path):
    """No ``fastcoder.stats`` round trip between ``ready`` and typing (the wait asks at
    least once: milliseconds; skipped, the measured gap was ~6 microseconds in two runs)."""
    s = _replay(tiny_model_dir, tmp_path, "--first-start")
    assert s["curve_at_typing"][0] in ("measuring", "measured"), s["curve_at_typing"]
    assert s["curve_wait_s"] < 1e-4, s["curve_wait_s"]
