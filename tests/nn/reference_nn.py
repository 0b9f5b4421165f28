"""PyTorch reference for tests/nn/test_torch_parity.cpp.

Usage: /usr/bin/python3 reference_nn.py DIR

For every DIR/<case>.in.safetensors (written by qkv) this script reads the case's config from
the file's __metadata__ ("config", a JSON string), the qkv parameters ("param.<qkv name>"), the
inputs ("input.<name>") and the upstream gradient "R". It builds the matching torch module,
copies the weights in, runs forward, backpropagates L = sum(out * R), and writes
DIR/<case>.out.safetensors with "out", "grad.input.<name>" and "grad.param.<qkv name>"
(gradients mapped back to qkv names).

A "gpt" case with "autocast": true runs its forward under torch.autocast("cpu",
dtype=torch.bfloat16), PyTorch's mixed precision, and its backward outside it, as training does.

Masks are built here by torch, never taken from qkv: from the sequence lengths in the config
("key_lengths", "src_lengths", "tgt_lengths") as key_padding_mask (True = padding), and, when
"causal" is set, nn.Transformer.generate_square_subsequent_mask. Config options: "activation"
(relu | gelu), "layer_norm_eps", "bias" (false: attention projections without biases, as qkv's
model.bias; torch 1.13's layers have no bias option, so their attention modules are replaced by
nn.MultiheadAttention(bias=False)), and for "transformer" also "share_embeddings" and
"tie_output" (one nn.Embedding for both sides; an nn.Linear without bias whose weight is the
target embedding's).

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


def load_into(module, params, prefix="", aliases=None):
    """Copies qkv parameters into a torch module; torch's strict load checks completeness.
    aliases: {torch name: torch name it shares its tensor with} (tied weights appear under
    every name in torch's state_dict, once in qkv's)."""
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
    for alias, target in (aliases or {}).items():
        assert alias not in state, alias + " is not shared in qkv"
        state[alias] = state[target]
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


# ---------------------------------------------------------------- masks, built by torch

def padding(lengths, m):
    """(B, m) key_padding_mask, True on the padding after each sequence's length."""
    return torch.arange(m)[None, :] >= torch.tensor(lengths)[:, None]


def causal(n):
    """(n, n) float mask, -inf above the diagonal: torch's own causal mask."""
    return tnn.Transformer.generate_square_subsequent_mask(n)


def attention(c):
    """An nn.MultiheadAttention as the case configures it (projection biases or not)."""
    return tnn.MultiheadAttention(c["d_model"], c["heads"], dropout=0.0,
                                  bias=c.get("bias", True), batch_first=True)


def without_attention_bias(layer, c):
    """qkv's bias = false drops the attention projections' biases only (the FFN and LayerNorm
    keep theirs); torch 1.13's layers have no such option, so swap their attention modules."""
    if not c.get("bias", True):
        for name in ("self_attn", "multihead_attn"):
            if hasattr(layer, name):
                setattr(layer, name, attention(c))
    return layer


def layer_options(c):
    return dict(dim_feedforward=c["d_ff"], dropout=0.0, activation=c.get("activation", "relu"),
                layer_norm_eps=c.get("layer_norm_eps", 1e-5), batch_first=True,
                norm_first=c["norm_first"])


class AttnOnlyLayer(tnn.Module):
    """qkv's attention-only block (model.attn_only; names match): the self-attention sublayer
    of nn.TransformerEncoderLayer (and, with cross, the cross-attention sublayer of
    nn.TransformerDecoderLayer), without the feed-forward sublayer, its norm and dropout."""

    def __init__(self, c, cross=False):
        super().__init__()
        d, eps = c["d_model"], c.get("layer_norm_eps", 1e-5)
        self.norm_first = c["norm_first"]
        self.self_attn = attention(c)
        self.norm1 = tnn.LayerNorm(d, eps=eps)
        if cross:
            self.multihead_attn = attention(c)
            self.norm2 = tnn.LayerNorm(d, eps=eps)

    def sublayer(self, x, norm, f):
        return x + f(norm(x)) if self.norm_first else norm(x + f(x))

    def forward(self, x, memory=None, attn_mask=None, key_padding_mask=None,
                memory_key_padding_mask=None):
        def sa(h):
            return self.self_attn(h, h, h, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                  need_weights=False)[0]

        def ca(h):
            return self.multihead_attn(h, memory, memory, need_weights=False,
                                       key_padding_mask=memory_key_padding_mask)[0]

        x = self.sublayer(x, self.norm1, sa)
        return x if memory is None else self.sublayer(x, self.norm2, ca)


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
        # share_embeddings: one table; tie_output: the output Linear's weight is the target
        # table (torch then sums the gradients of every use into the one tensor).
        self.tgt_embed = (self.src_embed if c.get("share_embeddings")
                          else tnn.Embedding(c["tgt_vocab"], d))
        self.transformer = tnn.Transformer(
            d_model=d, nhead=c["heads"], num_encoder_layers=c["encoder_layers"],
            num_decoder_layers=c["decoder_layers"], **layer_options(c))
        for stack in (self.transformer.encoder, self.transformer.decoder):
            for layer in stack.layers:
                without_attention_bias(layer, c)
        if c.get("tie_output"):
            self.output = tnn.Linear(d, c["tgt_vocab"], bias=False)
            self.output.weight = self.tgt_embed.weight
        else:
            self.output = tnn.Linear(d, c["tgt_vocab"])
        self.np_dtype = dtype

    def aliases(self):
        """torch state_dict names that hold another name's tensor (see load_into)."""
        out = {}
        if self.tgt_embed is self.src_embed:
            out["tgt_embed.weight"] = "src_embed.weight"
        if self.output.weight is self.tgt_embed.weight:
            out["output.weight"] = ("src_embed.weight" if self.tgt_embed is self.src_embed
                                    else "tgt_embed.weight")
        return out

    def forward(self, src, tgt, src_lengths, tgt_lengths):
        S, T = src.shape[1], tgt.shape[1]
        pe = sinusoidal(max(S, T), self.d, self.np_dtype)
        x = self.src_embed(src) * math.sqrt(self.d) + pe[:S]
        y = self.tgt_embed(tgt) * math.sqrt(self.d) + pe[:T]
        h = self.transformer(x, y, tgt_mask=causal(T),
                             src_key_padding_mask=padding(src_lengths, S),
                             tgt_key_padding_mask=padding(tgt_lengths, T),
                             memory_key_padding_mask=padding(src_lengths, S))
        return self.output(h)


