"""The primitives as Python functions: argument handling, then plan (C++ registry), then run on
a backend. Every op takes scope= and is also a method of each scope object."""
from __future__ import annotations

import functools
import inspect
from typing import Dict, List, Sequence, Tuple

import numpy as np

from . import _C
from ._arrays import Operand, dtype_name, operand
from ._backends import default_target, resolve_backend, run_plan
from ._layout import as_layout
from ._plan import Plan
from ._scope import ExecScope, thread

__all__ = ["OPS", "plan", "variants", "DispatchError"]

DispatchError = _C.DispatchError
# **config options the variants read; anything else is a typo the caller should hear about.
CONFIG_OPTIONS = ("thread_reduce", "propagate_nan")


class _Prepared:
    """A call checked and planned: what run_plan needs."""

    def __init__(self, plan: Plan, operands: List[Operand], batch_shape: Tuple[int, ...],
                 result_shape: Tuple[int, ...], out_dtype: str, backend: str):
        self.plan = plan
        self.operands = operands
        self.batch_shape = batch_shape
        self.result_shape = result_shape
        self.out_dtype = out_dtype
        self.backend = backend


def _axes_list(axes) -> List[int]:
    items = axes if isinstance(axes, (tuple, list)) else (axes,)
    out = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"axes: expected an int or a tuple of ints, not {axes!r}")
        out.append(int(a))
    return out


def _check_config(config: Dict[str, object]) -> Dict[str, object]:
    for key in config:
        if key not in CONFIG_OPTIONS:
            raise TypeError(f"unexpected keyword argument {key!r}; the variant options are {', '.join(CONFIG_OPTIONS)}")
    return config


def _prepare(op: str, named: Sequence[Tuple[str, object]], *, axes=None, out=None, accum=False,
             scope=thread, storage=None, layout=None, out_layout=None, batch_dims=0, target=None,
             backend=None, dispatch=None, out_dtype=None, config=None) -> _Prepared:
    if not isinstance(scope, ExecScope):
        raise TypeError(f"scope: expected tp.thread, tp.warp, tp.warpgroup or tp.cta(n), not {scope!r}")
    reduction = op in ("sum", "max", "min")
    scalar_ok = not reduction and op not in ("zero", "fill", "cast")
    ops = []
    for i, (arg, value) in enumerate(named):
        allow = scalar_ok or (op == "fill" and i == 1)
        ops.append(operand(value, arg, allow_scalar=allow))
    if op == "fill" and not ops[1].scalar:
        raise TypeError("value: fill takes a Python scalar value")
    arrays = [o for o in ops if not o.scalar]
    if not arrays:
        raise ValueError(f"{op}: at least one operand must be an array (all are scalars)")
    try:
        full_shape = np.broadcast_shapes(*(o.shape for o in arrays))
    except ValueError:
        shapes = ", ".join(f"{o.arg} {o.shape}" for o in arrays)
        raise ValueError(f"{op}: operand shapes do not broadcast: {shapes}") from None
    if len({o.kind for o in arrays}) > 1:
        raise TypeError(f"{op}: operands mix NumPy and device arrays; move them to one place first")
    for o in arrays:
        if o.shape != full_shape:
            o.broadcast_to(full_shape)

    if isinstance(batch_dims, bool) or not isinstance(batch_dims, (int, np.integer)):
        raise TypeError(f"batch_dims: expected an int, not {batch_dims!r}")
    if not 0 <= batch_dims < len(full_shape):
        raise ValueError(f"batch_dims: {batch_dims} must leave at least one tile dim of the "
                         f"{len(full_shape)}-dim operand {full_shape}")
    batch_shape, tile_shape = tuple(full_shape[:batch_dims]), tuple(full_shape[batch_dims:])

    layout = as_layout(layout, "layout")
    out_layout = as_layout(out_layout, "out_layout")
    if storage is None:
        storage = "local" if layout is not None and layout.thread_axes else scope.default_storage
    if not isinstance(storage, str):
        raise TypeError(f"storage: expected one of 'local', 'shared', 'shared.dyn', 'global', not {storage!r}")

    in_dtype = arrays[0].dtype
    out_dtype = dtype_name(out_dtype, "dtype") if out_dtype is not None else in_dtype
    core_layout = layout._core if layout is not None else None
    refs = [
        _C.TileRef.scalar(o.arg, o.value) if o.scalar
        else _C.TileRef(o.arg, o.dtype, list(tile_shape), storage, core_layout)
        for o in ops
    ]
    axes_list = _axes_list(axes) if reduction else []
    reduced_shape = [d for i, d in enumerate(tile_shape)
                     if i not in {a % len(tile_shape) for a in axes_list if -len(tile_shape) <= a < len(tile_shape)}]
    out_ref = _C.TileRef("out", out_dtype, reduced_shape if reduction else list(tile_shape), storage,
                         out_layout._core if out_layout is not None else None)
    if dispatch is not None and not isinstance(dispatch, str):
        raise TypeError(f"dispatch: expected a variant name, not {dispatch!r}")
    if accum and out is None:
        raise ValueError("accum: accum=True folds the result into out=, so out= must be given")
    call = _C.OpCall(op, refs, out_ref, scope.kind, scope.threads, axes_list, bool(accum),
                     _check_config(dict(config or {})), dispatch or "")

    backend = resolve_backend(backend, device_operands=arrays[0].kind == "device")
    if target is not None and not isinstance(target, str):
        raise TypeError(f"target: expected an architecture string such as 'sm_90a', not {target!r}")
    core = _C.plan(call, default_target(backend) if target is None else target)

    out_tile = tuple(core.call.output.shape)
    all_reduced = reduction and len(core.call.axes) == len(tile_shape) and out_tile == (1,)
    result_shape = batch_shape + (() if all_reduced else out_tile)
    return _Prepared(Plan(core, result_shape), ops, batch_shape, result_shape, out_dtype, backend)


