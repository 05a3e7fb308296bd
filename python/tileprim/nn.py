"""Drop-in ``torch.nn.Module``s of ``tileprim.layers``' programs: forward and backward are tile
programs (one kernel each on a GPU; the backward derived from the forward's steps), with the
parameters, argument names and results of the torch and Hugging Face modules they replace.

    import tileprim.nn as tpnn
    norm = tpnn.RMSNorm(4096, eps=1e-6)          # Llama's RMSNorm: weight, variance_epsilon
    mlp = tpnn.SwiGLUMLP(4096, 11008)            # gate_proj, up_proj, down_proj: LlamaMLP's state dict
    loss = tpnn.CrossEntropyLoss()(logits, labels)   # ignore_index=-100, the mean over the kept rows

``scope=`` (every module) names the programs' scope; None leaves it to the programs' call (the
planner's choice, once it chooses). ``fastmath=True`` (every module, keyword-only; DESIGN §3) runs
the programs forward and backward with the GPU's approximations of their transcendental steps
(``tp.op_table()[op]["fastmath"]`` states each one's error); the CPU backend runs the exact
functions, so there it changes no bit. Needs torch."""
from __future__ import annotations

from typing import Optional

import torch

from . import layers
from ._calls.scope import scope_of_key
from ._checks import as_bool
from ._torch.func import transforms_active
from ._torch.sum_to import sum_to

__all__ = ["GELU", "SiLUMul", "GELUMul", "SwiGLUMLP", "GEGLUMLP", "LayerNorm", "RMSNorm", "CrossEntropyLoss"]


def _where(x) -> Optional[str]:
    """The backend of the tensor's device: a module runs where its input lies, as torch's do (a
    program's default would take CPU tensors to the GPU where there is one)."""
    return "cpu" if x.device.type == "cpu" else None


def _elementwise(program, scope, fastmath, *tensors):
    """A map over tensors of one shape, as a batch of tiles of 8 elements per thread of ``scope``
    (where those divide its rows; else tiles of 8, or 1, at thread scope). By the last dim, not the
    count of elements: under torch.compile a traced batch size stays symbolic."""
    shape = tensors[0].shape
    n = shape[-1] if len(shape) else 1
    per_tile = 8 * (scope.threads if scope is not None else 1)
    if n % per_tile:
        scope, per_tile = None, 8 if n % 8 == 0 else 1
    tiles = [t.reshape(-1, per_tile) for t in tensors]
    return program(*tiles, batch_dims=1, scope=scope, backend=_where(tensors[0]), fastmath=fastmath).reshape(shape)


def _eps(eps, none_ok: bool = False):
    """eps checked where a module is made (a float; None where torch's module takes None)."""
    if (eps is None and none_ok) or (isinstance(eps, (int, float)) and not isinstance(eps, bool)):
        return eps
    raise TypeError(f"eps: expected a float{' or None' if none_ok else ''}, not {eps!r}")


def _rows(program, scope, fastmath, x, *args):
    """A program over the last dim, every other dim a batch of rows (rows as they are: no view, so
    no view's node for autograd to run backward)."""
    if x.dim() == 0:
        raise ValueError("input: a 0-d tensor has no last dim to normalize")
    if x.shape[-1] == 0:  # rows of no elements (LayerNorm(0)): nothing to normalize, torch's empty result
        return x.clone()
    rows = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    y = program(rows, *args, batch_dims=1, scope=scope, backend=_where(x), fastmath=fastmath)
    return y if rows is x else y.reshape(x.shape)


class GELU(torch.nn.Module):
    """``torch.nn.GELU(approximate=...)``: 'none' (the erf form) or 'tanh'."""

    def __init__(self, approximate: str = "none", *, scope=None, fastmath: bool = False):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate: {approximate!r} is not 'none' or 'tanh'")
        self.approximate, self.scope, self.fastmath = approximate, scope, as_bool(fastmath, "fastmath")

    def forward(self, x):
        program = layers.gelu_tanh if self.approximate == "tanh" else layers.gelu_erf
        return _elementwise(program, self.scope, self.fastmath, x)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}, fastmath={self.fastmath}"


class _Product(torch.nn.Module):
    """A gated product ``act(a) * b``: ``program``, a map of two tiles."""

    program = None

    def __init__(self, *, scope=None, fastmath: bool = False):
        super().__init__()
        self.scope, self.fastmath = scope, as_bool(fastmath, "fastmath")

    def forward(self, a, b):
        if a.shape != b.shape:  # broadcast as torch's act(a) * b does (the map pairs elements in order)
            try:
                shape = torch.broadcast_shapes(a.shape, b.shape)
            except RuntimeError:
                raise ValueError(f"a, b: shapes {tuple(a.shape)} and {tuple(b.shape)} do not broadcast") from None
            a, b = a.expand(shape), b.expand(shape)
        return _elementwise(self.program, self.scope, self.fastmath, a, b)

    def extra_repr(self) -> str:
        return f"fastmath={self.fastmath}"


