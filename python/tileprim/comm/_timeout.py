"""How long a collective across processes waits for the other ranks: the communicator's
default (tp.comm.init's timeout) and a call's own (tp.comm.treduce's), checked alike."""
from __future__ import annotations

import math
from typing import Optional

import tileprim._C as _C
from .._checks import short_repr

__all__ = ["DEFAULT_TIMEOUT", "check_timeout", "call_timeout"]

DEFAULT_TIMEOUT = float(_C.DEFAULT_TIMEOUT_S)  # seconds a call waits for the other ranks (C++'s default too)
# The longest wait: a year, far below what a deadline in a double or in nanoseconds holds.
MAX_TIMEOUT = 365 * 24 * 3600.0


def check_timeout(timeout) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout: expected seconds (a number), not {timeout!r}")
    # compared before float(): an int past float's range (2**1100) would overflow there
    if not (isinstance(timeout, int) or math.isfinite(timeout)) or not 0 < timeout <= MAX_TIMEOUT:
        raise ValueError(f"timeout: {short_repr(timeout)} is not a positive number of seconds up to "
                         f"{MAX_TIMEOUT:.0f} (a year)")
    return float(timeout)


def call_timeout(timeout, default: Optional[float]) -> float:
    """A call's timeout, checked: `default` (the communicator's; none: DEFAULT_TIMEOUT) when None."""
    if timeout is None:
        return DEFAULT_TIMEOUT if default is None else default
    return check_timeout(timeout)
