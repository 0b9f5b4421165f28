#!/usr/bin/env python3
"""Every consumer of a run's inference gives what the inference interface gives, in each precision.

Trains, through the real binary, a short Multi30k run and a tiny character LM, in bf16 where this
CPU runs bf16 (else fp32: the bf16 half is then reported skipped). Then, in the run's own
precision and in fp32 (--precision):
- `qkv eval --split test --hyp-out` (batched decodes), `qkv translate` (one sentence at a time, the
  first 8 test sources on stdin) and the page's API (`qkv serve`, /translate) agree line for line;
- `qkv generate` and the page's streamed sample agree character for character;
- a bf16 run's page answers as `qkv translate --precision bf16`, and differs from
  `--precision fp32` exactly where those two differ.

Usage: inference_agreement_test.py QKV_BINARY SOURCE_DIR
Exit 0: passed; 1: failed; 77: skipped (nothing to compare without bf16 is not a skip: fp32 runs).
"""
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_fixture as fx  # noqa: E402

failures = []
N = 8  # sentences compared one by one


def check(ok, what):
    print(("ok: " if ok else "FAILED: ") + what)
    if not ok:
        failures.append(what)


def bf16_runs(qkv, run):
    r = subprocess.run([qkv, "translate", run, "Ein Hund.", "--precision", "bf16"],
                       capture_output=True, text=True)
    return r.returncode == 0


def train(qkv, source, work, precision):
    mt, lm = os.path.join(work, "mt"), os.path.join(work, "lm")
    fx.run([qkv, "train", os.path.join(source, "configs", "multi30k.toml"), "--run-dir", mt,
            "--precision", precision, "--threads", "1", "--quiet",
            "--data.train_size", "600", "--data.valid_size", "30", "--data.test_size", "30",
            "--data.spm_vocab_size", "300", "--data.batch_size", "32", "--model.d_model", "32",
            "--model.heads", "2", "--model.d_ff", "64", "--model.encoder_layers", "1",
            "--model.decoder_layers", "1", "--train.max_steps", "150", "--train.eval_every", "150",
            "--optim.warmup", "20", "--optim.lr", "3e-3"])
    fx.run([qkv, "train", os.path.join(source, "configs", "shakespeare-char.toml"), "--run-dir", lm,
            "--precision", precision, *fx.LM])
    return mt, lm


def sources(source):
    with gzip.open(os.path.join(source, "configs", "data", "multi30k", "test_2016_flickr.de.gz"),
                   "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(N)]


def decodes(qkv, mt, srcs, work, flags):
    """(eval's first N hypotheses, translate's N lines) with these flags."""
    hyp = os.path.join(work, "hyp.txt")
    fx.run([qkv, "eval", mt, "--split", "test", "--hyp-out", hyp, "--threads", "1", *flags])
    with open(hyp, encoding="utf-8") as f:
        batched = f.read().splitlines()[:N]
    one = fx.run([qkv, "translate", mt, "--threads", "1", *flags], input="\n".join(srcs) + "\n")
    return batched, one.stdout.splitlines()


def page(qkv, mt, lm, srcs, flags):
    """The page's answers: each source's greedy translation, and one streamed sample."""
    server = fx.Server(qkv, [mt, lm], ["--threads", "1", *flags])
    try:
        outs = []
        for s in srcs:
            code, t, _ = server.post("/api/runs/mt/translate", {"text": s})
            outs.append(t["greedy"] if code == 200 else f"<{code} {t}>")
        code, sample = fx.generated_text(server.post("/api/runs/lm/generate", {
            "prompt": "ROMEO:", "tokens": 40, "temperature": 0.8, "top_k": 200, "seed": 7}))
        return outs, sample
    finally:
        server.stop()


def sample(qkv, lm, flags):
    out = fx.run([qkv, "generate", lm, "--prompt", "ROMEO:", "--tokens", "40", "--seed", "7",
                  "--quiet", "--threads", "1", *flags]).stdout
    return out.rstrip("\n")[len("ROMEO:"):]


def agree(qkv, mt, lm, srcs, work, name, flags):
    batched, one = decodes(qkv, mt, srcs, work, flags)
    check(batched == one, f"{name}: eval's batched decodes are translate's ({batched} / {one})")
    shown, streamed = page(qkv, mt, lm, srcs, flags)
    check(shown == one, f"{name}: the page's translations are translate's ({shown} / {one})")
    cli = sample(qkv, lm, flags)
    check(streamed == cli, f"{name}: the page's sample is generate's ({streamed!r} / {cli!r})")
    return one, streamed


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    qkv, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    work = tempfile.mkdtemp(prefix="qkv_inference_")
    try:
        probe = os.path.join(work, "probe")
        fx.run([qkv, "train", os.path.join(source, "configs", "copy.toml"), "--run-dir", probe,
                "--quiet", "--train.max_steps", "2", "--optim.warmup", "1", "--data.train_size", "20",
                "--data.valid_size", "2", "--data.test_size", "2"])
        bf16 = subprocess.run([qkv, "eval", probe, "--precision", "bf16"],
                              capture_output=True, text=True).returncode == 0
        mt, lm = train(qkv, source, work, "bf16" if bf16 else "fp32")
        srcs = sources(source)
        own, own_sample = agree(qkv, mt, lm, srcs, work, "the run's precision", [])
        fp32, fp32_sample = agree(qkv, mt, lm, srcs, work, "fp32", ["--precision", "fp32"])
        if bf16:
            named, named_sample = agree(qkv, mt, lm, srcs, work, "bf16", ["--precision", "bf16"])
            check(own == named and own_sample == named_sample,
                  "a bf16 run answers in bf16 unless told otherwise (page and CLI)")
            differ = [i for i in range(N) if own[i] != fp32[i]]
            print(f"bf16 and fp32 decodes differ at sentences {differ}; samples "
                  f"{'differ' if own_sample != fp32_sample else 'agree'}")
        else:
            print("skipped: the bf16 half (this CPU or oneDNN cannot run bf16)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("FAILED: " + "; ".join(failures) if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
