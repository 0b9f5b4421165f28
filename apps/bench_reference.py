#!/usr/bin/python3
"""The PyTorch side of `qkv bench --compare`: the same models, timed the same way.

Run by Debian's /usr/bin/python3 with python3-torch. Prints one JSON object per model:
{"model", "framework": "torch", "threads", "ms_per_step", "steps", "peak_rss_mb", "runtime",
"options"}. peak_rss_mb is the process's peak resident memory (VmHWM) above its resident memory
just before the model was built, as qkv's child reports it. runtime is what this process
computes on (the fields of bench/bench_runtime.hpp, which classifies them): the mapped file
holding the sgemm_ torch calls, read from /proc/self/maps, OpenBLAS's own report through
ctypes, OPENBLAS_CORETYPE and the thread counts. --describe prints only that and exits.

PyTorch at its fastest here (options measured side by side in one process, docs/performance.md
"The PyTorch side"): torch.set_num_threads equal to qkv's threads. Adam's multi-tensor
(foreach) step measured no faster on CPU in 1.13 (its _foreach ops loop over the tensors), so
Adam keeps its default, one tensor at a time. oneDNN stays enabled, but no op of these models
reaches it in float32 training (DNNL_VERBOSE=1 prints nothing: linear layers and bmm go to the
BLAS). Flushing denormals changed nothing measurable, and qkv does not flush: off. Each choice
has a switch, to measure it again.

Models (as apps/bench.cpp): nn.Transformer with the sizes of `tiny`, `small` and `annotated`
(post-LN, ReLU, dropout 0, batch_first, embeddings * sqrt(d) + sinusoidal positions, a linear
output projection, cross-entropy, Adam); `attention-4096` is one nn.MultiheadAttention,
forward + backward; `gpt-char` is nanoGPT's shakespeare_char CPU model written as nanoGPT
writes it for torch 1.x (class GPT below: pre-LN blocks, manual causal attention, GELU MLP,
no Linear biases, tied head), trained with AdamW (weight decay on 2-D weights), clip 1.0;
`bahdanau` is Bahdanau et al.'s encoder-decoder as nn/rnn_seq2seq.hpp builds it (class Bahdanau
below: a bidirectional nn.GRU encoder, an nn.GRUCell decoder stepped over the target with
additive attention, a maxout readout), trained with Adam.

usage: bench_reference.py --model NAME [--model NAME ...] [--threads N] [--min-seconds S]
                          [--adam-foreach on|off] [--mkldnn on|off] [--flush-denormal on|off]
       bench_reference.py --describe [--threads N]
"""
import argparse
import contextlib
import ctypes
import json
import math
import os
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
    "gpt-char": (False, 128, 4, 512, 0, 4, 65, 64, 12),  # run by gpt_step
    # configs/multi30k.toml's model on a real Multi30k batch (17 source, 21 target subwords)
    "multi30k": (True, 256, 4, 512, 3, 3, 6000, 17, 128),
    # configs/bahdanau-copy.toml's GRU encoder-decoder at the copy task's size (run by
    # bahdanau_step; heads and d_ff do not apply)
    "bahdanau": (True, 64, 1, 0, 1, 1, 14, 10, 64),
}
# The decoder's length where it differs from the source's (apps/bench.cpp: tgt_length).
TARGET_LENGTH = {"multi30k": 21, "bahdanau": 11}


def status_mb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return float(line.split()[1]) / 1024.0
    return 0.0


# ---- what this process computes on (mirrors bench/bench_runtime.cpp's this_process)

BLAS_KEYS = ("libblas", "libopenblas", "libmkl", "libblis", "atlas", "liblapack", "libcblas")


