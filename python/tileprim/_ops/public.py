"""The primitives as Python functions, one per entry of the C++ op table (``functions``
writes them): each hands its arguments to the call memo (``_calls.call``) and runs the prepared call.
Every op is also a method of each scope; ``tp.plan`` gives an op's Plan, nothing run."""
from __future__ import annotations

import functools
import json
import os
from typing import Dict, List, Tuple

import tileprim._C as _C
from .._calls.call import prepared_call
from .._opspec.table import OPS, SPECS
from ..comm import treduce
from .functions import op_function

__all__ = ["OPS", "plan", "variants", "op_table", "op_name"]

_TILE_OPS = [spec for spec in SPECS.values() if spec["family"] != "collective"]
OPS.update({spec["name"]: op_function(spec, prepared_call) for spec in _TILE_OPS})
_PLANNERS = {spec["name"]: op_function(spec, prepared_call, runs=False) for spec in _TILE_OPS}


def op_name(op) -> str:
    """The op table's name of ``op`` (``tp.sum``, ``tp.warp.sum`` or ``'sum'``)."""
    name = op if isinstance(op, str) else getattr(op, "_tp_op", None)
    if name not in OPS:
        raise ValueError(f"op: {op!r} is not a tileprim op; the ops are {', '.join(OPS)}")
    return name


def plan(op, /, *args, **kwargs):
    """Dispatch ``op`` on these arguments and return the :class:`Plan`; nothing runs.

    Parameters
    ----------
    op : op function, scope method or str
        ``tp.sum``, ``tp.warp.sqrt``, ``tp.comm.treduce`` or an op's name.
    *args, **kwargs
        The arguments the op itself takes.

    Returns
    -------
    Plan
        The chosen variant, its parameters and numerics, and every variant's status with reasons.

    Raises
    ------
    tp.DispatchError
        When no variant accepts the call (the message is the whole trace).
    ValueError, TypeError
        On bad arguments, naming the argument and the rule.

    Examples
    --------
    >>> p = tp.plan(tp.sum, np.ones(4, "f4"), scope=tp.thread, storage="local", target="sm_100a")
    >>> p.variant
    'local'
    >>> p.declined()["sm100_packed"]
    ['reduction_len: reduction_len 4 < 8']
    """
    if isinstance(op, str) and op == "treduce":  # the collective, by its name
        op = treduce
    planner = getattr(op, "_tp_planner", None)
    if planner is not None:  # tp.comm.treduce
        return planner(*args, **kwargs)
    name = op_name(op)
    keywords = getattr(op, "keywords", None)
    if not isinstance(op, str) and isinstance(keywords, dict):  # a scope method: its scope
        kwargs = {**keywords, **kwargs}
    return _PLANNERS[name](*args, **kwargs)


def variants(op) -> List[Tuple[str, int, List[str]]]:
    """The registered variants of ``op`` in choice order: (name, priority, predicate names).

    Parameters
    ----------
    op : op function, scope method, tp.comm.treduce or str
        The op, or its name ("sum", "treduce").

    Returns
    -------
    list of (str, int, list of str)

    Raises
    ------
    ValueError
        Where ``op`` is not a tileprim op.

    Examples
    --------
    >>> [v[0] for v in tp.variants("sum")]
    ['sm100_packed', 'local', 'shared', 'cross_warp']
    """
    name = op if isinstance(op, str) else getattr(op, "_tp_op", None) or getattr(op, "_tp_collective", None)
    if name is None:
        raise ValueError(f"op: {op!r} is not a tileprim op")
    return [tuple(v) for v in _C.variants(name)]


def op_table() -> Dict[str, dict]:
    """The C++ op table: every op's family, operands, dtypes, NaN rule, exactly rounded dtypes,
    the dtypes where the CPU and every GPU give the same bits (``same_bits``), the measured max
    error in ulps per dtype (``max_ulp``, elementwise ops), options and device functor; and
    ``fastmath``, what ``fastmath=True`` runs on a GPU where the op has an approximation (None
    where it has none): its functor, ``form`` in words, ``dtypes``, and per dtype the max error
    measured on a GPU (``max_ulp``, ``max_abs``; "not measured" until benchmarks' accuracy.py
    --fastmath has run on one), read from the package's fastmath_errors.json.

    Returns
    -------
    dict
        op name -> its entry (a dict of the fields above); a fresh copy on every call.

    Examples
    --------
    >>> t = tp.op_table()
    >>> t["sqrt"]["family"], t["exp"]["exactly_rounded"], t["max"]["options"]
    ('elementwise', ['float16', 'bfloat16'], ['thread_reduce', 'propagate_nan'])
    >>> t["exp"]["same_bits"], t["exp"]["max_ulp"]["float16"]
    (['float16', 'bfloat16', 'float32', 'float64'], 0.5)
    """
    table = {s["name"]: dict(s) for s in _C.ops()}
    for name, spec in table.items():
        if spec["fastmath"] is not None:
            spec["fastmath"] = {**spec["fastmath"], **fastmath_errors(name, spec["fastmath"]["dtypes"])}
    return table


def fastmath_errors(op: str, dtypes: List[str]) -> Dict[str, dict]:
    """The measured errors of ``op``'s fastmath approximation per dtype (max_ulp, max_abs, and
    where they were measured), from fastmath_errors.json; "not measured" where it has none."""
    measured = _fastmath_measurements()
    found = measured["ops"].get(op, {})
    return {key: {t: found[t][key] if t in found else "not measured" for t in dtypes}
            for key in ("max_ulp", "max_abs")} | {"measured_on": measured["device"] or "not measured"}


_FASTMATH_ERRORS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fastmath_errors.json")  # package's


@functools.lru_cache(maxsize=1)
def _fastmath_measurements() -> dict:
    with open(_FASTMATH_ERRORS, encoding="utf-8") as f:
        return json.load(f)
