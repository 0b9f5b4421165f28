#!/usr/bin/python3
"""run_with_cache from Python against the same pass in C++: the cost of the Python module.

    PYTHONPATH=build/python /usr/bin/python3 scripts/bench-python-cache.py RUN [--batch 8]
        [--positions 256] [--rounds 7] [--precision fp32|bf16]

Each round times, alternating, one pass capturing every hook point through
run.run_with_cache(ids) (the activations copied into float32 numpy arrays) and the same pass in
C++ (Inference::batch_logits with the same capture, nothing handed to Python:
qkv._qkv._testing.time_pass); prints the medians and their ratio. Random ids, batch x positions.
"""
import argparse
import statistics
import time

import numpy as np

import qkv
from qkv import _qkv


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--positions", type=int, default=256)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--precision", default=None)
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args()
    run = qkv.open(a.run, precision=a.precision, threads=a.threads)
    vocab = run.params[next(n for n in run.params if "embed" in n)].shape[0]
    ids = np.random.default_rng(1).integers(0, vocab, size=(a.batch, a.positions))
    run.run_with_cache(ids)  # warm: the allocator's caches, the weights' copies
    py, cpp = [], []
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        _, cache = run.run_with_cache(ids)
        py.append(time.perf_counter() - t0)
        del cache
        cpp.append(_qkv._testing.time_pass(run, ids, ["*"]))
    mb = sum(v.nbytes for v in run.run_with_cache(ids)[1].values()) / 1e6
    print(f"{a.run} ({run.precision}), batch {a.batch} x {a.positions}, every hook point "
          f"({len(run.hook_points())}, {mb:.0f} MB cached): run_with_cache "
          f"{statistics.median(py) * 1e3:.1f} ms, C++ {statistics.median(cpp) * 1e3:.1f} ms, "
          f"ratio {statistics.median(py) / statistics.median(cpp):.3f} (medians of {a.rounds})")


if __name__ == "__main__":
    main()