def _check_out(prep: _Prepared, out) -> None:
    if out is None:
        return
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out: expected a NumPy array for NumPy operands, not {type(out).__name__}")
    if dtype_name(out.dtype, "out") != prep.out_dtype:
        raise TypeError(f"out: dtype {out.dtype} differs from the result's {prep.out_dtype}")
    if tuple(out.shape) != prep.result_shape and tuple(out.shape) != prep.result_shape + (1,):
        raise ValueError(f"out: shape {tuple(out.shape)} differs from the result's {prep.result_shape}")
    if not out.flags.writeable:
        raise ValueError("out: the array is read-only")


OPERANDS = {"sum": ("src",), "max": ("src",), "min": ("src",), "zero": ("src",), "fill": ("src", "value"),
            "cast": ("src",), "add": ("a", "b"), "sub": ("a", "b"), "mul": ("a", "b"), "fdiv": ("a", "b"),
            "maximum": ("a", "b"), "fma": ("a", "b", "c")}


def _prepare_from(op: str, arguments: Dict[str, object]) -> _Prepared:
    """_prepare from an op function's bound arguments (its locals, or plan()'s binding)."""
    params = _parameters(op)
    args = {k: v for k, v in arguments.items() if k in params}
    names = OPERANDS.get(op, ("src",))
    named = [(n, args.pop(n)) for n in names]
    config = args.pop("config", {})
    if op == "cast":
        args["out_dtype"] = args.pop("dtype")
    return _prepare(op, named, config=config, **args)


def _run(op: str, arguments: Dict[str, object]):
    prep = _prepare_from(op, arguments)
    out = arguments.get("out")
    if all(o.kind != "device" for o in prep.operands):
        _check_out(prep, out)
    return run_plan(prep, out, bool(arguments.get("accum", False)))


# ---- the ops: each function's locals are its arguments ---------------------------------------------
def _reduction(name: str):
    def fn(src, axes=-1, *, out=None, accum=False, scope=thread, storage=None, layout=None, out_layout=None,
           batch_dims=0, target=None, backend=None, dispatch=None, **config):
        return _run(name, locals())
    fn.__doc__ = (f"{name} over ``axes`` of each tile of ``src``, run by ``scope`` on the tile staged in "
                  f"``storage`` with ``layout``; ``accum=True`` folds the result into ``out``.")
    return fn


