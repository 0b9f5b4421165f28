"""Nothing a caller passes crashes the interpreter: each bad input raises the named exception
class with the command line's one-line message. And the GIL is released during a pass: another
Python thread runs while a long generate does."""
import threading
import time

import numpy as np
import pytest

import qkv


def test_opening(runs, tmp_path):
    with pytest.raises(FileNotFoundError, match="no such run folder"):
        qkv.open(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError):
        qkv.open(str(tmp_path))  # a folder, but no run in it
    with pytest.raises(ValueError, match="fp32, bf16 or auto"):
        qkv.open(runs["lm"], precision="fp16")
    with pytest.raises(ValueError, match="step-999999"):
        qkv.open(runs["lm"], checkpoint="step-999999")


@pytest.fixture(scope="module")
def lm(runs):
    with qkv.open(runs["lm"]) as run:
        yield run


@pytest.mark.parametrize("bad,says", [
    (np.array([1.5, 2.0]), "must be integers"),
    (np.zeros((1, 2, 3), dtype=np.int64), "dimensions"),
    (np.array([-1, 2]), "out of range"),
    (np.array([10 ** 6]), "out of range"),
    (np.zeros((0, 4), dtype=np.int64), "empty"),
    (np.zeros((1, 0), dtype=np.int64), "empty"),
    (np.zeros(100, dtype=np.int64), "positions"),
    (["ROMEO", ""], "empty"),
    ([[1, 2], []], "row 1 of the batch is empty"),
    ([[1, 2], [[3, 4]]], "dimensions"),
    ([[1, 2], [1.5]], "must be integers"),
    ("", "empty"),
    ({"a": 1}, "must be integers"),
])
def test_bad_inputs_are_value_errors(lm, bad, says):
    with pytest.raises(ValueError, match=says):
        lm.run_with_cache(bad)


def test_a_batch_past_memory_is_a_memory_error_before_it_runs(lm):
    with pytest.raises(MemoryError, match="memory"):
        lm.run_with_cache(np.broadcast_to(np.int64(1), (2 ** 18, 16)), names=[])  # 32 MB of ids


def test_bad_arguments_are_value_errors(runs, lm):
    with pytest.raises(ValueError, match="decoder_input"):
        lm.run_with_cache("ROMEO", decoder_input=np.array([1, 2]))
    with pytest.raises(ValueError, match="tokens must be >= 1"):
        lm.generate("ROMEO", tokens=-1)
    with pytest.raises(ValueError, match="temperature"):
        lm.generate("ROMEO", temperature=-1.0)
    with pytest.raises(ValueError, match="translate"):
        lm.translate("ROMEO")  # a language model cannot decode: the command to use instead
    with pytest.raises(ValueError, match="head"):
        lm.score(ablate="7.7")
    with pytest.raises(ValueError, match="out of range"):
        lm.to_string([1, -3])
    with pytest.raises(ValueError, match="top must be >= 1"):
        lm.lens("ROMEO", top=0)
    with pytest.raises(ValueError, match="batch -1"):
        lm.heads(probes=-1, batches=1)
    with pytest.raises(ValueError, match="bound of -1"):
        lm.heads(max_work=-1)
    with pytest.raises(ValueError, match="not a known split|split"):
        lm.score(split="nonsense")
    with pytest.raises(ValueError, match="pairs"):
        lm.run_with_hooks("ROMEO", fwd_hooks=[("embed",)])
    with pytest.raises(ValueError, match="pairs"):
        lm.run_with_hooks("ROMEO", fwd_hooks=[("embed", "not a function")])
    with qkv.open(runs["copy"]) as copy:
        with pytest.raises(ValueError, match="decoder input"):
            copy.run_with_cache("3 1 4", decoder_input=np.zeros((2, 3), dtype=np.int64))
        with pytest.raises(ValueError, match="unknown|symbol"):
            copy.run_with_cache("3 1 x")


def test_the_gil_is_released_during_generate(lm):
    counted, stop = [0], threading.Event()

    def count():
        while not stop.is_set():
            counted[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        time.sleep(0.05)
        start = counted[0]
        t0 = time.perf_counter()
        # as many generations as fill half a second, however fast this CPU generates
        for _ in range(1000):
            lm.generate("ROMEO:", tokens=3000, seed=1)
            if time.perf_counter() - t0 > 0.5:
                break
        seconds = time.perf_counter() - t0
        during = counted[0] - start
    finally:
        stop.set()
        t.join()
    # Held through the call, the GIL would let the counting thread run only between tokens.
    assert seconds > 0.2, f"generate took only {seconds:.3f} s: too short to tell"
    assert during > 10000 * seconds, (during, seconds)


def test_ctrl_c_stops_a_generate(lm):
    import _thread
    timer = threading.Timer(0.3, _thread.interrupt_main)  # as SIGINT would
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            lm.generate("ROMEO:", tokens=10 ** 7, seed=1)
    finally:
        timer.cancel()
    assert time.perf_counter() - t0 < 5
    assert lm.generate("ROMEO:", tokens=5, seed=1)  # the run still answers


def test_two_threads_share_one_run(runs):
    with qkv.open(runs["copy"]) as run:
        texts = ["3 1 4 1 5", "7 7 2 9 9"]
        alone = [run.run_with_cache(t, names=["*.pattern", "logits"]) for t in texts]
        got = {}

        def ask(i):
            for _ in range(20):
                got[i] = run.run_with_cache(texts[i], names=["*.pattern", "logits"])

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i in range(2):
            assert np.array_equal(got[i][0], alone[i][0])
            assert all(np.array_equal(got[i][1][k], alone[i][1][k]) for k in alone[i][1])
