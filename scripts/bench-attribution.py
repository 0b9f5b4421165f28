#!/usr/bin/python3
"""qkv attribute (integrated gradients) and qkv patch --approx on a translator, against PyTorch
doing the same computation on the same weights, in alternating rounds.

    PYTHONPATH=build/python /usr/bin/python3 scripts/bench-attribution.py RUN \\
        [--text "Ein Hund läuft durch den Park."] [--corrupt "Ein Kind läuft durch den Park."] \\
        [--steps 64] [--batch 16] [--rounds 5] [--threads N]

RUN is a trained encoder-decoder (a translator, e.g. configs/multi30k.toml's). Each round times,
in an order that alternates from round to round:

  qkv IG       run.attribute(text, method="integrated-gradients", steps, batch): the greedy
               translation, then integrated gradients from the zero baseline at the embeddings
               (`steps` midpoints, `batch` interpolated inputs per recorded pass, one backward
               per output token), f(input) and f(baseline)
  torch IG     the same in PyTorch (tests/python/torch_models.py's Translator, fed run.params):
               a greedy translation (the decoder re-run on the prefix for each token, no cache),
               the same interpolated inputs through forward hooks at the embedding hook points,
               the same batches and backwards, f(input) and f(baseline)
  qkv approx   run.patch(text, corrupt, approx=True): both greedy translations, the clean and
               corrupted passes, and attribution patching's one recorded pass and backward: every
               head's output at every position and the encoder's resid_pre at every layer and
               position
  torch approx the same: both greedy translations, a clean pass capturing the activations, the
               corrupted pass with autograd and one backward of the logit difference,
               (clean - corrupted) . gradient per cell

The process runs with OMP_WAIT_POLICY=passive unless the environment sets it (both sides' OpenMP
threads sleep when idle, as `qkv bench --passive` runs its two sides on a busy machine: two
runtimes spinning in one process would slow whichever runs next). Both sides run in float32 (the run opened with precision="fp32") on the same threads
(qkv.open(threads=N), torch.set_num_threads(N); default: the CPUs this process may use). Before
timing, the torch results are checked against qkv's (the same scores to float32 rounding), so the
two compute the same thing. Prints one line per measurement: the median seconds of each side, the
ratio qkv / torch (below 1: qkv faster), and the load average before and after.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # before either side's OpenMP starts

import numpy as np  # noqa: E402

import qkv  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import torch  # noqa: E402
import torch_models  # noqa: E402

Z_SITES = (("encoder.blocks.{}.attn.z", "encoder"), ("decoder.blocks.{}.attn.z", "decoder"),
           ("decoder.blocks.{}.cross.z", "cross"))


class Torch:
    """The run's translator in PyTorch with hooks that capture or replace activations."""

    def __init__(self, run, max_extra):
        self.model = torch_models.build(run.params, run.config, torch.float32)
        self.points = {m.name: m for m in self.model.modules()
                       if isinstance(m, torch_models.HookPoint)}
        self.layers = run.config["model"]["encoder_layers"], run.config["model"]["decoder_layers"]
        self.bos, self.eos, self.max_extra = 1, 2, max_extra

    def forward(self, src, tgt, replace=None, capture=()):
        """logits (B, T, V) and {name: activation}; replace: {name: tensor} set at those points."""
        acts, handles = {}, []
        for name, t in (replace or {}).items():
            handles.append(self.points[name].register_forward_hook(lambda m, i, o, t=t: t))
        for name in capture:
            handles.append(self.points[name].register_forward_hook(
                lambda m, i, o, name=name: acts.__setitem__(name, o)))
        try:
            return self.model(src, tgt), acts
        finally:
            for h in handles:
                h.remove()

    def greedy(self, src):
        """The greedy output ids (without <bos>, <eos>), the decoder re-run for each token."""
        out = [self.bos]
        with torch.no_grad():
            while len(out) <= src.shape[1] + self.max_extra:
                logits, _ = self.forward(src, torch.tensor([out]))
                nxt = int(logits[0, -1].argmax())
                if nxt == self.eos:
                    break
                out.append(nxt)
        return out[1:]

    def integrated_gradients(self, src_ids, steps, batch):
        """(rows, S + T) scores from the zero baseline, as qkv attribute computes them."""
        src = torch.tensor([src_ids])
        ys = self.greedy(src)
        tgt = torch.tensor([[self.bos] + ys[:-1]])
        names = ("encoder.embed", "decoder.embed")
        with torch.no_grad():
            _, acts = self.forward(src, tgt, capture=names)
        embeds = [acts[n][0] for n in names]  # (n, d) each
        sums = [[torch.zeros_like(e) for e in embeds] for _ in ys]
        for at in range(0, steps, batch):
            alphas = torch.tensor([(k + 0.5) / steps for k in range(at, min(steps, at + batch))])
            K = len(alphas)
            leaves = [(alphas[:, None, None] * e).requires_grad_(True) for e in embeds]
            logits, _ = self.forward(src.expand(K, -1), tgt.expand(K, -1),
                                     replace=dict(zip(names, leaves)))
            for r, y in enumerate(ys):
                grads = torch.autograd.grad(logits[:, r, y].sum(), leaves,
                                            retain_graph=r + 1 < len(ys))
                for s, g in enumerate(grads):
                    sums[r][s] += g.sum(0)
        with torch.no_grad():
            at_input, _ = self.forward(src, tgt)
            at_base, _ = self.forward(src, tgt, replace={n: torch.zeros_like(e)[None]
                                                         for n, e in zip(names, embeds)})
        values = [(float(at_input[0, r, y]), float(at_base[0, r, y])) for r, y in enumerate(ys)]
        scores = torch.stack([torch.cat([(e * g / steps).sum(-1) for e, g in zip(embeds, sums[r])])
                              for r in range(len(ys))])
        return scores.detach().numpy(), values

    def attribution_patching(self, clean_ids, corrupt_ids):
        """{cell name: estimate}: every head at every position, the encoder's resid_pre."""
        clean, corrupt = torch.tensor([clean_ids]), torch.tensor([corrupt_ids])
        a, b = self.greedy(clean), self.greedy(corrupt)
        i = next(i for i in range(min(len(a), len(b)) + 1)
                 if i == len(a) or i == len(b) or a[i] != b[i])
        ans = (a[i] if i < len(a) else self.eos, b[i] if i < len(b) else self.eos)
        tgt = torch.tensor([[self.bos] + a[:i]])
        cells = [p.format(L) for p, site in Z_SITES
                 for L in range(self.layers[0] if site == "encoder" else self.layers[1])]
        cells += [f"encoder.blocks.{L}.resid_pre" for L in range(self.layers[0])]
        diff = lambda lg: lg[0, -1, ans[0]] - lg[0, -1, ans[1]]
        with torch.no_grad():
            lc, clean_acts = self.forward(clean, tgt, capture=cells)
        # the corrupted run with a tape: its embeddings are leaves, so every activation after
        # them is on the graph and autograd gives d(diff)/d(activation) for each
        names = ("encoder.embed", "decoder.embed")
        _, emb = self.forward(corrupt, tgt, capture=names)
        leaves = {n: emb[n].detach().requires_grad_(True) for n in names}
        lx, acts = self.forward(corrupt, tgt, replace=leaves, capture=cells)
        grads = torch.autograd.grad(diff(lx), [acts[c] for c in cells])
        scale = float(diff(lc) - diff(lx))
        out = {}
        for c, g in zip(cells, grads):
            delta = (clean_acts[c] - acts[c].detach()) * g / scale
            if c.endswith(".z"):  # (1, h, n, d_head): per head, summed over positions and d
                for h, v in enumerate(delta[0].sum((-1, -2)).tolist()):
                    out[f"{c}#{h}"] = v
            else:  # (1, n, d): per position
                for p, v in enumerate(delta[0].sum(-1).tolist()):
                    out[f"{c}@{p}"] = v
        return out


