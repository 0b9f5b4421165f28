#!/usr/bin/python3
"""The numbers of docs/inspect.md's worked examples ("Why this word"): one output token's scores
by every method of qkv attribute as a markdown table, and attribution patching's estimate of
every head against exact patching.

    PYTHONPATH=build/python /usr/bin/python3 scripts/attribution-tables.py RUN TEXT ROW \\
        [--contrast TOKEN] [--target TEXT] [--columns 5,6,7] [--corrupt TEXT] [--check K]

ROW is the output token (from 0) whose scores are tabled. Prints a row per method (saliency,
input x gradient, integrated gradients from the zero baseline and, when the vocabulary has
<pad>, from the padding baseline, attention rollout, value zeroing), its two largest |scores| in
bold; --columns keeps those columns (from 0, input tokens then earlier output tokens) and sums
the others. With --corrupt: the answers, the Pearson correlation of run.patch(approx=True)'s
estimate and run.patch()'s exact value over every head and over the residual cells, the heads of
largest exact value, and --check K's cells. Runs in the run's precision, on 2 threads.
"""
import argparse
import sys

import numpy as np

import qkv

METHODS = [("saliency", {}), ("input-x-gradient", {}), ("integrated-gradients", {}),
           ("integrated-gradients", {"baseline": "pad"}), ("attention-rollout", {}),
           ("value-zeroing", {})]


def table(run, a):
    pick = [int(c) for c in a.columns.split(",")] if a.columns else None
    for i, (method, extra) in enumerate(METHODS):
        kw = dict(extra, target=a.target)
        if method not in ("attention-rollout", "value-zeroing"):
            kw["contrast"] = a.contrast  # the other two do not depend on the output token
        try:
            j = run.attribute(a.text, method=method, **kw)
        except ValueError as e:  # a vocabulary without <pad>
            print(f"({method} {extra}: {e})")
            continue
        o = j["outputs"][a.row]
        labels = j["inputs"] + j["context"][:len(o["context"])]
        vals = o["inputs"] + o["context"]
        idx = pick or list(range(len(vals)))
        if i == 0:
            print(f"output {a.row}: {o['token']!r} of {[x['token'] for x in j['outputs']]}\n")
            print("| method | " + " | ".join(f"`{labels[c]}`" for c in idx) +
                  (" | the others, summed |" if pick else " |"))
            print("|---|" + "---:|" * (len(idx) + (1 if pick else 0)))
        top = sorted(range(len(vals)), key=lambda c: -abs(vals[c]))[:2]
        cells = [f"**{vals[c]:.2f}**" if c in top else f"{vals[c]:.2f}" for c in idx]
        if pick:
            cells.append(f"{sum(v for c, v in enumerate(vals) if c not in idx):.2f}")
        name = method + (", `--baseline pad`" if extra else "")
        note = (f"  (sum {sum(vals):.4f}, f(input) - f(baseline) "
                f"{o['value'] - o['baseline_value']:.4f})" if "value" in o else "")
        print(f"| {name} | " + " | ".join(cells) + " |" + note)


def patching(run, a):
    exact = run.patch(a.text, a.corrupt)
    approx = run.patch(a.text, a.corrupt, approx=True, check=a.check)
    e = {h["head"]: h["restored"] for h in exact["heads"]}
    est = {h["head"]: h["restored"] for h in approx["heads"]}
    names = list(e)
    x, y = np.array([est[n] for n in names]), np.array([e[n] for n in names])
    rx, ry = np.ravel(approx["residual"]), np.ravel(exact["residual"])
    print(f"\nclean answer {exact['clean_answer']!r}, corrupted {exact['corrupt_answer']!r}; "
          f"logit difference {exact['clean_diff']:.4f} clean, {exact['corrupt_diff']:.4f} corrupted")
    print(f"correlation of estimate and exact: {np.corrcoef(x, y)[0, 1]:.3f} over {len(names)} "
          f"heads, {np.corrcoef(rx, ry)[0, 1]:.3f} over {len(rx)} residual cells")
    print(f"residual, exact ({exact['stream']}, positions {exact['positions']}):")
    for L, row in enumerate(exact["residual"]):
        print(f"  {L}: " + " ".join(f"{v:.3f}" for v in row))
    print("\n| head | estimate | exact |\n|---|---:|---:|")
    for n in sorted(names, key=lambda n: -abs(e[n]))[:8]:
        print(f"| `{n}` | {est[n]:.3f} | {e[n]:.3f} |")
    c = approx["check"]
    print(f"\n--check {a.check}: correlation {c['correlation']}")
    for cell in c["cells"]:
        print(f"  {cell['name']:28} {cell['label']:8} {cell['estimate']:8.3f} {cell['exact']:8.3f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("text")
    p.add_argument("row", type=int)
    p.add_argument("--contrast")
    p.add_argument("--target")
    p.add_argument("--columns")
    p.add_argument("--corrupt")
    p.add_argument("--check", type=int, default=8)
    a = p.parse_args()
    run = qkv.open(a.run, threads=2)
    table(run, a)
    if a.corrupt:
        patching(run, a)


if __name__ == "__main__":
    sys.exit(main())
