"""Calling a tile primitive: the caller's arguments become a prepared call once per call
signature (checked, dispatched by the C++ registry, its backend's runner bound: ``_C.prepare``),
and every call of that signature is a dictionary lookup and a run.

The signature key is what decides the plan: the op, each operand's kind, dtype, shape, strides
and device (a scalar operand's value is a run-time argument), scope, storage, layouts,
options, target and backend."""
from __future__ import annotations

import math
import operator
from typing import Callable, Dict, List, Optional

import numpy as np

from . import _C
from ._backends import default_target, resolve_backend
from ._checks import OPTIONAL_STR, as_bool, as_int, expect, plain_ndarray, short_repr
from ._dtypes import INDEX_DTYPES, TILE_DTYPES, check_index_scalar, dtype_name, numpy_dtype
from ._interop import (PLACED_KEYS, Adapter, Unkeyable, adapter_for, adapter_named, placed_key,
                       remember_device_type)
from ._jax import JaxCallback, traced
from ._layout.syntax import LayoutExpr
from ._layout.value import TileLayout, as_layout, spelled_layout
from ._op_table import SPECS
from ._plan import Plan
from ._scope import ExecScope
from ._torch_host import TorchHostCall, is_host_tensor, to_numpy
from ._torch_ops import Routed, routing

__all__ = ["prepared_call", "forget"]

_MEMO: Dict[tuple, "_PreparedCall"] = {}
_MEMO_LIMIT = 4096
_SCALARS = (int, float, bool)
# How an operand of each type enters the signature, by its type (a dictionary lookup and, where
# one exists, a C-level getter: this runs on every call). A scalar's value is a run-time
# argument, so its type is its key. Device array types and NumPy scalar types join when seen.
_OPERAND_KEYS: Dict[type, Callable] = {np.ndarray: operator.attrgetter("dtype", "shape", "strides"),
                                       int: type, float: type, bool: type}


def prepared_call(op: str, operands: tuple, axes, out, accum, scope, storage, layout, out_layout, batch_dims,
                  target, backend, dispatch, extra, config: dict, keepdims=False) -> "_PreparedCall":
    """The prepared call of this signature (``.plan``, ``.run(values, out)``), from the memo or
    made now."""
    key = prepared = None
    if type(layout) is LayoutExpr and layout.shard is not None:  # S[...] syntax: keyed by its value
        layout = spelled_layout(layout)
    if type(out_layout) is LayoutExpr and out_layout.shard is not None:
        out_layout = spelled_layout(out_layout)
    if (layout is None or type(layout) is TileLayout) and (out_layout is None or type(out_layout) is TileLayout):
        try:
            key = (op, scope, axes, accum, keepdims, storage, layout, out_layout, batch_dims, target, backend, dispatch, extra,
                   None if out is None else placed_key(out), *[_OPERAND_KEYS[type(x)](x) for x in operands],
                   *config.items())
            prepared = _MEMO.get(key)
        except (Unkeyable, KeyError, TypeError):  # TypeError: an unhashable argument
            key = None
    if prepared is None:
        args = (op, operands, axes, out, accum, scope, storage, layout, out_layout, batch_dims, target, backend,
                dispatch, extra, config, keepdims)
        always = routing(operands, out)  # torch tensors that need autograd, or fake/functional ones
        if always is not None or traced(operands):
            options = dict(scope=scope, storage=storage, layout=layout, out_layout=out_layout, batch_dims=batch_dims,
                           target=target, backend=backend, dispatch=dispatch, extra=extra, config=config)
            if always is None:  # JAX tracers: the eager call takes keepdims as a keyword, as config is passed
                if keepdims:
                    options["config"] = {**config, "keepdims": True}
                return JaxCallback(op, axes, accum, options)
            prepared = Routed(always, op, axes, accum, options, lambda: _prepare(*args), keepdims)
            if always:  # a subclass's key would meet the plain tensor's
                return prepared
        else:
            prepared = _prepare(*args)
        if key is not None:
            if len(_MEMO) >= _MEMO_LIMIT:
                _MEMO.clear()
            _MEMO[key] = prepared
    return prepared


def forget() -> None:
    """Drops every remembered call signature (here and in the C++ plan cache)."""
    _MEMO.clear()
    _C.plan_cache_clear()


