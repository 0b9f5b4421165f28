"""PyTorch reference for tests/nn/test_encoder_classifier_reference.cpp.

Usage: /usr/bin/python3 reference_encoder_classifier.py DIR

For every DIR/<case>.in.safetensors (written by qkv): the case's config (the file's
__metadata__ "config", JSON), qkv's parameters ("param.<qkv name>"), the token ids
"input.src" (B, S), the class ids "input.labels" (B) when the case is a loss, and the upstream
gradient "R". Builds qkv's nn::EncoderClassifier from torch.nn: an nn.Embedding times sqrt(d),
sinusoidal positions (or a learned table), nn.TransformerEncoderLayer blocks (post-LN or pre-LN,
with torch's src_key_padding_mask), a final LayerNorm when the config has one, the pooling
("cls": the hidden state at position 0; "mean": the mean over the real positions) and an
nn.Linear classifier. Copies the weights in, runs forward (logits (B, 1, C), or with "loss" the
mean F.cross_entropy of the labels), backpropagates sum(out * R) and writes
DIR/<case>.out.safetensors with "out" and "grad.param.<qkv name>".

The padding mask comes from the config's "src_lengths", built here by torch, never from qkv.
Weight names map as reference_nn.py's (in_proj packing, the ffn. level dropped).
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_nn import (grads_back, layer_options, load_into, padding,  # noqa: E402
                          read_safetensors, run_all, sinusoidal, without_attention_bias,
                          write_safetensors)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as tnn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class EncoderClassifier(tnn.Module):
    """qkv's nn::EncoderClassifier, parameter names matching qkv's (after torch_name)."""

    def __init__(self, c, np_dtype):
        super().__init__()
        d = c["d_model"]
        self.c, self.d, self.np_dtype = c, d, np_dtype
        self.embed = tnn.Embedding(c["src_vocab"], d)
        if c["position"] == "learned":
            self.pos = tnn.Module()
            self.pos.weight = tnn.Parameter(torch.zeros(c["max_len"], d))
        self.blocks = tnn.Module()
        self.blocks.layers = tnn.ModuleList([
            without_attention_bias(tnn.TransformerEncoderLayer(d, c["heads"], **layer_options(c)), c)
            for _ in range(c["layers"])])
        if c["final_norm"]:
            self.blocks.norm = tnn.LayerNorm(d, eps=c.get("layer_norm_eps", 1e-5))
        self.classifier = tnn.Linear(d, c["classes"])

    def forward(self, src):
        S = src.shape[1]
        x = self.embed(src) * math.sqrt(self.d)
        if self.c["position"] == "learned":
            x = x + self.pos.weight[:S]
        else:
            x = x + sinusoidal(S, self.d, self.np_dtype)
        pad = padding(self.c["src_lengths"], S)  # (B, S), True on padding
        for layer in self.blocks.layers:
            x = layer(x, src_key_padding_mask=pad)
        if self.c["final_norm"]:
            x = self.blocks.norm(x)
        if self.c["pool"] == "cls":
            pooled = x[:, 0:1]
        else:
            keep = (~pad).to(x.dtype)[:, :, None]  # (B, S, 1)
            pooled = (x * keep).sum(1, keepdim=True) / keep.sum(1, keepdim=True)
        return self.classifier(pooled)  # (B, 1, C)


def run_case(path):
    t, meta = read_safetensors(path)
    c = json.loads(meta["config"])
    np_dt = {"float32": np.float32, "float64": np.float64}[c["dtype"]]
    torch.set_default_dtype({"float32": torch.float32, "float64": torch.float64}[c["dtype"]])
    params = {k[len("param."):]: v for k, v in t.items() if k.startswith("param.")}
    # Built in training mode (torch's default) with dropout 0: off torch's inference fast path.
    module = EncoderClassifier(c, np_dt)
    load_into(module, params)
    out = module(torch.from_numpy(t["input.src"]))
    if c["loss"]:
        out = F.cross_entropy(out.reshape(-1, c["classes"]), torch.from_numpy(t["input.labels"]))
    (out * torch.from_numpy(t["R"])).sum().backward()
    res = {"out": out.detach().numpy()}
    res.update(grads_back(module, params))
    for k, v in res.items():
        assert v.dtype == np_dt, "%s is %s" % (k, v.dtype)
    write_safetensors(path.replace(".in.safetensors", ".out.safetensors"), res,
                      {"torch": torch.__version__})


def main():
    run_all(run_case, __doc__, "reference_encoder_classifier.py")


if __name__ == "__main__":
    main()
