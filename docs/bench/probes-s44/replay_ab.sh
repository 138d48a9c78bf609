#!/usr/bin/env bash
# Typing replay of two commits alternately on one machine (forty-fourth session):
# 060f2bf (before the AMX invariance fix) and 72538b5 (after), each from its own worktree.
#   git worktree add --detach /tmp/wt-before 060f2bf; git worktree add --detach /tmp/wt-after 72538b5
#   bash docs/bench/probes-s44/replay_ab.sh OUTDIR ROUNDS
set -u
out=${1:?out dir}; rounds=${2:-2}
py=/work/main/.venv/bin/python
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    wt=/tmp/wt-$side
    echo "== round $r $side $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/ab.log"
    (cd "$wt" && PYTHONPATH=$wt $py -m fastcoder_cli bench replay --files 4 --max-keys 150 --methods ar,fastcoder \
        --dtype auto --out "$out/$side-$r" > "$out/$side-$r.log" 2>&1)
    echo "   rc $? $(date -u +%T)" | tee -a "$out/ab.log"
  done
done
