"""Pure-NumPy reference for tp.comm.treduce: the fold in the contract's order, in the operand dtype.

The order is the root's value first, then the other ranks ascending. Each step is one NumPy ufunc
call on arrays of the working dtype, so each step rounds once (float16 and ml_dtypes' bfloat16
compute through float32, and that double rounding is exact for + because 24 >= 2 * 11 + 2),
int32 wraps, and max/min are np.fmax/np.fmin (a NaN meeting a number gives the number).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

FOLDS = {"sum": np.add, "max": np.fmax, "min": np.fmin}
SIXTEEN_BIT = ("float16", "bfloat16")


def contract_order(nranks: int, root: int) -> list:
    """The ranks in the order treduce folds them: the root, then the others ascending."""
    return [root] + [r for r in range(nranks) if r != root]


def working_dtype(dtype: np.dtype, accumulate: Optional[str]) -> np.dtype:
    if accumulate is None:
        return dtype
    if accumulate != "float32" or dtype.name not in SIXTEEN_BIT:
        raise ValueError(f"accumulate={accumulate!r} applies to float16/bfloat16 only, as 'float32'")
    return np.dtype(np.float32)


@np.errstate(all="ignore")  # inf - inf, NaN compares and int32 wrap-around are intended
def fold_in_order(tensors: Sequence[np.ndarray], order: Sequence[int], op: str,
                  accumulate: Optional[str] = None) -> np.ndarray:
    """tensors[order[0]] op tensors[order[1]] op ..., left to right, rounded to the operand dtype once
    at the end when accumulating wider."""
    dtype = tensors[0].dtype
    work = working_dtype(dtype, accumulate)
    fold = FOLDS[op]
    acc = np.array(tensors[order[0]], dtype=work, copy=True)
    for r in order[1:]:
        acc = fold(acc, np.asarray(tensors[r], dtype=work))
    return acc.astype(dtype)


def treduce_reference(tensors: Sequence[np.ndarray], root: int, op: str,
                      accumulate: Optional[str] = None) -> np.ndarray:
    """What treduce must write into dst, bit for bit."""
    if not tensors or not 0 <= root < len(tensors):
        raise ValueError(f"root {root} out of range for {len(tensors)} ranks")
    shapes = {t.shape for t in tensors}
    dtypes = {t.dtype for t in tensors}
    if len(shapes) != 1 or len(dtypes) != 1:
        raise ValueError(f"ranks differ: shapes {shapes}, dtypes {dtypes}")
    return fold_in_order(tensors, contract_order(len(tensors), root), op, accumulate)
