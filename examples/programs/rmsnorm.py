"""RMSNorm: bfloat16 in and out, float32 inside, the weight w of shape (N,) broadcast over the rows.

    python examples/programs/rmsnorm.py
"""
import ml_dtypes
import numpy as np

import tileprim as tp


@tp.program
def rmsnorm(x, w, eps):
    xf = tp.cast(x, "float32")
    ms = tp.sum(xf * xf, axes=-1, keepdims=True) / x.shape[-1]
    return tp.cast(xf * tp.rsqrt(ms + eps) * tp.cast(w, "float32"), x.dtype)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    X = rng.standard_normal((512, 4096)).astype(ml_dtypes.bfloat16)
    w = rng.uniform(0.5, 1.5, 4096).astype(ml_dtypes.bfloat16)
    y = rmsnorm(X, w, 1e-6, batch_dims=1, backend="cpu")
    assert y.dtype == X.dtype and y.shape == X.shape
    x64 = X.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6) * w.astype(np.float64)
    worst = np.max(np.abs(y.astype(np.float64) - want) / np.maximum(np.abs(want), 1e-30))
    assert worst <= 2 ** -8 + 2 ** -16, worst  # one bfloat16 rounding of the float32 result
    print(tp.plan(rmsnorm, X, w, 1e-6, batch_dims=1, backend="cpu"))
    print(f"rmsnorm {X.shape} bfloat16: worst relative error {worst:.2e} (bfloat16 rounds at 3.9e-03): ok")
