"""Softmax over the last dim as one tile program: each row at the scope the planner chooses.

    python examples/programs/softmax.py        # runs on the CPU backend, checks against NumPy
"""
import numpy as np

import tileprim as tp


@tp.program
def softmax(x):
    m = tp.max(x, axes=-1, keepdims=True)
    e = tp.exp(x - m)
    return e / tp.sum(e, axes=-1, keepdims=True)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((512, 4096)) * 4).astype(np.float32)
    y = softmax(X, batch_dims=1, backend="cpu")
    x64 = X.astype(np.float64)
    want = np.exp(x64 - x64.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    err = np.linalg.norm(y - want) / np.linalg.norm(want)
    assert err < 1e-6, err
    print(tp.plan(softmax, X, batch_dims=1, backend="cpu"))
    print(f"softmax {X.shape}: relative L2 error {err:.2e} against float64 NumPy: ok")
