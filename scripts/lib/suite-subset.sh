# Sourced by scripts/test-cpus.sh and scripts/test-arm64.sh: what both do to run a part of the
# suite and to judge a short training. Needs PY (the python with json: /usr/bin/python3).

# ctest's numbers (for `ctest -I 0,0,0,NUMBERS`) of the tests in build folder $1 whose command
# runs one of the binaries named after it (directly or behind an emulator), less the tests
# whose names are in the variable EXCLUDED (one per line). ctest -E cannot do the leaving out:
# with -I it renumbers the tests before -I picks them.
subset_numbers() {
  local dir=$1
  shift
  (cd "$dir" && ctest --show-only=json-v1) | EXCLUDED="${EXCLUDED:-}" "$PY" -c '
import json, os, sys
wanted, excluded = set(sys.argv[1:]), set(os.environ["EXCLUDED"].split("\n"))
tests = json.load(sys.stdin)["tests"]
print(",".join(str(i + 1) for i, t in enumerate(tests)
               if t["name"] not in excluded
               and any(os.path.basename(a) in wanted for a in t.get("command", [])[:4])))' "$@"
}

# The first and the last training loss a run folder's metrics.jsonl logged: "FIRST LAST".
run_losses() {
  "$PY" -c '
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
loss = [r["loss"] for r in rec if "loss" in r and "split" not in r]  # training records
print(loss[0], loss[-1])' "$1/metrics.jsonl"
}

# Whether a loss fell by a fifth or more: loss_fell FIRST LAST.
loss_fell() { "$PY" -c "import sys; sys.exit(0 if $2 < 0.8 * $1 else 1)"; }

# Whether a refused command refused as qkv must: exit status 1, one line, and no run folder.
# refused_in_one_line STATUS OUTPUT RUN_DIR
refused_in_one_line() {
  [ "$1" -eq 1 ] && [ "$(printf '%s\n' "$2" | wc -l)" -eq 1 ] && [ ! -e "$3" ]
}
