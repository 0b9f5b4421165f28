"""The names mean what they say: PyTorch re-implementations of the tiny runs' models
(torch_models.py: a pre-LN GPT with learned positions and a tied output layer, a post-LN
translator with sinusoidal positions, a pre-LN encoder classifier reading <cls>), fed run.params
in float64, reproduce every activation run_with_cache hands out, within 1e-5; and a padded
batch of the translator is the PyTorch one under key-padding masks."""
import numpy as np
import pytest

import qkv

torch = pytest.importorskip("torch")
import torch_models  # noqa: E402  (needs torch)


def assert_reproduces(run, cache, logits, ref, ref_logits):
    assert set(ref) == set(cache) == set(run.hook_points())
    for name, value in cache.items():
        want = ref[name].numpy()
        assert value.shape == want.shape, (name, value.shape, want.shape)
        assert np.allclose(value, want, rtol=1e-5, atol=1e-5), \
            (name, float(np.abs(value - want).max()))
    assert np.allclose(logits, ref_logits.numpy(), rtol=1e-5, atol=1e-5)


def reference(run, *inputs):
    assert torch_models.supported(run.config) is None, torch_models.supported(run.config)
    model = torch_models.build(run.params, run.config, torch.float64)
    return torch_models.run_with_cache(model, *(torch.from_numpy(x) for x in inputs))


def test_a_torch_gpt_fed_run_params_reproduces_every_activation(runs):
    with qkv.open(runs["lm"], precision="fp32") as run:
        m = run.config["model"]
        assert (m["norm_first"], m["position"], m["activation"], m["tie_output"], m["bias"]) == \
            (True, "learned", "gelu", True, False)
        ids = np.stack([run.to_tokens("ROMEO: be"), run.to_tokens("JULIET: a")])
        logits, cache = run.run_with_cache(ids)
        ref_logits, ref = reference(run, ids)
        assert_reproduces(run, cache, logits, ref, ref_logits)


def test_a_torch_translator_fed_run_params_reproduces_every_activation(runs):
    with qkv.open(runs["copy"], precision="fp32") as run:
        m = run.config["model"]
        assert (m["norm_first"], m["position"], m["activation"], m["tie_output"], m["bias"],
                m["scale_embedding"]) == (False, "sinusoidal", "relu", False, True, True)
        src = np.stack([run.to_tokens("3 1 4 1 5"), run.to_tokens("9 2 6 5 3")])
        out = run.decoder_input("3 1 4 1 5")[0]  # <bos> 3 1 4 1 5 (if it has learnt to copy)
        # longer than the source, and not only the greedy output: cross-attention is (T, S)
        dec = np.stack([np.concatenate([out, out[1:3]]), np.concatenate([out[:1], out[:0:-1],
                                                                          out[1:3]])])
        logits, cache = run.run_with_cache(src, decoder_input=dec)
        ref_logits, ref = reference(run, src, dec)
        assert cache["decoder.blocks.0.cross.pattern"].shape == (2, m["heads"], dec.shape[1], 5)
        assert cache["encoder.blocks.1.attn.pattern"].shape == (2, m["heads"], 5, 5)
        assert_reproduces(run, cache, logits, ref, ref_logits)


def test_a_torch_encoder_classifier_fed_run_params_reproduces_every_activation(runs):
    with qkv.open(runs["dyck"], precision="fp32") as run:
        m = run.config["model"]
        assert (m["norm_first"], m["pool"]) == (True, "cls")
        ids = np.stack([run.to_tokens("( [ ] )"), run.to_tokens("( ( ] )")])
        logits, cache = run.run_with_cache(ids)
        ref_logits, ref = reference(run, ids)
        assert cache["pooled"].shape == (2, 1, m["d_model"])
        assert_reproduces(run, cache, logits, ref, ref_logits)


def zero_at_padding(name, want, src_valid, tgt_valid):
    """want with 0 where qkv's cache has it for a padded batch: the padded positions of the axis
    of positions (docs/python.md); a pattern's padded keys are 0 already (masked)."""
    side = src_valid if name.startswith("encoder.") else tgt_valid
    if ".cross." in name and name.endswith((".k", ".v")):
        side = src_valid  # cross-attention's keys and values: the source's positions
    if want.ndim == 4:  # (B, h, n, .): the heads share the batch's positions
        side = side[:, None, :].repeat(want.shape[1], 1)
    want[~side] = 0
    return want


def test_a_padded_translator_batch_is_the_torch_translator_under_key_padding_masks(runs):
    with qkv.open(runs["copy"], precision="fp32") as run:
        texts = ["3 1 4 1 5", "9 2", "6 5 3 5 8 9 7"]
        logits, cache = run.run_with_cache(texts)
        src_valid, tgt_valid = cache.pop("input_mask"), cache.pop("decoder_input_mask")
        src, dec = np.zeros(src_valid.shape, np.int64), np.zeros(tgt_valid.shape, np.int64)
        for b, (text, out) in enumerate(zip(texts, run.decoder_input(texts))):
            ids = run.to_tokens(text)
            src[b, :len(ids)], dec[b, :len(out)] = ids, out
        ref_logits, ref = reference(run, src, dec, src_valid, tgt_valid)
        ref["logits"] = ref_logits
        for name, value in list(cache.items()) + [("logits", logits)]:
            want = zero_at_padding(name, ref[name].numpy().copy(), src_valid, tgt_valid)
            assert np.allclose(value, want, rtol=1e-5, atol=1e-5), \
                (name, float(np.abs(value - want).max()))
