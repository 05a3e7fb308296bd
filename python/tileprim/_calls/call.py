"""Calling a tile primitive: the caller's arguments become a prepared call once per call
signature (checked, then planned by C++ as the program of one step: ``_C.prepare_call``), and
every call of that signature is a dictionary lookup and a run (``prepared``, which tile programs
share).

The signature key is what decides the plan: the op, each operand's kind, dtype, shape, strides
and device (a scalar operand's value is a run-time argument), scope, storage, layouts,
options, target and backend."""
from __future__ import annotations

import math
from typing import List, Optional

import numpy as np

import tileprim._C as _C
from .._arrays.adapters import adapter_for, remember_device_type
from .._arrays.dtypes import TILE_DTYPES, dtype_name, numpy_dtype
from .._arrays.routing import on_host, route_call
from .._checks import OPTIONAL_STR, as_axis, as_bool, as_int, expect, plain_ndarray
from .._layout.syntax import LayoutExpr
from .._layout.value import TileLayout, as_layout, spelled_layout
from .._opspec.table import SPECS
from .._platform.backends import default_target, resolve_backend
from . import autotune as autotuning
from .plan import Plan
from .prepared import MEMO, OPERAND_KEYS, DevicePrepared, HostPrepared, Input, forget, remember
from .scope import ExecScope, check_storage, not_a_scope, thread

__all__ = ["prepared_call", "forget"]

_SCALARS = (int, float, bool)


def prepared_call(op: str, operands: tuple, axes, out, accum, scope, storage, layout, out_layout, batch_dims,
                  target, backend, dispatch, extra, config: dict, keepdims=False):
    """The prepared call of this signature (``.plan``, ``.run(values, out)``), from the memo or
    made now."""
    key = prepared = None
    if type(layout) is LayoutExpr and layout.shard is not None:  # S[...] syntax: keyed by its value
        layout = spelled_layout(layout)
    if type(out_layout) is LayoutExpr and out_layout.shard is not None:
        out_layout = spelled_layout(out_layout)
    if (layout is None or type(layout) is TileLayout) and (out_layout is None or type(out_layout) is TileLayout):
        try:  # prepared.signature spelled out: this runs on every call, and a call frame costs 0.2 us
            # the options' types too: 1, 1.0 and True are equal keys, and the checks that refuse 1.0 or
            # True where an int or a bool is due run only when a signature is new
            key = (op, scope, axes, accum, keepdims, storage, layout, out_layout, batch_dims, target, backend,
                   dispatch, extra, *[OPERAND_KEYS[type(x)](x) for x in operands], *config.items(),
                   type(axes), type(accum), type(keepdims), type(batch_dims), *map(type, config.values()),
                   type(axes) is tuple and tuple(map(type, axes)))
            prepared = MEMO.get(key)
        except (KeyError, TypeError, RuntimeError):  # a type not seen before, an unhashable argument, one with
            key = None                                  # no shape (a nested tensor: the slow path names it)
    if prepared is None:
        args = (op, operands, axes, out, accum, scope, storage, layout, out_layout, batch_dims, target, backend,
                dispatch, extra, config, keepdims)
        # a library's own machinery may take the call (torch autograd, fake tensors, JAX tracers)
        options = dict(scope=scope, storage=storage, layout=layout, out_layout=out_layout, batch_dims=batch_dims,
                       target=target, backend=backend, dispatch=dispatch, extra=extra, config=config)
        routed = route_call(operands, out, dict(op=op, axes=axes, accum=accum, keepdims=keepdims, options=options),
                            lambda: _prepare(*args))
        if routed is None:
            prepared = _prepare(*args)
        else:
            prepared, memo = routed
            if not memo:
                return prepared
        remember(key, prepared)
    return prepared


# ---- the slow path: checking and planning a new call signature ------------------------------
def _axes_list(axes) -> List[int]:
    items = axes if isinstance(axes, (tuple, list)) else (axes,)
    try:
        return [as_axis(a, "axes") for a in items]
    except TypeError:
        raise TypeError(f"axes: expected an int or a tuple of ints, not {axes!r}") from None


class _Operand:
    """One operand as the slow path found it; ``prepare`` makes a later call's object of the
    same signature ready for the runner."""

    def __init__(self, arg: str, kind: str, dtype: Optional[str], shape: tuple, adapter=None, device=-1,
                 prepare=None):
        self.arg, self.kind, self.dtype, self.shape = arg, kind, dtype, shape
        self.adapter, self.device = adapter, device
        self.prepare = prepare  # object -> array the runner reads (contiguous, native, broadcast)


