"""Element types as tileprim names them: 'float16' (NumPy's), 'bfloat16' (ml_dtypes'),
'float32', 'float64', and the index types 'int32' and 'int64' (labels and indices: the ops that
take them say so in the op table; int32 is also treduce's)."""
from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["TILE_DTYPES", "INDEX_DTYPES", "VALUE_DTYPES", "numpy_dtype", "dtype_name", "check_index_scalar"]

TILE_DTYPES = ("float16", "bfloat16", "float32", "float64")  # what cast makes, and most ops take
INDEX_DTYPES = ("int32", "int64")
VALUE_DTYPES = TILE_DTYPES + INDEX_DTYPES  # what a tile may hold
_NUMPY = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
}


def numpy_dtype(name: str) -> np.dtype:
    return _NUMPY[name]


def dtype_name(dtype, arg: str, allowed=VALUE_DTYPES) -> str:
    """'float32' etc. for a NumPy/ml_dtypes/torch dtype or its name (either byte order);
    TypeError naming ``arg`` for anything not in ``allowed``."""
    if dtype is None:
        raise TypeError(f"{arg}: expected a dtype such as 'float32', not None")
    try:
        name = np.dtype(dtype).name  # the same for either byte order
    except TypeError:
        name = str(dtype).replace("torch.", "")
    if name not in allowed:
        raise TypeError(f"{arg}: dtype {name} is not supported here; this takes {', '.join(allowed)}"
                        + (" (bfloat16 from ml_dtypes)" if "bfloat16" in allowed else ""))
    return name


def check_index_scalar(value, dtype: str, arg: str) -> None:
    """ValueError naming ``arg`` unless ``value``, a scalar beside ``dtype`` (int32/int64) tiles as the
    caller passed it (an int checked before any float rounds it: 2**53 + 1 would become 2**53), is an
    integer the dtype holds and a float64 carries exactly (scalars travel as float64; one is
    converted to the dtype, where 0.5 would silently become 0)."""
    info = np.iinfo(_NUMPY[dtype])
    low, high = max(int(info.min), -(1 << 53)), min(int(info.max), 1 << 53)
    if isinstance(value, (int, np.integer)):
        whole = low <= int(value) <= high
    else:
        whole = bool(np.isfinite(value)) and float(value) == int(value) and low <= float(value) <= high
    if not whole:
        shown = int(value) if isinstance(value, np.integer) else value
        raise ValueError(f"{arg}: the scalar {shown!r} beside {dtype} tiles must be an integer from {low} to {high} "
                         f"(scalars travel as float64)")
