"""A program's float argument while its body is traced: the float itself (a subclass, so that
Python, NumPy and every library read it as the call's value) that remembers which of the call's
float arguments it is. Handed straight to an op (``x * t``, ``tp.maximum(x, t)``, ``ms + eps``), it
is recorded as that run-time scalar, not as a constant: the kernel takes it as a parameter, so the
traces of two values that differ only there have one plan and one kernel. Anything the body makes
from it (``2 * t``, ``math.exp(t)``, a branch on it) is a plain float, a constant of this value's
trace, as DESIGN §2 says of a program's scalars: every value still traces anew (the trace is
cheap), so no value ever runs another value's trace."""
from __future__ import annotations

import numpy as np

__all__ = ["ScalarArgument", "is_run_time_float"]

# the argument types a program takes at run time: those whose value is a Python float (item())
_RUN_TIME_FLOATS = (float, np.float16, np.float32, np.float64)


def is_run_time_float(x) -> bool:
    """A program argument that its kernel may take at run time: a float, or a NumPy float that is one."""
    return type(x) in _RUN_TIME_FLOATS


class ScalarArgument(float):
    """The ``index``-th run-time float of the call whose ``trace`` is being made."""

    def __new__(cls, value: float, index: int, trace):
        self = super().__new__(cls, value)
        self._tp_index, self._tp_trace = index, trace
        return self

    def __reduce__(self):  # copied or pickled: the plain value
        return float, (float(self),)


# Python's messages name the argument's type as the user passed it ("'float' object cannot be
# interpreted as an integer", "returns float")
ScalarArgument.__name__ = ScalarArgument.__qualname__ = "float"