def _unary(name: str, doc: str):
    def fn(src, *, out=None, scope=thread, storage=None, layout=None, out_layout=None, batch_dims=0,
           target=None, backend=None, dispatch=None, **config):
        return _run(name, locals())
    fn.__doc__ = doc
    return fn


def _binary(name: str, doc: str):
    def fn(a, b, *, out=None, scope=thread, storage=None, layout=None, out_layout=None, batch_dims=0,
           target=None, backend=None, dispatch=None, **config):
        return _run(name, locals())
    fn.__doc__ = doc
    return fn


def fma(a, b, c, *, out=None, scope=thread, storage=None, layout=None, out_layout=None, batch_dims=0,
        target=None, backend=None, dispatch=None, **config):
    """a * b + c with one rounding, per register (NumPy broadcasting, scalars allowed)."""
    return _run("fma", locals())


def fill(src, value, *, out=None, scope=thread, storage=None, layout=None, out_layout=None, batch_dims=0,
         target=None, backend=None, dispatch=None, **config):
    """A tile shaped like ``src`` with every element ``value``."""
    return _run("fill", locals())


def cast(src, dtype, *, out=None, scope=thread, storage=None, layout=None, out_layout=None, batch_dims=0,
         target=None, backend=None, dispatch=None, **config):
    """``src`` converted to ``dtype``, rounding to nearest even."""
    return _run("cast", locals())


OPS = {
    "sum": _reduction("sum"),
    "max": _reduction("max"),
    "min": _reduction("min"),
    "zero": _unary("zero", "A tile of zeros shaped like ``src``."),
    "fill": fill,
    "reciprocal": _unary("reciprocal", "1 / src, per register."),
    "sqrt": _unary("sqrt", "sqrt(src), per register."),
    "exp": _unary("exp", "exp(src), per register."),
    "exp2": _unary("exp2", "2 ** src, per register."),
    "log2": _unary("log2", "log2(src), per register."),
    "silu": _unary("silu", "src / (1 + exp(-src)), per register."),
    "add": _binary("add", "a + b, per register (NumPy broadcasting, scalars allowed)."),
    "sub": _binary("sub", "a - b, per register."),
    "mul": _binary("mul", "a * b, per register."),
    "fdiv": _binary("fdiv", "a / b, per register (IEEE division)."),
    "maximum": _binary("maximum", "max(a, b) per register; NaN loses (np.fmax) unless propagate_nan=True."),
    "fma": fma,
    "cast": cast,
}
for _name, _fn in OPS.items():
    _fn.__name__ = _fn.__qualname__ = _name
    _fn._tp_op = _name


@functools.lru_cache(maxsize=None)
def _parameters(op: str) -> frozenset:
    return frozenset(inspect.signature(OPS[op]).parameters)


def _op_name(op) -> str:
    name = op if isinstance(op, str) else getattr(op, "_tp_op", None)
    if name not in OPS:
        raise ValueError(f"op: {op!r} is not a tileprim op; the ops are {', '.join(OPS)}")
    return name


def _bind(op, args, kwargs) -> Tuple[str, Dict[str, object]]:
    """The op's name and its arguments as its function would see them (scope methods add scope=)."""
    name = _op_name(op)
    if not isinstance(op, str) and isinstance(getattr(op, "keywords", None), dict):
        kwargs = {**op.keywords, **kwargs}
    bound = inspect.signature(OPS[name]).bind(*args, **kwargs)
    bound.apply_defaults()
    return name, dict(bound.arguments)


def plan(op, *args, **kwargs) -> Plan:
    """Dispatch ``op`` (``tp.sum``, ``tp.warp.sqrt`` or a name) on these arguments; nothing runs."""
    name, arguments = _bind(op, args, kwargs)
    return _prepare_from(name, arguments).plan


def variants(op) -> List[Tuple[str, int, List[str]]]:
    """The registered variants of ``op`` in choice order: (name, priority, predicate names)."""
    return [tuple(v) for v in _C.variants(_op_name(op))]