def _host_array(x, arg: str):
    """A NumPy operand (or anything NumPy reads) and how to ready it; TypeError for what tiles
    cannot hold."""
    # an array known only by DLPack (DESIGN §2) is read on the host as NumPy reads it
    read = np.from_dlpack if hasattr(x, "__dlpack__") and not hasattr(x, "__array__") else np.asarray
    if isinstance(x, np.ndarray):
        arr = plain_ndarray(x, arg)
        OPERAND_KEYS.setdefault(type(x), OPERAND_KEYS[np.ndarray])  # memory only: keyed as an ndarray
    else:
        try:
            arr = read(x)
        except ValueError as e:  # NumPy's words for a ragged list: "inhomogeneous shape after 1 dimensions"
            raise ValueError(f"{arg}: a nested sequence whose rows differ in length is not an array ({e}); "
                             "every row needs the same length") from None
        except (BufferError, RuntimeError, TypeError) as e:
            if read is np.asarray:  # an object NumPy cannot read (a torch tensor on the meta device)
                raise TypeError(f"{arg}: a {type(x).__name__} NumPy cannot read as an array ({e})") from None
            raise TypeError(f"{arg}: a DLPack array NumPy cannot read on the host ({e}); pass a NumPy array or "
                            "a PyTorch, CuPy or JAX array") from None
    if arr.dtype.kind in "OcbuUSmM" or (arr.dtype.kind == "i" and arr.dtype.itemsize not in (4, 8)):
        raise TypeError(f"{arg}: dtype {arr.dtype} is not supported; tiles hold float16, bfloat16, float32, "
                        f"float64, int32 or int64 (convert with .astype)")
    dtype = dtype_name(arr.dtype, arg)
    native = numpy_dtype(dtype)
    if isinstance(x, np.ndarray) and arr.dtype.isnative:
        return arr, dtype, None if arr.flags.c_contiguous else np.ascontiguousarray
    # other byte orders are converted, as NumPy's ufuncs do; sequences are read by NumPy
    return arr, dtype, lambda v: np.ascontiguousarray(read(v), dtype=native)


def _operands(op: str, names, values, extra_scalar_ok) -> List[_Operand]:
    out = []
    for i, (arg, x) in enumerate(zip(names, values)):
        if isinstance(x, _SCALARS) or isinstance(x, np.generic):
            if not extra_scalar_ok(i):
                raise TypeError(f"{arg}: expected an array, not the scalar {x!r}")
            if isinstance(x, np.generic):
                OPERAND_KEYS[type(x)] = type
            out.append(_Operand(arg, "scalar", None, ()))
            continue
        adapter = adapter_for(x)
        if adapter is not None:
            remember_device_type(x, adapter)
            adapter.check_stored(x, arg)
            OPERAND_KEYS[type(x)] = adapter.dense_key
            out.append(_Operand(arg, "device", adapter.dtype(x, arg), adapter.shape(x), adapter, adapter.device(x)))
            continue
        arr, dtype, convert = _host_array(x, arg)
        out.append(_Operand(arg, "numpy", dtype, arr.shape, prepare=convert))
    return out


