"""PyTorch reference for tests/apps/test_attribution_patching.cpp: attribution patching's
estimates on a GPT's weights.

Usage: /usr/bin/python3 reference_attribution_patching.py DIR

For every DIR/<case>.in.safetensors (written by qkv from a trained run): the config (the file's
__metadata__ "config", JSON: reference_nn.py's GPT keys, "a" and "b", the clean and the corrupted
answer), qkv's parameters ("param.<qkv name>") and the ids ("input.clean", "input.corrupt", each
(1, n)). Builds reference_nn.py's GPT in float64 and runs it with each block's self-attention
written out (the in-projection split into heads, the causal softmax, each head's output z
before the out-projection), so that z and the block's input (resid_pre) are tensors autograd
can reach. The metric d = logit(a) - logit(b) at the last position; the gradient is taken on
the corrupted run. Writes DIR/<case>.out.safetensors with float64:
  "heads"     (layers, heads, n)  (z_clean - z_corrupt) . dd/dz at each position, / (d_clean - d_corrupt)
  "residual"  (layers, n)         the same for each block's input
  "diff"      (2,)                d_clean, d_corrupt
"""
import math

# reference_inspect (beside this file) puts tests/nn, reference_nn.py's folder, on the path
from reference_inspect import gpt_of, heads_of, read_case, write_case
from reference_nn import causal, run_all

import numpy as np
import torch
import torch.nn.functional as F


def self_attention(sa, x, H):
    """torch's MultiheadAttention under the causal mask, written out: (output, z (1, H, T, dh))."""
    _, T, d = x.shape
    dh = d // H
    q, k, v = [heads_of(t, H) for t in F.linear(x, sa.in_proj_weight, sa.in_proj_bias).split(d, -1)]
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh) + causal(T), -1)
    z = p @ v
    out = F.linear(z.transpose(1, 2).reshape(1, T, d), sa.out_proj.weight, sa.out_proj.bias)
    return out, z


def run(m, c, ids):
    """d and every z and resid_pre (each kept for autograd)."""
    T = ids.shape[1]
    h = m.embed(torch.from_numpy(ids)) + m.pos.weight[:T]
    acts = {"z": [], "resid": []}
    for layer in m.blocks.layers:  # pre-LN: x + sa(norm1(x)), then x + ff(norm2(x))
        h.retain_grad()
        acts["resid"].append(h)
        out, z = self_attention(layer.self_attn, layer.norm1(h), c["heads"])
        z.retain_grad()
        acts["z"].append(z)
        h = h + out
        if not m.attn_only:
            h = h + layer._ff_block(layer.norm2(h))
    logits = F.linear(m.blocks.norm(h), m.embed.weight)
    return logits[0, -1, c["a"]] - logits[0, -1, c["b"]], acts


def run_case(path):
    t, c, params = read_case(path)
    m = gpt_of(c, params)
    d_clean, clean = run(m, c, t["input.clean"])
    d_corrupt, corrupt = run(m, c, t["input.corrupt"])
    d_corrupt.backward()
    scale = (d_clean - d_corrupt).item()

    def estimate(kind, reduce_over):
        return torch.stack([((x - y) * y.grad).sum(reduce_over)[0] / scale
                            for x, y in zip(clean[kind], corrupt[kind])]).detach().numpy()

    out = {"heads": estimate("z", -1), "residual": estimate("resid", -1),
           "diff": np.array([d_clean.item(), d_corrupt.item()])}
    write_case(path, out)


def main():
    run_all(run_case, __doc__, "reference_attribution_patching.py")


if __name__ == "__main__":
    main()
