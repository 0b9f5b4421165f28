"""What the Python module's tests share: the tiny runs (tests/python/train_fixture.py, trained by
ctest's fixture), the qkv binary, and running it for its --json."""
import json
import os
import subprocess

import pytest


def _env(name):
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set: run these tests through ctest (tests/python/CMakeLists.txt)", 2)
    return value


@pytest.fixture(scope="session")
def qkv_bin():
    return _env("QKV_BIN")


@pytest.fixture(scope="session")
def runs():
    root = _env("QKV_TEST_RUNS")
    return {name: os.path.join(root, name) for name in ("copy", "lm", "dyck")}


@pytest.fixture(scope="session")
def cli(qkv_bin):
    """cli("lens", run, "text", "--json") -> the command's stdout parsed as JSON."""
    def run(*args):
        r = subprocess.run([qkv_bin, *args], capture_output=True, text=True)
        assert r.returncode == 0, f"qkv {' '.join(args)} failed:\n{r.stderr}"
        return json.loads(r.stdout)
    return run


def open_in(path, precision):
    """qkv.open(path, precision=...), the test skipped where this CPU cannot run bf16."""
    import qkv
    try:
        return qkv.open(path, precision=precision)
    except ValueError as e:
        if precision == "bf16" and "bf16" in str(e):
            pytest.skip(f"bf16 does not run here: {e}")
        raise
