"""PyTorch reference for tests/nn/test_linear_cross_entropy_reference.cpp.

Usage: /usr/bin/python3 reference_linear_cross_entropy.py DIR

For every DIR/<case>.in.safetensors: x (N, d) and w (V, d) float32, b (V) float32 when the case
has a bias, the targets (N) int64, and in the metadata ("config", a JSON string) ignore_index
and label_smoothing. Computes the output layer F.linear(x, w, b) under
torch.autocast("cpu", bfloat16), as a PyTorch user trains in bf16 (the logits come out
bfloat16), then F.cross_entropy on the logits cast to float32 with that ignore_index and label
smoothing, backpropagates into the float32 leaves and writes DIR/<case>.out.safetensors with
"loss" (shape (1), float64), "grad.x", "grad.w" and "grad.b" (float32), and the same in float32
without autocast ("fp32.loss", ...).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_nn import read_safetensors, run_all, write_safetensors  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def run(t, config, autocast):
    leaves = {k: torch.tensor(t[k], requires_grad=True) for k in ("x", "w", "b") if k in t}
    targets = torch.tensor(t["targets"])
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = F.linear(leaves["x"], leaves["w"], leaves.get("b"))
    want = torch.bfloat16 if autocast else torch.float32
    if logits.dtype != want:  # the reference must be what it says, not silently float32
        sys.stderr.write("reference_linear_cross_entropy.py: logits are %s under autocast=%s\n" %
                         (logits.dtype, autocast))
        sys.exit(2)
    loss = F.cross_entropy(logits.float(), targets, ignore_index=config["ignore_index"],
                           label_smoothing=config["label_smoothing"])
    loss.backward()
    res = {"loss": np.array([loss.item()], dtype=np.float64)}
    for name, var in leaves.items():
        res["grad." + name] = var.grad.numpy()
    return res


def run_case(path):
    t, meta = read_safetensors(path)
    config = json.loads(meta["config"])
    res = run(t, config, True)
    for name, a in run(t, config, False).items():
        res["fp32." + name] = a
    write_safetensors(path.replace(".in.safetensors", ".out.safetensors"), res)


def main():
    torch.set_num_threads(1)  # ctest runs tests side by side
    run_all(run_case, __doc__, "reference_linear_cross_entropy.py")


if __name__ == "__main__":
    main()
