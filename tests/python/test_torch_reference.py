"""The names mean what they say: a PyTorch re-implementation of the tiny GPT (pre-LN, learned
positions, GELU, tied output layer: the fixture's config), fed run.params, reproduces every
activation run_with_cache hands out, within 1e-5."""
import numpy as np
import pytest

import qkv

torch = pytest.importorskip("torch")
F = torch.nn.functional


def torch_gpt(p, ids, c):
    """Every hook point's activation of one pass, by name, as docs/hooks.md defines them."""
    m = c["model"]
    h, eps = m["heads"], m["layer_norm_eps"]
    W = {k: torch.from_numpy(v.copy()).double() for k, v in p.items()}
    ln = lambda x, pre: F.layer_norm(x, x.shape[-1:], W[pre + ".weight"], W[pre + ".bias"], eps)
    lin = lambda x, pre: F.linear(x, W[pre + ".weight"], W.get(pre + ".bias"))
    out = {}
    x = W["embed.weight"][ids]
    out["embed"] = x
    B, n, d = x.shape
    x = x + W["pos.weight"][:n]
    for L in range(m["decoder_layers"]):
        blk = f"blocks.layers.{L}"
        out[f"blocks.{L}.resid_pre"] = x
        a = ln(x, f"{blk}.norm1")
        heads = lambda t: t.view(B, n, h, d // h).transpose(1, 2)  # (B, h, n, d_head)
        q, k, v = (heads(lin(a, f"{blk}.self_attn.w_{w}")) for w in "qkv")
        scores = q @ k.transpose(-1, -2) / (d // h) ** 0.5
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        pattern = scores.softmax(-1)
        z = pattern @ v
        attn_out = lin(z.transpose(1, 2).reshape(B, n, d), f"{blk}.self_attn.w_o")
        out.update({f"blocks.{L}.attn.q": q, f"blocks.{L}.attn.k": k, f"blocks.{L}.attn.v": v,
                    f"blocks.{L}.attn.pattern": pattern, f"blocks.{L}.attn.z": z,
                    f"blocks.{L}.attn_out": attn_out})
        x = x + attn_out
        out[f"blocks.{L}.resid_mid"] = x
        pre = lin(ln(x, f"{blk}.norm2"), f"{blk}.ffn.linear1")
        post = F.gelu(pre)
        mlp_out = lin(post, f"{blk}.ffn.linear2")
        out.update({f"blocks.{L}.mlp.pre": pre, f"blocks.{L}.mlp.post": post,
                    f"blocks.{L}.mlp_out": mlp_out})
        x = x + mlp_out
        out[f"blocks.{L}.resid_post"] = x
    out["final_norm"] = ln(x, "blocks.norm")
    out["logits"] = out["final_norm"] @ W["embed.weight"].T  # tied output layer
    return out


def test_a_torch_gpt_fed_run_params_reproduces_every_activation(runs):
    with qkv.open(runs["lm"], precision="fp32") as run:
        c = run.config
        m = c["model"]
        assert (m["norm_first"], m["position"], m["activation"], m["tie_output"], m["bias"],
                m["norm"], m["qk_norm"]) == (True, "learned", "gelu", True, False, "layernorm", False)
        ids = np.stack([run.to_tokens("ROMEO: be"), run.to_tokens("JULIET: a")])
        logits, cache = run.run_with_cache(ids)
        ref = torch_gpt(run.params, torch.from_numpy(ids), c)
        assert set(ref) == set(cache) == set(run.hook_points())
        for name, value in cache.items():
            want = ref[name].numpy()
            assert value.shape == want.shape, name
            assert np.allclose(value, want, rtol=1e-5, atol=1e-5), \
                (name, float(np.abs(value - want).max()))
        assert np.allclose(logits, ref["logits"].numpy(), rtol=1e-5, atol=1e-5)
