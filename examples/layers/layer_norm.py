"""LayerNorm and RMSNorm as tileprim.layers' programs: bfloat16 rows in and out, float32 inside,
the weight (and LayerNorm's bias) one tile the batch shares; checked against float64, and the
derived backward (x, weight and bias) against gradcheck in float64.

    python examples/layers/layer_norm.py
"""
import ml_dtypes
import numpy as np

import tileprim as tp

if __name__ == "__main__":
    rng = np.random.default_rng(2)
    n = 1000  # a row one thread holds: no scope named (tp.program's default until the planner picks one)
    x = (rng.standard_normal((64, n)) * 2 + 0.5).astype(ml_dtypes.bfloat16)
    w = rng.uniform(0.5, 1.5, n).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal(n).astype(ml_dtypes.bfloat16)
    x64, w64, b64 = (t.astype(np.float64) for t in (x, w, b))
    centred = x64 - x64.mean(-1, keepdims=True)
    want = {"layer_norm": centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + 1e-5) * w64 + b64,
            "rms_norm": x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * w64}
    got = {"layer_norm": tp.layers.layer_norm(x, w, b, 1e-5, batch_dims=1, backend="cpu"),
           "rms_norm": tp.layers.rms_norm(x, w, 1e-6, batch_dims=1, backend="cpu")}
    for name in want:
        err = np.abs(got[name].astype(np.float64) - want[name]) / np.maximum(np.abs(want[name]), 1e-3)
        assert got[name].dtype == x.dtype and np.max(err) <= 2 ** -8 + 2 ** -12, np.max(err)
        print(f"{name} {x.shape} bfloat16: worst relative error {np.max(err):.2e}: ok")
    print(tp.plan(tp.layers.layer_norm, x, w, b, 1e-5, batch_dims=1, backend="cpu"))
    try:
        import torch
    except ImportError:
        raise SystemExit("(torch not installed: the gradient check is skipped)")
    import tileprim.nn as tpnn
    torch.manual_seed(2)
    h = torch.randn(4, 3, 24, dtype=torch.float64, requires_grad=True)
    norm = tpnn.LayerNorm(24, dtype=torch.float64)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_()
    assert torch.autograd.gradcheck(lambda h, w, b: tp.layers.layer_norm(h, w, b, 1e-5, batch_dims=2, backend="cpu"),
                                     (h, norm.weight, norm.bias))
    torch.testing.assert_close(norm(h), torch.nn.functional.layer_norm(h, (24,), norm.weight, norm.bias))
    rms = tpnn.RMSNorm(24, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda h, w: tp.layers.rms_norm(h, w, 1e-6, batch_dims=2, backend="cpu"),
                                     (h, rms.weight))
    print("LayerNorm and RMSNorm: gradcheck (float64) of x, weight and bias, and torch's layer_norm agree: ok")
