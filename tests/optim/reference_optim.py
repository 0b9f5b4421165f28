"""PyTorch reference for tests/optim/test_optim_reference.cpp.

Usage: /usr/bin/python3 reference_optim.py DIR

DIR/manifest.json lists cases. For each case it reads the initial parameters (<case>.init.bin)
and the per-step gradients (<case>.grads.bin), runs torch.optim (SGD, Adam or AdamW, the
single-tensor code path) with the case's hyperparameters, one parameter group per parameter
(its own weight decay) and the case's learning rate at each step, and writes the parameters
after every step to <case>.out.bin. Binary files are raw little-endian arrays of the case's
dtype, parameters concatenated in manifest order.

torch 1.13 has no Muon: for optimizer "muon" the parameters marked "muon" take Keller Jordan's
update as modded-nanogpt writes it (Muon and zeropower_via_newtonschulz5 below, in float32),
the others torch.optim.AdamW.

DIR/manifest.json may also list "newton_schulz" cases: a float32 matrix (<case>.in.bin, the
case's shape) goes through zeropower_via_newtonschulz5_bf16 and the result, widened to
float32, is written to <case>.out.bin.
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


def zeropower_via_newtonschulz5(G, steps=5):
    """modded-nanogpt's Newton-Schulz quintic, in float32 (it runs it in bfloat16 on GPUs)."""
    assert G.ndim == 2
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.float()
    if G.size(0) > G.size(1):
        X = X.T
    X = X / (X.norm() + 1e-7)
    for _ in range(steps):
        A = X @ X.T
        B = b * A + c * A @ A
        X = a * X + B @ X
    if G.size(0) > G.size(1):
        X = X.T
    return X


def zeropower_via_newtonschulz5_bf16(G, steps=5):
    """modded-nanogpt's Newton-Schulz quintic in bfloat16, as it runs on GPUs under torch 2:
    X = G.bfloat16(), every op's result rounded to bf16, each product accumulated in float32.
    Two ways torch 1.13 on the CPU differs are written out with float32 ops: it rounds a
    Python scalar to bf16 before multiplying a bf16 tensor by it (torch 2 and CUDA multiply in
    float32), and a bf16 matmul of at most 16^3 multiply-adds accumulates in bf16 (oneDNN's,
    above that, and cuBLAS's accumulate in float32)."""
    assert G.ndim == 2
    a, b, c = (3.4445, -4.7750, 2.0315)

    def scaled(s, T):  # bf16(s T), s in float32
        return (T.float() * s).bfloat16()

    def mm(P, Q):  # bf16(P Q), accumulated in float32
        return (P.float() @ Q.float()).bfloat16()

    X = G.bfloat16()
    if G.size(0) > G.size(1):
        X = X.T
    X = X / (X.norm().float() + 1e-7).bfloat16()
    for _ in range(steps):
        A = mm(X, X.T)
        B = scaled(b, A) + mm(scaled(c, A), A)
        X = scaled(a, X) + mm(B, X)
    if G.size(0) > G.size(1):
        X = X.T
    return X


class Muon(torch.optim.Optimizer):
    """modded-nanogpt's Muon (Nesterov momentum), one matrix at a time, with AdamW's decoupled
    weight decay; lr is the matrices' own rate."""

    def __init__(self, params, lr, momentum):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=0.0))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(g)
                buf = state["momentum_buffer"]
                buf.mul_(mu).add_(g)
                g = g.add(buf, alpha=mu)
                o = zeropower_via_newtonschulz5(g)
                if wd > 0:
                    p.mul_(1 - lr * wd)
                p.add_(o.to(p.dtype), alpha=-lr * max(1, p.size(0) / p.size(1)) ** 0.5)


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
    opts = []  # (optimizer, its learning rate from the step's lr_t)
    if kind == "muon":
        matrices = [g for g, m in zip(groups, metas) if m["muon"]]
        others = [g for g, m in zip(groups, metas) if not m["muon"]]
        # The schedule scales both rates alike: muon_lr * lr_t / lr.
        opts.append((Muon(matrices, lr=h["muon_lr"], momentum=h["muon_momentum"]),
                     lambda lr_t: h["muon_lr"] * lr_t / h["lr"]))
        if others:
            opts.append((torch.optim.AdamW(others, lr=h["lr"], betas=(h["beta1"], h["beta2"]),
                                           eps=h["eps"], amsgrad=h["amsgrad"], foreach=False),
                         lambda lr_t: lr_t))
    elif kind == "sgd":
        opt = torch.optim.SGD(groups, lr=h["lr"], momentum=h["momentum"], dampening=h["dampening"],
                              nesterov=h["nesterov"], foreach=False)
    elif kind in ("adam", "adamw"):
        cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
        opt = cls(groups, lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"],
                  amsgrad=h["amsgrad"], foreach=False)
    else:
        raise SystemExit("reference_optim.py: unknown optimizer " + kind)
    if not opts:
        opts.append((opt, lambda lr_t: lr_t))

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
        for o, rate in opts:
            for g in o.param_groups:
                g["lr"] = rate(lr)
            o.step()
        for p in params:
            out.append(p.detach().numpy().reshape(-1).astype(dt))
    assert goff == grads.size, "grads size"
    np.concatenate(out).tofile(os.path.join(d, case["name"] + ".out.bin"))


def run_newton_schulz(d, case):
    g = np.fromfile(os.path.join(d, case["name"] + ".in.bin"), dtype=np.float32)
    G = torch.from_numpy(g.reshape(case["shape"]))
    out = zeropower_via_newtonschulz5_bf16(G).float().contiguous().numpy()
    out.reshape(-1).tofile(os.path.join(d, case["name"] + ".out.bin"))


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: reference_optim.py DIR")
    d = sys.argv[1]
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    torch.set_num_threads(1)
    for case in manifest["cases"]:
        run_case(d, case)
    for case in manifest.get("newton_schulz", []):
        run_newton_schulz(d, case)
    print("reference_optim.py: torch %s, %d cases, %d newton_schulz" %
          (torch.__version__, len(manifest["cases"]), len(manifest.get("newton_schulz", []))))


if __name__ == "__main__":
    main()
