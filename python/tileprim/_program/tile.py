"""tp.Tile: a value of a tile program while it is traced. Arithmetic on tiles records the
elementwise ops (+ - * / and unary minus are tp.add, tp.sub, tp.mul, tp.fdiv, and tp.mul by -1);
comparisons record tp.eq, tp.ne, tp.lt, tp.le, tp.gt and tp.ge (as NumPy's arrays compare: else
``x == y`` would compare the Python objects and trace a constant)."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from .._arrays.dtypes import numpy_dtype
from .._opspec.table import OPS

__all__ = ["Tile"]


class _DTypeName(str):
    """A tile's dtype: its name ('float32'), equal also to the NumPy, ml_dtypes or torch dtype it
    names (``x.dtype == np.float32`` in a program's body, as for an array; a plain str compared False)."""

    __slots__ = ()

    def __eq__(self, other):
        if isinstance(other, str) or other is None:
            return str.__eq__(self, other)
        if str(other).startswith("torch."):  # torch's dtypes: torch.float32
            return str(other)[6:] == self
        try:
            return np.dtype(other) == numpy_dtype(self)
        except TypeError:
            return NotImplemented

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__


class Tile:
    """One tile of a tile program (an argument or a step's result), seen while the program is
    traced; nothing holds values. ``shape`` and ``dtype`` are the tile's (one instance of the
    batch); ``storage`` and ``layout`` are what the step asked for (None: the planner's choice;
    ``tp.plan(program, ...)`` shows where each tile was placed).

    Examples
    --------
    >>> @tp.program(scope=tp.cta(32))
    ... def double(x):
    ...     return x + x
    >>> double(np.arange(4, dtype=np.float32))
    array([0., 2., 4., 6.], dtype=float32)
    """

    __slots__ = ("_trace", "_id", "shape", "dtype", "storage", "layout", "name", "stopped")
    __array_ufunc__ = None  # NumPy scalars defer to the tile's reflected operators

    def __init__(self, trace, value_id: int, shape: Tuple[int, ...], dtype: str, storage: Optional[str], layout,
                 name: str):
        self._trace, self._id = trace, value_id
        self.shape, self.dtype, self.storage, self.layout, self.name = shape, _DTypeName(dtype), storage, layout, name
        self.stopped = False  # tp.stop_gradient's view of a value: no gradient flows back through its uses

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __add__(self, other):
        return OPS["add"](self, other)

    def __radd__(self, other):
        return OPS["add"](other, self)

    def __sub__(self, other):
        return OPS["sub"](self, other)

    def __rsub__(self, other):
        return OPS["sub"](other, self)

    def __mul__(self, other):
        return OPS["mul"](self, other)

    def __rmul__(self, other):
        return OPS["mul"](other, self)

    def __truediv__(self, other):
        return OPS["fdiv"](self, other)

    def __rtruediv__(self, other):
        return OPS["fdiv"](other, self)

    def __eq__(self, other):
        return OPS["eq"](self, other)

    def __ne__(self, other):
        return OPS["ne"](self, other)

    def __lt__(self, other):
        return OPS["lt"](self, other)

    def __le__(self, other):
        return OPS["le"](self, other)

    def __gt__(self, other):
        return OPS["gt"](self, other)

    def __ge__(self, other):
        return OPS["ge"](self, other)

    __hash__ = object.__hash__  # a tile is one value of the trace: hashed as itself, as before == was a step

    def __neg__(self):
        return OPS["mul"](self, -1.0)  # exact: flips the sign bit of every value, zeros and NaNs included

    def __bool__(self):
        raise TypeError("a tp.Tile has no truth value while its program is traced: Python control flow runs once, "
                        "at trace time, on shapes and scalars, not on tile values")

    def __array__(self, *args, **kwargs):
        raise TypeError(f"{self!r} is a value of a tile program being traced, not an array: tileprim ops take it "
                        f"only inside that program's function")

    def __repr__(self) -> str:
        shown = f" {self.name}" if self.name else ""
        return f"<tp.Tile{shown} {self.dtype}{list(self.shape)}>"
