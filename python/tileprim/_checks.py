"""Argument checks shared by the tile primitives and treduce: each raises TypeError naming the
argument and what it takes."""
from __future__ import annotations

import operator

import numpy as np

__all__ = ["expect", "as_int", "as_axis", "as_bool", "plain_ndarray", "short_repr", "OPTIONAL_STR"]

OPTIONAL_STR = (str, type(None))


def expect(value, types, arg: str, takes: str) -> None:
    """Nothing if ``value`` is one of ``types``; else TypeError "arg: expected takes, not value"."""
    if not isinstance(value, types):
        raise TypeError(f"{arg}: expected {takes}, not {value!r}")


def as_int(value, arg: str) -> int:
    """An int from anything with ``__index__`` (NumPy integers too), never a bool."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{arg}: expected an int, not {value!r}")
    return operator.index(value)


def as_axis(value, arg: str) -> int:
    """An axis: an int (``as_int``'s rule); one an int32 cannot hold is out of range of every tile
    (ValueError, as the planner's for an axis past the tile's rank)."""
    axis = as_int(value, arg)
    if not -2 ** 31 <= axis < 2 ** 31:
        raise ValueError(f"{arg}: axis {short_repr(axis)} is out of range")
    return axis


def as_bool(value, arg: str) -> bool:
    expect(value, (bool, np.bool_), arg, "True or False")
    return bool(value)


def plain_ndarray(x: np.ndarray, arg: str) -> np.ndarray:
    """An ndarray as the plain ndarray over its memory (np.asarray: a view, never a copy), the
    one rule of the ops and treduce: a subclass that is memory only (np.memmap, a subclass that
    adds attributes) is read as its data; one whose values carry meaning the data does not (a
    masked array's mask, np.matrix's 2-D algebra) is refused with a TypeError naming `arg`."""
    if type(x) is np.ndarray:
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"{arg}: masked arrays are not supported (tileprim would ignore the mask); "
                        f"pass {arg}.filled(value) or {arg}.data")
    if isinstance(x, np.matrix):
        raise TypeError(f"{arg}: np.matrix is not supported (its values follow matrix algebra, always 2-D); "
                        f"pass np.asarray({arg})")
    return np.asarray(x)


def short_repr(value, limit: int = 40) -> str:
    """repr(value) for an error message, its middle cut where it is long (an int of 2**1100)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:12]}...{text[-6:]} ({len(text)} characters)"
