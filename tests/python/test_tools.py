"""The commands as functions return the command line's numbers: translate, generate and classify
what `qkv translate / generate / classify --json` print, score the dict of `qkv eval --json`
(less its timings), heads, lens, patch and attribute their --json, each with and without ablate=."""
import subprocess

import pytest

import qkv

TIMINGS = {"seconds", "sentences_per_second"}


def stdout(qkv_bin, *args):
    r = subprocess.run([qkv_bin, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def untimed(scores):
    return {k: v for k, v in scores.items() if k not in TIMINGS}


@pytest.mark.parametrize("ablate", [None, "cross.0.1"])
def test_translate(runs, qkv_bin, ablate):
    texts = ["3 1 4 1 5", "7 7 2"]
    extra = ["--ablate", ablate] if ablate else []
    with qkv.open(runs["copy"]) as run:
        for beam in (1, 3):
            cli = stdout(qkv_bin, "translate", runs["copy"], *texts, "--beam", str(beam), *extra)
            assert run.translate(texts, beam=beam, ablate=ablate) == cli.splitlines()
        assert run.translate(texts[0], ablate=[ablate] if ablate else None) == \
            stdout(qkv_bin, "translate", runs["copy"], texts[0], *extra).strip("\n")


@pytest.mark.parametrize("ablate", [None, "1.0"])
def test_generate(runs, qkv_bin, ablate):
    extra = ["--ablate", ablate] if ablate else []
    prompt = "ROMEO:"
    with qkv.open(runs["lm"]) as run:
        out = run.generate(prompt, tokens=40, temperature=0.9, top_k=10, seed=7, ablate=ablate)
        cli = stdout(qkv_bin, "generate", runs["lm"], "--prompt", prompt, "--tokens", "40",
                     "--temperature", "0.9", "--top-k", "10", "--seed", "7", "--quiet", *extra)
        assert cli == prompt + out + "\n"
        assert run.generate(prompt, tokens=40, temperature=0.9, top_k=10, seed=8) != out or ablate


@pytest.mark.parametrize("ablate", [None, "0.1"])
def test_classify(runs, cli, ablate):
    extra = ["--ablate", ablate] if ablate else []
    texts = ["( [ ] )", "( ] [ )"]
    with qkv.open(runs["dyck"]) as run:
        got = run.classify(texts, ablate=ablate)
        assert got == [cli("classify", runs["dyck"], t, "--json", *extra) for t in texts]
        assert run.classify(texts[0], ablate=ablate) == got[0]
        assert abs(sum(c["p"] for c in got[0]["classes"]) - 1) < 1e-9


@pytest.mark.parametrize("name,ablate", [("copy", None), ("copy", "cross.0.1"), ("lm", None),
                                         ("lm", "1.0"), ("dyck", "0.1")])
def test_score_is_eval_json(runs, cli, name, ablate):
    extra = ["--ablate", ablate] if ablate else []
    with qkv.open(runs[name]) as run:
        got = run.score(ablate=ablate)
        assert untimed(got) == untimed(cli("eval", runs[name], "--json", *extra))
        assert "loss" in got
    if name == "copy":
        with qkv.open(runs[name]) as run:
            assert untimed(run.score(split="test")) == \
                untimed(cli("eval", runs[name], "--json", "--split", "test"))


@pytest.mark.parametrize("name,ablate", [("lm", None), ("lm", "0.1"), ("copy", None)])
def test_heads_is_heads_json(runs, cli, name, ablate):
    extra = ["--ablate", ablate] if ablate else []
    with qkv.open(runs[name]) as run:
        got = run.heads(batches=1, probes=2, ablate=ablate)
        assert got == cli("heads", runs[name], "--json", "--batches", "1", "--probes", "2", *extra)
        assert got["heads"]


@pytest.mark.parametrize("name,text,target,ablate", [("lm", "ROMEO", "a", None),
                                                     ("lm", "ROMEO", None, "1.1"),
                                                     ("copy", "3 1 4 1 5", None, "cross.0.0")])
def test_lens_is_lens_json(runs, cli, name, text, target, ablate):
    extra = (["--target", target] if target else []) + (["--ablate", ablate] if ablate else [])
    with qkv.open(runs[name]) as run:
        got = run.lens(text, target=target, top=3, ablate=ablate)
        assert got == cli("lens", runs[name], text, "--json", "--top", "3", *extra)
        assert ("attribution" in got) == bool(target)


def test_lens_position_is_lens_position_json(runs, cli):
    with qkv.open(runs["copy"]) as run:
        got = run.lens("1 2 3 4 5", top=3, position=0)
        assert got == cli("lens", runs["copy"], "1 2 3 4 5", "--json", "--top", "3",
                          "--position", "0")
        assert got["index"] == 0 and got["position"] == "<bos>"


def test_patch_is_patch_json(runs, qkv_bin, cli):
    pairs = [("1 2 3 4 5", "1 2 3 4 7"), ("3 1 4 1 5", "3 1 4 1 9"), ("8 8 2", "8 8 6")]
    compared = 0
    with qkv.open(runs["copy"]) as run:
        for clean, corrupt in pairs:
            r = subprocess.run([qkv_bin, "patch", runs["copy"], "--clean", clean, "--corrupt",
                                corrupt, "--json"], capture_output=True, text=True)
            if r.returncode != 0:  # the two answers were the same: no fraction to compare
                with pytest.raises(ValueError, match=r.stderr.strip().split(": ", 2)[-1][:30]):
                    run.patch(clean=clean, corrupt=corrupt)
                continue
            assert run.patch(clean=clean, corrupt=corrupt) == \
                cli("patch", runs["copy"], "--clean", clean, "--corrupt", corrupt, "--json")
            assert run.patch(clean=clean, corrupt=corrupt, ablate="encoder.0.0") == \
                cli("patch", runs["copy"], "--clean", clean, "--corrupt", corrupt, "--json",
                    "--ablate", "encoder.0.0")
            compared += 1
    assert compared >= 1


def test_patch_approx_is_patch_approx_json(runs, qkv_bin, cli):
    pairs = [("1 2 3 4 5", "7 2 3 4 5"), ("1 2 3 4 5", "1 2 3 4 7"), ("3 1 4 1 5", "3 1 4 1 9")]
    compared = 0
    with qkv.open(runs["copy"]) as run:
        for clean, corrupt in pairs:
            args = ["patch", runs["copy"], "--clean", clean, "--corrupt", corrupt, "--json",
                    "--approx"]
            if subprocess.run([qkv_bin, *args], capture_output=True).returncode != 0:
                continue  # the two answers were the same: nothing to estimate
            assert run.patch(clean=clean, corrupt=corrupt, approx=True) == cli(*args)
            got = run.patch(clean=clean, corrupt=corrupt, approx=True, check=4)
            assert got == cli(*args, "--check", "4")
            assert len(got["check"]["cells"]) == 4
            compared += 1
        with pytest.raises(ValueError, match="check= needs approx=True"):
            run.patch(clean="1 2 3 4 5", corrupt="7 2 3 4 5", check=4)
        with pytest.raises(ValueError, match="check must be 1..64, got 0"):
            run.patch(clean="1 2 3 4 5", corrupt="7 2 3 4 5", approx=True, check=0)
    assert compared >= 1


def test_patch_path_is_patch_path_json(runs, qkv_bin, cli):
    pairs = [("First Citizen", "KING HENRY: M"), ("ROMEO: O, she", "JULIET: Ay me"),
             ("What, ho! Boy", "Nay, my lord.")]
    compared = 0
    with qkv.open(runs["lm"]) as run:
        for clean, corrupt in pairs:
            args = ["patch", runs["lm"], "--clean", clean, "--corrupt", corrupt, "--json",
                    "--path", "0.1,L1H0"]
            if subprocess.run([qkv_bin, *args], capture_output=True).returncode != 0:
                continue  # the two answers were the same: nothing to restore
            got = run.patch(clean=clean, corrupt=corrupt, path="0.1,L1H0")
            assert got == cli(*args)
            assert [s["sender"] for s in got["senders"]] == ["0.1", "1.0"]
            compared += 1
        with pytest.raises(ValueError, match="path= and approx=True are two methods"):
            run.patch(clean="First Citizen", corrupt="KING HENRY: M", path="0.1", approx=True)
    with qkv.open(runs["copy"]) as run:  # post-LN
        with pytest.raises(ValueError, match="--path needs a pre-LN model"):
            run.patch(clean="1 2 3 4 5", corrupt="1 2 3 4 7", path="encoder.0.0")
    assert compared >= 1


@pytest.mark.parametrize("name,text,kw,args", [
    ("copy", "3 1 4 1 5", {"method": "integrated-gradients", "baseline": "pad", "steps": 16},
     ["--method", "integrated-gradients", "--baseline", "pad", "--steps", "16"]),
    ("copy", "3 1 4", {"target": "3 1", "contrast": "4", "ablate": "cross.0.1"},
     ["--target", "3 1", "--contrast", "4", "--ablate", "cross.0.1"]),
    ("lm", "ROMEO", {"method": "value-zeroing", "tokens": 2}, ["--method", "value-zeroing",
                                                               "--tokens", "2"])])
def test_attribute_is_attribute_json(runs, cli, name, text, kw, args):
    with qkv.open(runs[name]) as run:
        assert run.attribute(text, **kw) == cli("attribute", runs[name], text, "--json", *args)
        with pytest.raises(ValueError, match="unknown baseline 'zeros'; did you mean 'zero'"):
            run.attribute(text, method="integrated-gradients", baseline="zeros")
