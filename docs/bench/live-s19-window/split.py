"""Where each run's prefill went: the server's counters before and after each file
(requests' model runs, background suggestions, idle-time window prefills).

    python docs/bench/live-s19-window/split.py docs/bench/live-s19-window/report.json.gz
"""
import gzip
import json
import sys

path = sys.argv[1]
with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
    report = json.load(f)


def delta(run, *keys):
    a, b = run["after"], run["before"]
    for k in keys:
        a, b = (a or {}).get(k) or {}, (b or {}).get(k) or {}
    return (a if isinstance(a, (int, float)) else 0) - (b if isinstance(b, (int, float)) else 0)


print("| run | file | tokens prefilled: model runs / background suggestions / idle window | ms: background suggestions' prefill / idle window | window prefills (paused) |")
print("|---|---|---|---|---|")
for key, runs in report["results"]["runs"].items():
    for i, run in enumerate(runs):
        print(f"| {key} | {i} | {delta(run, 'total', 'prefillTokens'):.0f} / {delta(run, 'prefetch', 'prefillTokens'):.0f} / "
              f"{delta(run, 'window', 'prefillTokens'):.0f} | {delta(run, 'prefetch', 'prefillMs'):.0f} / "
              f"{delta(run, 'window', 'prefillMs'):.0f} | {delta(run, 'window', 'prefills'):.0f} "
              f"({delta(run, 'outcomes', 'window_paused'):.0f}) |")
