"""qkv from Python: trained runs, their weights and every activation as numpy arrays.

    import qkv
    run = qkv.open("runs/demo")                  # a run folder `qkv train` wrote
    logits, cache = run.run_with_cache("3 1 4", names=["*.attn.pattern"])
    run.params["encoder.layers.0.self_attn.w_q.weight"]  # a zero-copy view of a weight

The compiled part is qkv._qkv (python/*.cpp); this package re-exports it. The API, with an
example for each call: docs/python.md. qkv.train trains a run in this process, as `qkv train`.
"""
from ._qkv import Run, open, train  # noqa: F401  (open: qkv.open, as the issue and TransformerLens name it)

__all__ = ["open", "Run", "train"]
