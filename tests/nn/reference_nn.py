"""PyTorch reference for tests/nn/test_torch_parity.cpp.

Usage: /usr/bin/python3 reference_nn.py DIR

For every DIR/<case>.in.safetensors (written by qkv) this script reads the case's config from
the file's __metadata__ ("config", a JSON string), the qkv parameters ("param.<qkv name>"), the
inputs ("input.<name>"), the masks in qkv's convention ("mask.<name>", bool, True = may attend)
and the upstream gradient "R". It builds the matching torch module, copies the weights in,
runs forward, backpropagates L = sum(out * R), and writes DIR/<case>.out.safetensors with
"out", "grad.input.<name>" and "grad.param.<qkv name>" (gradients mapped back to qkv names).

Only numpy and torch are needed: safetensors files are read and written by the small functions
below, which are also the reader documented in docs/nn.md.
"""
import glob
import json
import math
import os
import re
import struct
import sys

try:
    import numpy as np
    import torch
    import torch.nn as tnn
    import torch.nn.functional as F
except Exception as e:  # the test must fail loudly, not skip
    sys.stderr.write(
        "reference_nn.py: %s cannot import torch/numpy (%s); install python3-torch and "
        "python3-numpy (make install)\n" % (sys.executable, e))
    sys.exit(2)

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "BOOL": np.bool_}
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


def read_safetensors(path):
    """Returns ({name: numpy array}, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=DTYPES[h["dtype"]]).reshape(h["shape"]).copy()
    return out, meta


def write_safetensors(path, tensors, meta=None):
    header, chunks, off = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name, a in tensors.items():
        a = np.array(a, order="C", copy=True)  # ascontiguousarray would turn 0-d into 1-d
        b = a.tobytes()
        header[name] = {"dtype": NAMES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))


# ---------------------------------------------------------------- weight mapping

ATTN = re.compile(r"^(?:(.*)\.)?w_([qkvo])\.(weight|bias)$")


def torch_name(qkv_name):
    """qkv name -> (torch name, row slice index in a packed in_proj or None)."""
    n = qkv_name.replace(".ffn.", ".").replace("cross_attn", "multihead_attn")
    if n.startswith("ffn."):
        n = n[4:]
    m = ATTN.match(n)
    if not m:
        return n, None
    prefix = m.group(1) + "." if m.group(1) else ""
    if m.group(2) == "o":
        return prefix + "out_proj." + m.group(3), None
    return prefix + "in_proj_" + m.group(3), "qkv".index(m.group(2))


def load_into(module, params, prefix=""):
    """Copies qkv parameters into a torch module; torch's strict load checks completeness."""
    state = {}
    packed = {}
    for qname, a in params.items():
        tname, part = torch_name(qname)
        tname = prefix + tname
        if part is None:
            state[tname] = torch.from_numpy(a)
        else:
            packed.setdefault(tname, [None, None, None])[part] = a
    for tname, parts in packed.items():
        assert all(p is not None for p in parts), "incomplete projections for " + tname
        state[tname] = torch.from_numpy(np.concatenate(parts, 0))
    module.load_state_dict(state, strict=True)


def grads_back(module, params, prefix=""):
    """Gradients of the torch parameters, under qkv names (packed in_proj split in three)."""
    named = dict(module.named_parameters())
    out = {}
    for qname, a in params.items():
        tname, part = torch_name(qname)
        g = named[prefix + tname].grad
        assert g is not None, "no gradient for " + prefix + tname
        g = g.detach().numpy()
        if part is not None:
            rows = a.shape[0]
            g = g[part * rows:(part + 1) * rows]
        out["grad.param." + qname] = g
    return out


# ---------------------------------------------------------------- masks

def blocked(mask):
    """qkv mask (True = may attend) -> torch bool mask (True = may NOT attend)."""
    return torch.from_numpy(~mask)


def sinusoidal(n, d, dtype):
    pe = np.zeros((n, d))
    pos = np.arange(n)[:, None]
    for i in range(0, d, 2):
        angle = pos[:, 0] / 10000.0 ** (i / d)
        pe[:, i] = np.sin(angle)
        if i + 1 < d:
            pe[:, i + 1] = np.cos(angle)
    return torch.from_numpy(pe.astype(dtype))


class Wrapped(tnn.Module):
    """nn.Transformer with embeddings * sqrt(d), sinusoidal positions and an output Linear,
    the layout of qkv's Seq2Seq (parameter names chosen to match after prefixing)."""

    def __init__(self, c, dtype):
        super().__init__()
        d = c["d_model"]
        self.d = d
        self.src_embed = tnn.Embedding(c["src_vocab"], d)
        self.tgt_embed = tnn.Embedding(c["tgt_vocab"], d)
        self.transformer = tnn.Transformer(
            d_model=d, nhead=c["heads"], num_encoder_layers=c["encoder_layers"],
            num_decoder_layers=c["decoder_layers"], dim_feedforward=c["d_ff"], dropout=0.0,
            activation="relu", batch_first=True, norm_first=c["norm_first"])
        self.output = tnn.Linear(d, c["tgt_vocab"])
        self.np_dtype = dtype

    def forward(self, src, tgt, src_valid, tgt_valid):
        S, T = src.shape[1], tgt.shape[1]
        pe = sinusoidal(max(S, T), self.d, self.np_dtype)
        x = self.src_embed(src) * math.sqrt(self.d) + pe[:S]
        y = self.tgt_embed(tgt) * math.sqrt(self.d) + pe[:T]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True = blocked
        h = self.transformer(x, y, tgt_mask=causal,
                             src_key_padding_mask=blocked(src_valid),
                             tgt_key_padding_mask=blocked(tgt_valid),
                             memory_key_padding_mask=blocked(src_valid))
        return self.output(h)


