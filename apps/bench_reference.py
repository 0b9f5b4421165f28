#!/usr/bin/python3
"""The PyTorch side of `qkv bench --compare`: the same models, timed the same way.

Run by Debian's /usr/bin/python3 with python3-torch. Prints one JSON object per model:
{"model", "framework": "torch", "threads", "ms_per_step", "steps", "peak_rss_mb"}.
peak_rss_mb is the process's peak resident memory (VmHWM) above its resident memory just
before the model was built, as qkv's child reports it.

Models (as apps/bench.cpp): nn.Transformer with the sizes of `tiny`, `small` and `annotated`
(post-LN, ReLU, dropout 0, batch_first, embeddings * sqrt(d) + sinusoidal positions, a linear
output projection, cross-entropy, Adam); `attention-4096` is one nn.MultiheadAttention,
forward + backward.

usage: bench_reference.py --model NAME [--model NAME ...] [--threads N] [--min-seconds S]
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MODELS = {
    # name: (seq2seq, d_model, heads, d_ff, enc_layers, dec_layers, vocab, length, batch)
    "tiny": (True, 64, 4, 256, 2, 2, 16, 32, 64),
    "small": (True, 128, 4, 512, 2, 2, 16, 32, 64),
    "annotated": (True, 512, 8, 2048, 2, 2, 11, 10, 80),
    "attention-4096": (False, 512, 8, 0, 0, 0, 0, 4096, 1),
}


def status_mb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return float(line.split()[1]) / 1024.0
    return 0.0


def sinusoidal(n, d):
    pos = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    i = torch.arange(0, d, 2, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, i / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


class Seq2Seq(nn.Module):
    def __init__(self, d, heads, d_ff, enc, dec, vocab, length):
        super().__init__()
        self.d = d
        self.src_embed = nn.Embedding(vocab, d)
        self.tgt_embed = nn.Embedding(vocab, d)
        self.register_buffer("pe", sinusoidal(length, d))
        self.transformer = nn.Transformer(
            d_model=d, nhead=heads, num_encoder_layers=enc, num_decoder_layers=dec,
            dim_feedforward=d_ff, dropout=0.0, activation="relu", batch_first=True,
            norm_first=False)
        self.output = nn.Linear(d, vocab)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(length))

    def forward(self, src, tgt):
        s = self.src_embed(src) * math.sqrt(self.d) + self.pe
        t = self.tgt_embed(tgt) * math.sqrt(self.d) + self.pe
        return self.output(self.transformer(s, t, tgt_mask=self.causal))


def time_steps(step, min_steps, min_seconds):
    ms = []
    start = time.perf_counter()
    while len(ms) < min_steps or (time.perf_counter() - start < min_seconds and len(ms) < 200):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def run_one(name, min_seconds):
    seq2seq, d, heads, d_ff, enc, dec, vocab, length, batch = MODELS[name]
    base = status_mb("VmRSS")
    torch.manual_seed(1)
    if seq2seq:
        model = Seq2Seq(d, heads, d_ff, enc, dec, vocab, length)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        src = torch.randint(0, vocab, (batch, length))
        tgt_in = torch.randint(0, vocab, (batch, length))
        tgt_out = torch.randint(0, vocab, (batch * length,))

        def step():
            opt.zero_grad(set_to_none=True)
            logits = model(src, tgt_in)
            loss = F.cross_entropy(logits.reshape(-1, vocab), tgt_out)
            loss.backward()
            opt.step()
    else:
        mha = nn.MultiheadAttention(d, heads, batch_first=True)
        x = torch.randn(batch, length, d, requires_grad=True)
        g = torch.randn(batch, length, d)

        def step():
            mha.zero_grad(set_to_none=True)
            x.grad = None
            y, _ = mha(x, x, x, need_weights=False)
            y.backward(g)

    for _ in range(3):
        step()
    ms = time_steps(step, 5, min_seconds)
    return {"model": name, "framework": "torch", "threads": torch.get_num_threads(),
            "ms_per_step": statistics.median(ms), "steps": len(ms),
            "peak_rss_mb": status_mb("VmHWM") - base}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", choices=sorted(MODELS), required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-seconds", type=float, default=2.0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    for name in a.model:
        print(json.dumps(run_one(name, a.min_seconds)), flush=True)


if __name__ == "__main__":
    main()
