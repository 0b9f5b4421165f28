#!/bin/bash
# same-bits.sh OLD_QKV NEW_QKV OUTDIR: do two builds of qkv compute the same bits?
#
# Trains, with each binary, the fp32 runs whose results must not move when code is reorganised
# or a new precision is added beside fp32: 200 steps of configs/shakespeare-char.toml, 300 of
# configs/copy.toml and 20 of configs/multi30k.toml. It compares their metrics.jsonl (wall-clock
# fields dropped) and the sha256 of every checkpoint, and prints "same bits" or the differences.
# A few minutes on 2 cores.
set -u
[ $# -eq 3 ] || { sed -n 2,8p "$0"; exit 2; }
OLD=$(readlink -f "$1"); NEW=$(readlink -f "$2"); OUT=$(readlink -m "$3")
SRC=$(cd "$(dirname "$0")/.." && pwd)
TIME_FIELDS='["time","elapsed","seconds","wall","step_ms","tokens_per_sec","examples_per_sec","timestamp","ms_per_step","wall_seconds"]'

# without_time IN: metrics.jsonl's records without their wall-clock fields, one per line
without_time() {
  /usr/bin/python3 -c 'import json, sys
drop = set(json.loads(sys.argv[2]))
for line in open(sys.argv[1]):
    r = {k: v for k, v in json.loads(line).items() if k not in drop}
    print(json.dumps(r, sort_keys=True))' "$1" "$TIME_FIELDS"
}

# train QKV SIDE NAME CONFIG ARGS...: one run, then its comparable files under OUT/SIDE/cmp
train() {
  local qkv=$1 side=$2 name=$3 cfg=$4; shift 4
  local dir="$OUT/$side/$name"
  rm -rf "$dir"; mkdir -p "$OUT/$side/cmp"
  if ! "$qkv" train "$SRC/configs/$cfg" --run-dir "$dir" --quiet --threads 2 "$@" \
      > "$OUT/$side/$name.log" 2>&1; then
    echo "$side $name: training failed (see $OUT/$side/$name.log)"; return 1
  fi
  without_time "$dir/metrics.jsonl" > "$OUT/$side/cmp/$name.metrics.jsonl"
  (cd "$dir" && sha256sum checkpoints/*/model.safetensors) > "$OUT/$side/cmp/$name.ckpt.sha256"
}

status=0
for side in old new; do
  qkv=$OLD; [ $side = new ] && qkv=$NEW
  train "$qkv" $side shakespeare-char shakespeare-char.toml --train.max_steps 200 || status=1
  train "$qkv" $side copy copy.toml --train.max_steps 300 || status=1
  train "$qkv" $side multi30k multi30k.toml --train.max_steps 20 --optim.warmup 5 \
      --train.eval_every 10 --train.eval_examples 16 --data.test_size 24 || status=1
done
[ $status -eq 0 ] || exit 1
if diff -r "$OUT/old/cmp" "$OUT/new/cmp"; then echo "same bits"; else exit 1; fi
