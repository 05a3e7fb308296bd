"""SwiGLU and GeGLU: the gated products silu(a) * b (Llama's MLP) and gelu_tanh(a) * b (Gemma's),
as tileprim.layers' programs in a drop-in MLP (tileprim.nn.SwiGLUMLP / GEGLUMLP, LlamaMLP's
parameter names); checked against float64 and the derived backward against gradcheck.

    python examples/layers/gated_mlp.py
"""
import math

import ml_dtypes
import numpy as np

import tileprim as tp

if __name__ == "__main__":
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((128, 1376)) * 3).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((128, 1376)).astype(ml_dtypes.bfloat16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    wants = {"silu_mul": a64 / (1 + np.exp(-a64)) * b64,
             "gelu_tanh_mul": 0.5 * a64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (a64 + 0.044715 * a64 ** 3))) * b64}
    for name, want in wants.items():
        y = getattr(tp.layers, name)(a.reshape(-1, 8), b.reshape(-1, 8), batch_dims=1, backend="cpu").reshape(a.shape)
        # one bfloat16 rounding, beside float32's cancellation in 1 + erf (or tanh) near -1, worth
        # an ulp of 1 times |x| (torch's float32 formula cancels alike)
        miss = np.abs(y.astype(np.float64) - want) - 2.0 ** -23 * np.abs(a64 * b64)
        worst = np.max(miss / np.maximum(np.abs(want), 2.0 ** -126))
        assert y.dtype == a.dtype and worst <= 2 ** -8 + 2 ** -16, worst
        print(f"{name} {a.shape} bfloat16: worst relative error {worst:.2e}: ok")
    try:
        import torch
    except ImportError:
        raise SystemExit("(torch not installed: the MLP and gradient checks are skipped)")
    import torch.nn.functional as F

    import tileprim.nn as tpnn
    torch.manual_seed(0)
    for mlp, act in ((tpnn.SwiGLUMLP(16, 40, dtype=torch.float64), F.silu),
                     (tpnn.GEGLUMLP(16, 40, dtype=torch.float64), lambda t: F.gelu(t, approximate="tanh"))):
        h = torch.randn(3, 5, 16, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(mlp, (h,))
        eager = mlp.down_proj(act(mlp.gate_proj(h)) * mlp.up_proj(h))
        torch.testing.assert_close(mlp(h), eager, rtol=1e-14, atol=1e-14)
        print(f"{type(mlp).__name__}: gradcheck (float64) and torch's MLP agree: ok")