class GPT(tnn.Module):
    """A decoder-only LM laid out as qkv's DecoderLM (names match): token embedding + learned
    positions, nn.TransformerEncoderLayer(norm_first=True, activation="gelu") blocks under the
    causal mask torch builds, a final LayerNorm and the head tied to the embedding."""

    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.embed = tnn.Embedding(c["vocab"], d)
        self.pos = tnn.Module()
        self.pos.weight = tnn.Parameter(torch.zeros(c["max_len"], d))
        self.blocks = tnn.Module()
        self.attn_only = c.get("attn_only", False)
        self.blocks.layers = tnn.ModuleList([
            AttnOnlyLayer(dict(c, norm_first=True)) if self.attn_only else
            without_attention_bias(tnn.TransformerEncoderLayer(
                d, c["heads"], c["d_ff"], dropout=0.0, activation="gelu", batch_first=True,
                norm_first=True), c)
            for _ in range(c["layers"])])
        self.blocks.norm = tnn.LayerNorm(d)

    def forward(self, ids):
        T = ids.shape[1]
        h = self.embed(ids) + self.pos.weight[:T]
        for layer in self.blocks.layers:  # torch's own mask: -inf above the diagonal
            h = layer(h, attn_mask=causal(T)) if self.attn_only else layer(h, src_mask=causal(T))
        return F.linear(self.blocks.norm(h), self.embed.weight)


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
    for v in inputs.values():
        if v.is_floating_point():
            v.requires_grad_(True)
    kind = c["kind"]
    # Modules are built in training mode (torch's default), with dropout 0: training mode keeps
    # torch off its inference fast path, which would not record gradients anyway.
    module = None
    prefix_params = params

    if kind == "mha":
        module = attention(c)
        load_into(module, params)
        q = inputs["query"]
        kv = inputs.get("memory", q)
        kw = {"need_weights": False, "key_padding_mask": padding(c["key_lengths"], kv.shape[1])}
        if c.get("causal"):  # self-attention only: n == m
            kw["attn_mask"] = causal(q.shape[1])
        out, _ = module(q, kv, kv, **kw)
    elif kind == "encoder_layer" and c.get("attn_only"):
        module = AttnOnlyLayer(c)
        load_into(module, params)
        x = inputs["x"]
        out = module(x, key_padding_mask=padding(c["src_lengths"], x.shape[1]))
    elif kind == "encoder_layer":
        module = without_attention_bias(
            tnn.TransformerEncoderLayer(c["d_model"], c["heads"], **layer_options(c)), c)
        load_into(module, params)
        x = inputs["x"]
        out = module(x, src_key_padding_mask=padding(c["src_lengths"], x.shape[1]))
    elif kind == "decoder_layer" and c.get("attn_only"):
        module = AttnOnlyLayer(c, cross=True)
        load_into(module, params)
        x, mem = inputs["x"], inputs["memory"]
        out = module(x, mem, attn_mask=causal(x.shape[1]),
                     key_padding_mask=padding(c["tgt_lengths"], x.shape[1]),
                     memory_key_padding_mask=padding(c["src_lengths"], mem.shape[1]))
    elif kind == "decoder_layer":
        module = without_attention_bias(
            tnn.TransformerDecoderLayer(c["d_model"], c["heads"], **layer_options(c)), c)
        load_into(module, params)
        x, mem = inputs["x"], inputs["memory"]
        out = module(x, mem, tgt_mask=causal(x.shape[1]),
                     tgt_key_padding_mask=padding(c["tgt_lengths"], x.shape[1]),
                     memory_key_padding_mask=padding(c["src_lengths"], mem.shape[1]))
    elif kind == "transformer":
        module = Wrapped(c, np_dt)
        prefix_params = qkv_to_wrapped(params)
        load_into(module, prefix_params, aliases=module.aliases())
        out = module(inputs["src"], inputs["tgt"], c["src_lengths"], c["tgt_lengths"])
    elif kind == "gpt":
        module = GPT(c)
        load_into(module, params)
        if c.get("autocast"):  # PyTorch's mixed precision: bf16 products under autocast
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = module(inputs["ids"])
            out = out.float()
        else:
            out = module(inputs["ids"])
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
