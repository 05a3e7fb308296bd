"""Element types as tileprim names them: 'float16' (NumPy's), 'bfloat16' (ml_dtypes'),
'float32', 'float64', and 'int32' (treduce only)."""
from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["TILE_DTYPES", "numpy_dtype", "dtype_name"]

TILE_DTYPES = ("float16", "bfloat16", "float32", "float64")
_NUMPY = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "int32": np.dtype(np.int32),
}


def numpy_dtype(name: str) -> np.dtype:
    return _NUMPY[name]


def dtype_name(dtype, arg: str, allowed=TILE_DTYPES) -> str:
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
