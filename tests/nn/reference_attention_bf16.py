"""PyTorch reference for tests/nn/test_attention_bf16_reference.cpp.

Usage: /usr/bin/python3 reference_attention_bf16.py DIR

For every DIR/<case>.in.safetensors: q, k, v (B, h, n, d) float32, the mask (bool (n, m) or
broadcastable to (B, h, n, m), True = may attend), the upstream gradient R and the scale in the
metadata. Computes softmax(q k^T scale, masked) v under torch.autocast("cpu", bfloat16), as a
PyTorch user trains in bf16, backpropagates sum(out * R) into the float32 leaves and writes
DIR/<case>.out.safetensors with "out", "grad.q", "grad.k", "grad.v" (float32) and the same in
float32 without autocast ("fp32.out", ...). A row with every key masked gives 0 and no gradient
(softmax alone would give NaN): its scores are unmasked for the softmax and its weights zeroed.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_nn import read_safetensors, run_all, write_safetensors  # noqa: E402

import torch  # noqa: E402


def attention(x, mask, scale):
    q, k, v = x["q"], x["k"], x["v"]
    scores = (q @ k.transpose(-2, -1)) * scale
    mask = mask.expand(scores.shape)
    dead = ~mask.any(-1, keepdim=True)  # rows with nothing to attend to
    p = torch.softmax(scores.masked_fill(~(mask | dead), float("-inf")), -1)
    return p.masked_fill(dead, 0) @ v


def run(t, scale, autocast):
    x = {k: torch.tensor(t[k], requires_grad=True) for k in ("q", "k", "v")}
    mask = torch.tensor(t["mask"])
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = attention(x, mask, scale)
    (out.float() * torch.tensor(t["R"])).sum().backward()
    res = {"out": out.float().detach().numpy()}
    for name, var in x.items():
        res["grad." + name] = var.grad.numpy()
    return res


def run_case(path):
    t, meta = read_safetensors(path)
    scale = json.loads(meta["config"])["scale"]
    res = run(t, scale, True)
    for name, a in run(t, scale, False).items():
        res["fp32." + name] = a
    write_safetensors(path.replace(".in.safetensors", ".out.safetensors"), res)


def main():
    run_all(run_case, __doc__, "reference_attention_bf16.py")


if __name__ == "__main__":
    main()
