#!/usr/bin/env python3
"""Who waits for whom in a two-thread step: from a perf recording of `qkv bench --child`, for
every sample of one thread inside libgomp (spinning at a barrier or between parallel regions),
the symbol the other thread ran at the nearest moment. What one thread runs while the other
waits is the work to split better (a product's uneven bands, a serial pass between regions).

  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE perf record -F 999 -o step.perf -- \\
      qkv bench --child --model multi30k --threads 2 --min-seconds 10 --precision bf16
  scripts/perf-waits.py step.perf [--top 20]

oneDNN's JIT kernels show as `[unknown] [perf-PID.map]`. Needs linux-perf. Shares are of all
of the waiting thread's samples (warm-up and model building included: keep them short beside
--min-seconds)."""
import argparse
import bisect
import collections
import re
import subprocess
import sys

LINE = re.compile(r"\s*(\d+)\s+([\d.]+):\s+[0-9a-f]+\s+(.*)$")
NEAREST_S = 0.0008  # a sample of the other thread within this many seconds counts as "meanwhile"


def samples(perf_data):
    out = subprocess.run(["perf", "script", "-i", perf_data, "-F", "tid,time,ip,sym,dso"],
                         check=True, capture_output=True, text=True).stdout
    by_tid = collections.defaultdict(list)
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        tid, t, sym = m.groups()
        sym = re.sub(r"\(/[^)]*/([^/)]+)\)$", r"[\1]", sym.strip())  # (/usr/lib/x/libgomp.so) -> [libgomp.so]
        by_tid[int(tid)].append((float(t), sym[:100]))
    return by_tid


def report(waiter, waiter_samples, other, other_samples, top):
    times = [t for t, _ in other_samples]
    meanwhile = collections.Counter()
    waits = 0
    for t, sym in waiter_samples:
        if "libgomp" not in sym:
            continue
        waits += 1
        i = bisect.bisect_left(times, t)
        near = [j for j in (i - 1, i) if 0 <= j < len(times) and abs(times[j] - t) < NEAREST_S]
        meanwhile[other_samples[near[0]][1] if near else "(the other thread not running)"] += 1
    total = len(waiter_samples)
    print(f"thread {waiter} waits in libgomp in {waits} of its {total} samples "
          f"({100 * waits / max(total, 1):.1f}%); thread {other} meanwhile:")
    for sym, n in meanwhile.most_common(top):
        print(f"  {100 * n / max(total, 1):5.1f}%  {sym}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("perf_data")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    by_tid = samples(args.perf_data)
    busiest = sorted(by_tid, key=lambda tid: -len(by_tid[tid]))[:2]
    if len(busiest) < 2:
        sys.exit(f"perf-waits: {args.perf_data} has samples of {len(busiest)} thread(s); record a "
                 "run with --threads 2")
    a, b = sorted(busiest)
    report(a, by_tid[a], b, by_tid[b], args.top)
    report(b, by_tid[b], a, by_tid[a], args.top)


if __name__ == "__main__":
    main()
