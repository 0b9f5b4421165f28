#!/usr/bin/env python3
"""The induction-head phase change of runs trained with a [probe] section, as numbers.

For each run folder: the best head's induction score (the largest over layers and heads of
the self-attention's "induction" score in the probe records of metrics.jsonl) against steps,
the window of steps in which it rises (from the last probe below 20% of its final value to the
first at or above 80%), the score and the in-context learning score before and after that
window, and the training loss around it. A run whose best score stays under 0.2 (the initial
weights score about 0.05) has no window ("none").

Usage: induction-summary.py RUN [RUN ...]        (standard library only)
"""
import json
import sys


def probes_and_losses(run):
    probes, losses = [], []
    with open(run + "/metrics.jsonl") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "probe" in r:
                att = r["probe"].get("attentions", {}).get("self")
                if att and "induction" in att:
                    best = max(max(row) for row in att["induction"])
                    probes.append((r["step"], best, r["probe"].get("icl")))
            elif "split" not in r and "loss" in r:
                losses.append((r["step"], r["loss"]))
    return probes, losses


def loss_at(losses, step):
    """The logged training loss nearest to step."""
    return min(losses, key=lambda sl: abs(sl[0] - step))[1] if losses else float("nan")


def fmt(x):
    return "-" if x is None else f"{x:.3f}"


def summary(run):
    probes, losses = probes_and_losses(run)
    if not probes:
        return f"{run}: no probe records (train with [probe] every = N)"
    final = probes[-1][1]
    line = (f"{run}: best induction {fmt(probes[0][1])} at step {probes[0][0]} -> {fmt(final)}"
            f" at step {probes[-1][0]} (icl {fmt(probes[0][2])} -> {fmt(probes[-1][2])})")
    if final < 0.2:
        return line + "; window: none"
    start = max((p for p in probes if p[1] < 0.2 * final), key=lambda p: p[0], default=probes[0])
    end = min((p for p in probes if p[1] >= 0.8 * final and p[0] > start[0]), key=lambda p: p[0],
              default=probes[-1])
    return (line + f"; window: steps {start[0]}..{end[0]}"
            f" (induction {fmt(start[1])} -> {fmt(end[1])}, icl {fmt(start[2])} -> {fmt(end[2])},"
            f" training loss {loss_at(losses, start[0]):.3f} -> {loss_at(losses, end[0]):.3f})")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for run in sys.argv[1:]:
        print(summary(run))
