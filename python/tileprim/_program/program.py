"""tp.program: a Python function over tiles, traced once per call signature into steps that the
C++ planner turns into a ProgramPlan; the CPU backend runs it step by step, the CUDA backend as one
kernel. A repeated call of a signature is a dictionary lookup and a run."""
from __future__ import annotations

import functools
import inspect
import math
import sys
from typing import Dict, Optional

import numpy as np

from .. import _C
from .._backends import device_arch, resolve_backend
from .._calls import _host_array
from .._checks import as_int
from .._dtypes import numpy_dtype
from .._interop import Adapter, Unkeyable, adapter_for, placed_key, remember_device_type
from .._torch_host import is_host_tensor, to_numpy, to_torch
from .._torch_ops import routing
from .._scope import STORAGE_SCOPES, ExecScope, thread
from .torch_op import call_program_op, number_program, torch_compiling
from .plan import ProgramPlan
from .tile import Tile
from .trace import TRACING, Trace, user_location

__all__ = ["Program", "program"]

_SCALARS = (int, float, bool, np.integer, np.floating)
_MEMO_LIMIT = 256  # signatures per program; more start over
STAGINGS = tuple(_C.staging_names())  # how the kernel may hold the rows, in priority order


def program(fn=None, *, scope: Optional[ExecScope] = None, storage: Optional[str] = None,
            staging: Optional[str] = None):
    """Makes ``fn`` a tile program: its arguments are tiles (one instance of the batch each) and
    Python scalars; its body calls tileprim ops. Bare ``@tp.program`` or ``@tp.program(scope=...,
    storage=..., staging=...)`` (the call's defaults).

    ``staging`` names how the kernel holds the rows (``"registers"``, ``"shared"``, ``"streamed"``
    or ``"spilled"``; see ``ProgramPlan.staging``); None: the first whose predicate accepts, as the
    plan's staging trace shows. A named staging that declines raises DispatchError with its reasons.

    Examples
    --------
    >>> @tp.program(scope=tp.cta(32))
    ... def softmax(x):
    ...     e = tp.exp(x - tp.max(x, axes=-1, keepdims=True))
    ...     return e / tp.sum(e, axes=-1, keepdims=True)
    >>> y = softmax(np.zeros((2, 4), np.float32), batch_dims=1)
    >>> y[0]
    array([0.25, 0.25, 0.25, 0.25], dtype=float32)
    """
    if scope is not None and not isinstance(scope, ExecScope):
        raise TypeError(f"scope: expected tp.thread, tp.warp, tp.warpgroup or tp.cta(n), not {scope!r}")
    if storage is not None and storage not in STORAGE_SCOPES:
        raise ValueError(f"storage: {storage!r} is not one of {', '.join(STORAGE_SCOPES)}")
    if staging is not None and staging not in STAGINGS:
        raise ValueError(f"staging: {staging!r} is not one of {', '.join(STAGINGS)}")
    if fn is None:
        return lambda f: Program(f, scope, storage, staging)
    return Program(fn, scope, storage, staging)


