"""qkv.open and what a run says of itself: family, config, hook points in forward order,
attention sites, capabilities, tokens; close and the context manager."""
import numpy as np
import pytest

import qkv


def test_families_and_capabilities(runs):
    expect = {"copy": ("pairs", ["decode"]), "lm": ("lm", ["generate"]),
              "dyck": ("classify", ["classify"])}
    for name, (family, caps) in expect.items():
        with qkv.open(runs[name]) as run:
            assert run.family == family
            assert run.capabilities() == caps
            assert run.path == runs[name]
            assert "checkpoints" in run.checkpoint


def test_config_is_the_runs_effective_config(runs):
    with qkv.open(runs["lm"]) as run:
        c = run.config
        assert c["model"]["d_model"] == 32 and c["model"]["decoder_layers"] == 2
        assert c["data"]["block_size"] == 16 and c["data"]["task"] == "lm"


def test_hook_points_are_the_names_a_pass_reaches_in_order(runs):
    for name, text in (("copy", "3 1 4"), ("lm", "ROMEO"), ("dyck", "( [ ] )")):
        with qkv.open(runs[name]) as run:
            points = run.hook_points()
            assert len(points) == len(set(points)) > 10
            _, cache = run.run_with_cache(text)
            assert list(cache) == points, name
    with qkv.open(runs["lm"]) as run:
        points = run.hook_points()
        assert points[0] == "embed" and points[-1] == "logits"
        assert "blocks.1.attn.pattern" in points and "blocks.1.mlp.post" in points


def test_attention_sites(runs):
    with qkv.open(runs["copy"]) as run:
        sites = run.attention_sites()
        assert [s["name"] for s in sites] == ["encoder", "decoder", "cross"]
        cross = sites[2]
        assert cross["hook"] == "decoder.blocks.{l}.cross"
        assert (cross["queries"], cross["keys"], cross["causal"]) == ("output", "input", False)
        assert cross["heads"] == 2 and cross["layers"] >= 1
    with qkv.open(runs["lm"]) as run:
        (site,) = run.attention_sites()
        assert site["name"] == "self" and site["causal"] and site["layers"] == 2


def test_tokens_round_trip(runs):
    with qkv.open(runs["lm"]) as run:
        ids = run.to_tokens("ROMEO: be")
        assert ids.dtype == np.int64 and ids.shape == (9,)
        assert run.to_string(ids) == "ROMEO: be"
        assert run.to_string(list(ids)) == "ROMEO: be"
    with qkv.open(runs["copy"]) as run:
        assert run.to_tokens("3 1 4").shape == (3,)


def test_close_and_context_manager(runs):
    run = qkv.open(runs["lm"])
    with run as same:
        assert same is run and not run.closed
    assert run.closed and "closed" in repr(run)
    with pytest.raises(ValueError, match="closed"):
        run.hook_points()
    with pytest.raises(ValueError, match="closed"):
        run.run_with_cache("ROMEO")
    run.close()  # twice: nothing