class SiLUMul(_Product):
    """SwiGLU's gated product ``silu(a) * b`` (Liger's LigerSiLUMulFunction)."""

    program = layers.silu_mul


class GELUMul(_Product):
    """GeGLU's gated product ``gelu_tanh(a) * b`` (Liger's LigerGELUMulFunction)."""

    program = layers.gelu_tanh_mul


class _GatedMLP(torch.nn.Module):
    """down_proj(act(gate_proj(x)) * up_proj(x)): Llama's / Gemma's MLP, parameters named as theirs."""

    def __init__(self, hidden_size: int, intermediate_size: int, bias: bool, product, device, dtype):
        super().__init__()
        made = dict(bias=bias, device=device, dtype=dtype)
        self.gate_proj = torch.nn.Linear(hidden_size, intermediate_size, **made)
        self.up_proj = torch.nn.Linear(hidden_size, intermediate_size, **made)
        self.down_proj = torch.nn.Linear(intermediate_size, hidden_size, **made)
        self.product = product

    def forward(self, x):
        return self.down_proj(self.product(self.gate_proj(x), self.up_proj(x)))


class SwiGLUMLP(_GatedMLP):
    """Llama's MLP (``LlamaMLP``: silu)."""

    def __init__(self, hidden_size: int, intermediate_size: int, bias: bool = False, *, scope=None,
                 fastmath: bool = False, device=None, dtype=None):
        super().__init__(hidden_size, intermediate_size, bias, SiLUMul(scope=scope, fastmath=fastmath), device, dtype)


class GEGLUMLP(_GatedMLP):
    """Gemma's MLP (gelu, tanh form)."""

    def __init__(self, hidden_size: int, intermediate_size: int, bias: bool = False, *, scope=None,
                 fastmath: bool = False, device=None, dtype=None):
        super().__init__(hidden_size, intermediate_size, bias, GELUMul(scope=scope, fastmath=fastmath), device, dtype)


class LayerNorm(torch.nn.Module):
    """``torch.nn.LayerNorm`` over the last dim (weight and bias; without them, ones and zeros)."""

    def __init__(self, normalized_shape: int, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 *, scope=None, fastmath: bool = False, device=None, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        if len(shape) != 1:
            raise ValueError(f"normalized_shape: {shape} normalizes {len(shape)} dims; this takes the last one")
        self.normalized_shape, self.eps, self.elementwise_affine, self.scope = shape, _eps(eps), elementwise_affine, scope
        self.fastmath = as_bool(fastmath, "fastmath")
        made = dict(device=device, dtype=dtype)
        self.weight = torch.nn.Parameter(torch.ones(shape, **made)) if elementwise_affine else None
        self.bias = torch.nn.Parameter(torch.zeros(shape, **made)) if elementwise_affine and bias else None

    def forward(self, x):
        w = self.weight if self.weight is not None else x.new_ones(self.normalized_shape)
        b = self.bias if self.bias is not None else x.new_zeros(self.normalized_shape)
        return _rows(layers.layer_norm, self.scope, self.fastmath, x, w, b, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
                + ("" if self.bias is not None or not self.elementwise_affine else ", bias=False")
                + f", fastmath={self.fastmath}")


class RMSNorm(torch.nn.Module):
    """Llama's ``LlamaRMSNorm`` (``weight``, ``variance_epsilon``), in float32 inside; ``eps=None`` is
    ``torch.nn.RMSNorm``'s: the input dtype's machine epsilon."""

    def __init__(self, hidden_size: int, eps: Optional[float] = 1e-6, *, scope=None, fastmath: bool = False,
                 device=None, dtype=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))
        self.variance_epsilon, self.scope, self.fastmath = _eps(eps, none_ok=True), scope, as_bool(fastmath, "fastmath")

    def forward(self, x):
        eps = torch.finfo(x.dtype).eps if self.variance_epsilon is None else self.variance_epsilon
        return _rows(layers.rms_norm, self.scope, self.fastmath, x, self.weight.to(x.dtype), eps)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}, fastmath={self.fastmath}"


