"""PyTorch reference for tests/apps/test_attribute.cpp: token attributions at the embeddings.

Usage: /usr/bin/python3 reference_attribute.py DIR

For every DIR/<case>.in.safetensors (written by qkv from a trained run): the config (the file's
__metadata__ "config", JSON: "kind" "gpt" or "transformer" with reference_nn.py's keys, and
"rows" (the logit position each output row reads), "targets", "contrast" (-1: none), "steps"),
qkv's parameters ("param.<qkv name>") and the ids ("input.ids" for a GPT; "input.src" and
"input.tgt", the decoder's input, for an encoder-decoder). Builds reference_nn.py's module in
float64, runs it from the token embeddings on (a GPT's embed(ids); an encoder-decoder's
src_embed(src) * sqrt(d) and tgt_embed(tgt) * sqrt(d), positions added after), and for each row
takes f = logit(target) - logit(contrast) at its position and autograd's gradient at the
embeddings. Writes DIR/<case>.out.safetensors with (rows, columns) float64 matrices, the columns
being the embeddings' positions in order (source, then decoder input):
  "saliency"              |df/de_i|_2
  "input_x_gradient"      e_i . df/de_i
  "integrated_gradients"  e_i . mean_k df/de(a_k e), a_k = (k + 1/2) / steps (zero baseline)
With "pad" in the config ([source pad id, target pad id], an encoder-decoder), also
  "integrated_gradients_pad"  (e_i - b_i) . mean_k df/de(b + a_k (e - b)), b every position's
                              embedding of the side's pad id (times sqrt(d), as e)
"""
import math

# reference_inspect (beside this file) puts tests/nn, reference_nn.py's folder, on the path
from reference_inspect import gpt_of, read_case, write_case
from reference_nn import Wrapped, causal, load_into, qkv_to_wrapped, run_all, sinusoidal

import numpy as np
import torch
import torch.nn.functional as F


def gpt_logits(m, embeds):
    (e,) = embeds
    T = e.shape[1]
    h = e + m.pos.weight[:T]
    for layer in m.blocks.layers:
        h = layer(h, attn_mask=causal(T)) if m.attn_only else layer(h, src_mask=causal(T))
    return F.linear(m.blocks.norm(h), m.embed.weight)


def transformer_logits(m, embeds):
    xs, ys = embeds
    S, T = xs.shape[1], ys.shape[1]
    pe = sinusoidal(max(S, T), m.d, np.float64)
    h = m.transformer(xs + pe[:S], ys + pe[:T], tgt_mask=causal(T))
    return m.output(h)


def build(c, params, t):
    """The module, its logits from embeddings, and the embeddings (each (1, n, d))."""
    if c["kind"] == "gpt":
        m = gpt_of(c, params)
        return m, gpt_logits, [m.embed(torch.from_numpy(t["input.ids"]))]
    m = Wrapped(c, np.float64)
    load_into(m, qkv_to_wrapped(params), aliases=m.aliases())
    scale = math.sqrt(c["d_model"])
    return m, transformer_logits, [m.src_embed(torch.from_numpy(t["input.src"])) * scale,
                                   m.tgt_embed(torch.from_numpy(t["input.tgt"])) * scale]


def row_value(logits, c, r):
    """f of row r for each copy in the batch: (B,)."""
    v = logits[:, c["rows"][r], c["targets"][r]]
    if c["contrast"] >= 0:
        v = v - logits[:, c["rows"][r], c["contrast"]]
    return v


def gradients(logits_of, m, embeds, c, r, alphas, base=None):
    """Sum over the alphas of df_r/de at b + alpha * (e - b) (b: base, or 0), each (n, d)."""
    base = base or [torch.zeros_like(e) for e in embeds]
    xs = [torch.cat([b + a * (e - b) for a in alphas], 0).detach().requires_grad_(True)
          for e, b in zip(embeds, base)]
    f = row_value(logits_of(m, xs), c, r).sum()
    return [g.sum(0) for g in torch.autograd.grad(f, xs)]


def run_case(path):
    t, c, params = read_case(path)
    m, logits_of, embeds = build(c, params, t)
    # training mode (torch's default; dropout is 0): it keeps torch off its inference fast path
    embeds = [e.detach()[0:1] for e in embeds]
    steps = c["steps"]
    alphas = [(k + 0.5) / steps for k in range(steps)]
    out = {"saliency": [], "input_x_gradient": [], "integrated_gradients": []}
    e = [x[0] for x in embeds]
    if "pad" in c:  # each side's pad embedding at every position, as build() embeds tokens
        scale = math.sqrt(c["d_model"])
        pads = [torch.full_like(torch.from_numpy(t["input." + side]), pad)
                for side, pad in zip(("src", "tgt"), c["pad"])]
        base = [(m.src_embed(pads[0]) * scale).detach(), (m.tgt_embed(pads[1]) * scale).detach()]
        out["integrated_gradients_pad"] = []
    for r in range(len(c["rows"])):
        if "pad" in c:
            ig = gradients(logits_of, m, embeds, c, r, alphas, base)
            out["integrated_gradients_pad"].append(
                torch.cat([((a - b[0]) * x / steps).sum(-1) for a, b, x in zip(e, base, ig)]))
        g = gradients(logits_of, m, embeds, c, r, [1.0])
        ig = gradients(logits_of, m, embeds, c, r, alphas)
        out["saliency"].append(torch.cat([x.norm(dim=-1) for x in g]))
        out["input_x_gradient"].append(torch.cat([(a * x).sum(-1) for a, x in zip(e, g)]))
        out["integrated_gradients"].append(
            torch.cat([(a * x / steps).sum(-1) for a, x in zip(e, ig)]))
    res = {k: torch.stack(v).detach().numpy() for k, v in out.items()}
    write_case(path, res)


def main():
    run_all(run_case, __doc__, "reference_attribute.py")


if __name__ == "__main__":
    main()
