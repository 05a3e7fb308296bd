"""tp.stop_gradient: a value whose uses pass no gradient back (JAX's ``lax.stop_gradient``, torch's
``detach``). In a tile program it records no step: the kernel is the same, and the derived backward
(backward.py) sends no gradient through the operands read from it. A softmax's or a logsumexp's
row max is the use: the result does not depend on the shift in real arithmetic, so its gradient
through the max (a tie mask, a fourth reduction in the backward) is zero and need not be computed."""
from __future__ import annotations

from .._arrays.routing import library_of
from .tile import Tile
from .trace import TRACING

__all__ = ["stop_gradient"]


def stop_gradient(x):
    """``x``, through which no gradient flows back.

    Inside a tile program ``x`` is a tile: every op that reads the returned tile passes no gradient
    to it (nothing is computed or stored; the forward kernel is unchanged), and a program result
    returned through it gets none. Outside a program: a torch tensor is detached; a JAX array goes
    through ``jax.lax.stop_gradient``; NumPy and CuPy arrays, which hold no gradient, are returned.

    Examples
    --------
    >>> @tp.program
    ... def softmax(x):
    ...     e = tp.exp(x - tp.stop_gradient(tp.max(x, axes=-1, keepdims=True)))
    ...     return e / tp.sum(e, axes=-1, keepdims=True)
    >>> softmax(np.array([[2.0, 2.0, 2.0, 2.0]], np.float32), batch_dims=1)
    array([[0.25, 0.25, 0.25, 0.25]], dtype=float32)
    """
    if type(x) is Tile:
        if x._trace is not TRACING[0]:
            raise ValueError(f"stop_gradient: {x!r} is a tile of another program (or of an earlier tracing); pass it "
                             f"to this program as an argument")
        stopped = Tile(x._trace, x._id, x.shape, x.dtype, x.storage, x.layout, x.name)
        stopped.stopped = True
        return stopped
    library = library_of(x)
    return x if library is None else library.stop_gradient(x)
