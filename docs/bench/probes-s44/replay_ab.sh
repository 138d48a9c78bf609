#!/usr/bin/env bash
# The typing replay of two commits alternately on one machine (forty-fourth session), each
# from its own worktree:
#   git worktree add --detach /tmp/wt-before BEFORE; git worktree add --detach /tmp/wt-after AFTER
#   [CACHE_BEFORE=DIR] bash docs/bench/probes-s44/replay_ab.sh OUTDIR ROUNDS
# CACHE_BEFORE: the before side's FastCoder cache, where the two commits' CURVE_VERSION
# differs (a shared costs/ would be re-measured at every switch): link ~/.cache/fastcoder/*
# there but copy costs/.
# Run 1 (replay-ab): BEFORE 060f2bf / AFTER 72538b5 (the AMX invariance fix), one cache.
# Run 2 (replay-prefill-ab): BEFORE 25df631 / AFTER 50ff318 (the prefill chunk chosen by
# the cost curve), CACHE_BEFORE=/tmp/fc-cache-before.
set -u
out=${1:?out dir}; rounds=${2:-2}
py=/work/main/.venv/bin/python
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    wt=/tmp/wt-$side
    cache=${FASTCODER_CACHE:-$HOME/.cache/fastcoder}; [ "$side" = before ] && cache=${CACHE_BEFORE:-$cache}
    echo "== round $r $side $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/ab.log"
    (cd "$wt" && FASTCODER_CACHE=$cache PYTHONPATH=$wt $py -m fastcoder_cli bench replay --files 4 --max-keys 150 \
        --methods ar,fastcoder --dtype auto --out "$out/$side-$r" > "$out/$side-$r.log" 2>&1)
    echo "   rc $? $(date -u +%T)" | tee -a "$out/ab.log"
  done
done
