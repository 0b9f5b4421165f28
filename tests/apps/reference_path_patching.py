"""PyTorch reference for tests/apps/test_path_patching.cpp: path patching's values on a GPT's
weights.

Usage: /usr/bin/python3 reference_path_patching.py DIR

For every DIR/<case>.in.safetensors (written by qkv from a trained run): the config (the file's
__metadata__ "config", JSON: reference_nn.py's GPT keys, "a" and "b", the clean and the corrupted
answer, "sender_layer" and "sender_head"), qkv's parameters ("param.<qkv name>") and the ids
("input.clean", "input.corrupt", each (1, n)). Builds reference_nn.py's GPT in float64 and runs
it with each block's self-attention written out. The sender's delta is its head's slice of
(z_clean - z_corrupt) times its slice of W_O; each direct path is a corrupted run in which one
receiver alone reads (its stream + delta) through its own norm: a later head's q, k or v, an
MLP, or the final norm and the unembedding. Writes DIR/<case>.out.safetensors with float64:
  "paths"  (receivers,)  each path's restored fraction, in qkv's order: by stream point (each
                         block's resid_pre: every head's q, k, v; its resid_mid: the MLP), then
                         the logits
  "diff"   (2,)          d_clean, d_corrupt
"""
import math

# reference_inspect (beside this file) puts tests/nn, reference_nn.py's folder, on the path
from reference_inspect import gpt_of, heads_of, read_case, write_case
from reference_nn import causal, run_all

import numpy as np
import torch
import torch.nn.functional as F


def run(m, c, ids, delta=None, recv=None):
    """(d, the z of every layer). recv: (layer, head, "q"/"k"/"v") or ("mlp", layer) or
    ("logits",): that receiver alone reads its stream plus delta."""
    H = c["heads"]
    ids = torch.from_numpy(ids)
    T = ids.shape[1]
    h = m.embed(ids) + m.pos.weight[:T]
    zs = []
    for l, layer in enumerate(m.blocks.layers):  # pre-LN: x + sa(norm1(x)), x + ff(norm2(x))
        sa = layer.self_attn
        d = h.shape[-1]
        q, k, v = [heads_of(t, H) for t in
                   F.linear(layer.norm1(h), sa.in_proj_weight, sa.in_proj_bias).split(d, -1)]
        if recv is not None and recv[0] == l:
            alt = [heads_of(t, H) for t in F.linear(layer.norm1(h + delta), sa.in_proj_weight,
                                                    sa.in_proj_bias).split(d, -1)]
            which = "qkv".index(recv[2])
            parts = [q, k, v]
            t = parts[which].clone()
            t[:, recv[1]] = alt[which][:, recv[1]]
            parts[which] = t
            q, k, v = parts
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // H) + causal(T), -1)
        z = p @ v
        zs.append(z)
        h = h + F.linear(z.transpose(1, 2).reshape(1, T, d), sa.out_proj.weight, sa.out_proj.bias)
        if not m.attn_only:
            read = h + delta if recv == ("mlp", l) else h
            h = h + layer._ff_block(layer.norm2(read))
    if recv == ("logits",):
        h = h + delta
    logits = F.linear(m.blocks.norm(h), m.embed.weight)
    return (logits[0, -1, c["a"]] - logits[0, -1, c["b"]]).item(), zs


def run_case(path):
    t, c, params = read_case(path)
    m = gpt_of(c, params)
    with torch.no_grad():
        d_clean, z_clean = run(m, c, t["input.clean"])
        d_corrupt, z_corrupt = run(m, c, t["input.corrupt"])
        Ls, hs = c["sender_layer"], c["sender_head"]
        dh = c["d_model"] // c["heads"]
        W = m.blocks.layers[Ls].self_attn.out_proj.weight[:, hs * dh:(hs + 1) * dh]  # (d, dh)
        delta = (z_clean[Ls] - z_corrupt[Ls])[:, hs] @ W.T  # (1, T, d)
        receivers = [] if m.attn_only else [("mlp", Ls)]
        for l in range(Ls + 1, c["layers"]):
            receivers += [(l, h, i) for h in range(c["heads"]) for i in "qkv"]
            if not m.attn_only:
                receivers.append(("mlp", l))
        receivers.append(("logits",))
        scale = d_clean - d_corrupt
        paths = [(run(m, c, t["input.corrupt"], delta, r)[0] - d_corrupt) / scale
                 for r in receivers]
    write_case(path, {"paths": np.array(paths), "diff": np.array([d_clean, d_corrupt])})


def main():
    run_all(run_case, __doc__, "reference_path_patching.py")


if __name__ == "__main__":
    main()
