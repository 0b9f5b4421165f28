"""Batches of unequal lengths: run_with_cache pads at the end and masks the padding, so each
row's activations at its real positions equal that input run alone, at every hook point of
each family; padded positions hold 0, and the cache says which positions are real.

Equal up to float32 rounding, not bit for bit: a BLAS product's bits for a row depend on how
many rows the batch has (core/parallel.hpp), so an equal-length batch differs from its rows run
alone in the same last bits (about 6e-7 of the largest value on these runs, fp32), and a bf16
run's attention patterns, formed again over the wider rows, in theirs (3e-7). The bound: 1e-5
of each activation's largest magnitude."""
import numpy as np
import pytest

import qkv

from conftest import open_in

TEXTS = {"lm": ["ROMEO: be", "JULIET", "O"],
         "copy": ["3 1 4 1 5", "9 2", "6 5 3 5 8 9 7"],
         "dyck": ["( [ ] )", "( )", "( [ ( ) ] ) [ ]"]}


def real_part(a, like):
    """a's first like.shape[k] entries along each axis: a row's real positions."""
    return a[tuple(slice(0, k) for k in like.shape)]


def assert_rows_are_alone(run, texts, logits, cache, alone):
    for b, (one_logits, one_cache) in enumerate(alone):
        assert set(one_cache) <= set(cache)
        for name, one in [("logits", one_logits)] + list(one_cache.items()):
            row = (logits if name == "logits" else cache[name])[b]
            real = real_part(row, one[0])
            assert real.shape == one[0].shape, (texts[b], name)
            assert np.abs(real - one[0]).max() <= 1e-5 * np.abs(one[0]).max(), \
                (texts[b], name, float(np.abs(real - one[0]).max()))
            rest = row.copy()
            rest[tuple(slice(0, k) for k in one[0].shape)] = 0
            assert not rest.any(), (texts[b], name, "padding is not 0")


@pytest.mark.parametrize("name", ["lm", "copy", "dyck"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_each_row_of_a_padded_batch_is_that_input_alone(runs, name, precision):
    texts = TEXTS[name]
    with open_in(runs[name], precision) as run:
        logits, cache = run.run_with_cache(texts)
        lengths = [len(run.to_tokens(t)) for t in texts]
        n = max(lengths)
        assert cache["input_mask"].dtype == np.bool_
        assert cache["input_mask"].tolist() == [[i < k for i in range(n)] for k in lengths]
        alone = [run.run_with_cache(t) for t in texts]
        assert set(cache) - {"input_mask", "decoder_input_mask"} == set(run.hook_points())
        if name == "copy":
            outs = [len(run.decoder_input(t)[0]) for t in texts]
            assert len(set(outs)) > 1  # both sides padded
            assert cache["decoder_input_mask"].tolist() == \
                [[i < k for i in range(max(outs))] for k in outs]
        assert_rows_are_alone(run, texts, logits, cache, alone)


def test_the_decoder_input_of_unequal_outputs_is_a_list_of_rows(runs):
    with qkv.open(runs["copy"]) as run:
        texts = TEXTS["copy"]
        dec = run.decoder_input(texts)
        assert isinstance(dec, list) and [d.shape for d in dec] == \
            [run.decoder_input(t)[0].shape for t in texts]
        logits, cache = run.run_with_cache(texts)
        given, given_cache = run.run_with_cache(texts, decoder_input=dec)
        assert np.array_equal(logits, given)
        assert all(np.array_equal(cache[k], given_cache[k]) for k in cache)
        assert np.array_equal(run.run_with_hooks(texts), logits)


def test_rows_of_ids_read_as_the_texts_and_hooks_see_the_padded_batch(runs):
    with qkv.open(runs["lm"]) as run:
        texts = TEXTS["lm"]
        logits, cache = run.run_with_cache(texts, names=["blocks.0.attn.z"])
        from_ids, ids_cache = run.run_with_cache([run.to_tokens(t) for t in texts],
                                                 names=["blocks.0.attn.z"])
        assert np.array_equal(logits, from_ids)
        assert list(cache) == list(ids_cache) == ["blocks.0.attn.z", "input_mask"]
        seen = []
        hooked = run.run_with_hooks(texts, fwd_hooks=[("embed", lambda a, n: seen.append(a.shape))])
        assert seen == [(3, len(run.to_tokens(texts[0])), run.config["model"]["d_model"])]
        assert np.array_equal(hooked, logits)
        # equal lengths from a list: the mask is there, all true; from an array it is not
        _, same = run.run_with_cache(["ROMEO", "JULIE"], names=[])
        assert same["input_mask"].all() and same["input_mask"].shape == (2, 5)
        assert run.run_with_cache(np.stack([run.to_tokens("ROMEO")] * 2), names=[])[1] == {}
