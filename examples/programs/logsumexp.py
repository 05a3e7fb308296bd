"""logsumexp over the last dim: max, then the sum of exp(x - max), in one program per row.

    python examples/programs/logsumexp.py
"""
import numpy as np

import tileprim as tp


@tp.program
def logsumexp(x):
    m = tp.max(x, axes=-1, keepdims=True)
    return tp.log(tp.sum(tp.exp(x - m), axes=-1, keepdims=True)) + m


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((512, 4096)) * 4).astype(np.float32)
    y = logsumexp(X, batch_dims=1, backend="cpu")
    assert y.shape == (512, 1)
    x64 = X.astype(np.float64)
    m = x64.max(-1, keepdims=True)
    want = np.log(np.exp(x64 - m).sum(-1, keepdims=True)) + m
    err = np.max(np.abs(y - want) / np.abs(want))
    assert err < 1e-6, err
    print(tp.plan(logsumexp, X, batch_dims=1, backend="cpu"))
    print(f"logsumexp {X.shape}: worst relative error {err:.2e} against float64 NumPy: ok")
