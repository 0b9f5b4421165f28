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
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nn"))
from reference_nn import GPT, causal, load_into, read_safetensors, run_all, write_safetensors  # noqa: E402,E501

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def self_attention(sa, x, H):
    """torch's MultiheadAttention under the causal mask, written out: (output, z (1, H, T, dh))."""
    _, T, d = x.shape
    dh = d // H
    q, k, v = F.linear(x, sa.in_proj_weight, sa.in_proj_bias).split(d, -1)

    def heads(t):
        return t.reshape(1, T, H, dh).transpose(1, 2)

    p = torch.softmax(heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(dh) + causal(T), -1)
    z = p @ heads(v)
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
    t, meta = read_safetensors(path)
    c = json.loads(meta["config"])
    torch.set_default_dtype(torch.float64)
    params = {k[len("param."):]: v.astype(np.float64) for k, v in t.items()
              if k.startswith("param.")}
    m = GPT(c)
    load_into(m, params)
    d_clean, clean = run(m, c, t["input.clean"])
    d_corrupt, corrupt = run(m, c, t["input.corrupt"])
    d_corrupt.backward()
    scale = (d_clean - d_corrupt).item()

    def estimate(kind, reduce_over):
        return torch.stack([((x - y) * y.grad).sum(reduce_over)[0] / scale
                            for x, y in zip(clean[kind], corrupt[kind])]).detach().numpy()

    out = {"heads": estimate("z", -1), "residual": estimate("resid", -1),
           "diff": np.array([d_clean.item(), d_corrupt.item()])}
    write_safetensors(path.replace(".in.safetensors", ".out.safetensors"), out,
                      {"torch": torch.__version__})


def main():
    run_all(run_case, __doc__, "reference_attribution_patching.py")


if __name__ == "__main__":
    main()
