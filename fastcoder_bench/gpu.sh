#!/usr/bin/env bash
# The GPU measurements, run ON a lent device machine (H100/H200, no network) from the
# project root there. Each stage is one device call; what must last between calls lives
# under /tmp there (a carried folder exists only during its call; the working tree is
# sent afresh each time). Packing, here, before the first call:
#   bash ../shared/gpu/pack.sh                    # wheels -> .gpu/whl, bench projects -> .gpu/data
#   then split the GGUF into .gpu/mN/ chunks small enough that chunk + working tree < 64 MiB,
#   and copy the common datastore (cache_root()/common/<fingerprint>-stdlib.fcds) to .gpu/common
#   (the CPU runs' D_c: the device's Python stdlib would give another one).
# Stages (carry in brackets):
#   setup        [.gpu/whl .gpu/meta .gpu/common]   wheels into /tmp/site, D_c into the cache
#   chunk N      [.gpu/mN]                          one model chunk
#   model N      [.gpu/mN .gpu/data]                last chunk, bench projects, assemble + verify + convert
#   smoke                                           CUDA tests + a 2-task suite run on cuda
#   suite ARGS                                      fastcoder bench --suite repo on cuda into /tmp/suite (resumes)
#   replay ARGS                                     typing replay on cuda into /tmp/replay
# Every stage copies its logs and reports to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD:/tmp/site FASTCODER_CACHE=/tmp/fc-cache HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
fc() { python3 -m fastcoder_cli "$@"; }
stage=${1:-}; shift || true
case "$stage" in
setup)
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
  mkdir -p /tmp/fc-cache/gguf /tmp/fc-cache/common /tmp/fc-chunks
  cp .gpu/meta/model.* /tmp/fc-chunks/ && cp .gpu/common/*.fcds /tmp/fc-cache/common/
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(), 'cpus', __import__('os').cpu_count())" ;;
chunk)
  cp ".gpu/m$1/"* /tmp/fc-chunks/ && du -sh /tmp/fc-chunks ;;
model)
  cp ".gpu/m$1/"* /tmp/fc-chunks/ && cp -r .gpu/data/bench /tmp/fc-cache/
  name=$(cat /tmp/fc-chunks/model.name)
  cat /tmp/fc-chunks/part* > "/tmp/fc-cache/gguf/$name.gguf" && rm -f /tmp/fc-chunks/part*
  [ "$(sha256sum "/tmp/fc-cache/gguf/$name.gguf" | cut -c1-64)" = "$(cat /tmp/fc-chunks/model.sha256)" ] || { echo "sha256 mismatch: a chunk is missing"; exit 1; }
  time fc models fetch "$name" --quiet --no-load || exit 1
  echo "model $name ready" ;;
smoke)
  python3 -m pytest -q -p no:cacheprovider tests/test_static_verifier.py tests/test_folded_attention.py 2>&1 | tail -15 | tee "$OUT/smoke-pytest.log"
  timeout -s INT 240 python3 -m fastcoder_cli bench --suite repo --limit 2 --methods ar,fastcoder --device cuda --dtype bfloat16 \
    --out /tmp/smoke --force --quiet 2>&1 | tail -40 | tee "$OUT/smoke-suite.log"
  cp /tmp/smoke/report.json "$OUT/smoke-report.json" 2>/dev/null; true ;;
suite)
  t=${SUITE_TIMEOUT:-480}
  timeout -s INT "$t" python3 -m fastcoder_cli bench --suite repo --device cuda --out /tmp/suite --quiet "$@" > "$OUT/suite.log" 2>&1
  echo "rc $?"; tail -60 "$OUT/suite.log"
  for f in report.json report.md tasks.jsonl run.json; do cp "/tmp/suite/$f" "$OUT/" 2>/dev/null; done; true ;;
replay)
  t=${REPLAY_TIMEOUT:-480}
  timeout -s INT "$t" python3 -m fastcoder_cli bench replay --device cuda --out /tmp/replay "$@" > "$OUT/replay.log" 2>&1
  echo "rc $?"; tail -60 "$OUT/replay.log"
  cp /tmp/replay/report.json "$OUT/replay-report.json" 2>/dev/null; cp /tmp/replay/*.md "$OUT/" 2>/dev/null; true ;;
*) echo "usage: fastcoder_bench/gpu.sh setup | chunk N | model N | smoke | suite ARGS | replay ARGS"; exit 2 ;;
esac