class CrossEntropyLoss(torch.nn.Module):
    """``torch.nn.CrossEntropyLoss`` of logits (N, C) against class indices (N,): the rows' losses
    from ``layers.cross_entropy``, then (reduction) their mean over the rows whose target is not
    ``ignore_index``, their sum (both summed by tileprim, so the same bits on the CPU and the GPU), or
    the rows ('none'): float32 for 16-bit logits (float64 for float64), as Liger's and as Hugging Face's
    loss, which takes the logits to float32 first (torch's own module returns the logits' dtype, whose
    bfloat16 would round the mean to 3 digits). No class weights or label smoothing. The backward is one program,
    ``layers.cross_entropy_backward``: (softmax - onehot(target)) * grad over each row from the
    forward's row max and sum, reading the logits once and writing their gradient once."""

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0, *, scope=None, fastmath: bool = False):
        super().__init__()  # torch's arguments in torch's order; what this loss does not do is refused
        if weight is not None:
            raise ValueError("weight: class weights are not supported (pass None)")
        if size_average is not None or reduce is not None:
            raise ValueError("size_average, reduce: torch's deprecated pair is not supported; pass reduction=")
        if label_smoothing != 0.0:
            raise ValueError(f"label_smoothing: {label_smoothing!r}; label smoothing is not supported (pass 0.0)")
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
            raise TypeError(f"ignore_index: expected an int class index, not {ignore_index!r}")
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction: {reduction!r} is not 'mean', 'sum' or 'none'")
        self.ignore_index, self.reduction, self.scope = ignore_index, reduction, scope
        self.fastmath = as_bool(fastmath, "fastmath")

    def forward(self, input, target):
        if input.dim() != 2 or target.shape != input.shape[:1]:
            raise ValueError(f"input, target: expected logits (N, C) and targets (N,), not {tuple(input.shape)} and "
                             f"{tuple(target.shape)}")
        if not input.is_floating_point():
            raise TypeError(f"input: expected float logits, not {input.dtype}")
        if target.dtype in (torch.uint8, torch.int8, torch.int16):  # torch's narrow class indices
            target = target.to(torch.int32)
        scope = None if self.scope is None else self.scope.key  # a constant, as torch.compile takes it
        # a class below 0, not ignored, is outside the row (NaN), as torch refuses it: not take_along_axis's
        # count from the row's end
        target = target.masked_fill((target < 0) & (target != self.ignore_index), input.shape[1])
        return _CrossEntropy.apply(input, target, self.ignore_index, self.reduction, scope, self.fastmath)[0]

    def extra_repr(self) -> str:
        return f"ignore_index={self.ignore_index}, reduction={self.reduction!r}, fastmath={self.fastmath}"


class _CrossEntropy(torch.autograd.Function):
    """CrossEntropyLoss's forward and its one-program backward (the loss's options as plain values:
    scope as its key). The setup_context style, which torch.func's transforms take (grad, vjp,
    jacrev): the rows' max and sum of exponentials and the count of kept rows, which the backward
    reads, are outputs too. The backward is differentiable in turn."""

    @staticmethod
    def forward(logits, target, ignore_index, reduction, scope, fastmath):
        rows, m, s = layers.cross_entropy_for_backward(logits, target[:, None], ignore_index,
                                                       **_run(logits, scope, fastmath))
        rows, count = rows[:, 0], (target != ignore_index).sum()
        if reduction != "none":
            rows = sum_to(rows, ())  # tileprim's sum: the same bits on the CPU and the GPU, as torch's is not
            if reduction == "mean":
                rows = rows / count
        return rows, m, s, count

    @staticmethod
    def setup_context(ctx, inputs, output):
        logits, target, ctx.ignore_index, ctx.reduction, scope, fastmath = inputs
        _, m, s, count = output
        ctx.mark_non_differentiable(m, s, count)
        ctx.save_for_backward(logits, target, m, s, count)
        ctx.run = _run(logits, scope, fastmath)

    @staticmethod
    def vmap(info, in_dims, logits, target, ignore_index, reduction, scope, fastmath):
        """Each sample's rows as rows of one call (its rows' losses), then each sample's reduction
        (per-sample losses and, through vmap of grad, per-sample gradients)."""
        v = info.batch_size
        logits, target = (x.movedim(d, 0) if d is not None else x.expand(v, *x.shape)
                          for x, d in zip((logits, target), in_dims[:2]))
        n, c = logits.shape[1:]
        rows, m, s, _ = _CrossEntropy.apply(logits.reshape(v * n, c), target.reshape(v * n), ignore_index, "none",
                                            scope, fastmath)
        rows, count = rows.reshape(v, n), (target != ignore_index).sum(-1)
        if reduction != "none":
            rows = sum_to(rows, (v, 1)).reshape(v)
            if reduction == "mean":
                rows = rows / count
        return (rows, m.reshape(v, n, 1), s.reshape(v, n, 1), count), (0, 0, 0, 0)

    @staticmethod
    def backward(ctx, grad, *unused):
        logits, target, m, s, count = ctx.saved_tensors
        if torch.is_grad_enabled() or transforms_active():  # this backward differentiated in turn (create_graph,
            # torch.func): each row's max and sum made again from the logits, so that theirs reach the logits
            _, m, s = layers.cross_entropy_for_backward(logits, target[:, None], ctx.ignore_index, **ctx.run)
        if ctx.reduction == "none":
            grad = grad.contiguous()[:, None]  # each row's
        else:  # one value every row shares: the sum's, or the mean's divided by the kept rows, as torch's division
            grad = (grad / count if ctx.reduction == "mean" else grad).reshape(1)
        dx = layers.cross_entropy_backward(logits, target[:, None], ctx.ignore_index, m, s, grad, **ctx.run)
        return dx, None, None, None, None, None


def _run(logits, scope, fastmath) -> dict:
    return dict(batch_dims=1, scope=None if scope is None else scope_of_key(scope), backend=_where(logits),
                fastmath=fastmath)