# ---- the slow path: checking and planning a new call signature ------------------------------
def _axes_list(axes) -> List[int]:
    items = axes if isinstance(axes, (tuple, list)) else (axes,)
    try:
        return [as_int(a, "axes") for a in items]
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
    if isinstance(x, np.ndarray):
        arr = plain_ndarray(x, arg)
        _OPERAND_KEYS.setdefault(type(x), _OPERAND_KEYS[np.ndarray])  # memory only: keyed as an ndarray
    else:
        try:
            arr = np.asarray(x)
        except ValueError as e:  # NumPy's words for a ragged list: "inhomogeneous shape after 1 dimensions"
            raise ValueError(f"{arg}: a nested sequence whose rows differ in length is not an array ({e}); "
                             "every row needs the same length") from None
    if arr.dtype.kind in "OcbuUSmM" or (arr.dtype.kind == "i" and arr.dtype.itemsize not in (4, 8)):
        raise TypeError(f"{arg}: dtype {arr.dtype} is not supported; tiles hold float16, bfloat16, float32, "
                        f"float64, int32 or int64 (convert with .astype)")
    dtype = dtype_name(arr.dtype, arg)
    native = numpy_dtype(dtype)
    if isinstance(x, np.ndarray) and arr.dtype.isnative:
        return arr, dtype, None if arr.flags.c_contiguous else np.ascontiguousarray
    # other byte orders are converted, as NumPy's ufuncs do; sequences are read by NumPy
    return arr, dtype, lambda v: np.ascontiguousarray(np.asarray(v), dtype=native)


def _operands(op: str, names, values, extra_scalar_ok) -> List[_Operand]:
    out = []
    for i, (arg, x) in enumerate(zip(names, values)):
        if isinstance(x, _SCALARS) or isinstance(x, np.generic):
            if not extra_scalar_ok(i):
                raise TypeError(f"{arg}: expected an array, not the scalar {x!r}")
            if isinstance(x, np.generic):
                _OPERAND_KEYS[type(x)] = type
            out.append(_Operand(arg, "scalar", None, ()))
            continue
        adapter = adapter_for(x)
        if adapter is not None:
            remember_device_type(x, adapter)
            adapter.check_stored(x, arg)
            _OPERAND_KEYS[type(x)] = adapter.dense_key
            out.append(_Operand(arg, "device", adapter.dtype(x, arg), adapter.shape(x), adapter, adapter.device(x)))
            continue
        arr, dtype, convert = _host_array(x, arg)
        out.append(_Operand(arg, "numpy", dtype, arr.shape, prepare=convert))
    return out


def _prepare(op, values, axes, out, accum, scope, storage, layout, out_layout, batch_dims, target, backend,
             dispatch, extra, config, keepdims=False) -> "_PreparedCall":
    if any(map(is_host_tensor, values)) or is_host_tensor(out):  # torch CPU tensors: through NumPy views
        for x in (*values, out):
            if is_host_tensor(x):
                torch_keys = adapter_named("torch")
                _OPERAND_KEYS[type(x)], PLACED_KEYS[type(x)] = torch_keys.dense_key, torch_keys.placed_key
        return TorchHostCall(_prepare(op, [to_numpy(x) for x in values], axes, to_numpy(out, contiguous=False),
                                      accum, scope, storage, layout, out_layout, batch_dims, target, backend,
                                      dispatch, extra, config, keepdims), values)
    spec = SPECS[op]
    if not isinstance(scope, ExecScope):
        raise TypeError(f"scope: expected tp.thread, tp.warp, tp.warpgroup or tp.cta(n), not {scope!r}")
    accum = as_bool(accum, "accum")
    if "axis" in config:
        raise TypeError("unexpected keyword argument 'axis': tileprim reduces over axes=, as in axes=-1 or axes=(0, 1)")
    reduction = spec["family"] == "reduction"
    scalar_ok = (lambda i: False) if reduction or op in ("zero", "cast") else \
        (lambda i: i == 1) if op == "fill" else (lambda i: True)
    operands = _operands(op, spec["operands"], values, scalar_ok)
    arrays = [o for o in operands if o.kind != "scalar"]  # none, or a 0-d tile: validate.cc says so
    if len({o.kind for o in arrays}) > 1:
        raise TypeError(f"{op}: operands mix NumPy and device arrays; move them to one place first")
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
    if storage is None:
        storage = "local" if layout is not None and layout.thread_axes else scope.default_storage
    expect(storage, str, "storage", "one of 'local', 'shared', 'shared.dyn'")
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
    if accum and out is None:
        raise ValueError("accum: accum=True folds the result into out=, so out= must be given")
    call = _C.OpCall(op, refs, out_ref, scope.kind, scope.threads, axes_list, accum, config, dispatch or "")

    on_device = bool(arrays) and arrays[0].kind == "device"
    backend = resolve_backend(backend, device_operands=on_device)
    devices = sorted({o.device for o in arrays}) if on_device else []
    if len(devices) > 1:
        raise ValueError(f"operands: on devices {devices[0]} and {devices[1]}; move them to one device")
    target = default_target(backend, devices[0] if devices else 0) if target is None else target
    core = _C.prepare(call, target, backend, devices)

    out_tile = tuple(core.plan.call.output.shape)
    all_reduced = reduction and len(core.plan.call.axes) == len(tile_shape) and out_tile == (1,)
    result_shape = batch_shape + (() if all_reduced else out_tile)
    if reduction and as_bool(keepdims, "keepdims"):  # NumPy's keepdims: 1 where each reduced axis was
        kept = set(core.plan.call.axes)
        result_shape = batch_shape + tuple(1 if i in kept else d for i, d in enumerate(tile_shape))
    tiles = math.prod(batch_shape)
    plan = Plan(core.plan, result_shape, bound=core, tiles=tiles)
    if on_device:
        prepared = _DeviceCall(core, plan, operands, full_shape, result_shape, out_dtype, tiles, accum, devices[0])
    else:
        prepared = _HostCall(core, plan, operands, full_shape, result_shape, out_dtype, tiles, accum)
    if out is not None:
        prepared.check_out(out)
    return prepared


