#!/usr/bin/env bash
# Where a bench model's training step spends its time: samples `qkv bench --child` with perf
# (cpu-clock, call graphs through DWARF) and prints the shares of the samples taken inside the
# timed training steps (not the 3 warm-up steps, whose first touches of fresh memory are page
# faults a steady step does not have): OpenBLAS's compute kernels, its packing and driver, and
# everything outside the GEMMs by autograd op and phase (forward, backward, optimizer step),
# then the top symbols.
#
#   scripts/profile-bench.sh [--model tiny] [--threads 1] [--seconds 40] [--out DIR] [--qkv BIN]
#   scripts/profile-bench.sh --report OUT/MODEL-tN.txt   # the tables again from a recorded run
#
# cpu-clock samples count only time this process runs, so the shares stay meaningful on a busy
# machine (hardware counters are not needed; many VMs have none). One thread by default: the
# shares are then the work itself, not the waiting of one thread for the other (with more, the
# OpenMP workers' samples count too, under "worker thread"). Runs with
# OMP_WAIT_POLICY=passive. The kernel's samples on a loaded machine are mostly scheduling
# (task switches, reschedule interrupts): they are listed apart. Needs linux-perf.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model=tiny
threads=1
seconds=40
out="runs/profile"
report=""
qkv="$here/build/apps/qkv"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --seconds) seconds="$2"; shift ;;
    --out) out="$2"; shift ;;
    --qkv) qkv="$2"; shift ;;
    --report) report="$2"; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "profile-bench: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "$report" ]]; then
[[ -x "$qkv" ]] || { echo "profile-bench: no qkv binary at $qkv (build first, or --qkv BIN)" >&2; exit 2; }
command -v perf > /dev/null || { echo "profile-bench: perf not found (apt-get install linux-perf)" >&2; exit 2; }
mkdir -p "$out"
data="$out/$model-t$threads.perf.data"
# On CLOCK_MONOTONIC, the clock of the child's timed_from_monotonic_s (where the timed steps begin).
OMP_WAIT_POLICY=passive perf record -q -k CLOCK_MONOTONIC -e cpu-clock -F 499 \
  --call-graph dwarf,8192 -o "$data" -- \
  "$qkv" bench --child --model "$model" --threads "$threads" --min-seconds "$seconds" \
  > "$out/$model-t$threads.json"
perf script -i "$data" -F comm,pid,tid,time,event,ip,sym,symoff,dso 2> /dev/null \
  > "$out/$model-t$threads.txt"
echo "$model, $threads thread(s): $(cat "$out/$model-t$threads.json"); load $(cut -d' ' -f1 /proc/loadavg)"
report="$out/$model-t$threads.txt"
fi
[[ -f "$report" ]] || { echo "profile-bench: no recorded samples at $report" >&2; exit 2; }
/usr/bin/python3 - "$report" "${report%.txt}.json" <<'EOF'
import collections, json, re, sys

def parse(block):
    # header "qkv PID/TID TIME: cpu-clock:", then one "ADDR SYMBOL+0xOFF (DSO)" line a frame
    lines = [l.strip() for l in block.strip().split("\n") if l.strip()]
    m = re.match(r"\S+\s+(\d+)/(\d+)\s+([\d.]+):", lines[0]) if lines else None
    if not m:
        return None
    stack = [re.sub(r"(\+0x[0-9a-f]+)? \([^()]*\)$", "", re.sub(r"^[0-9a-f]+ ", "", l))
             for l in lines[1:]]
    return {"main": m.group(1) == m.group(2), "time": float(m.group(3)), "stack": stack}

def op_of(stack):
    # the innermost autograd op (qkv::ag::NAME) or optimizer on the stack
    for f in stack:
        m = re.search(r"qkv::ag::(\w+)(\(|$)", f)
        if m and m.group(1) not in ("Var", "run_backward"):
            return m.group(1)
        if "Optimizer::step" in f or "Adam" in f:
            return "optimizer step"
        if "zero_grad" in f:
            return "zero_grad"
    for f in stack:
        m = re.search(r"qkv::(\w+)(\(|$)", f)
        if m:
            return m.group(1)
    return stack[0]

samples = [s for s in map(parse, open(sys.argv[1]).read().split("\n\n")) if s and s["stack"]]
# Inside the timed training steps: the main thread's samples under Trainer::step, and the
# OpenMP workers' samples (a worker's stack starts in libgomp, which has no symbols to match),
# from the moment the child reports the timed steps began. A recording without that moment
# (an older binary, or perf without -k) counts from the first step on, warm-up included.
in_step = lambda s: any("Trainer::step" in x for x in s["stack"])
first = min((s["time"] for s in samples if s["main"] and in_step(s)), default=float("inf"))
try:
    first = max(first, json.loads(open(sys.argv[2]).read())["timed_from_monotonic_s"])
except (OSError, ValueError, KeyError):
    print("(no timed_from_monotonic_s in %s: the warm-up steps are counted too)" % sys.argv[2])
steps = [(s["stack"], s["main"]) for s in samples
         if s["time"] >= first and (in_step(s) or not s["main"])]
share = lambda n: "%.1f%%" % (100.0 * n / len(steps))
part, phase, outside, leaf = (collections.Counter() for _ in range(4))
for f, main in steps:
    text = " | ".join(f)
    ph = ("worker thread" if not main else "optimizer step" if "Optimizer::step" in text
          else "zero_grad" if "zero_grad" in text
          else "backward" if "Var::backward" in text else "forward")
    phase[ph] += 1
    leaf[f[0]] += 1
    in_gemm = any("sgemm" in x for x in f[:4])
    where = ("attention" if "attention" in text else "linear" if "linear" in text
             else "other" if main else "a worker thread: op not on its stack")
    # OpenBLAS's compute kernels: the packed one and, for small products, the unpacked ones
    if "sgemm_kernel" in f[0] or "sgemm_small_kernel" in f[0]:
        part["GEMM: OpenBLAS kernel (%s)" % where] += 1
    elif in_gemm:
        part["GEMM: OpenBLAS packing and driver (%s)" % where] += 1
    elif "pvm_" in f[0] or "[k]" in f[0] or any(k in text for k in ("__schedule", "irqentry")):
        part["kernel (scheduling, interrupts, page faults)"] += 1
    else:
        part["outside GEMMs"] += 1
        outside[(ph, op_of(f))] += 1
print("%d samples in the steps (%d in all)" % (len(steps), len(samples)))
print("| where | share |\n|---|---:|")
for k, v in sorted(part.items(), key=lambda kv: -kv[1]):
    print("| %s | %s |" % (k, share(v)))
print("\n| phase | share |\n|---|---:|")
for k, v in phase.most_common():
    print("| %s | %s |" % (k, share(v)))
print("\n| outside GEMMs: phase, op | share |\n|---|---:|")
for (ph, op), v in outside.most_common(14):
    print("| %s %s | %s |" % (ph, op[:60], share(v)))
print("\n| top symbols | share |\n|---|---:|")
for k, v in leaf.most_common(14):
    print("| `%s` | %s |" % (k[:70], share(v)))
EOF
