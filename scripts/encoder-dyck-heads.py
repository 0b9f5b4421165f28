#!/usr/bin/env python3
"""What a trained Dyck classifier's heads attend to, over many balanced strings (docs/encoder.md).

Serves RUN (a dyck run of model.kind = "encoder") with `qkv serve`, asks POST /attention for N
random balanced Dyck-2 strings (depth <= data.max_depth, even lengths 8..20, seed 1) and prints,
per layer and head, the mean attention of each closer on its own opener (uniform over the n + 1
keys would be about 1/15 here), and of <cls> (the read-out) on the first and on the last bracket.

Usage: scripts/encoder-dyck-heads.py QKV_BINARY RUN [N]
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "apps"))
import serve_fixture as fx  # noqa: E402


def balanced(n, depth, rng):
    """A random balanced Dyck-2 string of n brackets whose depth stays within depth."""
    while True:
        out, open_ = [], []
        for i in range(n):
            left = n - i
            can_open = len(open_) < depth and len(open_) + 1 <= left - 1
            if can_open and (not open_ or rng.random() < 0.5):
                open_.append(rng.choice("(["))
                out.append(open_[-1])
            elif open_:
                out.append(")" if open_.pop() == "(" else "]")
            else:
                break
        if len(out) == n and not open_:
            return out


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    qkv, run = sys.argv[1], sys.argv[2]
    n_strings = int(sys.argv[3]) if len(sys.argv) == 4 else 200
    rng = random.Random(1)
    name = os.path.basename(os.path.normpath(run))
    server = fx.Server(qkv, [run])
    try:
        sums, closers = {}, 0
        for _ in range(n_strings):
            w = balanced(rng.choice(range(8, 21, 2)), 3, rng)
            code, att, _ = server.post(f"/api/runs/{name}/attention", {"text": " ".join(w)})
            if code != 200:
                raise SystemExit(f"POST attention: {code} {att}")
            m = len(w) + 1  # keys: <cls> and the brackets
            stack, partner = [], {}
            for i, c in enumerate(w):
                if c in "([":
                    stack.append(i + 1)
                else:
                    partner[i + 1] = stack.pop()
            closers += len(partner)
            for l, heads in enumerate(att["kinds"][0]["layers"]):
                for h, a in enumerate(heads):
                    s = sums.setdefault((l, h), [0.0, 0.0, 0.0])
                    s[0] += sum(a[q * m + p] for q, p in partner.items())
                    s[1] += a[1]          # <cls> (row 0) on the first bracket
                    s[2] += a[m - 1]      # <cls> on the last bracket
        print(f"{n_strings} balanced strings, {closers} closers")
        for (l, h), (match, first, last) in sorted(sums.items()):
            print(f"layer {l + 1} head {h + 1}: closer on its opener {match / closers:.3f}   "
                  f"<cls> on the first bracket {first / n_strings:.3f}, on the last "
                  f"{last / n_strings:.3f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
