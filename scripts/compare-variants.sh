#!/usr/bin/env bash
# Trains each model variant on copy, reverse (lengths 1..L, L = 10) and dates, then prints a
# markdown table of greedy exact match on the test split: at the training lengths, and for
# copy and reverse also on lengths L+1..2L never seen in training (qkv eval --min-len --max-len).
#
#   scripts/compare-variants.sh [--quick] [--jobs N] [--rows FILE] [--out DIR] [--qkv BIN]
#
# A row is one line "name:overrides" (qkv train --section.key VALUE options applied to every
# task); the default rows are below, --rows FILE replaces them (blank and # lines skipped).
# Every training runs with --threads 1; --jobs runs that many at a time (default 2).
# --quick: tiny trainings (a smoke test of the script, numbers meaningless).
# Each task starts from its shipped config (configs/copy.toml, reverse.toml, dates.toml); copy and
# reverse keep it as is (12 epochs), dates trains for 15 epochs instead of 30. Time: the five
# position rows took 14 min 45 s of CPU in all; the three scorer rows more (additive and
# linear are slower on dates): budget about 20 minutes on 2 idle cores with --jobs 2.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
quick=0
jobs=2
rows_file=""
out="runs/compare-variants"
qkv="$here/build/apps/qkv"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --jobs) jobs="$2"; shift ;;
    --rows) rows_file="$2"; shift ;;
    --out) out="$2"; shift ;;
    --qkv) qkv="$2"; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "compare-variants: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$qkv" ]] || { echo "compare-variants: no qkv binary at $qkv (build first, or --qkv BIN)" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "compare-variants: --jobs must be a positive integer" >&2; exit 2; }

default_rows='
sinusoidal:--model.position sinusoidal
learned:--model.position learned --model.max_len 96
relative:--model.position relative --model.relative_clip 16
rope:--model.position rope
none:--model.position none
additive:--model.attention additive
linear:--model.attention linear
window-2:--model.window 2
'
if [[ -n "$rows_file" ]]; then rows="$(cat "$rows_file")"; else rows="$default_rows"; fi

L=10
# per-task overrides: the shipped configs, shortened to fit the time budget
if [[ $quick == 1 ]]; then
  common="--data.train_size 400 --data.valid_size 40 --data.test_size 40 --train.max_steps 20 --train.eval_examples 20 --optim.warmup 5"
  copy_o="$common"; reverse_o="$common"; dates_o="$common"
else
  copy_o=""; reverse_o=""; dates_o="--train.epochs 15"
fi

mkdir -p "$out"
names=()
declare -A over
while IFS= read -r line; do
  [[ -z "${line// }" || "$line" == \#* ]] && continue
  name="${line%%:*}"
  [[ "$name" != "$line" && "$name" =~ ^[A-Za-z0-9_.+-]+$ ]] ||
    { echo "compare-variants: bad row '$line' (expected name:overrides)" >&2; exit 2; }
  names+=("$name")
  over[$name]="${line#*:}"
done <<< "$rows"

# one training + its evaluations; writes $out/<name>-<task>.json lines
job() {
  local name="$1" task="$2" run="$out/$1-$2" res="$out/$1-$2.results"
  local cfg="$here/configs/$task.toml" extra
  case "$task" in copy) extra="$copy_o" ;; reverse) extra="$reverse_o" ;; dates) extra="$dates_o" ;; esac
  rm -rf "$run"
  # shellcheck disable=SC2086
  if ! "$qkv" train "$cfg" --run-dir "$run" --threads 1 --quiet $extra ${over[$name]} > "$run.log" 2>&1; then
    echo "compare-variants: $name/$task failed to train (see $run.log)" >&2
    echo "fail" > "$res"; return 0
  fi
  {
    echo "L $("$qkv" eval "$run" --split test --json --threads 1)"
    if [[ $task != dates ]]; then
      echo "2L $("$qkv" eval "$run" --split test --json --threads 1 --min-len $((L + 1)) --max-len $((2 * L)) 2>&1 | tail -1)"
    fi
  } > "$res" 2>&1 || true
}

start=$(date +%s)
running=0
for name in "${names[@]}"; do
  for task in copy reverse dates; do
    job "$name" "$task" &
    running=$((running + 1))
    if (( running >= jobs )); then wait -n || true; running=$((running - 1)); fi
  done
done
wait

# "0.998" -> "99.8%"; anything else (an error line, a failed training) -> "error"
cell() {
  local file="$out/$1-$2.results" tag="$3" line
  line="$(grep "^$tag {" "$file" 2>/dev/null | head -1 || true)"
  if [[ -z "$line" ]]; then echo "error"; return; fi
  line="${line#"$tag "}"
  /usr/bin/python3 -c 'import json,sys; print("%.1f%%" % (100 * json.loads(sys.argv[1])["exact_match"]))' "$line"
}
{
  echo "| variant | copy | reverse | dates | copy@2L | reverse@2L |"
  echo "|---|---|---|---|---|---|"
  for name in "${names[@]}"; do
    echo "| $name | $(cell "$name" copy L) | $(cell "$name" reverse L) | $(cell "$name" dates L) | $(cell "$name" copy 2L) | $(cell "$name" reverse 2L) |"
  done
} | tee "$out/table.md"
echo
echo "exact match on the test split; L = $L: copy/reverse train on lengths 1..L; @2L: lengths $((L + 1))..$((2 * L))$([[ $quick == 1 ]] && echo ' (--quick: tiny trainings)'); $(( $(date +%s) - start )) s, --jobs $jobs"
