#!/usr/bin/python3
"""PyTorch's speed options on a bench model, side by side in one process.

Each variant gets its own copy of the model (apps/bench_reference.py's Seq2Seq, same seed) and
its own Adam; the rounds alternate the variants (each round starting with the next one), so
load from elsewhere hits them alike. Prints
per variant the median and the fastest step, in wall time and in this process's CPU time (all
threads: with OMP_WAIT_POLICY=passive it counts work, not spinning, and so stays comparable on
a busy machine). All variants run with the reference's malloc setting (keep_freed_memory).
apps/bench_reference.py's defaults are the result (docs/performance.md).

usage: scripts/torch-options.py [--model tiny] [--threads 2] [--rounds 10] [--steps 4]
Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps"))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import bench_reference as ref  # noqa: E402

VARIANTS = {
    "PyTorch defaults": dict(foreach=False, mkldnn=True, flush=False),
    "Adam foreach": dict(foreach=True, mkldnn=True, flush=False),
    "oneDNN off": dict(foreach=False, mkldnn=False, flush=False),
    "flush denormals": dict(foreach=False, mkldnn=True, flush=True),
}


def make_step(name, foreach):
    seq2seq, d, heads, d_ff, enc, dec, vocab, length, batch = ref.MODELS[name]
    if not seq2seq:
        sys.exit("torch-options: %s is not a Seq2Seq model" % name)
    torch.manual_seed(1)
    model = ref.Seq2Seq(d, heads, d_ff, enc, dec, vocab, length)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=foreach)
    src = torch.randint(0, vocab, (batch, length))
    tgt_in = torch.randint(0, vocab, (batch, length))
    tgt_out = torch.randint(0, vocab, (batch * length,))

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(src, tgt_in).reshape(-1, vocab), tgt_out).backward()
        opt.step()
    return step


def apply(v):
    torch.backends.mkldnn.enabled = v["mkldnn"]
    torch.set_flush_denormal(v["flush"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny", choices=sorted(ref.MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=4, help="timed steps per variant and round")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    ref.keep_freed_memory()  # the reference's allocator setting, so only the variants differ
    steps = {k: make_step(a.model, v["foreach"]) for k, v in VARIANTS.items()}
    wall = {k: [] for k in VARIANTS}
    cpu = {k: [] for k in VARIANTS}
    for k, v in VARIANTS.items():  # warm-up
        apply(v)
        for _ in range(3):
            steps[k]()
    names = list(VARIANTS)
    for r in range(a.rounds):
        # each round starts with the next variant, so none always runs first
        for k in names[r % len(names):] + names[:r % len(names)]:
            apply(VARIANTS[k])
            for _ in range(a.steps):
                t0, c0 = time.perf_counter(), time.process_time()
                steps[k]()
                wall[k].append((time.perf_counter() - t0) * 1e3)
                cpu[k].append((time.process_time() - c0) * 1e3)
    print("%s, %d threads, %d rounds x %d steps; load %.2f" %
          (a.model, a.threads, a.rounds, a.steps, os.getloadavg()[0]))
    print("| variant | wall ms median | wall ms best | CPU ms median | CPU ms best |")
    print("|---|---:|---:|---:|---:|")
    for k in VARIANTS:
        print("| %s | %.1f | %.1f | %.1f | %.1f |" % (k, statistics.median(wall[k]), min(wall[k]),
                                                    statistics.median(cpu[k]), min(cpu[k])))


if __name__ == "__main__":
    main()
