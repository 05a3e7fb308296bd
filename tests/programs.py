"""The tile programs the tests share, each written once as a user writes it, and its float64 NumPy
oracle. The bodies are plain functions: a test makes the Program it needs with ``tp.program(f,
scope=...)`` (or calls it inside another program). 16-bit tiles are computed in float32 inside and
cast back, as a norm or softmax over bfloat16 activations is; float32 and float64 tiles stay in
their own dtype (so gradcheck runs in float64)."""
import numpy as np

import tileprim as tp

_SIXTEEN = ("float16", "bfloat16")


def _wide(x):
    return tp.cast(x, "float32") if x.dtype in _SIXTEEN else x


def _back(y, x):
    return tp.cast(y, x.dtype) if x.dtype in _SIXTEEN else y


def softmax(x):
    xf = _wide(x)
    e = tp.exp(xf - tp.max(xf, axes=-1, keepdims=True))
    return _back(e / tp.sum(e, axes=-1, keepdims=True), x)


def logsumexp(x):  # one value per row (keepdims=False)
    xf = _wide(x)
    m = tp.max(xf, axes=-1, keepdims=True)
    return _back(tp.log(tp.sum(tp.exp(xf - m), axes=-1)) + tp.max(xf, axes=-1), x)


def normalized(x, w, eps):
    """x scaled by the reciprocal root of its mean square, times w (RMSNorm's body)."""
    xf = _wide(x)
    ms = tp.sum(xf * xf, axes=-1, keepdims=True) / x.shape[-1]
    return _back(xf * tp.rsqrt(ms + eps) * _wide(w), x)


def rmsnorm(x, w, eps):  # w of shape (N,): one tile shared by every row
    return normalized(x, w, eps)


def add_rmsnorm(x, r, w, eps):  # the residual stream's fused step: h = x + r, and h normalised
    h = x + r
    return normalized(h, w, eps), h


# ---- float64 oracles -----------------------------------------------------------------------------
def softmax64(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def logsumexp64(x):
    x = np.asarray(x, np.float64)
    m = x.max(axis=-1)
    return np.log(np.exp(x - m[..., None]).sum(axis=-1)) + m


def rmsnorm64(x, w, eps):
    x = np.asarray(x, np.float64)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * np.asarray(w, np.float64)