def _prepare(op, values, axes, out, accum, scope, storage, layout, out_layout, batch_dims, target, backend,
             dispatch, extra, config, keepdims=False):
    viewed = on_host(values, lambda views: _prepare(op, views, axes, out, accum, scope, storage, layout, out_layout,
                                                     batch_dims, target, backend, dispatch, extra, config, keepdims))
    if viewed is not None:  # e.g. torch CPU tensors: through NumPy views
        return viewed
    spec = SPECS[op]
    named = scope is not None  # named nowhere on a batched call: the planner chooses (C++ auto_scope)
    if not named:
        scope = thread
    if not isinstance(scope, ExecScope):
        raise not_a_scope(scope)
    accum = as_bool(accum, "accum")
    if "axis" in config:
        raise TypeError("unexpected keyword argument 'axis': tileprim reduces over axes=, as in axes=-1 or axes=(0, 1)")
    config = {k: bool(v) if isinstance(v, np.bool_) else v for k, v in config.items()}  # np.True_ as True
    reduction = spec["family"] == "reduction"
    scalar_ok = (lambda i: False) if reduction or op in ("zero", "cast") else \
        (lambda i: i == 1) if op == "fill" else (lambda i: True)
    operands = _operands(op, spec["operands"], values, scalar_ok)
    arrays = [o for o in operands if o.kind != "scalar"]  # none, or a 0-d tile: validate.cc says so
    if len({o.kind for o in arrays}) > 1:
        raise TypeError(f"{op}: operands mix NumPy and device arrays; move them to one place first")
    for o in arrays:  # NumPy broadcasts at most 32 dims (a RuntimeError naming nothing past them)
        if len(o.shape) > 32:
            raise ValueError(f"{o.arg}: {len(o.shape)} dims; an operand has at most 32 (batch and tile dims)")
    try:
        full_shape = np.broadcast_shapes(*(o.shape for o in arrays))
    except ValueError:
        shapes = ", ".join(f"{o.arg} {o.shape}" for o in arrays)
        raise ValueError(f"{op}: operand shapes do not broadcast: {shapes}") from None
    batch_dims = as_int(batch_dims, "batch_dims")
    if full_shape and not 0 <= batch_dims < len(full_shape):
        raise ValueError(f"batch_dims: {batch_dims} must leave at least one tile dim of the "
                         f"{len(full_shape)}-dim operand {full_shape}")
    batch_shape, tile_shape = tuple(full_shape[:batch_dims]), tuple(full_shape[batch_dims:])

    layout = as_layout(layout, "layout")
    out_layout = as_layout(out_layout, "out_layout")
    storage_given = storage is not None
    check_storage(storage)
    if storage is None:
        storage = "local" if layout is not None and layout.thread_axes else scope.default_storage
    expect(dispatch, OPTIONAL_STR, "dispatch", "a variant name")
    expect(target, OPTIONAL_STR, "target", "an architecture string such as 'sm_90a'")
    in_dtype = arrays[0].dtype if arrays else "float32"  # no array: validate.cc refuses the call
    out_dtype = dtype_name(extra, "dtype", TILE_DTYPES) if spec["extra_arg"] == "dtype" else in_dtype
    core_layout = layout._core if layout is not None else None
    refs = [_C.TileRef.scalar(o.arg) if o.kind == "scalar"
            else _C.TileRef(o.arg, o.dtype, list(tile_shape), storage, core_layout) for o in operands]
    axes_list = _axes_list(axes) if reduction else []
    # the output's shape comes from C++ (validate.cc normalises the axes and derives it)
    out_ref = _C.TileRef("out", out_dtype, [], storage, out_layout._core if out_layout is not None else None)
    call = _C.OpCall(op, refs, out_ref, scope.kind, scope.threads, axes_list, accum, config, dispatch or "", scope.ctas)

    on_device = bool(arrays) and arrays[0].kind == "device"
    backend = resolve_backend(backend, device_operands=on_device)
    devices = sorted({o.device for o in arrays}) if on_device else []
    if len(devices) > 1:
        raise ValueError(f"operands: on devices {devices[0]} and {devices[1]}; move them to one device")
    target = default_target(backend, devices[0] if devices else 0) if target is None else target
    auto = not named and batch_dims >= 1  # batched with no scope named: at the planner's choice of scope
    keepdims = reduction and as_bool(keepdims, "keepdims")
    tiles = math.prod(batch_shape)
    inputs = [Input(i, o.prepare, full_shape if o.shape != full_shape else None)
              for i, o in enumerate(operands) if o.kind != "scalar"]
    scalar_at = [i for i, o in enumerate(operands) if o.kind == "scalar"]

    def planned(scope_only="", staging=""):  # the program of one step (at one point of the planner's)
        return _C.prepare_call(call, target, backend, devices, auto, storage_given, scope_only, staging)

    def made(core):
        step = core.plan.step_plans[0]
        out_tile = tuple(step.call.output.shape)
        all_reduced = reduction and len(step.call.axes) == len(tile_shape) and out_tile == (1,)
        result_shape = batch_shape + (() if all_reduced else out_tile)
        if reduction and keepdims:  # NumPy's keepdims: 1 where each reduced axis was
            kept = set(step.call.axes)
            result_shape = batch_shape + tuple(1 if i in kept else d for i, d in enumerate(tile_shape))
        plan = Plan(step, result_shape, bound=core, tiles=tiles)
        run = (core, plan, len(operands), inputs, scalar_at, [(result_shape, out_dtype)], False, tiles, accum,
               [o.arg for o in operands], (result_shape,) if all_reduced else ())
        if on_device:
            return DevicePrepared(*run, adapter=arrays[0].adapter, device=devices[0])
        return HostPrepared(*run)

    prepared = made(planned())
    if (auto and on_device and not accum and layout is None and out_layout is None and autotuning.requested(None)
            and all(o.adapter.runnable(x) for o, x in zip(operands, values) if o.kind == "device")):
        signature = (op, [(o.arg, o.kind, o.dtype, tuple(o.shape)) for o in operands], axes_list, keepdims,
                     storage_given and storage, dispatch, extra, sorted(config.items()), target, backend)
        shown = f"{op}: {tiles} x " + ", ".join(f"{o.arg} {o.dtype}{tuple(tile_shape)}" for o in arrays)
        prepared = _tuned(made, planned, prepared, values, signature, shown, tiles, arrays[0].adapter, devices[0])
    return prepared


def _tuned(made, planned, prepared, values, signature, shown, tiles, adapter, device):
    """The call prepared at the point of the planner's candidates measured fastest on this GPU
    (autotune.py), each timed on the call's own operands."""
    def seconds_of(scope, staging):
        return autotuning.run_seconds(made(planned(scope, staging)), values, adapter, device)

    record = autotuning.tuned(signature, shown, autotuning.candidates(prepared.plan.scope_trace), tiles,
                              autotuning.gpu_of(device), seconds_of)
    prepared = made(planned(record["scope"], record["staging"]))
    prepared.plan.autotuned = record
    return prepared
