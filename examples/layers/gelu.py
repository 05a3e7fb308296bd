"""GELU, erf and tanh forms (torch.nn.GELU(), GELU(approximate="tanh")), as tileprim.layers' tile
programs: bfloat16 in and out, float32 inside; checked against float64 and, in float64, their
derived backward against torch.autograd.gradcheck.

    python examples/layers/gelu.py
"""
import math

import ml_dtypes
import numpy as np

import tileprim as tp


def gelu64(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((256, 1024)) * 3).astype(ml_dtypes.bfloat16)
    tiles = x.reshape(-1, 8)  # an elementwise layer: a batch of tiles of 8, any shape
    for name, approximate in (("gelu_erf", "none"), ("gelu_tanh", "tanh")):
        y = getattr(tp.layers, name)(tiles, batch_dims=1, backend="cpu").reshape(x.shape)
        want = gelu64(x.astype(np.float64), approximate)
        # one bfloat16 rounding, beside float32's cancellation in 1 + erf (or tanh) near -1, worth
        # an ulp of 1 times |x| (torch's float32 formula cancels alike)
        miss = np.abs(y.astype(np.float64) - want) - 2.0 ** -23 * np.abs(x.astype(np.float64))
        worst = np.max(miss / np.maximum(np.abs(want), 2.0 ** -126))
        assert y.dtype == x.dtype and worst <= 2 ** -8 + 2 ** -16, worst  # one bfloat16 rounding
        print(f"{name} {x.shape} bfloat16: worst relative error {worst:.2e} (bfloat16 rounds at 3.9e-03): ok")
    try:
        import torch
    except ImportError:
        raise SystemExit("(torch not installed: the gradient check is skipped)")
    import tileprim.nn as tpnn
    x64 = torch.randn(6, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    for approximate in ("none", "tanh"):
        layer = tpnn.GELU(approximate)
        assert torch.autograd.gradcheck(layer, (x64,))
        # against the float64 formula, which cancels in 1 + erf (tanh) for x < 0 as any float64 GELU
        # does (torch's too): a few ulps of |x| (8 ulps of 1: 2^-49)
        got, xs = layer(x64).detach().numpy(), x64.detach().numpy()
        want = gelu64(xs, approximate)
        assert np.all(np.abs(got - want) <= 2.0 ** -49 * (np.abs(xs) + np.abs(want))), approximate
    print("GELU's derived backward passes gradcheck (float64), forward within 8 ulps of |x| of float64's: ok")
