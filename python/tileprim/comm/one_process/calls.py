"""A treduce call in one process: its bound plan from the memo (by its options and its arrays'
signature) or checked and bound now, and its run. A repeated call on device arrays into a given
dst is read, matched and launched in C++ where the arrays' type publishes DLPack's C exchange
table (_C.RepeatedCollective, one per options and array type); it leaves arrays an autograd
graph wants to the checking path, which refuses them (treduce has no backward)."""
from __future__ import annotations

from typing import Dict

import tileprim._C as _C
from ..._arrays.adapters import PLACED_KEYS
from ..._arrays.routing import refuse_gradients
from .._options import TreduceOptions
from .bound_treduce import BoundTreduce
from .checked_treduce import check_and_bind

__all__ = ["bound_treduce", "run_treduce"]

# (options, dst's array key, every rank's) -> the call's bound plan
_BOUND: Dict[tuple, BoundTreduce] = {}
_BOUND_LIMIT = 1024
# (options, dst's array type) -> its repeated calls in C++ (_C.RepeatedCollective, which holds
# each array signature it ran), or False for a type that publishes no DLPack C exchange table
# (its calls stay on the memo path)
_REPEATED: Dict[tuple, object] = {}
_REPEATED_LIMIT = 256


def bound_treduce(tensors: list, dst, options: TreduceOptions) -> BoundTreduce:
    """The call's bound plan from the memo, or checked and bound now."""
    try:
        key = (options, None if dst is None else PLACED_KEYS[type(dst)](dst),
               *[PLACED_KEYS[type(x)](x) for x in tensors])
        bound = _BOUND.get(key)
    except (KeyError, TypeError, AttributeError):  # an array of a type not yet keyed: the checks take it
        return check_and_bind(tensors, dst, options)
    if bound is None:
        bound = check_and_bind(tensors, dst, options)
        if len(_BOUND) >= _BOUND_LIMIT:
            _BOUND.clear()
        _BOUND[key] = bound
    return bound


def run_treduce(tensors: list, dst, options: TreduceOptions):
    """Runs the call: from C++ where it repeats one RepeatedCollective holds; else checked (or
    found in the memo), run, and then remembered there."""
    repeated = None
    if dst is not None:
        repeated = _REPEATED.get((options, type(dst)))
        if repeated:
            out = repeated.run(tensors, dst)
            if out is not None:
                return out
    refuse_gradients("treduce", [*tensors, dst])
    bound = bound_treduce(tensors, dst, options)
    out = bound.run(tensors, dst)
    if dst is not None and bound.adapter is not None:
        if repeated is None:
            if len(_REPEATED) >= _REPEATED_LIMIT:
                _REPEATED.clear()
            repeated = _REPEATED[(options, type(dst))] = _repeated_calls(type(dst), bound.adapter)
        if repeated:
            repeated.remember(bound.core, tensors, out)
    return out


def _repeated_calls(array_type: type, adapter):
    needs_grad = "requires_grad" if adapter.library == "torch" else ""
    try:
        return _C.RepeatedCollective(array_type, adapter.lazy_view, needs_grad)
    except ValueError:  # no DLPack C exchange table
        return False
