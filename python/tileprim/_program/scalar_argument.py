"""A program's float argument while its body is traced: a stand-in for the value that notes every
read of it by Python (arithmetic, comparisons, float(), formatting, NumPy) and lets tileprim's ops
take it as an operand without reading it. A trace that never read it is the trace of every value of
that argument: its ops take the value at run time (a kernel parameter, as a standalone call's scalar
operands), so a call with a new value plans and compiles nothing again. Where the body read it
(Python control flow on it, ``math.exp(t)``, ``2 * t``), the value is a constant of that trace, as
DESIGN §2 says of a program's scalars, and a new value traces anew."""
from __future__ import annotations

import operator

import numpy as np

__all__ = ["ScalarArgument"]


class ScalarArgument:
    """The ``index``-th float argument of the call being traced, holding its ``value``; ``read``
    once Python has used the value."""

    __slots__ = ("value", "index", "read")

    def __init__(self, value: float, index: int):
        self.value, self.index, self.read = value, index, False

    @property
    def __class__(self):  # isinstance(t, float) holds, as for the value (a type check reads nothing)
        return float

    def _read(self) -> float:
        self.read = True
        return self.value

    def __float__(self):
        return self._read()

    def __int__(self):
        return int(self._read())

    def __bool__(self):
        return bool(self._read())

    def __hash__(self):
        return hash(self._read())

    def __repr__(self):
        return repr(self._read())

    def __str__(self):
        return str(self._read())

    def __format__(self, spec):
        return format(self._read(), spec)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._read(), dtype)

    def __getattr__(self, name):  # float's own attributes and methods: real, is_integer, hex, ...
        return getattr(self._read(), name)

    def __reduce__(self):  # copied or pickled: the value it stands for
        return float, (self._read(),)


def _unary(name: str):
    def method(self, *args):
        return getattr(self._read(), name)(*args)
    method.__name__ = name
    return method


def _binary(name: str, fn, reflected: bool):
    def method(self, other):
        from .tile import Tile
        if isinstance(other, Tile):  # the tile's own operator records the step, reading nothing
            return NotImplemented
        other = other._read() if isinstance(other, ScalarArgument) else other
        return fn(other, self._read()) if reflected else fn(self._read(), other)
    method.__name__ = name
    return method


for _name in ("__neg__", "__pos__", "__abs__", "__round__", "__trunc__", "__floor__", "__ceil__"):
    setattr(ScalarArgument, _name, _unary(_name))
for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    setattr(ScalarArgument, f"__{_op}__", _binary(f"__{_op}__", getattr(operator, _op), False))
    setattr(ScalarArgument, f"__r{_op}__", _binary(f"__r{_op}__", getattr(operator, _op), True))
setattr(ScalarArgument, "__divmod__", _binary("__divmod__", divmod, False))
setattr(ScalarArgument, "__rdivmod__", _binary("__rdivmod__", divmod, True))
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(ScalarArgument, f"__{_op}__", _binary(f"__{_op}__", getattr(operator, _op), False))
