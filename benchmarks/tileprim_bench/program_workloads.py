"""The tile-program benchmark's workloads over rows of length N: softmax, RMSNorm, residual-add +
RMSNorm and logsumexp, each as a tile program, as the plain PyTorch and NumPy code a user would
otherwise write (the peers; Liger's Triton kernels where it has one), and as a float64 oracle
written once for NumPy arrays and torch tensors; softmax and RMSNorm also with the float64 oracle
of their gradients (the forward + backward cases, where torch autograd derives the peers' backward
and tileprim derives the program's).

Every workload reads bfloat16 or float32 rows, computes in float32 and writes the input's dtype,
as PyTorch and Liger do. The programs are examples/programs/{softmax,rmsnorm,logsumexp}.py's with
that float32 cast added to softmax and logsumexp (the examples' float32 steps are the same), and
their row max read through tp.stop_gradient, as a user who trains through them writes it (the
forward's steps and kernel are the same; the derived backward skips the max). Each
program names no scope and no staging: it is called as a user calls it, and the planner chooses
both (benchmarks/program_scopes.py is the sweep its cost model is checked against)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

import tileprim as tp

__all__ = ["EPS", "softmax", "rmsnorm", "add_rmsnorm", "logsumexp", "Workload", "WORKLOADS", "GRADIENT_WORKLOADS"]

EPS = 1e-6


@tp.program
def softmax(x):
    xf = tp.cast(x, "float32")
    e = tp.exp(xf - tp.stop_gradient(tp.max(xf, axes=-1, keepdims=True)))
    return tp.cast(e / tp.sum(e, axes=-1, keepdims=True), x.dtype)


def normalized(x, w, eps):
    """RMSNorm of the tile x (any float dtype) by w, float32 inside; inlined by both programs."""
    xf = tp.cast(x, "float32")
    ms = tp.sum(xf * xf, axes=-1, keepdims=True) / x.shape[-1]
    return tp.cast(xf * tp.rsqrt(ms + eps) * tp.cast(w, "float32"), x.dtype)


@tp.program
def rmsnorm(x, w, eps):
    return normalized(x, w, eps)


@tp.program
def add_rmsnorm(x, r, w, eps):
    """The residual stream's fused step (Liger's and Quack's fused add-RMSNorm): the sum h in the
    input's dtype, and h normalised."""
    h = x + r
    return normalized(h, w, eps), h


@tp.program
def logsumexp(x):
    xf = tp.cast(x, "float32")
    m = tp.stop_gradient(tp.max(xf, axes=-1, keepdims=True))
    return tp.cast(tp.log(tp.sum(tp.exp(xf - m), axes=-1, keepdims=True)) + m, x.dtype)


# ---- peers: tensor methods only, so the same code runs eager and under torch.compile -----------
def torch_softmax(x):
    return x.softmax(-1)


def torch_rmsnorm(x, w, eps):
    xf = x.float()
    return (xf * (xf * xf).mean(-1, keepdim=True).add(eps).rsqrt() * w.float()).to(x.dtype)


def torch_add_rmsnorm(x, r, w, eps):
    h = x + r
    return torch_rmsnorm(h, w, eps), h


def torch_fused_rmsnorm(x, w, eps):
    """torch.nn.functional.rms_norm: PyTorch's own RMSNorm kernel, where it has one."""
    import torch.nn.functional as functional
    return functional.rms_norm(x, x.shape[-1:], w, eps)


def torch_fused_add_rmsnorm(x, r, w, eps):
    h = x + r
    return torch_fused_rmsnorm(h, w, eps), h


def torch_logsumexp(x):
    return x.logsumexp(-1, keepdim=True)


