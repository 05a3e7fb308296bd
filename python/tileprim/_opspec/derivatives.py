"""Each op's vector-Jacobian product, written once with tileprim ops: the backward of a
standalone op (``_torch.grad``, on tensors) and the backward of a tile program (``_program.backward``,
on the tiles of the backward program being traced) both read these rules. ``tp`` is whatever runs
the ops: an object with the op functions bound to the backward's options, or the op functions
themselves inside a trace.

max/min and maximum split the gradient evenly among ties, as ``torch.amax`` and ``torch.maximum``
do: every element equal to the result gets grad / (number of such elements). An element that is
NaN never equals the result (``tp.eq``), so a slice of NaNs (result NaN) passes no gradient.
Comparisons pass none (their result is a step function); ``where`` routes the gradient to the
operand it picked. Broadcast operands get the gradient summed back to their shape by the caller."""
from __future__ import annotations

import math

__all__ = ["UNARY", "NARY", "GATHER", "tie_share", "VALUELESS"]

_LN2 = math.log(2.0)

# ops whose result is constant where it is differentiable (a value read for its shape only, or a
# comparison's 0 or 1): no gradient flows through them
VALUELESS = ("zero", "fill", "eq", "ne", "lt", "le", "gt", "ge")
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def tie_share(tp, g, result, candidates, k):
    """Candidate k's gradient: g split evenly among the candidates equal to the result."""
    masks = [tp.eq(c, result) for c in candidates]
    count = masks[0]
    for m in masks[1:]:
        count = tp.add(count, m)
    return tp.mul(masks[k], tp.fdiv(g, tp.maximum(count, 1.0)))


def _silu(tp, g, x):
    # silu(x) = x s, s = 1 / (1 + exp(-x)); d/dx = s (1 + x (1 - s))
    s = tp.reciprocal(tp.add(tp.exp(tp.mul(x, -1.0)), 1.0))
    return tp.mul(g, tp.mul(s, tp.fma(x, tp.sub(1.0, s), 1.0)))


# one-operand maps: (tp, g, x, y, dtype of x) -> the gradient of x (None: no gradient)
UNARY = {
    "sqrt": lambda tp, g, x, y, dt: tp.fdiv(tp.mul(g, 0.5), y),
    "rsqrt": lambda tp, g, x, y, dt: tp.mul(tp.mul(g, -0.5), tp.mul(y, tp.mul(y, y))),
    "exp": lambda tp, g, x, y, dt: tp.mul(g, y),
    "exp2": lambda tp, g, x, y, dt: tp.mul(tp.mul(g, y), _LN2),
    "log": lambda tp, g, x, y, dt: tp.fdiv(g, x),
    "log2": lambda tp, g, x, y, dt: tp.fdiv(g, tp.mul(x, _LN2)),
    "reciprocal": lambda tp, g, x, y, dt: tp.mul(tp.mul(g, -1.0), tp.mul(y, y)),
    "silu": lambda tp, g, x, y, dt: _silu(tp, g, x),
    "tanh": lambda tp, g, x, y, dt: tp.mul(g, tp.fma(tp.mul(y, -1.0), y, 1.0)),  # 1 - y^2
    "sigmoid": lambda tp, g, x, y, dt: tp.mul(g, tp.mul(y, tp.sub(1.0, y))),
    "erf": lambda tp, g, x, y, dt: tp.mul(g, tp.mul(tp.exp(tp.mul(tp.mul(x, x), -1.0)), _TWO_OVER_SQRT_PI)),
    "copy": lambda tp, g, x, y, dt: g,  # values move unchanged
    "cast": lambda tp, g, x, y, dt: tp.cast(g, dt),
}

# maps of several operands: per operand, (tp, g, operand values, y) -> its gradient at y's shape,
# or None where none flows (where's cond)
NARY = {
    "add": (lambda tp, g, v, y: g, lambda tp, g, v, y: g),
    "sub": (lambda tp, g, v, y: g, lambda tp, g, v, y: tp.mul(g, -1.0)),
    "mul": (lambda tp, g, v, y: tp.mul(g, v[1]), lambda tp, g, v, y: tp.mul(g, v[0])),
    "fdiv": (lambda tp, g, v, y: tp.fdiv(g, v[1]), lambda tp, g, v, y: tp.mul(tp.fdiv(g, v[1]), tp.mul(y, -1.0))),
    "maximum": (lambda tp, g, v, y: tie_share(tp, g, y, v, 0), lambda tp, g, v, y: tie_share(tp, g, y, v, 1)),
    "fma": (lambda tp, g, v, y: tp.mul(g, v[1]), lambda tp, g, v, y: tp.mul(g, v[0]), lambda tp, g, v, y: g),
    "where": (None, lambda tp, g, v, y: tp.where(v[0], g, 0.0), lambda tp, g, v, y: tp.where(v[0], 0.0, g)),
}

# the gather ops: per operand, (tp, g, operand values, axis) -> its gradient, or None (idx; x, of
# which scatter reads only the shape). take's is a scatter of g into zeros, scatter's a take of g.
GATHER = {
    "take_along_axis": (lambda tp, g, v, axis: tp.scatter_add_along_axis(v[0], v[1], g, axis), None),
    "scatter_add_along_axis": (None, None, lambda tp, g, v, axis: tp.take_along_axis(g, v[1], axis)),
}