class Program:
    """A traced tile program; call it like a tileprim op:
    ``prog(*args, batch_dims=0, scope=None, backend=None, target=None, out=None)``."""

    def __init__(self, fn, scope: Optional[ExecScope], storage: Optional[str], staging: Optional[str] = None):
        if not callable(fn):
            raise TypeError(f"tp.program: expected a function, not {fn!r}")
        functools.update_wrapper(self, fn)
        self._fn, self._scope, self._storage, self._staging = fn, scope, storage, staging
        self._params = list(inspect.signature(fn).parameters)
        self._memo: Dict[tuple, "_PreparedProgram"] = {}
        self._number = number_program(self)  # its name in a compiled graph's custom op

    def __call__(self, *args, batch_dims=0, scope=None, backend=None, target=None, out=None):
        if torch_compiling():
            return call_program_op(self, args, batch_dims, scope, backend, target, out)
        always = routing(args, out)  # torch tensors that need a gradient, or fake/functional ones
        if always or (always is False and _grad_enabled()):
            return call_program_op(self, args, batch_dims, scope, backend, target, out)
        if any(map(is_host_tensor, args)):
            return self._call_on_host_tensors(args, batch_dims, scope, backend, target, out)
        key = self._key(args, batch_dims, scope, backend, target)
        prepared = self._memo.get(key) if key is not None else None
        if prepared is None:
            prepared = self._prepare(args, batch_dims, scope, backend, target)
            if key is not None:
                if len(self._memo) >= _MEMO_LIMIT:
                    self._memo.clear()
                self._memo[key] = prepared
        return prepared.run(args, out)

    def _call_on_host_tensors(self, args, batch_dims, scope, backend, target, out):
        """PyTorch CPU tensors: run on NumPy views of them, the results returned as tensors."""
        views = tuple(to_numpy(x) for x in args)
        if out is not None:
            outs = tuple(to_numpy(o, contiguous=False) for o in out) if isinstance(out, tuple) else \
                to_numpy(out, contiguous=False)
            self(*views, batch_dims=batch_dims, scope=scope, backend=backend, target=target, out=outs)
            return out
        result = self(*views, batch_dims=batch_dims, scope=scope, backend=backend, target=target)
        return tuple(map(to_torch, result)) if isinstance(result, tuple) else to_torch(result)

    def _tp_planner(self, *args, batch_dims=0, scope=None, backend=None, target=None) -> ProgramPlan:
        """tp.plan(program, ...): the ProgramPlan of this call; nothing runs."""
        return self._prepare(args, batch_dims, scope, backend, target).plan

    def __repr__(self) -> str:
        return f"<tp.program {self.__name__}>"

    # ---- signatures ---------------------------------------------------------------------------
    @staticmethod
    def _key(args, batch_dims, scope, backend, target):
        parts = [batch_dims, scope, backend, target]
        for x in args:
            if type(x) is np.ndarray:
                parts.append((x.dtype, x.shape, x.strides))
            elif isinstance(x, _SCALARS):
                parts.append((type(x), x))  # scalars are constants of the trace: a new value traces anew
            else:
                try:
                    parts.append(placed_key(x))  # a device array of a type seen before
                except Unkeyable:
                    adapter = adapter_for(x)
                    if adapter is None:
                        return None
                    remember_device_type(x, adapter)  # the next call keys it directly
                    parts.append(adapter.placed_key(x))
        return tuple(parts)

    def _prepare(self, args, batch_dims, scope, backend, target) -> "_PreparedProgram":
        where = f"{self.__name__}"
        if len(args) != len(self._params):
            raise TypeError(f"{where}() takes {len(self._params)} arguments ({', '.join(self._params)}), "
                            f"got {len(args)}")
        scope = scope if scope is not None else self._scope if self._scope is not None else None
        if scope is None:
            scope = thread
        if not isinstance(scope, ExecScope):
            raise TypeError(f"scope: expected tp.thread, tp.warp, tp.warpgroup or tp.cta(n), not {scope!r}")
        batch_dims = as_int(batch_dims, "batch_dims")
        if target is not None and not isinstance(target, str):
            raise TypeError(f"target: expected an architecture string such as 'sm_90a', not {target!r}")
        for name, x in zip(self._params, args):
            if isinstance(x, Tile):
                raise TypeError(f"{name}: a tile of another program; pass arrays and Python scalars to a program")
        backend, adapter, device = _program_backend(backend, [(n, x) for n, x in zip(self._params, args)
                                                               if not isinstance(x, _SCALARS)])
        arrays = {}
        for name, x in zip(self._params, args):
            if not isinstance(x, _SCALARS):
                arrays[name] = _host_array(x, name) if adapter is None else _DeviceArray(adapter, x, name)
        if not arrays:
            raise ValueError(f"{where}: at least one argument must be an array (all are scalars)")
        rank = max(a.ndim for a, _, _ in arrays.values())
        if not 0 <= batch_dims < rank:
            raise ValueError(f"batch_dims: {batch_dims} must leave at least one tile dim of the {rank}-dim "
                             f"arguments")
        tile_rank = rank - batch_dims
        splits = {}
        for name, (arr, dtype, _) in arrays.items():
            if arr.ndim == 0:
                raise ValueError(f"{name}: a 0-d array holds one value, not a tile; pass it as a Python scalar "
                                 f"or reshape it to (1,)")
            cut = max(0, arr.ndim - tile_rank)
            splits[name] = (arr.shape[:cut], arr.shape[cut:])
        try:
            batch_shape = tuple(np.broadcast_shapes(*(b for b, _ in splits.values())))
        except ValueError:
            shown = ", ".join(f"{n} {b}" for n, (b, _) in splits.items())
            raise ValueError(f"batch_dims: the arguments' batch dims do not broadcast: {shown}") from None
        if len(batch_shape) < batch_dims:
            batch_shape = (1,) * (batch_dims - len(batch_shape)) + batch_shape
        trace = Trace(self.__name__, scope)
        traced_args, inputs = [], []
        for name, x in zip(self._params, args):
            if name not in arrays:
                traced_args.append(x.item() if isinstance(x, np.generic) else x)
                continue
            arr, dtype, convert = arrays[name]
            b, tile_shape = splits[name]
            per_tile = tuple(b) == batch_shape
            # one tile for the whole batch: read once; partly broadcast batch dims are expanded
            shared = not per_tile and all(d == 1 for d in b)
            inputs.append(_Input(name, arr, convert, batch_shape, tile_shape, per_tile, shared, dtype))
            traced_args.append(trace.input(name, dtype, tile_shape, shared))
        result, names, line = _trace_call(self._fn, trace, traced_args)
        outputs = result if isinstance(result, tuple) else (result,)
        for t in outputs:
            if type(t) is not Tile or t._trace is not trace:
                got = "another program's tile" if type(t) is Tile else type(t).__name__
                raise ValueError(f"{line}: {self.__name__} returns {got}; a program returns a tile of its own or a "
                                 f"tuple of them")
        trace.name_results(names)
        if backend == "cuda" and not target:
            target = device_arch(device)
        core = _C.plan_program(self.__name__, trace.inputs, trace.steps, [t._id for t in outputs], scope.kind,
                               scope.threads, self._storage or "", self._staging or "", target or "", backend,
                               [device] if backend == "cuda" else [])
        plan = ProgramPlan(core, [batch_shape + t.shape for t in outputs])
        kernel = _C.cuda.ProgramKernel(core) if backend == "cuda" else None
        return _PreparedProgram(core, plan, inputs, outputs, batch_shape, isinstance(result, tuple), kernel, adapter,
                                device, trace)


