"""RankTensor: one tensor as treduce reads it (a rank's source or dst), checked as it is read."""
from __future__ import annotations

import numpy as np

import tileprim._C as _C
from ..._arrays.dtypes import dtype_name, numpy_dtype
from ..._checks import plain_ndarray

__all__ = ["RankTensor", "DTYPES"]

# the dtypes treduce takes: its op-table entry's
DTYPES = tuple(next(op["dtypes"] for op in _C.ops() if op["name"] == "treduce"))


class RankTensor:
    """One tensor as treduce reads it: where it lies, and how."""

    def __init__(self, x, arg: str, adapter):
        self.obj, self.arg, self.adapter = x, arg, adapter
        if adapter is None:
            if not isinstance(x, np.ndarray):
                raise TypeError(f"{arg}: expected a NumPy or device array, not {type(x).__name__}")
            x = plain_ndarray(x, arg)
            if not x.dtype.isnative:
                raise TypeError(f"{arg}: dtype {x.dtype} is not in native byte order; convert it with "
                                f"{arg}.astype({x.dtype.newbyteorder('=').name!r})")
            self.dtype = dtype_name(x.dtype, arg, allowed=DTYPES)
            self.itemsize = x.itemsize
            if any(s % x.itemsize for s in x.strides):
                raise ValueError(f"{arg}: strides {x.strides} are not whole elements")
            self.shape, self.strides = x.shape, tuple(s // x.itemsize for s in x.strides)
            self.pointer, self.device = x.__array_interface__["data"][0], -1
        else:
            adapter.check_stored(x, arg)
            self.dtype = adapter.dtype(x, f"{arg}: dtype", allowed=DTYPES)
            self.itemsize = numpy_dtype(self.dtype).itemsize
            self.shape, self.strides = adapter.shape(x), adapter.strides(x)
            self.pointer, self.device = adapter.pointer(x), adapter.device(x)

    def tile_ref(self) -> "_C.TileRef":
        """The tensor as the C++ core's call sees it (its layout, not its address)."""
        return _C.TileRef(self.arg, self.dtype, list(self.shape), "global", None, self.device, list(self.strides))
