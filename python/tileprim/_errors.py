"""tileprim's own exception types, at the bottom of the package: every module may import this
one, and it imports nothing of tileprim but the compiled core."""
from __future__ import annotations

import tileprim._C as _C

__all__ = ["DispatchError"]

DispatchError = _C.DispatchError


def _dispatch_error_repr(self) -> str:
    return f"DispatchError:\n{self}"


def _dispatch_error_html(self) -> str:
    from ._viz.plan_html import dispatch_error_html  # pictures load only when Jupyter asks for one
    return dispatch_error_html(str(self))


# The message is the whole trace table: shown as it prints, not as one escaped line.
DispatchError.__repr__ = _dispatch_error_repr
DispatchError._repr_html_ = _dispatch_error_html
DispatchError.__doc__ = ("No variant accepts the call (a ValueError). The message is the whole trace table: the call, "
                         "then every variant with its priority, status and reasons.")
