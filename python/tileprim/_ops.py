"""The primitives as Python functions, generated from the C++ op table (``_C.ops()``): each
op's signature follows its family and operand names; its body hands the arguments to the
call memo (``_calls``) and runs the bound plan. Every op is also a method of each scope."""
from __future__ import annotations

from typing import Dict, List, Tuple

from . import _C
from ._calls import bound_call
from ._program.trace import TRACING, record_step
from ._docs import op_docstring
from ._errors import DispatchError
from ._scope import ExecScope, thread
from .comm import treduce

__all__ = ["OPS", "plan", "variants", "DispatchError", "op_name", "twin"]

_COMMON = ("scope=thread, storage=None, layout=None, out_layout=None, batch_dims=0, target=None, backend=None, "
           "dispatch=None, **config")


def _source(spec: dict, runs: bool) -> str:
    """The op function's source: its signature, then one call of the memo; the plan() twin
    of an op returns the bound plan's Plan instead of running it."""
    operands = spec["operands"]
    reduction = spec["family"] == "reduction"
    params = list(operands) + ([spec["extra_arg"]] if spec["extra_arg"] else [])
    signature = ", ".join(params) + (", axes=-1" if reduction else "")
    keywords = "out=None, accum=False, keepdims=False, " if reduction else "out=None, "
    pack = "(" + "".join(f"{o}, " for o in operands) + ")"
    tail = f".run({pack}, out)" if runs else ".plan"
    args = (f"{spec['name']!r}, {pack}, {'axes' if reduction else 'None'}, out, "
            f"{'accum' if reduction else 'False'}, scope, storage, layout, out_layout, batch_dims, target, "
            f"backend, dispatch, {spec['extra_arg'] or 'None'}, config, {'keepdims' if reduction else 'False'}")
    # inside a tile program being traced, a call records a step instead of running
    record = f"    if TRACING[0] is not None:\n        return record_step({args})\n" if runs else ""
    return (f"def op({signature}, *, {keywords}{_COMMON}):\n{record}"
            f"    return bound_call({args}){tail}\n")


def _make(spec: dict, runs: bool, bind=bound_call, default_scope=thread):
    namespace = {"bound_call": bind, "thread": default_scope, "TRACING": TRACING, "record_step": record_step}
    exec(compile(_source(spec, runs), f"<tileprim.{spec['name']}>", "exec"), namespace)
    fn = namespace["op"]
    fn.__name__ = fn.__qualname__ = spec["name"]
    fn.__module__ = "tileprim"
    fn._tp_op = spec["name"]
    if runs:
        fn.__doc__ = op_docstring(spec)
    return fn


_SPECS = [s for s in _C.ops() if s["family"] != "collective"]
_C_OPS_BY_NAME = {s["name"]: s for s in _SPECS}
OPS = {s["name"]: _make(s, runs=True) for s in _SPECS}
_PLANNERS = {s["name"]: _make(s, runs=False) for s in _SPECS}
ExecScope._ops = OPS


def twin(name: str, bind):
    """An op function whose body hands its arguments to ``bind`` instead of the call memo (the same
    signature but for scope=None, which ``bind`` reads as tp.thread: torch.compile's stand-in)."""
    return _make(_C_OPS_BY_NAME[name], runs=True, bind=bind, default_scope=None)


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
    if not isinstance(op, str) and isinstance(keywords, dict):  # a scope method: its scope=
        kwargs = {**keywords, **kwargs}
    return _PLANNERS[name](*args, **kwargs)


def variants(op) -> List[Tuple[str, int, List[str]]]:
    """The registered variants of ``op`` in choice order: (name, priority, predicate names).

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
    error in ulps per dtype (``max_ulp``, elementwise ops), options and device functor.

    Examples
    --------
    >>> t = tp.op_table()
    >>> t["sqrt"]["family"], t["exp"]["exactly_rounded"], t["max"]["options"]
    ('elementwise', ['float16', 'bfloat16'], ['thread_reduce', 'propagate_nan'])
    >>> t["exp"]["same_bits"], t["exp"]["max_ulp"]["float16"]
    (['float16', 'bfloat16', 'float32', 'float64'], 0.5)
    """
    return {s["name"]: dict(s) for s in _C.ops()}