def maps_entries():
    """(start, end, path) of every file mapping in /proc/self/maps."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].startswith("/"):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5].rstrip("\n")
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            out.append((lo, hi, path))
    return out


def loaded(name):
    """A handle on an already-mapped library (never loads a new one), or None."""
    try:
        return ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return None


def onednn_info():
    """The oneDNN PyTorch was built with ("2.6.3 (Git Hash ...)" from torch.__config__.show())
    and the ISA its kernels use here (DNNL_VERBOSE's header names it; PyTorch 1.13 has no API
    for it, so it is the CPU's best ISA capped by ONEDNN_MAX_CPU_ISA, as oneDNN picks it)."""
    text = torch.__config__.show()
    version = ""
    for line in text.splitlines():
        if "oneDNN" in line or "MKL-DNN" in line:
            version = line.split(" v", 1)[-1].strip() if " v" in line else line.strip()
            break
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", os.environ.get("DNNL_MAX_CPU_ISA", ""))
    return version + ("" if not cap else ", capped at " + cap)


def runtime_info():
    entries = maps_entries()
    files = list(dict.fromkeys(p for _, _, p in entries))
    blas_files = [f for f in files if any(k in os.path.basename(f) for k in BLAS_KEYS)]
    # The sgemm_ torch calls: Debian's libtorch_cpu needs libblas.so.3; other builds bundle a
    # BLAS, so the mapped BLAS files are tried after it.
    sgemm_file = ""
    for name in ["libblas.so.3"] + blas_files:
        lib = loaded(name)
        fn = getattr(lib, "sgemm_", None) if lib is not None else None
        if fn is None:
            continue
        addr = ctypes.cast(fn, ctypes.c_void_p).value
        hit = [p for lo, hi, p in entries if lo <= addr < hi]
        if hit:
            sgemm_file = os.path.realpath(hit[0])
            break
    info = {"framework": "torch", "sgemm_file": sgemm_file, "blas_files": blas_files,
            "blas_threading": "unknown", "openblas_config": "", "openblas_corename": "",
            "blas_threads": -1, "openblas_coretype_env": os.environ.get("OPENBLAS_CORETYPE", ""),
            "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "omp_max_threads": 0, "cores": len(os.sched_getaffinity(0)),
            "onednn": onednn_info()}
    for f in blas_files:  # OpenBLAS reports itself
        lib = loaded(f)
        if lib is None or getattr(lib, "openblas_get_parallel", None) is None:
            continue
        info["blas_threading"] = {0: "sequential", 1: "pthreads", 2: "openmp"}.get(
            lib.openblas_get_parallel(), "unknown")
        lib.openblas_get_config.restype = ctypes.c_char_p
        lib.openblas_get_corename.restype = ctypes.c_char_p
        info["openblas_config"] = lib.openblas_get_config().decode()
        info["openblas_corename"] = lib.openblas_get_corename().decode()
        info["blas_threads"] = lib.openblas_get_num_threads()
        break
    gomp = loaded("libgomp.so.1")
    if gomp is not None:
        info["omp_max_threads"] = gomp.omp_get_max_threads()
    return info


# ---- the models

def sinusoidal(n, d):
    pos = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    i = torch.arange(0, d, 2, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, i / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


class Seq2Seq(nn.Module):
    def __init__(self, d, heads, d_ff, enc, dec, vocab, length, tgt_length=None):
        super().__init__()
        self.d = d
        self.src_embed = nn.Embedding(vocab, d)
        self.tgt_embed = nn.Embedding(vocab, d)
        self.register_buffer("pe", sinusoidal(max(length, tgt_length or length), d))
        self.transformer = nn.Transformer(
            d_model=d, nhead=heads, num_encoder_layers=enc, num_decoder_layers=dec,
            dim_feedforward=d_ff, dropout=0.0, activation="relu", batch_first=True,
            norm_first=False)
        self.output = nn.Linear(d, vocab)
        self.register_buffer(
            "causal", nn.Transformer.generate_square_subsequent_mask(tgt_length or length))

    def forward(self, src, tgt):
        s = self.src_embed(src) * math.sqrt(self.d) + self.pe[: src.size(1)]
        t = self.tgt_embed(tgt) * math.sqrt(self.d) + self.pe[: tgt.size(1)]
        return self.output(self.transformer(s, t, tgt_mask=self.causal))


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, length):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(length, length, dtype=torch.bool)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(~self.mask[:T, :T], float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, d, heads, d_ff, length):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, length)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, d_ff, bias=False), nn.GELU(),
                                 nn.Linear(d_ff, d, bias=False))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, d, heads, d_ff, layers, vocab, length):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(length, d)
        self.blocks = nn.ModuleList([Block(d, heads, d_ff, length) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # the head tied to the embedding


class Bahdanau(nn.Module):
    """nn/rnn_seq2seq.hpp's model (tests/nn/reference_rnn_seq2seq.py checks qkv's against the
    same equations): annotations h (B, S, d) from a bidirectional GRU of d / 2 units a direction;
    s_0 = tanh(W_s h<-_1); per target step c_i = sum_j a_ij h_j with a_i = softmax(v . tanh(W_a
    s_{i-1} + U_a h_j)), s_i = GRUCell([E y_{i-1}; c_i], s_{i-1}), t_i = maxout_2(U_o s_i + V_o E
    y_{i-1} + C_o c_i), logits = W_o t_i."""

    def __init__(self, d, enc, vocab):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, d)
        self.tgt_embed = nn.Embedding(vocab, d)
        self.encoder = nn.GRU(d, d // 2, enc, batch_first=True, bidirectional=True)
        self.w_s = nn.Linear(d // 2, d, bias=False)
        self.w_a = nn.Linear(d, d, bias=False)
        self.u_a = nn.Linear(d, d, bias=False)
        self.v_a = nn.Parameter(torch.randn(d) / math.sqrt(d))
        self.cell = nn.GRUCell(2 * d, d)
        self.u_o = nn.Linear(d, d)
        self.v_o = nn.Linear(d, d, bias=False)
        self.c_o = nn.Linear(d, d, bias=False)
        self.output = nn.Linear(d // 2, vocab)

    def forward(self, src, tgt):
        h, _ = self.encoder(self.src_embed(src))  # (B, S, d)
        keys = self.u_a(h)
        s = torch.tanh(self.w_s(h[:, 0, h.size(2) // 2:]))
        y = self.tgt_embed(tgt)
        states, contexts = [], []
        for i in range(tgt.size(1)):
            e = torch.tanh(self.w_a(s).unsqueeze(1) + keys) @ self.v_a  # (B, S)
            c = (torch.softmax(e, 1).unsqueeze(2) * h).sum(1)
            s = self.cell(torch.cat([y[:, i], c], 1), s)
            states.append(s)
            contexts.append(c)
        s, c = torch.stack(states, 1), torch.stack(contexts, 1)
        t = self.u_o(s) + self.v_o(y) + self.c_o(c)
        return self.output(torch.maximum(t[..., 0::2], t[..., 1::2]))


def autocast(precision):
    """The forward and the loss under torch.autocast("cpu", dtype=torch.bfloat16) for bf16 (its
    linear layers and matmuls then run oneDNN's bf16 kernels; backward follows the forward's
    dtypes), or nothing for fp32."""
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def gpt_step(name, foreach, precision):
    _, d, heads, d_ff, _, layers, vocab, length, batch = MODELS[name]
    model = GPT(d, heads, d_ff, layers, vocab, length)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3,
                            betas=(0.9, 0.99), foreach=foreach)
    x = torch.randint(0, vocab, (batch, length))
    y = torch.randint(0, vocab, (batch * length,))

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast(precision):
            loss = F.cross_entropy(model(x).reshape(-1, vocab), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return step


def time_steps(step, min_steps, min_seconds):
    ms = []
    start = time.perf_counter()
    while len(ms) < min_steps or (time.perf_counter() - start < min_seconds and len(ms) < 200):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def run_one(name, min_seconds, foreach, precision="fp32"):
    seq2seq, d, heads, d_ff, enc, dec, vocab, length, batch = MODELS[name]
    base = status_mb("VmRSS")
    torch.manual_seed(1)
    if name == "gpt-char":
        step = gpt_step(name, foreach, precision)
    elif seq2seq:
        tl = TARGET_LENGTH.get(name, length)
        if name == "bahdanau":
            model = Bahdanau(d, enc, vocab)
        else:
            model = Seq2Seq(d, heads, d_ff, enc, dec, vocab, length, tl)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=foreach)
        src = torch.randint(0, vocab, (batch, length))
        tgt_in = torch.randint(0, vocab, (batch, tl))
        tgt_out = torch.randint(0, vocab, (batch * tl,))

        def step():
            opt.zero_grad(set_to_none=True)
            with autocast(precision):
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
            with autocast(precision):
                y, _ = mha(x, x, x, need_weights=False)
            y.backward(g)

    for _ in range(3):
        step()
    ms = time_steps(step, 5, min_seconds)
    return {"model": name, "framework": "torch", "threads": torch.get_num_threads(),
            "precision": precision,
            "ms_per_step": statistics.median(ms), "steps": len(ms),
            "peak_rss_mb": status_mb("VmHWM") - base}


def keep_freed_memory():
    """PyTorch 1.13 on CPU allocates each tensor with malloc and frees it when the last reference
    goes. glibc returns large freed blocks to the system (munmap, heap trimming), so every step
    page-faults its activations back in: about 5,000 minor faults a step on `tiny`, a quarter of
    its time. PyTorch's CPU tuning guide recommends an allocator that keeps memory (jemalloc,
    tcmalloc); glibc does the same when told not to trim and to serve blocks up to its largest
    mmap threshold (32 MiB) from the heap. qkv's own caching allocator never returns memory
    within a run, so this puts both sides on the same footing."""
    libc = ctypes.CDLL("libc.so.6")
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
    libc.mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024)
    libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1)


def on_off(v):
    if v not in ("on", "off"):
        raise argparse.ArgumentTypeError("expected on or off, got %r" % v)
    return v == "on"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", action="append", choices=sorted(MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-seconds", type=float, default=2.0)
    ap.add_argument("--adam-foreach", type=on_off, default=False,
                    help="Adam's multi-tensor step, or (off, PyTorch's default) one tensor at a time")
    ap.add_argument("--mkldnn", type=on_off, default=True,
                    help="torch.backends.mkldnn.enabled (on: PyTorch's default)")
    ap.add_argument("--flush-denormal", type=on_off, default=False,
                    help="torch.set_flush_denormal (off: qkv does not flush either)")
    ap.add_argument("--keep-memory", type=on_off, default=True,
                    help="glibc malloc keeps freed memory for reuse (on) instead of returning "
                         "it to the system and page-faulting it back every step (off: the default)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast(\"cpu\", dtype=torch.bfloat16)")
    ap.add_argument("--describe", action="store_true",
                    help="print what this process computes on (one JSON object) and exit")
    a = ap.parse_args()
    if not a.describe and not a.model:
        ap.error("--model is required (or --describe)")
    torch.set_num_threads(a.threads)
    torch.backends.mkldnn.enabled = a.mkldnn
    torch.set_flush_denormal(a.flush_denormal)
    if a.keep_memory:
        keep_freed_memory()
    options = {"adam_foreach": a.adam_foreach, "mkldnn": a.mkldnn,
               "flush_denormal": a.flush_denormal, "keep_memory": a.keep_memory}
    if a.describe:
        print(json.dumps({"runtime": runtime_info(), "options": options}), flush=True)
        return
    for name in a.model:
        r = run_one(name, a.min_seconds, a.adam_foreach, a.precision)
        r["runtime"] = runtime_info()
        r["options"] = options
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
