"""Trains the tiny runs the Python module's tests read (a ctest fixture, FIXTURES_SETUP).

    train_fixture.py QKV SOURCE OUT

Through the real binary, side by side, one thread each, seconds each: a copy-task
encoder-decoder (OUT/copy, fp32), a two-layer character language model (OUT/lm, the
shakespeare-char config's precision: bf16 where the CPU runs it) and an encoder-only Dyck
classifier (OUT/dyck). Flags as tests/apps/serve_fixture.py and serve_encoder_test.py train them.
"""
import os
import shutil
import subprocess
import sys

COPY = ["--quiet", "--threads", "1", "--train.max_steps", "200", "--train.epochs", "100",
        "--train.eval_every", "100", "--train.log_every", "10", "--train.eval_examples", "10",
        "--data.train_size", "1000", "--data.valid_size", "10", "--data.test_size", "10",
        "--optim.warmup", "20", "--model.d_model", "32", "--model.d_ff", "64", "--model.heads", "2"]
LM = ["--quiet", "--threads", "1", "--model.d_model", "32", "--model.d_ff", "64",
      "--model.decoder_layers", "2", "--model.heads", "2", "--data.block_size", "16",
      "--model.max_len", "16", "--data.batch_size", "16", "--train.max_steps", "60",
      "--train.log_every", "10", "--train.eval_every", "30", "--train.eval_iters", "2",
      "--optim.warmup", "10", "--optim.lr", "1e-2"]
DYCK = ["--quiet", "--threads", "1", "--train.max_steps", "150", "--train.epochs", "0",
        "--train.eval_every", "50", "--data.train_size", "2000", "--data.valid_size", "100",
        "--data.test_size", "100", "--data.max_len", "12", "--model.d_model", "32",
        "--model.d_ff", "64", "--model.heads", "2", "--model.encoder_layers", "2",
        "--optim.warmup", "10", "--optim.lr", "3e-3"]


def main():
    qkv, source, out = sys.argv[1:4]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    jobs = {"copy": ("copy.toml", COPY), "lm": ("shakespeare-char.toml", LM),
            "dyck": ("dyck.toml", DYCK)}
    procs = []
    for name, (config, flags) in jobs.items():
        cmd = [qkv, "train", os.path.join(source, "configs", config), "--run-dir",
               os.path.join(out, name), *flags]
        procs.append((cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                            text=True)))
    failed = False
    for cmd, p in procs:
        text = p.communicate()[0]
        if p.returncode != 0:
            print(f"FAILED: {' '.join(cmd)}\n{text}")
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