def qkv_to_wrapped(params):
    """Seq2Seq names -> Wrapped names: the stacks live under transformer."""
    out = {}
    for k, v in params.items():
        if k.startswith("encoder.") or k.startswith("decoder."):
            k = "transformer." + k
        out[k] = v
    return out


# ---------------------------------------------------------------- cases

def run_case(path):
    t, meta = read_safetensors(path)
    c = json.loads(meta["config"])
    np_dt = {"float32": np.float32, "float64": np.float64}[c["dtype"]]
    tdt = {"float32": torch.float32, "float64": torch.float64}[c["dtype"]]
    torch.set_default_dtype(tdt)
    params = {k[len("param."):]: v for k, v in t.items() if k.startswith("param.")}
    inputs = {k[len("input."):]: torch.from_numpy(v) for k, v in t.items() if k.startswith("input.")}
    masks = {k[len("mask."):]: v for k, v in t.items() if k.startswith("mask.")}
    for v in inputs.values():
        if v.is_floating_point():
            v.requires_grad_(True)
    kind = c["kind"]
    # Modules are built in training mode (torch's default), with dropout 0: training mode keeps
    # torch off its inference fast path, which would not record gradients anyway.
    module = None
    prefix_params = params

    if kind == "mha":
        module = tnn.MultiheadAttention(c["d_model"], c["heads"], dropout=0.0, bias=True,
                                        batch_first=True)
        load_into(module, params)
        q = inputs["query"]
        kv = inputs.get("memory", q)
        kw = {"need_weights": False}
        if "attn" in masks:  # (n, m), shared by the batch
            kw["attn_mask"] = blocked(masks["attn"])
        if "key_valid" in masks:  # (B, m)
            kw["key_padding_mask"] = blocked(masks["key_valid"])
        out, _ = module(q, kv, kv, **kw)
    elif kind == "encoder_layer":
        module = tnn.TransformerEncoderLayer(c["d_model"], c["heads"], c["d_ff"], dropout=0.0,
                                             activation="relu", batch_first=True,
                                             norm_first=c["norm_first"])
        load_into(module, params)
        out = module(inputs["x"], src_key_padding_mask=blocked(masks["key_valid"]))
    elif kind == "decoder_layer":
        module = tnn.TransformerDecoderLayer(c["d_model"], c["heads"], c["d_ff"], dropout=0.0,
                                             activation="relu", batch_first=True,
                                             norm_first=c["norm_first"])
        load_into(module, params)
        out = module(inputs["x"], inputs["memory"], tgt_mask=blocked(masks["causal"]),
                     tgt_key_padding_mask=blocked(masks["tgt_valid"]),
                     memory_key_padding_mask=blocked(masks["src_valid"]))
    elif kind == "transformer":
        module = Wrapped(c, np_dt)
        prefix_params = qkv_to_wrapped(params)
        load_into(module, prefix_params)
        out = module(inputs["src"], inputs["tgt"], masks["src_valid"], masks["tgt_valid"])
    elif kind == "cross_entropy":
        out = F.cross_entropy(inputs["logits"], inputs["targets"], ignore_index=c["ignore_index"],
                              label_smoothing=c["label_smoothing"])
    else:
        raise ValueError("unknown case kind " + kind)

    R = torch.from_numpy(t["R"])
    (out * R).sum().backward()

    res = {"out": out.detach().numpy()}
    for name, v in inputs.items():
        if v.is_floating_point():
            res["grad.input." + name] = v.grad.detach().numpy()
    if module is not None:
        g = grads_back(module, prefix_params)
        if prefix_params is not params:  # back to the qkv names
            g = {k.replace("grad.param.transformer.", "grad.param."): v for k, v in g.items()}
        res.update(g)
    for k, v in res.items():
        assert v.dtype == np_dt, "%s is %s" % (k, v.dtype)
    write_safetensors(path.replace(".in.safetensors", ".out.safetensors"), res,
                      {"torch": torch.__version__})


def run_all(run_one, usage, script):
    """Runs run_one on every DIR/*.in.safetensors, DIR the one argument; exits 2 on misuse."""
    if len(sys.argv) != 2:
        sys.stderr.write(usage)
        sys.exit(2)
    cases = sorted(glob.glob(os.path.join(sys.argv[1], "*.in.safetensors")))
    if not cases:
        sys.stderr.write("%s: no cases in %s\n" % (script, sys.argv[1]))
        sys.exit(2)
    for p in cases:
        run_one(p)
        print("done", os.path.basename(p))


def main():
    run_all(run_case, __doc__, "reference_nn.py")


if __name__ == "__main__":
    main()
