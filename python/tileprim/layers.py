"""The layers LLMs are made of, as tile programs: GELU (erf and tanh forms), SwiGLU and GeGLU's
gated products, LayerNorm, RMSNorm and the cross-entropy of a row of logits against its integer
label. Each computes in float32 (float64 for float64 inputs) and returns the input's dtype, names
no scope (the call or the planner picks one) and gets its backward derived from its steps, like any
program. Their sources are the documentation: read them.

    y = tp.layers.gelu_tanh(x, batch_dims=1)  # maps: contiguous rows taken as tiles of 8
    y = tp.layers.rms_norm(x, w, 1e-6, batch_dims=1)                            # norms: one row a tile
    loss = tp.layers.cross_entropy(logits, labels[:, None], -100, batch_dims=1)  # (M, 1), 0 where ignored

``tileprim.nn`` wraps them as drop-in ``torch.nn.Module``s.

Examples
--------
>>> x = np.array([[-1.0, 0.0, 2.0]], np.float32)
>>> tp.layers.gelu_erf(x, batch_dims=1, backend="cpu")
array([[-0.15865526,  0.        ,  1.9544997 ]], dtype=float32)
>>> logits = np.array([[2.0, 1.0, 0.5], [0.0, 0.0, 0.0]], np.float32)
>>> tp.layers.cross_entropy(logits, np.array([[0], [-100]]), -100, batch_dims=1, backend="cpu")
array([[0.46436882],
       [0.        ]], dtype=float32)
"""
from __future__ import annotations

import math

from ._ops import names as tp  # the ops as a user writes them: tp.sum...
from ._program.program import program
from ._program.stop_gradient import stop_gradient

__all__ = ["gelu_erf", "gelu_tanh", "silu_mul", "gelu_tanh_mul", "layer_norm", "rms_norm", "cross_entropy",
           "cross_entropy_for_backward", "cross_entropy_backward"]

_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _wide(x) -> str:
    """The dtype a layer computes in: float32, or float64 for float64 inputs."""
    return "float64" if x.dtype == "float64" else "float32"


def _gelu_erf(xf):
    return xf * (0.5 + 0.5 * tp.erf(xf * _SQRT_HALF))  # torch.nn.GELU()


def _gelu_tanh(xf):  # torch.nn.GELU(approximate="tanh"), as 0.5 (1 + tanh(z)) = sigmoid(2 z): no cancellation
    return xf * tp.sigmoid(2.0 * _SQRT_2_OVER_PI * tp.fma(0.044715 * xf, xf * xf, xf))


@program
def gelu_erf(x):
    """0.5 x (1 + erf(x / sqrt(2))), in float32."""
    return tp.cast(_gelu_erf(tp.cast(x, _wide(x))), x.dtype)


@program
def gelu_tanh(x):
    """0.5 x (1 + tanh(z)), z = sqrt(2 / pi) (x + 0.044715 x^3), in float32 as x sigmoid(2 z)."""
    return tp.cast(_gelu_tanh(tp.cast(x, _wide(x))), x.dtype)


@program
def silu_mul(a, b):
    """SwiGLU's gated product silu(a) * b (Llama's MLP: down(silu(gate(h)) * up(h))), in float32."""
    return tp.cast(tp.silu(tp.cast(a, _wide(a))) * tp.cast(b, _wide(a)), a.dtype)


@program
def gelu_tanh_mul(a, b):
    """GeGLU's gated product gelu_tanh(a) * b (Gemma's MLP), in float32."""
    return tp.cast(_gelu_tanh(tp.cast(a, _wide(a))) * tp.cast(b, _wide(a)), a.dtype)


@program
def layer_norm(x, w, b, eps):
    """(x - mean) / sqrt(var + eps) * w + b over the last dim (the biased variance, as torch)."""
    xf = tp.cast(x, _wide(x))
    n = x.shape[-1]
    # the rounded mean misses the row's by its sum's rounding; the mean of what is left corrects it
    # (a constant row then centres to exactly 0, as torch's: one ulp left over gave +-1 after rsqrt).
    # The correction passes no gradient: off's is already centred, so the gradient is the same
    off = xf - tp.sum(xf, axes=-1, keepdims=True) / n
    centred = off - stop_gradient(tp.sum(off, axes=-1, keepdims=True) / n)
    var = tp.sum(centred * centred, axes=-1, keepdims=True) / n
    y = tp.fma(centred * tp.rsqrt(var + eps), tp.cast(w, _wide(x)), tp.cast(b, _wide(x)))
    return tp.cast(y, x.dtype)


@program
def rms_norm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w over the last dim."""
    xf = tp.cast(x, _wide(x))
    ms = tp.sum(xf * xf, axes=-1, keepdims=True) / x.shape[-1]
    return tp.cast(xf * tp.rsqrt(ms + eps) * tp.cast(w, _wide(x)), x.dtype)


def _max_and_sum_exp(xf):
    """A row's max m and sum of exp(xf - m): its logsumexp is log(s) + m, its softmax exp(xf - m) / s."""
    m = tp.max(xf, axes=-1, keepdims=True)
    return m, tp.sum(tp.exp(xf - m), axes=-1, keepdims=True)


def _kept_loss(xf, label, ignore_index, m, s):
    lse = tp.log(s) + m
    kept = tp.cast(tp.ne(label, ignore_index), xf.dtype)
    return tp.where(kept, lse - tp.take_along_axis(xf, label), 0.0)


@program
def cross_entropy(x, label, ignore_index):
    """Each row's loss logsumexp(x) - x[label] in float32 (float64 for float64 logits), 0 where
    label == ignore_index: x a row of logits, label its int32 or int64 class (a tile of 1 per row).
    A label outside the row, not ignored, gives NaN. The mean over the kept rows is the caller's
    (``tileprim.nn``'s)."""
    xf = tp.cast(x, _wide(x))
    m, s = _max_and_sum_exp(xf)
    return _kept_loss(xf, label, ignore_index, m, s)


@program
def cross_entropy_for_backward(x, label, ignore_index):
    """``cross_entropy``'s loss (the same bits) and what ``cross_entropy_backward`` reads of each
    row: its max m and its sum of exp(x - m), one value each per row."""
    xf = tp.cast(x, _wide(x))
    m, s = _max_and_sum_exp(xf)
    return _kept_loss(xf, label, ignore_index, m, s), m, s


@program
def cross_entropy_backward(x, label, ignore_index, m, s, grad):
    """The gradient of ``cross_entropy`` with respect to x: (softmax(x) - onehot(label)) * grad
    over each row, in one pass that reads x once (m and s: ``cross_entropy_for_backward``'s; grad:
    the loss's gradient, 0 where the label is ignored), returned in x's dtype. The one-hot is
    take_along_axis's derivative, -grad scattered into zeros at the label (a label outside the row
    adds nothing)."""
    xf = tp.cast(x, _wide(x))
    g = tp.where(tp.cast(tp.ne(label, ignore_index), _wide(x)), grad, 0.0)
    softmax_g = tp.exp(xf - m) * (g / s)
    return tp.cast(tp.scatter_add_along_axis(xf, label, g * -1.0) + softmax_g, x.dtype)
