"""Argument checks shared by the tile primitives and treduce: each raises TypeError naming the
argument and what it takes."""
from __future__ import annotations

import operator

import numpy as np

__all__ = ["expect", "as_int", "as_bool", "OPTIONAL_STR"]

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


def as_bool(value, arg: str) -> bool:
    expect(value, (bool, np.bool_), arg, "True or False")
    return bool(value)
