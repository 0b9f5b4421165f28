#!/usr/bin/python3
"""The block options' PyTorch formulas, for tests/nn/test_block_options_reference.cpp.

Usage: reference_block_options.py IN.json OUT.json

IN holds cases: {"name", "op", "config", "tensors": {name: {"shape", "data"}}, "R"}. For each,
the op's formula below is computed in torch (float64) on the tensors, and the gradient of
sum(out * R) with respect to every tensor; OUT gets {name: {"out", "grad.<tensor>"...}}.
torch 1.13 has no RMSNorm module, SwiGLU or soft cap: these are their papers' one-line
definitions, built from torch's own ops (and torch builds the causal mask).
"""
import json
import math
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.stderr.write("%s: cannot import torch (%s); install Debian's python3-torch\n"
                     % (sys.executable, e))
    sys.exit(2)


def rms(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def lin(t, prefix, x):
    return F.linear(x, t[prefix + ".weight"], t.get(prefix + ".bias"))


def mha(t, c):
    """Self-attention with QK-norm under torch's causal mask, as modded-nanogpt."""
    x = t["x"]
    b, n, d = x.shape
    h = c["heads"]
    dh = d // h

    def heads(y):
        return y.view(b, n, h, dh).transpose(1, 2)

    q, k, v = (heads(lin(t, "w_" + p, x)) for p in "qkv")
    q, k = rms(q, c["eps"]), rms(k, c["eps"])
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    keep = torch.ones(n, n, dtype=torch.bool).tril()
    s = s.masked_fill(~keep, float("-inf"))
    o = torch.softmax(s, -1) @ v
    return lin(t, "w_o", o.transpose(1, 2).reshape(b, n, d))


OPS = {
    "rmsnorm": lambda t, c: rms(t["x"], c["eps"]) * t["weight"],
    "relu2_ffn": lambda t, c: lin(t, "linear2", F.relu(lin(t, "linear1", t["x"])) ** 2),
    "swiglu_ffn": lambda t, c: lin(t, "linear2",
                                   F.silu(lin(t, "linear1", t["x"])) * lin(t, "linear3", t["x"])),
    "softcap": lambda t, c: c["cap"] * torch.tanh(t["x"] / c["cap"]),
    "qk_norm_attention": mha,
}


def tensor(j):
    return torch.tensor(j["data"], dtype=torch.float64).reshape(j["shape"]).requires_grad_(True)


def flat(x):
    return {"shape": list(x.shape), "data": x.detach().reshape(-1).tolist()}


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        sys.exit(2)
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    out = {}
    for case in cases:
        t = {k: tensor(v) for k, v in case["tensors"].items()}
        y = OPS[case["op"]](t, case["config"])
        r = torch.tensor(case["R"]["data"], dtype=torch.float64).reshape(y.shape)
        names = list(t)
        grads = torch.autograd.grad((y * r).sum(), [t[k] for k in names])
        res = {"out": flat(y)}
        for k, g in zip(names, grads):
            res["grad." + k] = flat(g)
        out[case["name"]] = res
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