def _grad_enabled() -> bool:
    return sys.modules["torch"].is_grad_enabled()


def _program_backend(backend, arrays):
    """(backend, adapter, device): device arrays run where they lie (all on one device of one
    library); NumPy arrays as standalone calls run them (the GPU where one is usable)."""
    if backend not in (None, "cpu", "cuda"):
        raise ValueError(f"backend: {backend!r} is not 'cpu' or 'cuda'")
    placed = [(name, adapter_for(x), x) for name, x in arrays]
    placed = [(name, a, x) for name, a, x in placed if a is not None]
    if not placed:  # NumPy arrays: where a standalone call would run them
        backend = resolve_backend(backend)
        return backend, None, 0 if backend == "cuda" else -1
    if backend == "cpu":
        raise ValueError(f"backend: 'cpu' runs on host arrays; {placed[0][0]} is a {placed[0][1].library} device "
                         f"array (pass NumPy arrays, or leave backend= unset)")
    if len(placed) != len(arrays):
        host = next(name for name, _ in arrays if name not in {p[0] for p in placed})
        raise TypeError(f"{host}: a host array beside {placed[0][1].library} device arrays; pass every array on the "
                        f"same device")
    name0, adapter, x0 = placed[0]
    device = adapter.device(x0)
    for name, a, x in placed[1:]:
        if a is not adapter:
            raise TypeError(f"{name}: a {a.library} array beside {adapter.library} arrays; pass one library's arrays")
        if a.device(x) != device:
            raise ValueError(f"{name}: is on device {a.device(x)}, {name0} on device {device}")
    for name, a, x in placed:
        a.check_stored(x, name)
    return "cuda", adapter, device