class _PreparedCall:
    """A call signature prepared to run: its bound plan (``core``) and what its runs need."""

    def __init__(self, core, plan, operands, full_shape, result_shape, out_dtype, tiles, accum):
        self.core, self.plan = core, plan
        self.result_shape, self.out_dtype, self.tiles, self.accum = result_shape, out_dtype, tiles, accum
        self.scalar_at = [i for i, o in enumerate(operands) if o.kind == "scalar"]
        self.names = [o.arg for o in operands]
        self.zeros = [0.0] * len(operands)
        self.broadcast = [o.kind != "scalar" and o.shape != full_shape for o in operands]
        self.full_shape = full_shape

    def scalars(self, values) -> list:
        if not self.scalar_at:
            return self.zeros
        s = list(self.zeros)
        for i in self.scalar_at:
            try:
                s[i] = float(values[i])
            except OverflowError:  # an int past float64's range, e.g. 2**1100
                raise ValueError(f"{self.names[i]}: the scalar {short_repr(values[i])} is beyond float64's range "
                                 "(about 1.8e308)") from None
            if self.out_dtype in INDEX_DTYPES:
                check_index_scalar(s[i], self.out_dtype, self.names[i])
        return s

    def out_shape_ok(self, shape) -> bool:
        return tuple(shape) == self.result_shape or tuple(shape) == self.result_shape + (1,)


class _HostCall(_PreparedCall):
    """NumPy operands, on the CPU backend or through the GPU's staging arena."""

    def __init__(self, core, plan, operands, full_shape, result_shape, out_dtype, tiles, accum):
        super().__init__(core, plan, operands, full_shape, result_shape, out_dtype, tiles, accum)
        self.np_dtype = numpy_dtype(out_dtype)
        self.prepare = []
        for o, b in zip(operands, self.broadcast):
            if o.kind == "scalar":
                self.prepare.append(_none)
            elif b:
                self.prepare.append(_broadcaster(full_shape, o.prepare))
            else:
                self.prepare.append(o.prepare or _same)
        # the common case: contiguous native arrays, read as they are
        self.direct = all(p is _same for p in self.prepare)

    def check_out(self, out) -> None:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out: expected a NumPy array for NumPy operands, not {type(out).__name__}")
        plain_ndarray(out, "out")
        if dtype_name(out.dtype, "out") != self.out_dtype:
            raise TypeError(f"out: dtype {out.dtype} differs from the result's {self.out_dtype}")
        if not self.out_shape_ok(out.shape):
            raise ValueError(f"out: shape {tuple(out.shape)} differs from the result's {self.result_shape}")
        if not out.flags.writeable:
            raise ValueError("out: the array is read-only")

    def run(self, values, out):
        inputs = list(values) if self.direct else [p(x) for p, x in zip(self.prepare, values)]
        result = np.empty(self.result_shape, self.np_dtype)
        if self.accum:
            result[...] = out.reshape(self.result_shape)
        self.core.run_host(inputs, self.scalars(values), result, self.tiles)
        if out is None:
            return result
        out[...] = result.reshape(out.shape)  # only now: a failed run leaves out untouched
        return out


