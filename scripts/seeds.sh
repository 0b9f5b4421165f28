#!/usr/bin/env bash
# Trains shipped configs over several seeds and prints, per config, the median and the range
# (min - max) of the final test metrics (best checkpoint, as `qkv train` reports at the end):
# exact match, token accuracy, loss, and the wall time of one training. README's results
# table comes from this script.
#
#   scripts/seeds.sh [--config NAME]... [--seeds "1 2 3"] [--threads N] [--out DIR] [--qkv BIN]
#                    [--passive] [--quick]
#
# --config NAME: configs/NAME.toml (repeatable; default every configs/*.toml). --seeds: the
# seeds (default 1 2 3; `--seed S` is the config's seed: model initialisation, dropout, data
# generation and order). --threads: passed to qkv train (default: the config's, 0 = all cores);
# the trainings run one after another. --passive: OMP_WAIT_POLICY=passive (idle threads sleep
# instead of spinning: on a busy machine training is many times faster; the metrics are the
# same, bit for bit, as they depend only on the config, seed and thread count). --quick: tiny
# trainings (a smoke test of the script, numbers meaningless). The load average before and after is printed with the table: wall
# times on a busy machine are not the configs' wall times.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
configs=()
seeds="1 2 3"
threads=""
out="runs/seeds"
qkv="$here/build/apps/qkv"
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --config) configs+=("$2"); shift ;;
    --seeds) seeds="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --out) out="$2"; shift ;;
    --qkv) qkv="$2"; shift ;;
    --quick) quick=1 ;;
    --passive) export OMP_WAIT_POLICY=passive ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "seeds: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$qkv" ]] || { echo "seeds: no qkv binary at $qkv (build first, or --qkv BIN)" >&2; exit 2; }
for s in $seeds; do
  [[ "$s" =~ ^[0-9]+$ ]] || { echo "seeds: --seeds must be integers, got '$s'" >&2; exit 2; }
done
[[ -z "$threads" || "$threads" =~ ^[0-9]+$ ]] ||
  { echo "seeds: --threads must be a non-negative integer, got '$threads'" >&2; exit 2; }
if [[ ${#configs[@]} -eq 0 ]]; then
  for f in "$here"/configs/*.toml; do configs+=("$(basename "$f" .toml)"); done
fi
for c in "${configs[@]}"; do
  [[ -f "$here/configs/$c.toml" ]] ||
    { echo "seeds: no config configs/$c.toml (--config takes a name from configs/)" >&2; exit 2; }
done

extra=()
[[ -n "$threads" ]] && extra+=(--threads "$threads")
[[ $quick == 1 ]] && extra+=(--data.valid_size 16 --data.test_size 16 --train.max_steps 4
  --train.eval_examples 16 --optim.warmup 2)

mkdir -p "$out"
load_before="$(cut -d' ' -f1 /proc/loadavg)"
results="$out/results.jsonl"
: > "$results"
for c in "${configs[@]}"; do
  for s in $seeds; do
    run="$out/$c-seed$s"
    rm -rf "$run"
    start=$(date +%s%N)
    if ! "$qkv" train "$here/configs/$c.toml" --run-dir "$run" --seed "$s" --quiet "${extra[@]}" \
        > "$run.log" 2>&1; then
      echo "seeds: $c seed $s failed to train (see $run.log)" >&2
      exit 1
    fi
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    seconds="$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    test_line="$(grep '"split":"test"' "$run/metrics.jsonl" | tail -1 || true)"
    [[ -n "$test_line" ]] || { echo "seeds: $c seed $s: no test metrics in $run/metrics.jsonl" >&2; exit 1; }
    echo "{\"config\":\"$c\",\"seed\":$s,\"seconds\":$seconds,\"test\":$test_line}" >> "$results"
    echo "seeds: $c seed $s done in $seconds s" >&2
  done
done
load_after="$(cut -d' ' -f1 /proc/loadavg)"

/usr/bin/python3 - "$results" "$load_before" "$load_after" "$quick" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
configs = list(dict.fromkeys(r["config"] for r in rows))
def cell(values, fmt):
    return "%s (%s - %s)" % (fmt(statistics.median(values)), fmt(min(values)), fmt(max(values)))
pct = lambda v: "%.1f%%" % (100 * v)
print("| config | seeds | exact match | token accuracy | test loss | wall time |")
print("|---|---|---|---|---|---|")
for c in configs:
    rs = [r for r in rows if r["config"] == c]
    print("| `configs/%s.toml` | %s | %s | %s | %s | %s |" % (
        c, " ".join(str(r["seed"]) for r in rs),
        cell([r["test"]["exact_match"] for r in rs], pct),
        cell([r["test"]["token_accuracy"] for r in rs], pct),
        cell([r["test"]["loss"] for r in rs], lambda v: "%.4f" % v),
        cell([r["seconds"] for r in rs], lambda v: "%.0f s" % v)))
print()
print("median (min - max) over seeds of the test split with the best checkpoint; load average "
      "%s -> %s%s" % (sys.argv[2], sys.argv[3], " (--quick: tiny trainings)" if sys.argv[4] == "1" else ""))
EOF
