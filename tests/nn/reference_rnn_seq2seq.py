"""PyTorch reference for tests/nn/test_rnn_seq2seq_reference.cpp: the recurrent
encoder-decoders of nn/rnn_seq2seq.hpp (Bahdanau et al. 2015 with additive attention, Cho et al.
2014 with one fixed context) written out from the papers' equations on torch modules.

Usage: /usr/bin/python3 reference_rnn_seq2seq.py DIR

For every DIR/<case>.in.safetensors (written by qkv): the config (metadata "config", JSON: d,
encoder_layers, cross_attention, scale_embedding, bos, steps), qkv's parameters "param.<name>",
the batch "src" (B, S), "src_valid" (B, S) bool, "tgt_in" (B, T) and upstream gradients "R"
(B, T, V) for the logits. The encoder is torch.nn.GRU (bidirectional, packed sequences), the
decoder torch.nn.GRUCell, the alignment model, the maxout and the output layer plain torch ops.
Writes DIR/<case>.out.safetensors: "logits" (B, T, V) teacher-forced, "pattern" (B, T, S) (with
attention), "greedy" (B, steps) the argmax tokens fed back from <bos>, "greedy_logits"
(B, steps, V), and "grad.param.<name>" of L = sum(logits R).
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_nn import read_safetensors, run_all, write_safetensors  # noqa: E402

import torch  # noqa: E402
import torch.nn as tnn  # noqa: E402


class Model:
    def __init__(self, c, p):
        self.c, self.d = c, c["d"]
        self.p = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
        half = self.d // 2
        self.enc = tnn.GRU(self.d, half, c["encoder_layers"], batch_first=True,
                           bidirectional=True)
        pre = "encoder.rnn."
        self.enc.load_state_dict({k[len(pre):]: torch.tensor(v) for k, v in p.items()
                                  if k.startswith(pre)})
        self.cell = tnn.GRUCell(2 * self.d, self.d)
        pre = "decoder.rnn."
        self.cell.load_state_dict({k[len(pre):-3]: torch.tensor(v) for k, v in p.items()
                                   if k.startswith(pre)})

    def embed(self, ids, name):
        w = self.p.get(name, self.p["src_embed.weight"])  # share_embeddings: one table
        return w[ids] * (math.sqrt(self.d) if self.c["scale_embedding"] else 1.0)

    def encode(self, src, valid):
        lengths = valid.sum(1)
        packed = tnn.utils.rnn.pack_padded_sequence(self.embed(src, "src_embed.weight"), lengths,
                                                    batch_first=True, enforce_sorted=False)
        out, _ = self.enc(packed)
        h, _ = tnn.utils.rnn.pad_packed_sequence(out, batch_first=True,
                                                 total_length=src.shape[1])
        return h, lengths

    def start(self, h, lengths):
        p, half = self.p, self.d // 2
        back = h[:, 0, half:]  # h<-_1
        if self.c["cross_attention"]:
            return torch.tanh(back @ p["decoder.W_s.weight"].T), None
        fwd = h[torch.arange(h.shape[0]), lengths - 1, :half]  # h->_S
        ctx = torch.cat([fwd, back], 1)
        return torch.tanh(ctx @ p["decoder.W_s.weight"].T), ctx

    def step(self, s, y, h, keys, valid, ctx):
        """s_{i-1} (B, d), y = E y_{i-1} (B, d) -> s_i, c_i, a_i."""
        p, a = self.p, None
        if self.c["cross_attention"]:
            q = s @ p["decoder.attention.W_a.weight"].T
            e = torch.tanh(q[:, None, :] + keys) @ p["decoder.attention.v_a"][0]  # (B, S)
            a = torch.softmax(e.masked_fill(~valid, float("-inf")), 1)
            ctx = (a[:, :, None] * h).sum(1)
        s = self.cell(torch.cat([y, ctx], 1), s)
        t = (s @ p["decoder.U_o.weight"].T + p["decoder.U_o.bias"] +
             y @ p["decoder.V_o.weight"].T + ctx @ p["decoder.C_o.weight"].T)
        t = torch.maximum(t[:, 0::2], t[:, 1::2])  # maxout over adjacent pairs
        return s, t @ p["output.weight"].T + p["output.bias"], a

    def run(self, src, valid, tgt_in):
        h, lengths = self.encode(src, valid)
        s, ctx = self.start(h, lengths)
        keys = h @ self.p["decoder.attention.U_a.weight"].T if self.c["cross_attention"] else None
        y = self.embed(tgt_in, "tgt_embed.weight")
        logits, pattern = [], []
        for i in range(tgt_in.shape[1]):
            s, out, a = self.step(s, y[:, i], h, keys, valid, ctx)
            logits.append(out)
            pattern.append(a)
        return torch.stack(logits, 1), pattern, (h, lengths, keys, ctx)


def run_case(path):
    t, meta = read_safetensors(path)
    c = json.loads(meta["config"])
    torch.set_default_dtype(torch.float32)
    params = {k[len("param."):]: v for k, v in t.items() if k.startswith("param.")}
    m = Model(c, params)
    src, valid, tgt_in = (torch.tensor(t[k]) for k in ("src", "src_valid", "tgt_in"))
    logits, pattern, (h, lengths, keys, ctx) = m.run(src, valid, tgt_in)
    (logits * torch.tensor(t["R"])).sum().backward()
    res = {"logits": logits.detach().numpy()}
    if c["cross_attention"]:
        res["pattern"] = torch.stack(pattern, 1).detach().numpy()
    grads = dict(m.p)
    grads.update({"encoder.rnn." + k: v for k, v in m.enc.named_parameters()})
    grads.update({"decoder.rnn." + k + "_l0": v for k, v in m.cell.named_parameters()})
    for name in params:
        res["grad.param." + name] = grads[name].grad.numpy()
    with torch.no_grad():  # greedy: each argmax fed back, from <bos>, for `steps` steps
        s, ctx = m.start(h, lengths)
        tok = torch.full((src.shape[0],), c["bos"], dtype=torch.int64)
        toks, outs = [], []
        for _ in range(c["steps"]):
            s, out, _ = m.step(s, m.embed(tok, "tgt_embed.weight"), h, keys, valid, ctx)
            tok = out.argmax(1)
            toks.append(tok)
            outs.append(out)
    res["greedy"] = torch.stack(toks, 1).numpy()
    res["greedy_logits"] = torch.stack(outs, 1).numpy()
    write_safetensors(path.replace(".in.safetensors", ".out.safetensors"), res)


def main():
    run_all(run_case, __doc__, "reference_rnn_seq2seq.py")


if __name__ == "__main__":
    main()
