#!/usr/bin/env bash
# The induction-head experiment of docs/lesson.md: the two-layer attention-only model
# (configs/induction-2l.toml) and its one-layer control (configs/induction-1l.toml), each over
# three seeds, both trainings of a seed at once (each config runs on one thread); then the
# numbers (scripts/induction-summary.py) and one report page with every chart also as SVG.
#
#   scripts/induction-heads.sh [--seeds "1 2 3"] [--out DIR] [--qkv BIN]
#
# Writes DIR/two-layers-seedS and DIR/one-layer-seedS (run folders), DIR/report.html and
# DIR/svg/*.svg (default DIR: runs/induction). About 1.5 minutes on 2 cores.
#
# When one training of a seed fails, the other is stopped at once and the script exits 1 naming
# the run that failed; on any exit (an error, Ctrl-C, SIGTERM) no training of it is left running.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seeds="1 2 3"
out="runs/induction"
qkv="$here/build/apps/qkv"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) seeds="$2"; shift ;;
    --out) out="$2"; shift ;;
    --qkv) qkv="$2"; shift ;;
    *) echo "induction-heads.sh: unknown option '$1' (--seeds, --out, --qkv)" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$qkv" ]] || { echo "induction-heads.sh: no qkv binary at $qkv (make binary)" >&2; exit 1; }

# The trainings running now, by pid: their run folders. Whatever ends the script stops them.
declare -A running=()
stop_trainings() {
  for pid in "${!running[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${!running[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_trainings EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Both trainings of seed $1 at once; returns when both are done, exits 1 as soon as one fails.
train_seed() {
  local s="$1" pid status
  "$qkv" train "$here/configs/induction-2l.toml" --run-dir "$out/two-layers-seed$s" --seed "$s" \
    --overwrite --quiet &
  running[$!]="$out/two-layers-seed$s"
  "$qkv" train "$here/configs/induction-1l.toml" --run-dir "$out/one-layer-seed$s" --seed "$s" \
    --overwrite --quiet &
  running[$!]="$out/one-layer-seed$s"
  while [[ ${#running[@]} -gt 0 ]]; do
    status=0
    wait -n -p pid "${!running[@]}" || status=$?
    if [[ $status -ne 0 ]]; then
      echo "induction-heads.sh: the training of ${running[$pid]} failed (exit $status);" \
        "stopping the other" >&2
      unset "running[$pid]"
      exit 1
    fi
    unset "running[$pid]"
  done
}

mkdir -p "$out"
runs=()
for s in $seeds; do
  echo "seed $s: training two-layers-seed$s and one-layer-seed$s"
  train_seed "$s"
  runs+=("$out/two-layers-seed$s" "$out/one-layer-seed$s")
done
python3 "$here/scripts/induction-summary.py" "${runs[@]}"
"$qkv" report "${runs[@]}" --out "$out/report.html" --svg "$out/svg" --examples 0