def numpy_softmax(x):
    xf = x.astype(np.float32)
    e = np.exp(xf - xf.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(x.dtype)


def numpy_rmsnorm(x, w, eps):
    xf = x.astype(np.float32)
    ms = (xf * xf).mean(-1, keepdims=True)
    return (xf / np.sqrt(ms + np.float32(eps)) * w.astype(np.float32)).astype(x.dtype)


def numpy_add_rmsnorm(x, r, w, eps):
    h = x + r
    return numpy_rmsnorm(h, w, eps), h


def numpy_logsumexp(x):
    xf = x.astype(np.float32)
    m = xf.max(-1, keepdims=True)
    return (np.log(np.exp(xf - m).sum(-1, keepdims=True)) + m).astype(x.dtype)


# ---- the float64 oracle, for NumPy arrays and torch tensors alike ---------------------------------
def _xp(a):
    return np if isinstance(a, np.ndarray) else __import__("torch")


def _row_max(a):
    return a.max(-1, keepdims=True) if isinstance(a, np.ndarray) else a.amax(-1, keepdim=True)


def _row_sum(a):
    return a.sum(-1, keepdims=True) if isinstance(a, np.ndarray) else a.sum(-1, keepdim=True)


def _rms(x, w):
    return x / _xp(x).sqrt(_row_sum(x * x) / x.shape[-1] + EPS) * w


def softmax_oracle(inputs, results):
    (x,) = inputs
    e = _xp(x).exp(x - _row_max(x))
    return (e / _row_sum(e),)


def rmsnorm_oracle(inputs, results):
    x, w = inputs
    return (_rms(x, w),)


def add_rmsnorm_oracle(inputs, results):
    # the program defines h in the input's dtype, so the normalised rows are checked against
    # RMSNorm of the h it returned, and h against the exact sum (one rounding away)
    x, r, w = inputs
    _, h = results
    return _rms(h, w), x + r


def logsumexp_oracle(inputs, results):
    (x,) = inputs
    m = _row_max(x)
    return (_xp(x).log(_row_sum(_xp(x).exp(x - m))) + m,)


# ---- the gradients' float64 oracle (the forward + backward cases), given the rows' gradient g -----
# one gradient per array argument: those of the rows for these rows, w's summed over these rows
# (the caller adds up its chunks of rows)
def softmax_gradients(inputs, g):
    """dx = y (g - sum(g y)), y = softmax(x)."""
    (y,) = softmax_oracle(inputs, None)
    return (y * (g - _row_sum(g * y)),)


def rmsnorm_gradients(inputs, g):
    """dx = rstd (g w - x rstd^2 mean(g w x)) and dw = sum over the rows of g x rstd, where
    rstd = 1 / sqrt(mean(x^2) + eps)."""
    x, w = inputs
    n = x.shape[-1]
    rstd = 1 / _xp(x).sqrt(_row_sum(x * x) / n + EPS)
    gw = g * w
    return rstd * (gw - x * rstd ** 2 * (_row_sum(gw * x) / n)), (g * x * rstd).sum(0)


def _liger_softmax(F, x):
    return F.liger_softmax(x)


# Liger's RMSNorms with offset 0 and "gemma" casting: everything in float32, then one cast, as
# the programs do (its default "llama" casting multiplies by w in the input's dtype)
def _liger_rms_norm(F, x, w, eps):
    return F.liger_rms_norm(x, w, eps, 0.0, "gemma", False)


def _liger_fused_add(F, x, r, w, eps):
    return F.liger_fused_add_rms_norm(x, r, w, eps, 0.0, "gemma", False)


@dataclass(frozen=True)
class Workload:
    """One benchmarked computation: the program, its peers, its oracle, and its arguments and
    results in shape: ``rows_in`` (M, N) operands (x, or x and r), then w (N,) and eps where
    ``weighted``; ``rows_out`` (M, N) results then ``values_out`` (M, 1) results."""

    name: str
    program: tp.Program
    rows_in: int
    weighted: bool
    rows_out: int
    values_out: int
    oracle: Callable
    torch_peer: Callable
    numpy_peer: Callable
    # Liger's op: (liger_kernel.transformers.functional, *the program's arguments); None: it has none
    liger: Optional[Callable] = None
    torch_rms_norm: Optional[Callable] = None  # the same through torch.nn.functional.rms_norm
    # the float64 oracle of the gradients ((the arrays, the results' gradient) -> one per array);
    # None: no forward + backward case
    gradients: Optional[Callable] = None

    def arguments(self, x, r, w) -> tuple:
        """The program's (and every peer's) arguments, from the shared inputs."""
        return (x, r)[:self.rows_in] + ((w, EPS) if self.weighted else ())

    def bytes(self, m: int, n: int, itemsize: int) -> int:
        """Bytes one call must move at least: each operand read once, each result written once."""
        rows = (self.rows_in + self.rows_out) * m * n
        return itemsize * (rows + self.values_out * m + (n if self.weighted else 0))

    def gradient_bytes(self, m: int, n: int, itemsize: int) -> int:
        """Bytes one forward + backward must move at least (a workload of row results alone): the
        forward reads the operands (and w) and writes the results; the backward reads the operands
        (and w) again and the results' gradients, and writes the operands' gradients (and w's, N
        values). The results are not read back: the backward can recompute what it needs."""
        rows = (3 * self.rows_in + 2 * self.rows_out) * m * n
        return itemsize * (rows + (3 * n if self.weighted else 0))


WORKLOADS = (
    Workload("softmax", softmax, 1, False, 1, 0, softmax_oracle, torch_softmax, numpy_softmax,
             liger=_liger_softmax, gradients=softmax_gradients),
    Workload("rmsnorm", rmsnorm, 1, True, 1, 0, rmsnorm_oracle, torch_rmsnorm, numpy_rmsnorm,
             liger=_liger_rms_norm,
             torch_rms_norm=torch_fused_rmsnorm, gradients=rmsnorm_gradients),
    Workload("add_rmsnorm", add_rmsnorm, 2, True, 2, 0, add_rmsnorm_oracle, torch_add_rmsnorm,
             numpy_add_rmsnorm,
             liger=_liger_fused_add,
             torch_rms_norm=torch_fused_add_rmsnorm),
    Workload("logsumexp", logsumexp, 1, False, 0, 1, logsumexp_oracle, torch_logsumexp, numpy_logsumexp),
)
GRADIENT_WORKLOADS = tuple(w for w in WORKLOADS if w.gradients is not None)  # timed forward + backward too
