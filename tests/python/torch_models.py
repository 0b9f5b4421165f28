"""qkv's three kinds of model re-implemented in PyTorch, built from a run's config and fed its
run.params: the tests' statement of what every hook point means (docs/hooks.md), and the PyTorch
side of scripts/bench-python-cache.py.

    model = torch_models.build(run.params, run.config, torch.float64)
    logits, acts = torch_models.run_with_cache(model, ids)     # acts: {hook name: tensor}

Every activation a qkv hook point names passes through a HookPoint module of that name, as in
TransformerLens: a forward hook on it sees that activation. Covered: pre- and post-LN blocks,
LayerNorm, learned or sinusoidal positions, ReLU or GELU, dot-product attention (scaled by
1/sqrt(d_head) or model.attention_scale), biases on or off, tied or separate output layers, cls or mean
pooling; `supported(config)` names what a config uses beyond that.
"""
import math

import numpy as np
import torch
from torch import nn

F = nn.functional


def supported(c):
    """None when these modules implement the config's model, else what they lack."""
    m = c["model"]
    want = {"norm": "layernorm", "qk_norm": False, "attention": "dot", "logit_softcap": 0.0,
            "attn_only": False, "window": 0, "encoder": "attention"}
    for key, value in want.items():
        if key in m and m[key] != value:
            return f"model.{key} = {m[key]!r}"
    if m["position"] not in ("learned", "sinusoidal", "none"):
        return f"model.position = {m['position']!r}"
    if m["activation"] not in ("relu", "gelu"):
        return f"model.activation = {m['activation']!r}"
    return None


class HookPoint(nn.Module):
    """The identity, named by the qkv hook point whose activation passes through it."""

    def __init__(self, name):
        super().__init__()
        self.name = name

    def forward(self, x):
        return x


class Weights:
    """run.params as tensors of one dtype, each module taking its own by prefix."""

    def __init__(self, params, dtype):
        self.p, self.dtype = params, dtype

    def tensor(self, name):
        return nn.Parameter(torch.from_numpy(np.array(self.p[name])).to(self.dtype),
                            requires_grad=False)

    def linear(self, prefix):
        w = self.tensor(prefix + ".weight")
        has_bias = prefix + ".bias" in self.p
        lin = nn.Linear(w.shape[1], w.shape[0], bias=has_bias, dtype=self.dtype)
        lin.weight = w
        if has_bias:
            lin.bias = self.tensor(prefix + ".bias")
        return lin

    def layer_norm(self, prefix, eps):
        w = self.tensor(prefix + ".weight")
        ln = nn.LayerNorm(w.shape[0], eps=eps, dtype=self.dtype)
        ln.weight, ln.bias = w, self.tensor(prefix + ".bias")
        return ln