class _DeviceArray:
    """What tracing needs of a device array (its shape and dtype), unpacked like _host_array's."""

    def __init__(self, adapter, x, name):
        self.shape = tuple(adapter.shape(x))
        self.ndim = len(self.shape)
        self.dtype_name = adapter.dtype(x, name)

    def __iter__(self):
        return iter((self, self.dtype_name, None))


def _trace_call(fn, trace: Trace, args):
    """Runs fn on tiles with TRACING set; returns its result, its locals at return (to name the
    tiles) and the file:line it returned from."""
    if TRACING[0] is not None:
        raise RuntimeError(f"{user_location()}: a tile program cannot be called while another is traced; "
                           f"call its function directly to inline it")
    seen = {}
    code = fn.__code__ if hasattr(fn, "__code__") else None

    def watch(frame, event, arg):
        if event == "return" and frame.f_code is code:
            seen["locals"] = dict(frame.f_locals)
            seen["line"] = f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"

    previous = sys.getprofile()
    TRACING[0] = trace
    sys.setprofile(watch)
    try:
        result = fn(*args)
    finally:
        sys.setprofile(previous)
        TRACING[0] = None
    return result, seen.get("locals", {}), seen.get("line", fn.__name__)


class _Input:
    """One array argument and how a call readies it for the runner."""

    def __init__(self, name, arr, convert, batch_shape, tile_shape, per_tile, shared, dtype):
        self.name, self.batch_shape, self.tile_shape = name, batch_shape, tuple(tile_shape)
        self.per_tile, self.shared, self.dtype = per_tile, shared, dtype
        self.convert = convert

    def prepare_device(self, adapter, x):
        """A C-contiguous device array holding this input's tiles (one where the batch shares it),
        kept alive by the caller until the launch."""
        if not self.shared and not self.per_tile:
            x = adapter.broadcast(x, self.batch_shape + self.tile_shape)
        return adapter.contiguous(x)

    def prepare(self, x):
        arr = np.asarray(x) if self.convert is None else self.convert(x)
        if self.shared:
            return np.ascontiguousarray(arr.reshape(self.tile_shape))
        if not self.per_tile:
            arr = np.broadcast_to(arr, self.batch_shape + self.tile_shape)
        return np.ascontiguousarray(arr)


