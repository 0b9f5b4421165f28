"""What the PyTorch references of qkv's inspection commands share (reference_attribute.py,
reference_attribution_patching.py, reference_path_patching.py, beside this file): reading a case
that qkv wrote from a trained run, building reference_nn.py's GPT on its weights in float64,
splitting a projection into heads, and writing the case's answers.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nn"))
from reference_nn import GPT, load_into, read_safetensors, write_safetensors  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402


def read_case(path):
    """(tensors, config, params) of DIR/<case>.in.safetensors: its tensors, its config (the
    __metadata__ "config", JSON) and qkv's parameters ("param.<qkv name>") in float64 by qkv
    name. torch's default dtype is float64 from here on."""
    t, meta = read_safetensors(path)
    c = json.loads(meta["config"])
    torch.set_default_dtype(torch.float64)
    params = {k[len("param."):]: v.astype(np.float64) for k, v in t.items()
              if k.startswith("param.")}
    return t, c, params


def gpt_of(c, params):
    """reference_nn.py's GPT of config c holding qkv's parameters."""
    m = GPT(c)
    load_into(m, params)
    return m


def heads_of(t, H):
    """(1, T, d) -> (1, H, T, d / H): a projection split into its heads."""
    _, T, d = t.shape
    return t.reshape(1, T, H, d // H).transpose(1, 2)


def write_case(path, out):
    """out (name -> array) written to DIR/<case>.out.safetensors for the case at path."""
    write_safetensors(path.replace(".in.safetensors", ".out.safetensors"), out,
                      {"torch": torch.__version__})