def _none(_):
    return None


def _same(x):
    return x


def _broadcaster(shape, convert):
    def prepare(x):
        x = convert(x) if convert is not None else x
        return np.ascontiguousarray(np.broadcast_to(x, shape))
    return prepare


class _DeviceCall(_PreparedCall):
    """Device arrays: used in place; the result in the same library, on the same device,
    ordered on that library's current stream."""

    def __init__(self, core, plan, operands, full_shape, result_shape, out_dtype, tiles, accum, device):
        super().__init__(core, plan, operands, full_shape, result_shape, out_dtype, tiles, accum)
        arrays = [o for o in operands if o.kind != "scalar"]
        a = self.adapter = arrays[0].adapter
        self.device = device
        self.kinds = [o.kind for o in operands]
        # what a repeated call does, fixed here: the library's own functions where it has them
        self.contiguous, self.pointer, self.result_pointer = a.contiguous, a.pointer, a.result_pointer
        self.allocate = a.allocator(result_shape, out_dtype, device)
        self.stream = a.stream_of(device)
        self.finish = None if type(a).finish is Adapter.finish else a.finish
        # the common case: every operand an array of the result's shape; most often there is one
        self.direct = not self.scalar_at and not any(self.broadcast)
        if self.direct and len(operands) == 1:
            self.run = self._run_one

    def check_out(self, out) -> None:
        if self.adapter.library == "jax":
            raise TypeError("out: JAX arrays are immutable; use the returned array")
        adapter = adapter_for(out)
        if adapter is not self.adapter:
            raise TypeError(f"out: expected a {self.adapter.library} device array like the operands, "
                            f"not {type(out).__name__}")
        adapter.check_stored(out, "out")
        if adapter.contiguous(out) is not out:
            raise ValueError("out: must be C-contiguous; the kernel writes into it")
        if adapter.dtype(out, "out") != self.out_dtype:
            raise TypeError(f"out: dtype {adapter.dtype(out, 'out')} differs from the result's {self.out_dtype}")
        if not self.out_shape_ok(adapter.shape(out)):
            raise ValueError(f"out: shape {adapter.shape(out)} differs from the result's {self.result_shape}")
        if adapter.device(out) != self.device:
            raise ValueError(f"out: is on device {adapter.device(out)}, the operands on device {self.device}")

    def run(self, values, out):
        if self.direct:
            arrays = list(map(self.contiguous, values))  # held until the launch: a copy must outlive it
            pointers = list(map(self.pointer, arrays))
            scalars = self.zeros
        else:
            a = self.adapter
            arrays = [None if kind == "scalar" else a.broadcast(x, self.full_shape) if b else self.contiguous(x)
                      for kind, b, x in zip(self.kinds, self.broadcast, values)]
            pointers = [0 if x is None else self.pointer(x) for x in arrays]
            scalars = self.scalars(values)
        return self._launch(pointers, scalars, out)

    def _run_one(self, values, out):
        # _launch spelled out for the most frequent call: one array, no lists for _C to convert
        x = self.contiguous(values[0])  # held until the launch: a copy must outlive it
        if out is not None:
            self.core.run_device_one(self.pointer(x), self.pointer(out), self.tiles, self.device, self.stream())
            return out
        result = self.allocate()
        stream = self.stream()
        self.core.run_device_one(self.pointer(x), self.result_pointer(result), self.tiles, self.device, stream)
        return result if self.finish is None else self.finish(result, self.device, stream)

    def _launch(self, pointers, scalars, out):
        """Into out=, or into a new result the caller's library allocated."""
        if out is not None:
            self.core.run_device(pointers, scalars, self.pointer(out), self.tiles, self.device, self.stream())
            return out
        result = self.allocate()
        stream = self.stream()
        self.core.run_device(pointers, scalars, self.result_pointer(result), self.tiles, self.device, stream)
        return result if self.finish is None else self.finish(result, self.device, stream)
