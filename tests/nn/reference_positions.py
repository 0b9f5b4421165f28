"""PyTorch reference for tests/nn/test_positions_reference.cpp.

Usage: /usr/bin/python3 reference_positions.py DIR

For every DIR/<case>.in.safetensors: inputs q, k, v (B, h, n, d) float64, the mask (bool, True =
may attend), the relative bias table (h, 2K + 1) when the case is "relative", and the upstream
gradient R. Computes attention with the position scheme written out directly from its
definition, backpropagates sum(out * R) and writes DIR/<case>.out.safetensors with "out" and
"grad.<input>". The schemes: "relative", a learned scalar per head for each relative offset
j - i clipped to [-K, K] (the clipped offsets of Shaw et al. 2018, with a scalar per offset
where Shaw et al. learn vectors; not T5's bias, which buckets offsets logarithmically), and
"rope", the rotary embedding of Su et al. 2021.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_nn import read_safetensors, run_all, write_safetensors  # noqa: E402

import torch  # noqa: E402


def rope(x, offset):
    # pair (2i, 2i+1) of the row at position p turns by p * 10000^(-2i/d)
    n, d = x.shape[-2], x.shape[-1]
    pos = torch.arange(offset, offset + n, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    a = pos * freq
    pairs = x.reshape(*x.shape[:-1], d // 2, 2)
    xe, xo = pairs[..., 0], pairs[..., 1]
    ye = xe * torch.cos(a) - xo * torch.sin(a)
    yo = xe * torch.sin(a) + xo * torch.cos(a)
    return torch.stack([ye, yo], -1).reshape(x.shape)


def run_case(path):
    t, meta = read_safetensors(path)
    c = json.loads(meta["config"])
    off = c["q_offset"]
    x = {k: torch.tensor(t[k], requires_grad=True) for k in ("q", "k", "v")}
    q, k, v = x["q"], x["k"], x["v"]
    n, m, d = q.shape[-2], k.shape[-2], q.shape[-1]
    bias = 0
    if c["kind"] == "rope":
        q, k = rope(q, off), rope(k, 0)
    else:
        x["table"] = torch.tensor(t["table"], requires_grad=True)
        K = c["clip"]
        i = torch.arange(n)[:, None] + off
        j = torch.arange(m)[None, :]
        bias = x["table"][:, (j - i).clamp(-K, K) + K]  # (h, n, m): clipped offsets, no buckets
    scores = q @ k.transpose(-2, -1) / math.sqrt(d) + bias
    scores = scores.masked_fill(~torch.tensor(t["mask"]), float("-inf"))
    out = torch.softmax(scores, -1) @ v
    (out * torch.tensor(t["R"])).sum().backward()
    res = {"out": out.detach().numpy()}
    for name, var in x.items():
        res["grad." + name] = var.grad.numpy()
    write_safetensors(path.replace(".in.safetensors", ".out.safetensors"), res)


def main():
    run_all(run_case, __doc__, "reference_positions.py")


if __name__ == "__main__":
    main()
