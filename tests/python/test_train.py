"""qkv.train: training in process, as `qkv train` (training/train.hpp, python/train.cpp).

The run folder equals the binary's byte for byte, on_step sees every metrics.jsonl record in
order, and a KeyboardInterrupt sent from a timer thread (_thread.interrupt_main) stops the run
with a checkpoint that resumes to exactly the uninterrupted result."""
import _thread
import json
import os
import subprocess
import threading
import time

import pytest

import qkv

# tests/apps/test_train.cpp's small copy run: dropout on (its generator must resume too), a
# checkpoint every 10 steps, validations at 20, 40 and 60.
SMALL = {"threads": 1, "data.train_size": 2000, "data.valid_size": 100, "data.test_size": 100,
         "model.dropout": 0.1, "train.max_steps": 60, "train.log_every": 5,
         "train.eval_every": 20, "checkpoint.every": 10, "optim.warmup": 10}


def copy_config():
    return os.path.join(os.environ["QKV_SOURCE"], "configs", "copy.toml")


def cli_train(qkv_bin, run_dir, overrides):
    args = [qkv_bin, "train", copy_config(), "--run-dir", str(run_dir), "--quiet"]
    for k, v in overrides.items():
        args += ["--" + k, str(v)]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def files(folder):
    out = {}
    for root, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, folder)] = f.read()
    return out


def without_wait(provenance):
    """provenance.json without openmp_wait: how the process's idle threads wait, chosen from the
    machine's load as the qkv binary starts (core/openmp_wait.hpp), a fact of the process."""
    j = json.loads(provenance)
    j.pop("openmp_wait", None)
    return j


def read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def uninterrupted(qkv_bin, tmp_path_factory):
    """The small run, trained by the qkv binary."""
    run = tmp_path_factory.mktemp("train") / "cli"
    cli_train(qkv_bin, run, SMALL)
    return run


def test_the_run_folder_is_qkv_trains_byte_for_byte(uninterrupted, tmp_path):
    seen = []
    r = qkv.train(copy_config(), overrides=SMALL, run_dir=tmp_path / "py", quiet=True,
                  on_step=seen.append)
    assert r["reason"] == "completed" and r["exit_code"] == 0 and r["step"] == 60
    assert r["run_dir"] == str(tmp_path / "py")
    assert r["final"].startswith("done: 60 steps; test (100 examples")
    a, b = files(uninterrupted), files(tmp_path / "py")
    assert sorted(a) == sorted(b)
    assert "loss.svg" in a and "checkpoints/step-00000060/model.safetensors" in a
    for name in a:
        if name == "provenance.json":
            pa, pb = without_wait(a[name]), without_wait(b[name])
            assert pa.pop("qkv") == pb.pop("qkv"), (
                "the qkv binary and the module were built from different sources: build both")
            assert pa == pb
        else:
            assert a[name] == b[name], name
    # on_step: every record, in the file's order
    logged = [json.loads(line) for line in b["metrics.jsonl"].decode().splitlines()]
    assert seen == logged


def test_on_step_sees_the_probes_records_and_every_other(tmp_path):
    seen = []
    qkv.train(copy_config(), overrides={**SMALL, "train.max_steps": 20, "probe.every": 10},
              run_dir=tmp_path / "run", quiet=True, on_step=seen.append)
    logged = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert seen == logged
    kinds = [("probe" if "probe" in j else j.get("split", "train")) for j in seen]
    assert kinds.count("probe") == 3  # steps 0, 10, 20
    assert kinds.count("train") == 4 and kinds.count("valid") == 1 and kinds.count("test") == 1


def resume_and_compare(run, uninterrupted):
    r = qkv.train(resume=run, quiet=True)
    assert r["reason"] == "completed" and r["step"] == 60
    assert read(run / "metrics.jsonl") == read(uninterrupted / "metrics.jsonl")
    for f in ("model.safetensors", "optim.safetensors"):
        p = os.path.join("checkpoints", "step-00000060", f)
        assert read(run / p) == read(uninterrupted / p), f


def test_keyboard_interrupt_during_on_step_stops_there_and_resumes(uninterrupted, tmp_path):
    # The timer thread's interrupt lands while on_step sleeps at step 20's record: Python raises
    # it in on_step, and the run stops at step 20's boundary (after its validation).
    def on_step(j):
        if j["step"] == 20 and "split" not in j:
            threading.Timer(0.01, _thread.interrupt_main).start()
            time.sleep(0.5)

    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        qkv.train(copy_config(), overrides=SMALL, run_dir=run, quiet=True, on_step=on_step)
    assert os.path.isdir(run / "checkpoints" / "step-00000020")
    assert not os.path.exists(run / "checkpoints" / "step-00000030")
    resume_and_compare(run, uninterrupted)


def test_keyboard_interrupt_while_it_steps_leaves_a_resumable_run(uninterrupted, tmp_path):
    # The interrupt lands while C++ steps without the GIL; the signal check between steps sees it.
    def on_step(j):
        if j["step"] == 10 and "split" not in j:
            threading.Timer(0.02, _thread.interrupt_main).start()

    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        qkv.train(copy_config(), overrides=SMALL, run_dir=run, quiet=True, on_step=on_step)
    steps = sorted(n for n in os.listdir(run / "checkpoints") if n.startswith("step-"))
    assert steps and steps[-1] < "step-00000060", steps  # stopped before the end
    resume_and_compare(run, uninterrupted)


def test_an_exception_in_on_step_stops_with_a_checkpoint_and_is_raised(tmp_path):
    def on_step(j):
        if j["step"] == 10:
            raise RuntimeError("enough")

    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="enough"):
        qkv.train(copy_config(), overrides=SMALL, run_dir=run, quiet=True, on_step=on_step)
    assert os.path.isdir(run / "checkpoints" / "step-00000010")
    assert not os.path.exists(run / "checkpoints" / "step-00000020")


def test_bad_arguments_raise_the_fitting_exception(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.toml"):
        qkv.train(str(tmp_path / "nowhere.toml"), quiet=True)
    with pytest.raises(FileNotFoundError, match="no such run folder"):
        qkv.train(resume=tmp_path / "nowhere", quiet=True)
    with pytest.raises(ValueError, match="model.d_modle"):
        qkv.train(copy_config(), overrides={"model.d_modle": 64}, run_dir=tmp_path / "a",
                  quiet=True)
    with pytest.raises(TypeError, match="train.max_steps"):
        qkv.train(copy_config(), overrides={"train.max_steps": object()}, run_dir=tmp_path / "b")
    with pytest.raises(TypeError, match="callable"):
        qkv.train(copy_config(), overrides=SMALL, run_dir=tmp_path / "c", on_step=3)
    # a run refused before its first step leaves no folder behind
    assert not os.path.exists(tmp_path / "a") and not os.path.exists(tmp_path / "c")


def test_other_threads_run_while_it_trains(tmp_path):
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    start = len(ticks)
    qkv.train(copy_config(), overrides={**SMALL, "train.max_steps": 20}, run_dir=tmp_path / "r",
              quiet=True)
    during = len(ticks) - start
    done.set()
    t.join()
    assert during > 10  # the GIL was released while it stepped
