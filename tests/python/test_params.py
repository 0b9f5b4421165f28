"""run.params: writable zero-copy float32 views of the model's weights. Editing one changes the
next pass exactly as the same edit made in C++ (through the tensor API) does, in fp32 and in
bf16; a view outlives run.close() and `del run`."""
import gc

import numpy as np

import qkv
from qkv import _qkv

from conftest import open_in


def test_views_share_the_models_memory(runs):
    with qkv.open(runs["lm"]) as run:
        a, b = run.params, run.params
        assert list(a) and set(a) == set(b)
        for name, view in a.items():
            assert view.dtype == np.float32 and view.flags.writeable
            assert np.shares_memory(view, b[name]), name


def edit_and_compare(runs, precision):
    """The same edit to one weight, through a view in one run and in C++ in another: the
    logits of both are the same bits, and differ from before."""
    text = "ROMEO: be"
    a = open_in(runs["lm"], precision)
    b = open_in(runs["lm"], precision)
    before = a.run_with_cache(text, names=[])[0]
    name = next(n for n, v in a.params.items() if v.ndim == 2 and "blocks" in n)
    view = a.params[name]
    i = view.size // 3
    value = float(view.flat[i]) + 0.5
    view.flat[i] = value
    _qkv._testing.set_param(b, name, i, value)
    after_a = a.run_with_cache(text, names=[])[0]
    after_b = b.run_with_cache(text, names=[])[0]
    assert np.array_equal(after_a, after_b), name
    assert not np.array_equal(before, after_a), name
    a.close(), b.close()


def test_an_edit_through_a_view_is_the_same_edit_in_cpp_fp32(runs):
    edit_and_compare(runs, "fp32")


def test_an_edit_through_a_view_is_the_same_edit_in_cpp_bf16(runs):
    edit_and_compare(runs, "bf16")  # the weights' bf16 copies are made afresh by each call


def test_views_outlive_the_run(runs):
    run = qkv.open(runs["copy"])
    views = run.params
    total = sum(float(v.sum()) for v in views.values())
    run.close()
    del run
    gc.collect()
    assert sum(float(v.sum()) for v in views.values()) == total
    for v in views.values():
        v[...] = 1.0  # the memory is still the views' to write
    assert sum(float(v.sum()) for v in views.values()) == sum(v.size for v in views.values())
