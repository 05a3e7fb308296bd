"""Operands as tileprim sees them: arrays (NumPy here; device arrays through DLPack or
``__cuda_array_interface__`` in the CUDA backend) and Python scalars."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import ml_dtypes
import numpy as np

__all__ = ["Operand", "operand", "dtype_name", "numpy_dtype", "SUPPORTED_DTYPES"]

SUPPORTED_DTYPES = ("float16", "bfloat16", "float32", "float64")
_NUMPY_DTYPES = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}


def numpy_dtype(name: str) -> np.dtype:
    return _NUMPY_DTYPES[name]


def dtype_name(dtype, arg: str) -> str:
    """'float32' etc. for a NumPy/ml_dtypes dtype or its name; TypeError for anything else."""
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    name = d.name if d is not None else str(dtype)
    if name not in _NUMPY_DTYPES:
        raise TypeError(f"{arg}: dtype {name} is not supported; tiles hold "
                        f"{', '.join(SUPPORTED_DTYPES)} (bfloat16 from ml_dtypes)")
    return name


@dataclass
class Operand:
    arg: str
    kind: str                      # "numpy", "device" or "scalar"
    array: object                  # np.ndarray, or _interop.DeviceArray for "device"
    value: float = 0.0

    @property
    def scalar(self) -> bool:
        return self.kind == "scalar"

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.array.shape) if self.array is not None else ()

    @property
    def dtype(self) -> str:
        if self.kind == "device":
            return self.array.dtype
        return dtype_name(self.array.dtype, self.arg)

    def broadcast_to(self, shape) -> None:
        if self.kind == "device":
            self.array = self.array.broadcast_to(shape)
        else:
            self.array = np.broadcast_to(self.array, shape)


def operand(x, arg: str, *, allow_scalar: bool) -> Operand:
    if isinstance(x, (bool, int, float, np.number)) and not isinstance(x, np.ndarray):
        if not allow_scalar:
            raise TypeError(f"{arg}: expected an array, not the scalar {x!r}")
        return Operand(arg, "scalar", None, float(x))
    if isinstance(x, np.ndarray):
        dtype_name(x.dtype, arg)
        return Operand(arg, "numpy", x)
    from ._interop import device_array, is_device_array
    if is_device_array(x):
        return Operand(arg, "device", device_array(x, arg))
    try:
        arr = np.asarray(x)
    except Exception as e:  # noqa: BLE001 - anything NumPy cannot read is the caller's type error
        raise TypeError(f"{arg}: expected an array or a scalar, not {type(x).__name__}") from e
    if arr.dtype == object:
        raise TypeError(f"{arg}: expected an array or a scalar, not {type(x).__name__}")
    if arr.dtype.kind in "iub":
        raise TypeError(f"{arg}: dtype {arr.dtype} is not supported; tiles hold {', '.join(SUPPORTED_DTYPES)}")
    dtype_name(arr.dtype, arg)
    return Operand(arg, "numpy", arr)
