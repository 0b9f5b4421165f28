#!/usr/bin/python3
"""run_with_cache over every hook point: from Python against the same call in C++, and against
PyTorch doing the same job on the same model.

    PYTHONPATH=build/python /usr/bin/python3 scripts/bench-python-cache.py RUN [--batch 8]
        [--positions 256] [--rounds 7] [--threads N] [--no-torch]

RUN is a trained language model (a decoder-only GPT). Each round times, one after another in
an order that rotates from round to round, one pass over the same random ids (batch x positions):

  qkv fp32 / bf16   run.run_with_cache(ids): every hook point captured and handed to Python as float32
                    numpy arrays (the run opened twice, precision="fp32" and "bf16")
  C++ fp32 / bf16   the same pass and capture in C++, nothing handed to Python
                    (Inference::batch_logits: qkv._qkv._testing.time_pass)
  torch fp32        the same GPT as a PyTorch module (tests/python/torch_models.py) with the
                    run's weights (run.params), a forward hook on every submodule storing its
                    output, under torch.no_grad()
  torch bf16        the same under torch.autocast("cpu", dtype=torch.bfloat16)

torch.set_num_threads(N) and qkv.open(threads=N) give both the same threads (default: the
CPUs this process may use). Prints each median and the ratios: Python over C++ (the cost of the
module), qkv over torch (below 1: qkv faster), and the load average before and after.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import qkv
from qkv import _qkv

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))


def torch_side(run, threads):
    """(fp32 pass, bf16 pass, the module): each pass fn(ids) -> seconds; None without torch."""
    try:
        import torch
        import torch_models
    except ImportError as e:
        print(f"torch: not measured ({e})")
        return None
    why = torch_models.supported(run.config)
    if why is not None or run.config["model"]["kind"] != "decoder":
        print(f"torch: not measured (torch_models.py has no {why or 'non-GPT model'})")
        return None
    torch.set_num_threads(threads)
    model = torch_models.build(run.params, run.config, torch.float32)
    store = {}
    for name, module in model.named_modules():  # every submodule, TransformerLens's cache job
        module.register_forward_hook(lambda m, i, out, name=name: store.__setitem__(name, out))

    def timed(autocast):
        def fn(ids):
            t = torch.from_numpy(ids)
            store.clear()
            t0 = time.perf_counter()
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                model(t)
            return time.perf_counter() - t0
        return fn

    return timed(False), timed(True), model, store


def qkv_side(run):
    def fn(ids):
        t0 = time.perf_counter()
        _, cache = run.run_with_cache(ids)
        seconds = time.perf_counter() - t0
        del cache
        return seconds
    return fn


def cpp_side(run):
    return lambda ids: _qkv._testing.time_pass(run, ids, ["*"])


def open_bf16(path, threads):
    try:
        return qkv.open(path, precision="bf16", threads=threads)
    except ValueError as e:
        print(f"bf16: not measured ({e})")
        return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--positions", type=int, default=256)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--no-torch", action="store_true")
    a = p.parse_args()
    load_before = os.getloadavg()
    fp32 = qkv.open(a.run, precision="fp32", threads=a.threads)
    bf16 = open_bf16(a.run, a.threads)
    context = fp32.config["model"]["max_len"] if fp32.config["model"]["position"] == "learned" \
        else a.positions
    if a.positions > context:
        sys.exit(f"--positions {a.positions}: {a.run} reads at most {context} positions "
                 f"(model.max_len); train it with --model.max_len and --data.block_size {a.positions}")
    vocab = fp32.params[next(n for n in fp32.params if "embed" in n)].shape[0]
    ids = np.random.default_rng(1).integers(0, vocab, size=(a.batch, a.positions))

    sides = {"qkv fp32": qkv_side(fp32), "C++ fp32": cpp_side(fp32)}
    if bf16 is not None:
        sides.update({"qkv bf16": qkv_side(bf16), "C++ bf16": cpp_side(bf16)})
    torch = None if a.no_torch else torch_side(fp32, a.threads)
    if torch is not None:
        sides["torch fp32"] = torch[0]
        if bf16 is not None:
            sides["torch bf16"] = torch[1]
        check_same_model(fp32, torch[2], torch[3], ids)

    for fn in sides.values():  # warm: the allocators' caches, the weights' bf16 copies
        fn(ids)
    times = {name: [] for name in sides}
    names = list(sides)
    for r in range(a.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(sides[name](ids))
    report(a, fp32, times, load_before)


def check_same_model(run, model, store, ids):
    """The torch module's logits against qkv's in fp32: the same weights, the same model."""
    import torch
    logits, cache = run.run_with_cache(ids, names=["logits"])
    with torch.no_grad():
        mine = model(torch.from_numpy(ids)).numpy()
    print(f"torch fp32 logits vs qkv fp32: max |difference| {np.abs(mine - logits).max():.2e}; "
          f"torch stores {len(store)} module outputs a pass, qkv {len(run.hook_points())} hook points")


def report(a, run, times, load_before):
    med = {name: statistics.median(t) for name, t in times.items()}
    mb = sum(v.nbytes for v in run.run_with_cache(np.zeros((a.batch, a.positions), np.int64))[1]
             .values()) / 1e6
    print(f"{a.run}, batch {a.batch} x {a.positions}, every hook point "
          f"({len(run.hook_points())}, {mb:.0f} MB in float32), {a.threads} threads, "
          f"medians of {a.rounds} alternating rounds:")
    for name, m in med.items():
        print(f"  {name:<11} {m * 1e3:9.1f} ms")
    for p in ("fp32", "bf16"):
        if f"qkv {p}" in med:
            print(f"  Python / C++ ({p}): {med[f'qkv {p}'] / med[f'C++ {p}']:.3f}")
    for p in ("fp32", "bf16"):
        if f"torch {p}" in med and f"qkv {p}" in med:
            what = "autocast" if p == "bf16" else "fp32"
            print(f"  qkv run_with_cache / torch hooks ({p} vs torch {what}): "
                  f"{med[f'qkv {p}'] / med[f'torch {p}']:.3f}")
    load_after = os.getloadavg()
    print(f"  load average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}"
          f" on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
