"""tp.program: a Python function over tiles, traced once per call signature into steps that the
C++ planner turns into a ProgramPlan; the CPU backend runs it step by step, the CUDA backend as one
kernel. A repeated call of a signature is a dictionary lookup and a run: the same memo and runs
as a standalone call's (``_calls.prepared``; a standalone call is the program of one step)."""
from __future__ import annotations

import functools
import inspect
import math
import sys
from typing import Optional

import numpy as np

import tileprim._C as _C
from .._arrays.adapters import adapter_for, remember_device_type
from .._arrays.routing import PROGRAM_ROUTES, UNROUTED, on_host, refuse_plans
from .._calls.call import _host_array
from .._calls.prepared import MEMO, OPERAND_KEYS, DevicePrepared, HostPrepared, Input, planned, remember, signature
from .._calls.scope import TILE_STORAGES, ExecScope, check_storage, not_a_scope
from .._checks import as_int
from .._platform.backends import device_arch, resolve_backend
from .._calls import autotune as autotuning
from .keys import key_program
from .map_tiles import map_tiles
from .plan import ProgramPlan
from .scalar_argument import ScalarArgument, is_run_time_float
from .tile import Tile
from .trace import SCALAR_TYPES, TRACING, Trace, user_location

__all__ = ["Program", "program"]

STAGINGS = tuple(_C.staging_names())  # how the kernel may hold the rows, in priority order


def program(fn=None, *, scope: Optional[ExecScope] = None, storage: Optional[str] = None,
            staging: Optional[str] = None, fastmath: bool = False, autotune: Optional[bool] = None):
    """Makes ``fn`` a tile program: its arguments are tiles (one instance of the batch each) and
    Python scalars; its body calls tileprim ops. Bare ``@tp.program`` or ``@tp.program(scope=...,
    storage=..., staging=..., fastmath=...)`` (the call's defaults).

    ``scope`` (here, at the call, or on one of its steps): the scope each instance runs at. Named
    nowhere (None), the planner chooses the scope and the staging for the call's tile shapes,
    dtypes and steps and the target's limits, by a cost model whose candidates, scores and reasons
    the plan shows (``ProgramPlan.scope_trace``); the CPU backend with no ``target=`` plans for a
    Hopper GPU (sm_90a), so that it computes what that GPU does. A named scope is obeyed.

    ``staging`` names how the kernel holds the rows (``"registers"``, ``"shared"``, ``"streamed"``
    or ``"spilled"``; see ``ProgramPlan.staging``); None: the first whose predicate accepts, as the
    plan's staging trace shows. A named staging that declines raises DispatchError with its reasons.

    ``fastmath=True``: on the GPU, every elementwise step that names no ``fastmath=`` of its own
    uses the hardware's approximations (``ex2.approx``, ``lg2.approx``, ``rsqrt.approx``, a row
    divided by one value through its reciprocal): the GPU's bits, not the CPU's, within the
    errors ``tp.op_table()[op]["fastmath"]`` states. The CPU backend runs the exact functions.

    ``autotune=True`` (None: ``TILEPRIM_AUTOTUNE=1``): where neither scope nor staging is named and
    the call's arrays are a GPU's, the cost model's best few candidates are run on them and
    timed once per call signature, and the fastest kept (remembered on disk beside the kernel cache,
    per GPU and driver); ``ProgramPlan.autotuned`` says what was measured. The choice is the GPU's:
    the CPU backend plans the model's, so its bits equal the GPU's at the scope the plan names.

    Examples
    --------
    >>> @tp.program
    ... def softmax(x):
    ...     e = tp.exp(x - tp.max(x, axes=-1, keepdims=True))
    ...     return e / tp.sum(e, axes=-1, keepdims=True)
    >>> y = softmax(np.zeros((2, 4), np.float32), batch_dims=1)
    >>> y[0]
    array([0.25, 0.25, 0.25, 0.25], dtype=float32)
    """
    if scope is not None and not isinstance(scope, ExecScope):
        raise not_a_scope(scope)
    check_storage(storage)
    if storage is not None and storage not in TILE_STORAGES:  # said when the program is made, not called
        raise ValueError(f"storage: {storage!r} is not one of {', '.join(map(repr, TILE_STORAGES))} (a program's "
                         "tiles are staged into registers or shared memory)")
    if staging is not None and staging not in STAGINGS:
        raise ValueError(f"staging: {staging!r} is not one of {', '.join(STAGINGS)}")
    fastmath = _fastmath(fastmath)
    if autotune is not None and not isinstance(autotune, (bool, np.bool_)):
        raise TypeError(f"autotune: expected True, False or None, not {autotune!r}")
    tuned = None if autotune is None else bool(autotune)
    if fn is None:
        return lambda f: Program(f, scope, storage, staging, fastmath, tuned)
    return Program(fn, scope, storage, staging, fastmath, tuned)


