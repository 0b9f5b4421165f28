"""PyTorch reference for tests/optim/test_optim_reference.cpp.

Usage: /usr/bin/python3 reference_optim.py DIR

DIR/manifest.json lists cases. For each case it reads the initial parameters (<case>.init.bin)
and the per-step gradients (<case>.grads.bin), runs torch.optim (SGD, Adam or AdamW, the
single-tensor code path) with the case's hyperparameters, one parameter group per parameter
(its own weight decay) and the case's learning rate at each step, and writes the parameters
after every step to <case>.out.bin. Binary files are raw little-endian arrays of the case's
dtype, parameters concatenated in manifest order.
"""
import json
import os
import sys

try:
    import numpy as np
    import torch
except Exception as e:  # the test must fail loudly, not skip
    sys.stderr.write(
        "reference_optim.py: %s cannot import torch/numpy (%s); install python3-torch and "
        "python3-numpy (make install)\n" % (sys.executable, e))
    sys.exit(2)


def run_case(d, case):
    dt = {"float32": np.float32, "float64": np.float64}[case["dtype"]]
    tdt = {"float32": torch.float32, "float64": torch.float64}[case["dtype"]]
    metas = case["params"]
    sizes = [int(np.prod(m["shape"], dtype=np.int64)) for m in metas]
    init = np.fromfile(os.path.join(d, case["name"] + ".init.bin"), dtype=dt)
    assert init.size == sum(sizes), "init size"
    params, off = [], 0
    for m, n in zip(metas, sizes):
        params.append(torch.tensor(init[off:off + n].reshape(m["shape"]), dtype=tdt, requires_grad=True))
        off += n

    h = case["hyper"]
    groups = [{"params": [p], "weight_decay": m["weight_decay"]} for p, m in zip(params, metas)]
    kind = case["optimizer"]
    if kind == "sgd":
        opt = torch.optim.SGD(groups, lr=h["lr"], momentum=h["momentum"], dampening=h["dampening"],
                              nesterov=h["nesterov"], foreach=False)
    elif kind in ("adam", "adamw"):
        cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
        opt = cls(groups, lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"],
                  amsgrad=h["amsgrad"], foreach=False)
    else:
        raise SystemExit("reference_optim.py: unknown optimizer " + kind)

    grads = np.fromfile(os.path.join(d, case["name"] + ".grads.bin"), dtype=dt)
    goff, out = 0, []
    for step, lr in enumerate(case["lrs"]):
        present = case["grad_present"][step]
        for p, m, n, has in zip(params, metas, sizes, present):
            if has:
                p.grad = torch.tensor(grads[goff:goff + n].reshape(m["shape"]), dtype=tdt)
                goff += n
            else:
                p.grad = None
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        for p in params:
            out.append(p.detach().numpy().reshape(-1).astype(dt))
    assert goff == grads.size, "grads size"
    np.concatenate(out).tofile(os.path.join(d, case["name"] + ".out.bin"))


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: reference_optim.py DIR")
    d = sys.argv[1]
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    torch.set_num_threads(1)
    for case in manifest["cases"]:
        run_case(d, case)
    print("reference_optim.py: torch %s, %d cases" % (torch.__version__, len(manifest["cases"])))


if __name__ == "__main__":
    main()