class Attention(nn.Module):
    """Multi-head attention, hook points NAME.{q,k,v,pattern,z}; mask True where a query may
    attend (qkv's convention), broadcast to (B, h, n, m)."""

    def __init__(self, W, prefix, name, heads, scale):
        super().__init__()
        self.heads, self.scale = heads, scale  # scale 0: 1/sqrt(d_head)
        self.w_q, self.w_k, self.w_v, self.w_o = (W.linear(f"{prefix}.w_{w}") for w in "qkvo")
        for what in ("q", "k", "v", "pattern", "z"):
            setattr(self, f"hook_{what}", HookPoint(f"{name}.{what}"))

    def forward(self, x, memory, mask):
        B, n, d = x.shape
        split = lambda t: t.view(B, t.shape[1], self.heads, d // self.heads).transpose(1, 2)
        v = self.hook_v(split(self.w_v(memory)))  # (B, h, m, d_head)
        k = self.hook_k(split(self.w_k(memory)))
        q = self.hook_q(split(self.w_q(x)))  # (B, h, n, d_head)
        scale = self.scale or 1 / math.sqrt(d // self.heads)
        scores = q @ k.transpose(-1, -2) * scale  # (B, h, n, m)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        pattern = self.hook_pattern(scores.softmax(-1))
        z = self.hook_z(pattern @ v)  # (B, h, n, d_head)
        return self.w_o(z.transpose(1, 2).reshape(B, n, d))


class FeedForward(nn.Module):
    def __init__(self, W, prefix, name, activation):
        super().__init__()
        self.linear1, self.linear2 = W.linear(prefix + ".linear1"), W.linear(prefix + ".linear2")
        self.act = nn.GELU() if activation == "gelu" else nn.ReLU()
        self.hook_pre, self.hook_post = HookPoint(name + ".pre"), HookPoint(name + ".post")

    def forward(self, x):
        return self.linear2(self.hook_post(self.act(self.hook_pre(self.linear1(x)))))


class Block(nn.Module):
    """A Transformer block: self-attention, cross-attention when cross (a decoder's), FFN; each
    sublayer pre-LN x + f(norm(x)) or post-LN norm(x + f(x)). Hook points NAME.resid_pre,
    attn.*, attn_out, resid_mid, cross.*, cross_out, resid_cross, mlp.*, mlp_out, resid_post."""

    def __init__(self, W, prefix, name, m, cross):
        super().__init__()
        self.norm_first = m["norm_first"]
        eps = m["layer_norm_eps"]
        subs = [("self_attn", "attn")] + ([("cross_attn", "cross")] if cross else [])
        self.attn = nn.ModuleList(Attention(W, f"{prefix}.{p}", f"{name}.{n}", m["heads"],
                                            m["attention_scale"])
                                  for p, n in subs)
        self.ffn = FeedForward(W, prefix + ".ffn", name + ".mlp", m["activation"])
        self.norms = nn.ModuleList(W.layer_norm(f"{prefix}.norm{i + 1}", eps)
                                   for i in range(len(subs) + 1))
        points = ["resid_pre", "attn_out", "resid_mid"] + \
            (["cross_out", "resid_cross"] if cross else []) + ["mlp_out", "resid_post"]
        self.hooks = nn.ModuleDict({p: HookPoint(f"{name}.{p}") for p in points})

    def residual(self, x, norm, f):
        return x + f(norm(x)) if self.norm_first else norm(x + f(x))

    def forward(self, x, self_mask, memory=None, cross_mask=None):
        h = self.hooks
        x = h["resid_pre"](x)
        x = h["resid_mid"](self.residual(x, self.norms[0],
                                         lambda a: h["attn_out"](self.attn[0](a, a, self_mask))))
        if len(self.attn) == 2:
            x = h["resid_cross"](self.residual(
                x, self.norms[1], lambda a: h["cross_out"](self.attn[1](a, memory, cross_mask))))
        return h["resid_post"](self.residual(x, self.norms[-1],
                                             lambda a: h["mlp_out"](self.ffn(a))))


class Stack(nn.Module):
    """Embedding (times sqrt(d) when scale_embedding), positions, blocks, a final norm when
    pre-LN or model.final_norm. Hook points NAME embed, blocks.L.*, final_norm."""

    def __init__(self, W, m, embed, pos, blocks, name, layers, cross):
        super().__init__()
        self.embed, self.position = W.tensor(embed + ".weight"), m["position"]
        self.scale = math.sqrt(m["d_model"]) if m["scale_embedding"] else None
        self.pos = W.tensor(pos + ".weight") if self.position == "learned" else None
        self.blocks = nn.ModuleList(Block(W, f"{blocks}.layers.{L}", f"{name}blocks.{L}", m, cross)
                                    for L in range(layers))
        self.norm = W.layer_norm(blocks + ".norm", m["layer_norm_eps"]) \
            if m["norm_first"] or m["final_norm"] else None
        self.hook_embed, self.hook_final = HookPoint(name + "embed"), HookPoint(name + "final_norm")

    def positions(self, n, dtype):
        if self.position == "learned":
            return self.pos[:n]
        if self.position == "none":
            return 0
        return sinusoidal(n, self.embed.shape[1]).to(dtype)

    def forward(self, ids, self_mask, memory=None, cross_mask=None):
        x = F.embedding(ids, self.embed)
        if self.scale is not None:
            x = x * self.scale
        x = self.hook_embed(x) + self.positions(ids.shape[1], x.dtype)
        for block in self.blocks:
            x = block(x, self_mask, memory, cross_mask)
        return self.hook_final(self.norm(x)) if self.norm is not None else x


def sinusoidal(n, d):
    """qkv's table (nn/positional.cpp), in float64: sin at even, cos at odd features."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64),
                            torch.arange(0, d, 2, dtype=torch.float64) / d)
    t = torch.zeros(n, d, dtype=torch.float64)
    t[:, 0::2], t[:, 1::2] = torch.sin(angle), torch.cos(angle)[:, :d // 2]
    return t


def key_mask(valid):
    """(B, m) bool, true on real tokens -> (B, 1, 1, m); None for None."""
    return None if valid is None else valid[:, None, None, :]


def causal(n, valid):
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    return mask if valid is None else mask & key_mask(valid)


class GPT(nn.Module):
    """A decoder-only language model: ids (B, n) -> logits (B, n, V)."""

    def __init__(self, W, m):
        super().__init__()
        self.stack = Stack(W, m, "embed", "pos", "blocks", "", m["decoder_layers"], cross=False)
        self.output = None if m["tie_output"] else W.linear("output")
        self.hook_logits = HookPoint("logits")

    def forward(self, ids, valid=None):
        h = self.stack(ids, causal(ids.shape[1], valid))
        return self.hook_logits(self.output(h) if self.output else h @ self.stack.embed.T)


class Translator(nn.Module):
    """An encoder-decoder: src (B, S), tgt_in (B, T) -> logits (B, T, V)."""

    def __init__(self, W, m):
        super().__init__()
        self.encoder = Stack(W, m, "src_embed", "src_pos", "encoder", "encoder.",
                             m["encoder_layers"], cross=False)
        tgt = "src_embed" if m["share_embeddings"] else "tgt_embed"
        self.decoder = Stack(W, m, tgt, "tgt_pos", "decoder", "decoder.",
                             m["decoder_layers"], cross=True)
        self.output = None if m["tie_output"] else W.linear("output")
        self.hook_logits = HookPoint("logits")

    def forward(self, src, tgt_in, src_valid=None, tgt_valid=None):
        memory = self.encoder(src, key_mask(src_valid))
        h = self.decoder(tgt_in, causal(tgt_in.shape[1], tgt_valid), memory, key_mask(src_valid))
        return self.hook_logits(self.output(h) if self.output else h @ self.decoder.embed.T)


class Classifier(nn.Module):
    """An encoder classifier: ids (B, S) -> logits (B, 1, C), read from position 0 (cls) or
    the mean over real positions."""

    def __init__(self, W, m):
        super().__init__()
        self.stack = Stack(W, m, "embed", "pos", "blocks", "", m["encoder_layers"], cross=False)
        self.pool, self.classifier = m["pool"], W.linear("classifier")
        self.hook_pooled, self.hook_logits = HookPoint("pooled"), HookPoint("logits")

    def forward(self, ids, valid=None):
        h = self.stack(ids, key_mask(valid))
        if self.pool == "cls":
            pooled = h[:, :1]
        elif valid is None:
            pooled = h.mean(1, keepdim=True)
        else:
            w = valid.to(h.dtype)[:, :, None]
            pooled = (h * w).sum(1, keepdim=True) / w.sum(1, keepdim=True)
        return self.hook_logits(self.classifier(self.hook_pooled(pooled)))


def build(params, config, dtype=torch.float64):
    """The run's model in PyTorch, in eval mode, its weights run.params' values in dtype."""
    m = config["model"]
    kinds = {"decoder": GPT, "encoder_decoder": Translator, "encoder": Classifier}
    return kinds[m["kind"]](Weights(params, dtype), m).eval()


def run_with_cache(model, *inputs):
    """(logits, {hook name: activation}) of one pass, every HookPoint's activation captured."""
    acts, handles = {}, []
    for module in model.modules():
        if isinstance(module, HookPoint):
            handles.append(module.register_forward_hook(
                lambda mod, inp, out: acts.__setitem__(mod.name, out)))
    try:
        with torch.no_grad():
            logits = model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return logits, acts