def _fastmath(value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"fastmath: expected True or False, not {value!r}")
    return bool(value)


class Program:
    """A traced tile program; call it like a tileprim op:
    ``prog(*args, batch_dims=0, scope=None, backend=None, target=None, out=None, fastmath=None, **kwargs)``
    (``scope=None`` and ``fastmath=None``: the decorator's; a scope named nowhere is the planner's
    choice; the function's arguments by position or keyword, its defaults where not given)."""

    def __init__(self, fn, scope: Optional[ExecScope], storage: Optional[str], staging: Optional[str] = None,
                 fastmath: bool = False, autotune: Optional[bool] = None):
        if not callable(fn):
            raise TypeError(f"tp.program: expected a function, not {fn!r}")
        functools.update_wrapper(self, fn)
        self._fn, self._scope, self._storage, self._staging = fn, scope, storage, staging
        self._fastmath, self._autotune = fastmath, autotune
        self._signature = inspect.signature(fn)
        variadic = [p for p in self._signature.parameters.values() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if variadic:
            raise TypeError(f"tp.program: {fn.__name__}({variadic[0]}): a program's arguments are named, one tile or "
                            f"scalar each (no *args or **kwargs)")
        self._params = list(self._signature.parameters)
        # the parameters the traced call passes by keyword (keyword-only: after every positional one)
        self._keyword_only = sum(p.kind == p.KEYWORD_ONLY for p in self._signature.parameters.values())
        self._keywords = self._params[len(self._params) - self._keyword_only:]  # passed by keyword when traced
        self._key = key_program(self)  # its name in a compiled graph's custom op

    def _bound(self, args: tuple, kwargs: dict) -> tuple:
        """The call's arguments in the function's parameter order: by position or keyword, its
        defaults where not given (the call's options, batch_dims ... fastmath, are not among them)."""
        if not kwargs and not self._keyword_only and len(args) == len(self._params):
            return args
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}(): {e} (the program's parameters: {self._signature})") from None
        bound.apply_defaults()
        return tuple(bound.arguments[name] for name in self._params)

    def __call__(self, *args, batch_dims=0, scope=None, backend=None, target=None, out=None, fastmath=None,
                 **kwargs):
        args = self._bound(args, kwargs)
        if TRACING[0] is not None:  # called in another program's body: its steps join that program's
            return self._inlined(args, batch_dims, scope, backend, target, out, fastmath)
        fastmath = self._fastmath if fastmath is None else _fastmath(fastmath)
        return self._tiled(self._routed, args, batch_dims, scope, backend, target, fastmath, out)

    def _unrouted(self, args, batch_dims, scope, backend, target, fastmath):
        """The call of arrays no library's route may take (plain tensors outside grad mode: a derived
        backward's, inside autograd's backward): ``__call__`` past binding its arguments and the routes
        (a few us of a norm's backward calls, on a host that binds the step's time)."""
        return self._tiled(self._run, tuple(args), batch_dims, scope, backend, target,
                           self._fastmath if fastmath is None else _fastmath(fastmath), None)

    def _tiled(self, run, args, batch_dims, scope, backend, target, fastmath, out):
        tiles = map_tiles(self, args, batch_dims, scope, out)  # maps alone over rows: tiles of a few elements
        if tiles is not None:
            return tiles.results(run(tiles.args, 1, scope, backend, target, fastmath, tiles.out), out)
        return run(args, batch_dims, scope, backend, target, fastmath, out)

    def _routed(self, args, batch_dims, scope, backend, target, fastmath, out):
        for route in PROGRAM_ROUTES:  # a library's own machinery may take it: torch.compile, autograd
            routed = route(self, args, out, batch_dims, scope, backend, target, fastmath)
            if routed is not UNROUTED:
                return routed
        return self._run(args, batch_dims, scope, backend, target, fastmath, out)

    def _traced(self, args, kinds, tile_shape):
        """(trace, the result tiles' ids): the body traced once on tiles of ``tile_shape`` in the
        dtypes ``kinds`` names (a tuple where the argument is a scalar, passed as it is); nothing
        planned (map_tiles)."""
        trace = Trace(self.__name__, None)
        traced = [(x.item() if isinstance(x, np.generic) else x) if isinstance(kind, tuple)
                  else trace.input(name, kind, tile_shape, False) for name, x, kind in zip(self._params, args, kinds)]
        result, _, _ = _trace_call(self._fn, trace, traced, self._keywords)
        outputs = result if isinstance(result, tuple) else (result,)
        return trace, [t._id if type(t) is Tile and t._trace is trace else None for t in outputs]

    def _inlined(self, args, batch_dims, scope, backend, target, out, fastmath):
        """The function's steps recorded into the program being traced, at its scope and with its
        options (a call's options belong to the outer program's call)."""
        given = {"batch_dims": batch_dims != 0, "scope": scope is not None, "backend": backend is not None,
                 "target": target is not None, "out": out is not None, "fastmath": fastmath is not None}
        for name, is_given in given.items():
            if is_given:
                raise ValueError(f"{user_location(2)}: {self.__name__}: {name}= belongs to the outer program's call, "
                                 f"not to a program called inside its body (its steps join the outer program's)")
        positional = len(self._params) - self._keyword_only
        return self._fn(*args[:positional], **dict(zip(self._params[positional:], args[positional:])))

    def _run(self, args, batch_dims, scope, backend, target, fastmath, out=None, folded=None):
        """The call past the routes: a library's own op runs its body so (its tensors already plain).
        ``folded`` (internal, the CUDA backend's: a norm's weight gradient, ``_torch.folded_gradients``):
        (run, outputs), those outputs returned summed over runs of ``run`` consecutive instances of the
        flattened batch, in order from -0.0, in the wide float: (runs,) + the tile's shape, float32
        (float64 for float64)."""
        return self._prepared(args, batch_dims, scope, backend, target, fastmath, folded).run(args, out)

    def _prepared(self, args, batch_dims, scope, backend, target, fastmath, folded=None):
        """The call's prepared run, remembered per call signature."""
        # batch_dims' and fastmath's types too: a memo hit must not pass what their checks refuse
        key = signature((self, batch_dims, scope, backend, target, fastmath, folded, type(batch_dims), type(fastmath)),
                        args, constants=True)
        prepared = MEMO.get(key) if key is not None else None
        if prepared is None:
            prepared = self._prepare(args, batch_dims, scope, backend, target, fastmath, folded)
            remember(key, prepared)
        return prepared

    def _tp_planner(self, *args, batch_dims=0, scope=None, backend=None, target=None, fastmath=None,
                    **kwargs) -> ProgramPlan:
        """tp.plan(program, ...): the ProgramPlan of this call; nothing runs. The call's prepared
        signature is remembered, so that a plan and a call of it plan once (an auto-scoped plan
        of a long row takes seconds)."""
        args = self._bound(args, kwargs)
        refuse_plans(self.__name__, args)
        fastmath = self._fastmath if fastmath is None else _fastmath(fastmath)
        tiles = map_tiles(self, args, batch_dims, scope, None)
        if tiles is None:
            return self._prepared(args, batch_dims, scope, backend, target, fastmath).plan
        return tiles.plan(self._prepared(tiles.args, 1, scope, backend, target, fastmath).plan, batch_dims)

    def __repr__(self) -> str:
        return f"<tp.program {self.__name__}>"

    def _prepare(self, args, batch_dims, scope, backend, target, fastmath=False, folded=None):
        viewed = on_host(args, lambda views: self._prepare(views, batch_dims, scope, backend, target, fastmath,
                                                           folded))
        if viewed is not None:  # e.g. PyTorch CPU tensors: run on NumPy views, tensors returned
            return viewed
        where = f"{self.__name__}"
        if len(args) != len(self._params):
            raise TypeError(f"{where}() takes {len(self._params)} arguments ({', '.join(self._params)}), "
                            f"got {len(args)}")
        scope = scope if scope is not None else self._scope  # None: named nowhere yet (a step may name it)
        if scope is not None and not isinstance(scope, ExecScope):
            raise not_a_scope(scope)
        batch_dims = as_int(batch_dims, "batch_dims")
        if target is not None and not isinstance(target, str):
            raise TypeError(f"target: expected an architecture string such as 'sm_90a', not {target!r}")
        for name, x in zip(self._params, args):
            if isinstance(x, Tile):
                raise TypeError(f"{name}: a tile of another program; pass arrays and Python scalars to a program")
        backend, adapter, device = _program_backend(backend, [(n, x) for n, x in zip(self._params, args)
                                                               if not isinstance(x, SCALAR_TYPES)])
        arrays = {}
        for name, x in zip(self._params, args):
            if not isinstance(x, SCALAR_TYPES):
                arrays[name] = _host_array(x, name) if adapter is None else _DeviceArray(adapter, x, name)
                if adapter is not None:  # the next call keys it directly
                    remember_device_type(x, adapter)
                    OPERAND_KEYS[type(x)] = adapter.dense_key
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
            if arr.ndim > 32:  # NumPy broadcasts at most 32 dims (a RuntimeError naming nothing past them)
                raise ValueError(f"{name}: {arr.ndim} dims; an argument has at most 32 (batch and tile dims)")
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
        traced_args, inputs, floats = [], [], []
        for position, (name, x) in enumerate(zip(self._params, args)):
            if name not in arrays:
                if is_run_time_float(x):  # a run-time scalar where an op takes it as it is (scalar_argument.py)
                    floats.append((position, ScalarArgument(float(x), len(floats), trace)))
                    traced_args.append(floats[-1][1])
                else:
                    traced_args.append(x.item() if isinstance(x, np.generic) else x)
                continue
            arr, dtype, convert = arrays[name]
            b, tile_shape = splits[name]
            per_tile = tuple(b) == batch_shape
            # one tile for the whole batch: read once; partly broadcast batch dims are expanded
            shared = not per_tile and all(d == 1 for d in b)
            inputs.append(Input(position, convert, None if per_tile else batch_shape + tuple(tile_shape),
                                tuple(tile_shape), shared))
            traced_args.append(trace.input(name, dtype, tile_shape, shared))
        result, names, line = _trace_call(self._fn, trace, traced_args, self._keywords)
        outputs = result if isinstance(result, tuple) else (result,)
        for t in outputs:
            if type(t) is not Tile or t._trace is not trace:
                got = "another program's tile" if type(t) is Tile else type(t).__name__
                raise ValueError(f"{line}: {self.__name__} returns {got}; a program returns a tile of its own or a "
                                 f"tuple of them")
        trace.name_results(names)
        # the float arguments ops took as they are: the plan's run-time scalars, their values left out of the
        # spec, so that the traces of values that differ only there share one plan and kernel
        steps = [_with_scalars(step, bool(floats)) for step in trace.steps]
        # the run-time scalars the plan takes (C++ counts them from the steps): those up to the last an op reads
        taken = 1 + max((k for step in steps for k in step.get("scalar_args", ())), default=-1)
        scalar_at = [position for position, a in floats if a._tp_index < taken]
        if backend == "cuda" and not target:
            target = device_arch(device)
        kind, threads, ctas = trace.scope.parts if trace.scope else ("", 0, 1)  # "": the planner's
        spec = (self.__name__, trace.inputs, steps, [t._id for t in outputs], kind, threads,
                self._storage or "", self._staging or "", target or "", backend, [device] if backend == "cuda" else [],
                fastmath, ctas, *(folded or (0, ())))
        # the spec as its repr: plain values, but for a layout a step names (whose repr need not be whole)
        named_layouts = any(s["layout"] is not None or s["out_layout"] is not None for s in steps)
        tiles = math.prod(batch_shape)
        as_tuple = isinstance(result, tuple)

        def made(spec):
            core = planned(None if named_layouts else repr(spec), lambda: _C.plan_program(*spec))
            results = [(batch_shape + t.shape, t.dtype) for t in outputs]
            for j in folded[1] if folded else ():  # a run's sum a tile, in the wide float (checked by the plan)
                wide = "float64" if outputs[j].dtype == "float64" else "float32"
                results[j] = ((-(-tiles // folded[0]),) + outputs[j].shape, wide)
            plan = ProgramPlan(core.plan, [shape for shape, _ in results], [float(args[p]) for p in scalar_at])
            dropped = tuple(shape for (shape, _), t in zip(results, outputs) if t.shape == ())  # reduced whole
            if adapter is None:
                prepared = HostPrepared(core, plan, len(args), inputs, scalar_at, results, as_tuple, tiles,
                                        dropped=dropped)
            else:
                prepared = DevicePrepared(core, plan, len(args), inputs, scalar_at, results, as_tuple, tiles,
                                          adapter=adapter, device=device, dropped=dropped)
            prepared.index_dtype = None  # a program's index scalars are checked as its body is traced
            prepared.trace, prepared.output_ids = trace, [t._id for t in outputs]  # what a derived backward reads
            prepared.stopped_outputs = [t.stopped for t in outputs]  # results returned through tp.stop_gradient
            return prepared

        prepared = made(spec)
        if (kind == "" and not self._staging and folded is None and adapter is not None
                and autotuning.requested(self._autotune)
                and all(adapter.runnable(x) for x in args if not isinstance(x, SCALAR_TYPES))):
            prepared = self._tuned(made, spec, prepared, args, tiles, adapter, device)
        return prepared

    @staticmethod
    def _tuned(made, spec, prepared, args, tiles, adapter, device):
        """The call prepared at the scope and staging measured fastest on this GPU (autotune.py)."""
        def seconds_of(candidate):
            return autotuning.run_seconds(made(candidate), args, adapter, device)

        gpu = autotuning.gpu_of(device)
        tuned, record = autotuning.tuned_spec(spec, prepared.plan.scope_trace, tiles, gpu, seconds_of)
        prepared = made(tuned)
        prepared.plan.autotuned = record
        return prepared


def _with_scalars(step: dict, run_time: bool) -> dict:
    """A traced step as the planner takes it: the call's float arguments among its operands as run-time
    scalars (their values left out, so that the plan is every value's), or, where the program takes no
    floats at run time (a derived backward given none), as constants."""
    if "scalar_args" not in step:
        return step
    if not run_time:
        return {k: v for k, v in step.items() if k != "scalar_args"}
    return dict(step, scalars=[0.0 if k >= 0 else v for k, v in zip(step["scalar_args"], step["scalars"])])


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


def _trace_call(fn, trace: Trace, args, keywords=()):
    """Runs fn on tiles with TRACING set (the last of args by the names ``keywords``: its
    keyword-only parameters); returns its result, its locals at return (to name the tiles) and
    the file:line it returned from."""
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
        positional = len(args) - len(keywords)
        result = fn(*args[:positional], **dict(zip(keywords, args[positional:])))
    finally:
        sys.setprofile(previous)
        TRACING[0] = None
    return result, seen.get("locals", {}), seen.get("line", fn.__name__)
