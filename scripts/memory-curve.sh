#!/usr/bin/env bash
# Resident memory of a long training run, against the step: is the steady state flat?
#   scripts/memory-curve.sh [STEPS] [OUT.csv] [extra qkv train args...]
# Trains configs/copy.toml (the tiny copy model) for STEPS steps (default 20000) into a temporary
# run folder, samples VmRSS of the qkv process twice a second, and writes "step,ms,rss_kib"
# rows (the step is the last one logged in metrics.jsonl). Prints the RSS every STEPS/10 steps
# and the growth after the first 10% of the run.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-20000}
OUT=${2:-memory-curve.csv}
shift $(( $# < 2 ? $# : 2 ))
QKV=${QKV:-build/apps/qkv}
RUN=$(mktemp -d /tmp/qkv-memory.XXXXXX)
trap 'rm -rf "$RUN"' EXIT

"$QKV" train configs/copy.toml --run-dir "$RUN/run" --quiet --train.max_steps "$STEPS" \
  --train.epochs 100000 --train.log_every 100 --train.eval_every 2000 "$@" &
PID=$!
echo "step,ms,rss_kib" > "$OUT"
START=$(date +%s%N)
while kill -0 "$PID" 2>/dev/null; do
  RSS=$(awk '/^VmRSS:/ {print $2}' "/proc/$PID/status" 2>/dev/null || true)
  STEP=$(tail -n 1 "$RUN/run/metrics.jsonl" 2>/dev/null | sed -n 's/.*"step":\([0-9]*\).*/\1/p' || true)
  [ -n "$RSS" ] && echo "${STEP:-0},$(( ($(date +%s%N) - START) / 1000000 )),$RSS" >> "$OUT"
  sleep 0.5
done
wait "$PID"

# The RSS at each tenth of the run, and the growth after the first tenth (warm-up: the caching
# allocator fills, validation's decoder buffers appear).
awk -F, -v steps="$STEPS" 'NR > 1 {
    b = int($1 / (steps / 10)); if (!(b in rss) || $3 > rss[b]) rss[b] = $3
  } END {
    printf "%8s %10s\n", "step", "RSS (MiB)"
    for (b = 0; b <= 10; ++b) if (b in rss) printf "%8d %10.1f\n", b * steps / 10, rss[b] / 1024
    last = (10 in rss) ? 10 : 9
    printf "growth from step %d to the end: %.1f MiB\n", steps / 10, (rss[last] - rss[1]) / 1024
  }' "$OUT"
