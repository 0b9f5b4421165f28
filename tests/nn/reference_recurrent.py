"""PyTorch reference for tests/nn/test_recurrent_reference.cpp.

Usage: /usr/bin/python3 reference_recurrent.py DIR

For every DIR/<case>.in.safetensors (written by qkv): the config (metadata "config", JSON),
the qkv module's parameters "param.<name>" (torch's names: qkv's GRU, LSTM and Conv1d use them),
the input "x" (B, n, d), the validity mask "valid" (B, n) bool, the initial states "h0", "c0"
when given, and upstream gradients "R" for the output (and "Rh", "Rc" for the final states).
Builds the torch module, loads the parameters with load_state_dict (strict), runs it, and
backpropagates L = sum(out R) + sum(h_n Rh) + sum(c_n Rc). Writes DIR/<case>.out.safetensors
with "out", "h", "c", "grad.x", "grad.h0", "grad.c0" and "grad.param.<name>".

Kinds:
  gru, lstm   torch.nn.GRU / torch.nn.LSTM(batch_first=True); the lengths (the mask's row sums,
              a prefix mask) go through pack_padded_sequence, the outputs back through
              pad_packed_sequence (zeros at padding), as a padded batch is run in torch.
  conv1d      torch.nn.Conv1d on x with its padded positions zeroed, padding="same", or for a
              causal case F.pad by (k - 1) dilation on the left; the output's padded positions 0.
  convstack   L such layers of width d: h = layer_norm(h + act(conv(h))), padded positions 0.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_nn import read_safetensors, run_all, write_safetensors  # noqa: E402

import torch  # noqa: E402
import torch.nn as tnn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def recurrent(c, t, x, valid, states):
    cls = tnn.GRU if c["kind"] == "gru" else tnn.LSTM
    m = cls(x.shape[2], c["hidden"], c["layers"], batch_first=True,
            bidirectional=c["bidirectional"])
    lengths = valid.sum(1)
    packed = tnn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                enforce_sorted=False)
    init = None
    if "h0" in states:
        init = (states["h0"], states["c0"]) if c["kind"] == "lstm" else states["h0"]
    return m, packed, init


def conv(c, x_t, layer):
    """x_t: (B, C, n) with padded positions zeroed -> (B, C_out, n); layer: an nn.Conv1d."""
    left = (layer.kernel_size[0] - 1) * layer.dilation[0]
    return layer(F.pad(x_t, (left, 0))) if c["causal"] else layer(x_t)


def make_conv(c, cin, cout, dilation):
    return tnn.Conv1d(cin, cout, c["k"], dilation=dilation,
                      padding=0 if c["causal"] else "same", bias=c.get("bias", True))


def run_case(path):
    t, meta = read_safetensors(path)
    c = json.loads(meta["config"])
    torch.set_default_dtype(torch.float32)
    x = torch.tensor(t["x"], requires_grad=True)
    valid = torch.tensor(t["valid"])
    states = {k: torch.tensor(t[k], requires_grad=True) for k in ("h0", "c0") if k in t}
    params = {k[len("param."):]: torch.tensor(v) for k, v in t.items() if k.startswith("param.")}
    keep = valid[:, :, None].to(x.dtype)
    res = {}
    if c["kind"] in ("gru", "lstm"):
        m, packed, init = recurrent(c, t, x, valid, states)
        names = {k: k for k in params}
        m.load_state_dict(params, strict=True)
        out_packed, final = m(packed, init)
        out, _ = tnn.utils.rnn.pad_packed_sequence(out_packed, batch_first=True,
                                                   total_length=x.shape[1])
        h, cell = final if c["kind"] == "lstm" else (final, None)
        loss = (out * torch.tensor(t["R"])).sum() + (h * torch.tensor(t["Rh"])).sum()
        res["h"] = h.detach().numpy()
        if cell is not None:
            loss = loss + (cell * torch.tensor(t["Rc"])).sum()
            res["c"] = cell.detach().numpy()
    else:
        layers = c.get("layers", 1)
        d_in = x.shape[2]
        m = tnn.ModuleDict()
        if c["kind"] == "conv1d":
            m["conv"] = make_conv(c, d_in, c["out"], c["dilation"])
            names = {k: "conv." + k for k in params}
        else:
            for i in range(layers):
                m[str(i)] = make_conv(c, d_in, d_in, c["growth"] ** i)
                m["norm" + str(i)] = tnn.LayerNorm(d_in)
            names = {}
            for k in params:  # layers.L.conv.weight -> L.weight, layers.L.norm.bias -> normL.bias
                _, i, part, name = k.split(".")
                names[k] = (i if part == "conv" else "norm" + i) + "." + name
        m.load_state_dict({names[k]: v for k, v in params.items()}, strict=True)
        h = x * keep
        if c["kind"] == "conv1d":
            out = conv(c, h.transpose(1, 2), m["conv"]).transpose(1, 2) * keep
        else:
            for i in range(layers):
                a = torch.relu(conv(c, h.transpose(1, 2), m[str(i)]).transpose(1, 2) * keep)
                h = m["norm" + str(i)](h + a) * keep
            out = h
        loss = (out * torch.tensor(t["R"])).sum()
    loss.backward()
    res["out"] = out.detach().numpy()
    res["grad.x"] = x.grad.numpy()
    for k, v in states.items():
        res["grad." + k] = v.grad.numpy()
    torch_params = dict(m.named_parameters())
    for qkv_name, torch_name in names.items():
        res["grad.param." + qkv_name] = torch_params[torch_name].grad.numpy()
    write_safetensors(path.replace(".in.safetensors", ".out.safetensors"), res)


def main():
    run_all(run_case, __doc__, "reference_recurrent.py")


if __name__ == "__main__":
    main()