def qkv_heads(j):
    """qkv patch --approx --json's estimates keyed as Torch.attribution_patching keys them."""
    out = {}
    for h in j["heads"]:
        stack = {"encoder": "encoder.blocks.{}.attn.z", "decoder": "decoder.blocks.{}.attn.z",
                 "cross": "decoder.blocks.{}.cross.z"}[h["attention"]]
        out[f"{stack.format(h['layer'])}#{h['index']}"] = h["restored"]
    for L, row in enumerate(j["residual"]):
        for p, v in enumerate(row):
            out[f"encoder.blocks.{L}.resid_pre@{p}"] = v
    return out


def check_same(run, model, a):
    """The torch side computes what qkv does: the same scores to float32 rounding."""
    ours = run.attribute(a.text, method="integrated-gradients", steps=a.steps, batch=a.batch)
    mine = np.array([r["inputs"] + r["context"] + [0.0] * (len(ours["context"]) - len(r["context"]))
                     for r in ours["outputs"]])
    theirs, _ = model.integrated_gradients(list(run.to_tokens(a.text)), a.steps, a.batch)
    if mine.shape != theirs.shape:
        sys.exit(f"integrated gradients: qkv scored {mine.shape}, torch {theirs.shape}")
    top = np.abs(theirs).max()
    print(f"check: integrated gradients, largest |qkv - torch| {np.abs(mine - theirs).max():.2e}"
          f" of scores up to {top:.3f}")
    est = qkv_heads(run.patch(a.text, a.corrupt, approx=True))
    tor = model.attribution_patching(list(run.to_tokens(a.text)), list(run.to_tokens(a.corrupt)))
    worst = max(abs(est[k] - tor[k]) for k in est)
    print(f"check: attribution patching, {len(est)} cells, largest |qkv - torch| {worst:.2e}")


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--text", default="Ein Hund läuft durch den Park.")
    p.add_argument("--corrupt", default="Ein Kind läuft durch den Park.")
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    a = p.parse_args()
    load_before = os.getloadavg()
    run = qkv.open(a.run, precision="fp32", threads=a.threads)
    if run.config["model"]["kind"] != "encoder_decoder":
        sys.exit(f"{a.run}: an encoder-decoder is needed (this is a {run.config['model']['kind']})")
    why = torch_models.supported(run.config)
    if why is not None:
        sys.exit(f"torch_models.py does not implement {why}")
    torch.set_num_threads(a.threads)
    model = Torch(run, run.config["train"]["max_decode_extra"])
    check_same(run, model, a)
    src, bad = list(run.to_tokens(a.text)), list(run.to_tokens(a.corrupt))
    sides = {
        "integrated gradients": {
            "qkv": lambda: run.attribute(a.text, method="integrated-gradients", steps=a.steps,
                                         batch=a.batch),
            "torch": lambda: model.integrated_gradients(src, a.steps, a.batch)},
        "attribution patching": {
            "qkv": lambda: run.patch(a.text, a.corrupt, approx=True),
            "torch": lambda: model.attribution_patching(src, bad)},
    }
    times = {m: {s: [] for s in fns} for m, fns in sides.items()}
    for r in range(a.rounds):
        for m, fns in sides.items():
            order = list(fns) if r % 2 == 0 else list(fns)[::-1]
            for s in order:
                times[m][s].append(timed(fns[s]))
    load_after = os.getloadavg()
    load = (f"load {load_before[0]:.1f} before, {load_after[0]:.1f} after, "
            f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}")
    for m, t in times.items():
        q, tt = statistics.median(t["qkv"]), statistics.median(t["torch"])
        print(f"{m}: qkv {q:.3f} s, torch {tt:.3f} s, qkv/torch {q / tt:.2f} "
              f"(median of {a.rounds} alternating rounds, {a.threads} threads, fp32, {load})")


if __name__ == "__main__":
    main()