class _PreparedProgram:
    """A program call signature's plan and what its runs need: on the CUDA backend its one
    kernel, and for device arrays their library's adapter and device."""

    def __init__(self, core, plan, inputs, outputs, batch_shape, as_tuple, kernel, adapter, device, trace):
        self.core, self.plan, self.inputs = core, plan, inputs
        self.trace, self.output_ids = trace, [t._id for t in outputs]  # what a derived backward reads
        self.batch_shape, self.as_tuple = batch_shape, as_tuple
        self.tiles = math.prod(batch_shape)
        self.results = [(batch_shape + t.shape, numpy_dtype(t.dtype)) for t in outputs]
        self.result_dtypes = [t.dtype for t in outputs]
        self.prepare = [i.prepare for i in inputs]
        self.kernel, self.adapter, self.device = kernel, adapter, device
        if adapter is not None:
            # what a repeated call does, fixed here (as for standalone calls): the library's own makers
            self.run = self._run_device
            self.stream = adapter.stream_of(device)
            self.allocators = [adapter.allocator(shape, dtype, device)
                               for (shape, _), dtype in zip(self.results, self.result_dtypes)]
            self.finish = None if type(adapter).finish is Adapter.finish else adapter.finish
            self.pointer, self.result_pointer = adapter.pointer, adapter.result_pointer
            self.readies = [functools.partial(i.prepare_device, adapter) for i in inputs]

    def _run_device(self, args, out):
        """Device arrays in place: the result in their library, ordered on its current stream."""
        if out is not None:
            self.check_device_out(out)
        held = [ready(x) for ready, x in zip(self.readies, (x for x in args if not isinstance(x, _SCALARS)))]
        pointers = [self.pointer(h) for h in held]  # held until the launch: a copy must outlive it
        stream = self.stream()
        if out is not None:
            outs = out if self.as_tuple else (out,)
            self.kernel.run_device(pointers, [], [self.pointer(o) for o in outs], self.tiles, stream)
            return out
        results = [allocate() for allocate in self.allocators]
        self.kernel.run_device(pointers, [], [self.result_pointer(r) for r in results], self.tiles, stream)
        if self.finish is not None:
            results = [self.finish(r, self.device, stream) for r in results]
        return tuple(results) if self.as_tuple else results[0]

    def check_device_out(self, out) -> None:
        outs = out if self.as_tuple else (out,)
        if self.as_tuple and not isinstance(out, tuple):
            raise TypeError(f"out: the program returns a tuple of {len(self.results)} tiles; pass a tuple of arrays")
        if len(outs) != len(self.results):
            raise ValueError(f"out: the program returns {len(self.results)} tile(s); out= gives {len(outs)}")
        a = self.adapter
        if a.library == "jax":
            raise TypeError("out: JAX arrays are immutable; use the returned array")
        for o, (shape, _), dtype in zip(outs, self.results, self.result_dtypes):
            if adapter_for(o) is not a:
                raise TypeError(f"out: expected a {a.library} device array like the inputs, not {type(o).__name__}")
            if tuple(a.shape(o)) != shape or a.dtype(o, "out") != dtype:
                raise ValueError(f"out: expected shape {shape} and dtype {dtype}, not {tuple(a.shape(o))} "
                                 f"{a.dtype(o, 'out')}")
            if a.device(o) != self.device:
                raise ValueError(f"out: is on device {a.device(o)}, the inputs on device {self.device}")
            if a.contiguous(o) is not o:
                raise ValueError("out: must be C-contiguous; the kernel writes into it")

    def run(self, args, out):
        if out is not None:
            self.check_out(out)
        arrays = [x for x in args if not isinstance(x, _SCALARS)]
        ready = [p(x) for p, x in zip(self.prepare, arrays)]
        results = [np.empty(shape, dtype) for shape, dtype in self.results]
        if self.kernel is None:
            self.core.run_host(ready, [], results, self.tiles)
        else:
            self.kernel.run_host(ready, [], results, self.tiles)
        if out is None:
            return tuple(results) if self.as_tuple else results[0]
        for o, r in zip(out if self.as_tuple else (out,), results):
            o[...] = r  # only now: a failed run leaves out untouched
        return out

    def check_out(self, out) -> None:
        outs = out if self.as_tuple else (out,)
        if self.as_tuple and not isinstance(out, tuple):
            raise TypeError(f"out: the program returns a tuple of {len(self.results)} tiles; pass a tuple of arrays")
        if len(outs) != len(self.results):
            raise ValueError(f"out: the program returns {len(self.results)} tile(s); out= gives {len(outs)}")
        for o, (shape, dtype) in zip(outs, self.results):
            if not isinstance(o, np.ndarray):
                raise TypeError(f"out: expected a NumPy array, not {type(o).__name__}")
            if o.shape != shape or o.dtype != dtype:
                raise ValueError(f"out: expected shape {shape} and dtype {np.dtype(dtype)}, not {o.shape} {o.dtype}")
            if not o.flags.writeable:
                raise ValueError("out: the array is read-only")
