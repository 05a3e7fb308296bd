"""The throughput cases: row reductions over K and scopes, elementwise maps over dtypes, each
tileprim beside the baselines on the same inputs. A case only says what to run; its inputs are
made when it is measured and shared with the cases after it that use the same ones."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional

import tileprim as tp
from tileprim._arrays.dtypes import numpy_dtype

REDUCTIONS = ("sum", "max", "min")
MAPS = {"sqrt": 1, "exp": 1, "log2": 1, "silu": 1, "sigmoid": 1, "add": 2, "fma": 3}  # op -> number of array operands
# the maps with an approximation: measured exact and with fastmath=True (the "... fastmath" cases)
FASTMATH_MAPS = tuple(op for op in MAPS if tp.op_table()[op]["fastmath"] is not None)
# maps whose exact path's speed depends on the values: timed again on standard normal inputs (an
# activation's), where more of the 16-bit silu's and sigmoid's results lie near a rounding midpoint than
# in [0.5, 1.5)
NORMAL_MAPS = ("silu", "sigmoid")
MAP_TILE = 8                                       # elements per thread's tile in the map cases
GPU_KS = (4, 8, 32, 128, 1024, 8192)
CPU_KS = (4, 8, 32, 128, 1024)
# None first: no scope named, the planner's choice, as a user calls it; then each scope the sweep compares
GPU_SCOPES = (None, tp.thread, tp.warp, tp.cta(32), tp.cta(128), tp.cta(256))
CPU_SCOPES = (tp.thread,)
MAP_DTYPES = ("float32", "float16", "bfloat16")


@dataclass
class Measured:
    """What measuring a case gave: tileprim's milliseconds per call, each baseline's, and any
    figures particular to the case (``detail``). A case whose baselines ran but tileprim could
    not has ``tileprim_ms`` None and the reason in ``note``."""

    tileprim_ms: Optional[float]
    baselines: Dict[str, float] = field(default_factory=dict)
    detail: Dict[str, object] = field(default_factory=dict)
    note: Optional[str] = None


@dataclass
class Case:
    """One line of the report: a name to print and filter on, what it is (``kind``:
    ``"throughput"``, ``"latency"`` or ``"kernel"``, and op, dtype, scope, K, shape, bytes moved
    where they apply) and ``measure``, which runs it."""

    name: str
    kind: str
    measure: Callable[[], Measured]
    op: Optional[str] = None
    dtype: Optional[str] = None
    scope: Optional[str] = None
    K: Optional[int] = None
    shape: Optional[tuple] = None
    bytes: Optional[int] = None


class Inputs:
    """The one set of input arrays alive at a time: kept while consecutive cases ask for the same
    key, dropped (and the library's cached memory handed back) when a case asks for another, so
    1 GiB inputs never pile up on the GPU."""

    def __init__(self, free: Callable[[], None]):
        self._free = free
        self._key, self._arrays = None, None

    def get(self, key: tuple, make: Callable[[], object]):
        if key != self._key:
            self.clear()
            self._arrays, self._key = make(), key
        return self._arrays

    def clear(self) -> None:
        self._key, self._arrays = None, None
        self._free()


def scope_name(scope) -> str:
    if scope is None:
        return "planner"
    return f"cta({scope.threads})" if scope.kind == "cta" else scope.kind


def throughput(timer, ours: Callable[[], object], theirs: Dict[str, Callable[[], object]]) -> Measured:
    """tileprim's call, then each baseline, timed by ``timer``."""
    ours()  # compiles; a tile that tileprim refuses raises here, before any baseline is timed
    return Measured(timer(ours), {name: timer(fn) for name, fn in theirs.items()})


def reduction_cases(lib, inputs: Inputs, timer, elements: int, ks: Iterable[int] = CPU_KS,
                    scopes: Iterable = CPU_SCOPES, ops: Iterable[str] = REDUCTIONS) -> List[Case]:
    """Row reductions ``scope.op(x, axes=-1, batch_dims=1)`` of float32 ``x`` of shape
    ``(elements // K, K)``, one case per K, op and scope (K outermost: the cases of one K share x).

    Parameters
    ----------
    lib : NumpyLibrary or GpuLibrary
        Makes the inputs and the baselines.
    inputs : Inputs
    timer : WallTimer or CudaEventTimer
    elements : int
        Elements of x (a multiple of every K).
    ks, scopes, ops : iterables
        Row lengths, exec scopes (``tp.thread``, ``tp.cta(128)``, ...; None: the planner's) and ops.

    Returns
    -------
    list of Case
    """
    # a row shorter than the scope's threads would leave most of them idle: not measured
    return [_reduction(lib, inputs, timer, op, k, scope, elements)
            for k in ks for op in ops for scope in scopes if scope is None or k >= scope.threads]


def _reduction(lib, inputs: Inputs, timer, op: str, k: int, scope, elements: int) -> Case:
    shape = (elements // k, k)

    def measure() -> Measured:
        x = inputs.get(("normal", shape), lambda: lib.normal(shape))
        if scope is None:  # no scope named: tp.sum(x, axes=-1, batch_dims=1)
            ours = functools.partial(getattr(tp, op), x, axes=-1, batch_dims=1, **lib.tileprim_options)
        elif scope.kind == "warp":  # the row across the lanes: lane i holds its K/32 elements i*K/32, ...
            tile = x.reshape(shape[0], 32, k // 32)
            ours = functools.partial(getattr(scope, op), tile, axes=(-2, -1), batch_dims=1,
                                     layout=tp.S[(32, k // 32):(1 @ tp.laneid, 1)], **lib.tileprim_options)
        else:
            ours = functools.partial(getattr(scope, op), x, axes=-1, batch_dims=1, **lib.tileprim_options)
        return throughput(timer, ours, lib.reductions(op, x))
    return Case(f"{op} K={k} {scope_name(scope)}", "throughput", measure, op=op, dtype="float32",
                scope=scope_name(scope), K=k, shape=shape, bytes=(shape[0] * k + shape[0]) * 4)


def map_cases(lib, inputs: Inputs, timer, elements: int, dtypes: Iterable[str] = MAP_DTYPES,
              ops: Iterable[str] = tuple(MAPS)) -> List[Case]:
    """Elementwise maps at thread scope on tiles of ``MAP_TILE`` elements (operands of shape
    ``(elements // MAP_TILE, MAP_TILE)``, ``batch_dims=1``), values in [0.5, 1.5), one case per
    dtype and op, one more with fastmath=True for the ops that have an approximation ("exp
    float16 fastmath") and one on standard normal values for ``NORMAL_MAPS`` ("silu float16
    normal"; dtype outermost: the cases of one dtype share their operands).

    Parameters
    ----------
    lib : NumpyLibrary or GpuLibrary
    inputs : Inputs
    timer : WallTimer or CudaEventTimer
    elements : int
        Elements per operand.
    dtypes, ops : iterables
        Element types and ops (keys of ``MAPS``).

    Returns
    -------
    list of Case
    """
    return [_map(lib, inputs, timer, op, dtype, elements, fastmath, values) for dtype in dtypes for op in ops
            for fastmath, values in ([(False, "positive"), (True, "positive")] if op in FASTMATH_MAPS else
                                     [(False, "positive")]) + ([(False, "normal")] if op in NORMAL_MAPS else [])]


def _map(lib, inputs: Inputs, timer, op: str, dtype: str, elements: int, fastmath: bool = False,
         values: str = "positive") -> Case:
    shape = (elements // MAP_TILE, MAP_TILE)
    arity = MAPS[op]

    def measure() -> Measured:
        made = getattr(lib, values)  # lib.positive or lib.normal
        operands = inputs.get((values, shape, dtype),
                              lambda: tuple(made(shape, dtype) for _ in range(max(MAPS.values()))))
        arrays = operands[:arity]
        ours = functools.partial(getattr(tp, op), *arrays, batch_dims=1, fastmath=fastmath, **lib.tileprim_options)
        return throughput(timer, ours, lib.maps(op, dtype, arrays))
    itemsize = numpy_dtype(dtype).itemsize
    name = f"{op} {dtype}" + (" fastmath" if fastmath else "") + (" normal" if values == "normal" else "")
    return Case(name, "throughput", measure, op=op, dtype=dtype, scope="thread", shape=shape,
                bytes=(arity + 1) * elements * itemsize)
