"""run_with_cache and run_with_hooks: every cached activation equals, bit for bit, what the
library's own single-input pass (Inference::logits with an nn::Hooks capture) captures, for each
family and precision; Python hooks replace activations, zeroing a head's z is --ablate's pass,
and a failing hook leaves the model as it was."""
import numpy as np
import pytest

import qkv
from qkv import _qkv

from conftest import open_in

TEXTS = {"copy": "3 1 4 1 5", "lm": "ROMEO: be", "dyck": "( [ ] )"}
HEAD = {"copy": ("cross.0.1", "decoder.blocks.0.cross.z", 1),
        "lm": ("1.0", "blocks.1.attn.z", 0), "dyck": ("0.1", "blocks.0.attn.z", 1)}


def reference(run, text, decoder_input=None, ablate=""):
    """The C++ side: Inference::logits of one input, capturing every hook point."""
    ids = run.to_tokens(text)
    dec = [] if decoder_input is None else decoder_input[0]
    return _qkv._testing.capture(run, ids, dec, ["*"], ablate)


@pytest.mark.parametrize("name", ["copy", "lm", "dyck"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_every_hook_point_equals_the_cpp_capture(runs, name, precision):
    with open_in(runs[name], precision) as run:
        assert run.precision == precision
        dec = run.decoder_input(TEXTS[name])
        logits, cache = run.run_with_cache(TEXTS[name])
        ref_logits, ref = reference(run, TEXTS[name], dec)
        assert set(cache) == set(ref) == set(run.hook_points())
        for point, value in cache.items():
            assert value.dtype == np.float32
            assert value.shape == ref[point].shape, point
            assert np.array_equal(value, ref[point]), point
        assert np.array_equal(logits.reshape(ref_logits.shape), ref_logits)
        assert np.array_equal(cache["logits"], logits)


@pytest.mark.parametrize("name", ["copy", "lm", "dyck"])
def test_each_cached_array_is_its_own_memory(runs, name):
    """Arrays handed over without a copy alias nothing: writing each one in turn changes no
    other array of the cache, not the logits, and not the next pass."""
    with open_in(runs[name], "fp32") as run:
        logits, cache = run.run_with_cache(TEXTS[name])
        before = {k: v.copy() for k, v in cache.items()}
        logits_before = logits.copy()
        for point, value in cache.items():
            value[...] = np.nan
            for other, kept in before.items():
                if other != point:
                    assert np.array_equal(cache[other], kept), (point, other)
            assert np.array_equal(logits, logits_before), point
            value[...] = before[point]
        again_logits, again = run.run_with_cache(TEXTS[name])
        assert np.array_equal(again_logits, logits_before)
        for point, value in again.items():
            assert np.array_equal(value, before[point]), point


def test_the_default_decoder_input_is_the_greedy_output(runs):
    with qkv.open(runs["copy"]) as run:
        text = TEXTS["copy"]
        dec = run.decoder_input(text)
        assert dec.dtype == np.int64 and dec.shape[0] == 1
        logits, _ = run.run_with_cache(text)
        given, _ = run.run_with_cache(text, decoder_input=dec)
        assert np.array_equal(logits, given)
        # teacher-forced on its own greedy output, the argmax is that output (then <eos>)
        guesses = logits[0].argmax(-1)
        assert np.array_equal(guesses[:-1], dec[0, 1:])
        assert run.to_string(dec[0, 1:]) == run.translate(text)


def test_names_select_what_is_cached(runs):
    with qkv.open(runs["lm"]) as run:
        logits, cache = run.run_with_cache(TEXTS["lm"], names=["blocks.*.attn.pattern", "logits"])
        assert list(cache) == ["blocks.0.attn.pattern", "blocks.1.attn.pattern", "logits"]
        pattern = cache["blocks.1.attn.pattern"]
        assert pattern.shape == (1, 2, 9, 9)
        assert np.allclose(pattern.sum(-1), 1, atol=1e-5)
        assert np.all(np.triu(pattern[0, 0], 1) == 0)  # causal
        assert list(run.run_with_cache(TEXTS["lm"], names="embed")[1]) == ["embed"]
        assert run.run_with_cache(TEXTS["lm"], names=[])[1] == {}


def test_a_batch_is_its_rows(runs):
    with qkv.open(runs["lm"], precision="fp32") as run:
        texts = ["ROMEO: be", "JULIET: a"[:9]]
        logits, cache = run.run_with_cache(texts, names=["blocks.0.attn.z", "logits"])
        ids = np.stack([run.to_tokens(t) for t in texts])
        from_ids, _ = run.run_with_cache(ids, names=[])
        assert logits.shape[:2] == (2, 9) and cache["blocks.0.attn.z"].shape == (2, 2, 9, 16)
        assert np.array_equal(logits, from_ids)
        for b, t in enumerate(texts):
            one, one_cache = run.run_with_cache(t, names=["blocks.0.attn.z"])
            assert np.allclose(logits[b], one[0], atol=1e-5)
            assert np.allclose(cache["blocks.0.attn.z"][b], one_cache["blocks.0.attn.z"][0], atol=1e-5)


def test_unknown_hook_names_are_a_key_error_with_the_nearest(runs):
    with qkv.open(runs["lm"]) as run:
        with pytest.raises(KeyError, match="blocks.0.attn.pattern"):
            run.run_with_cache("ROMEO", names=["blocks.0.attn.patern"])
        with pytest.raises(KeyError):
            run.run_with_hooks("ROMEO", fwd_hooks=[("nothing.*", lambda a, n: None)])


@pytest.mark.parametrize("name", ["copy", "lm", "dyck"])
def test_zeroing_a_heads_z_in_python_is_ablate(runs, name):
    head, point, index = HEAD[name]
    seen = []

    def zero(z, hook):
        seen.append((hook, z.shape))
        z[:, index] = 0  # (B, h, n, d_head): in place, returning None

    with qkv.open(runs[name]) as run:
        dec = run.decoder_input(TEXTS[name])
        hooked = run.run_with_hooks(TEXTS[name], fwd_hooks=[(point, zero)])
        ablated, _ = reference(run, TEXTS[name], dec, ablate=head)
        plain, _ = reference(run, TEXTS[name], dec)
        assert seen and seen[0][0] == point
        assert np.array_equal(hooked.reshape(ablated.shape), ablated)
        assert not np.array_equal(ablated, plain)
        returned = run.run_with_hooks(
            TEXTS[name], fwd_hooks=[(point, lambda z, hook: np.concatenate(
                [z[:, :index], 0 * z[:, index:index + 1], z[:, index + 1:]], axis=1))])
        assert np.array_equal(returned, hooked)


def test_hooks_by_glob_see_every_match_in_order_and_identity_changes_nothing(runs):
    with qkv.open(runs["lm"]) as run:
        names = []
        plain = run.run_with_hooks(TEXTS["lm"])
        same = run.run_with_hooks(TEXTS["lm"], fwd_hooks=[("*resid_pre", lambda a, n: names.append(n))])
        assert names == ["blocks.0.resid_pre", "blocks.1.resid_pre"]
        assert np.array_equal(plain, same)
        # a cache under hooks holds what flows on: the edited activation
        logits, cache = run.run_with_cache(TEXTS["lm"], names=["blocks.0.mlp_out"],
                                           fwd_hooks=[("blocks.0.mlp_out", lambda a, n: a * 0)])
        assert not cache["blocks.0.mlp_out"].any()


def test_a_hook_returning_another_shape_or_dtype_is_a_value_error_naming_it(runs):
    with qkv.open(runs["lm"]) as run:
        with pytest.raises(ValueError, match="blocks.0.attn.z"):
            run.run_with_hooks("ROMEO", fwd_hooks=[("blocks.0.attn.z", lambda a, n: a[:, :1])])
        with pytest.raises(ValueError, match="float64"):
            run.run_with_hooks("ROMEO", fwd_hooks=[("blocks.0.attn.z", lambda a, n: a.astype(np.float64))])
        with pytest.raises(ValueError, match="not a numpy array"):
            run.run_with_hooks("ROMEO", fwd_hooks=[("embed", lambda a, n: 3)])


class HookFailed(Exception):
    pass


def test_an_exception_in_a_hook_propagates_and_leaves_the_model_as_it_was(runs):
    with qkv.open(runs["copy"]) as run:
        before, cache_before = run.run_with_cache(TEXTS["copy"])

        def fail(a, name):
            a[...] = 0
            raise HookFailed(name)

        with pytest.raises(HookFailed, match="decoder.blocks.0.cross.z"):
            run.run_with_hooks(TEXTS["copy"], fwd_hooks=[("decoder.blocks.0.cross.z", fail)])
        after, cache_after = run.run_with_cache(TEXTS["copy"])
        assert np.array_equal(before, after)
        assert all(np.array_equal(cache_before[k], cache_after[k]) for k in cache_before)
