"""JAX CPU arrays: read through NumPy (``np.asarray``: no copy where JAX allows it), run on the host
like NumPy arrays, and returned as JAX arrays, as DESIGN §2 asks of every library (the same
library's arrays out). JAX arrays are immutable, so ``out=`` cannot be one."""
from __future__ import annotations

import sys

import numpy as np

__all__ = ["is_host_array", "JaxHostCall"]


def is_host_array(x) -> bool:
    """A JAX array on the CPU (not a tracer: inside ``jax.jit`` the callback takes the call)."""
    jax = sys.modules["jax"]  # loaded: x is one of its arrays or tracers
    return isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and \
        all(d.platform == "cpu" for d in x.devices())


class JaxHostCall:
    """A host call prepared on NumPy views (``inner``), taking and returning JAX CPU arrays (a tuple
    of them for a program returning several)."""

    def __init__(self, inner):
        self.inner, self.plan = inner, inner.plan

    def run(self, values, out):
        jax = sys.modules["jax"]
        views = [np.asarray(x) if isinstance(x, jax.Array) else x for x in values]
        if out is not None:
            outs = out if type(out) is tuple else (out,)
            if any(isinstance(o, jax.Array) for o in outs):
                raise TypeError("out: JAX arrays are immutable, so out= cannot be one; call without out= and use "
                                "the result")
            return self.inner.run(views, out)
        result = self.inner.run(views, None)
        return tuple(map(jax.numpy.asarray, result)) if type(result) is tuple else jax.numpy.asarray(result)
