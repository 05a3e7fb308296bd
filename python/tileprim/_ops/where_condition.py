"""tp.where's condition in its values' dtype (DESIGN §2: ``a where cond != 0, else b``): a cond of
another dtype (an int32 label mask beside float32 values, a float32 test beside bfloat16 ones)
becomes ``cast(ne(cond, 0), dtype)``, 1 or 0, before the one-dtype where runs. A NaN cond is
nonzero, so it takes ``a`` either way. A bool mask (NumPy's ``x > 0``, torch's, JAX's) becomes 1 or 0
in that dtype."""
from __future__ import annotations

import sys

from .._arrays.dtypes import VALUE_DTYPES, numpy_dtype
from .._opspec.table import OPS

__all__ = ["where_condition"]


def _dtype(x):
    """A tile's or an array's dtype name; None for a Python scalar or an unknown dtype (the call's
    own check then names it)."""
    dtype = getattr(x, "dtype", None)
    if dtype is None or isinstance(x, (int, float, bool)):
        return None
    name = str(dtype).replace("torch.", "")  # NumPy's, ml_dtypes', JAX's and torch's dtypes print so
    return name if name in VALUE_DTYPES else None


def where_condition(cond, a, b, **common):
    """``cond`` as the where of ``a`` and ``b`` takes it: unchanged where its dtype is theirs (or
    either is unknown), else ``cond != 0`` cast to theirs, run (or recorded in a trace) with the
    call's scope, batch, target and backend."""
    value = a if hasattr(a, "dtype") else b
    if getattr(cond, "dtype", None) == getattr(value, "dtype", None):  # the common call: one dtype, nothing to do
        return cond
    values = [d for d in (_dtype(a), _dtype(b)) if d is not None]
    if len(values) == 2 and values[0] != values[1]:  # named as they are, before cond takes a's dtype
        raise TypeError(f"b: dtype {values[1]} differs from a's {values[0]}; where's a and b need one dtype")
    if values and str(getattr(cond, "dtype", "")) in ("bool", "torch.bool"):  # a mask: 1 or 0, read as it is
        if hasattr(cond, "astype"):  # NumPy's, JAX's, CuPy's
            return cond.astype(numpy_dtype(values[0]))
        return cond.to(getattr(sys.modules["torch"], values[0]))
    mine = _dtype(cond)
    if not values or mine is None or mine == values[0]:
        return cond
    return OPS["cast"](OPS["ne"](cond, 0, **common), values[0], **common)
