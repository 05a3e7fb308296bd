"""tp.comm.treduce: every rank's tensor reduced into the root's dst, the root's value first and
then the other ranks ascending, chunked by ``tile``. Arguments are checked here and in the C++
core before anything is written; a repeated call of one signature reuses its bound plan."""
from __future__ import annotations

import operator
from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import _C
from .._backends import default_target, resolve_backend
from .._dtypes import dtype_name, numpy_dtype
from .._interop import adapter_for
from .._plan import Plan
from ._group import ParallelGroup

__all__ = ["treduce"]

DTYPES = ("float32", "float16", "bfloat16", "int32")
_MEMO: Dict[tuple, object] = {}
_MEMO_LIMIT = 1024


class _Rank:
    """One tensor as treduce reads it: where it lies, and how."""

    def __init__(self, x, arg: str, adapter):
        self.obj, self.arg, self.adapter = x, arg, adapter
        if adapter is None:
            if not isinstance(x, np.ndarray):
                raise TypeError(f"{arg}: expected a NumPy or device array, not {type(x).__name__}")
            if not x.dtype.isnative:
                raise TypeError(f"{arg}: dtype {x.dtype} is not in native byte order; convert it with "
                                f"{arg}.astype({x.dtype.newbyteorder('=').name!r})")
            self.dtype = dtype_name(x.dtype, f"{arg}: dtype", allowed=DTYPES)
            self.itemsize = x.itemsize
            if any(s % x.itemsize for s in x.strides):
                raise ValueError(f"{arg}: strides {x.strides} are not whole elements")
            self.shape, self.strides = x.shape, tuple(s // x.itemsize for s in x.strides)
            self.pointer, self.device = x.__array_interface__["data"][0], -1
        else:
            self.dtype = adapter.dtype(x, f"{arg}: dtype", allowed=DTYPES)
            self.itemsize = numpy_dtype(self.dtype).itemsize
            self.shape, self.strides = adapter.shape(x), adapter.strides(x)
            self.pointer, self.device = adapter.pointer(x), adapter.device(x)

    def key(self) -> tuple:
        return (self.adapter is not None, self.dtype, self.shape, self.strides, self.device)

    def extent(self) -> Tuple[int, int]:
        """The bytes [low, high) its elements lie in; empty for an empty tensor."""
        if 0 in self.shape:
            return (self.pointer, self.pointer)
        low = sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        high = sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        return (self.pointer + low * self.itemsize, self.pointer + (high + 1) * self.itemsize)


def _overlaps(a: _Rank, b: _Rank) -> bool:
    if a.adapter is None and b.adapter is None:
        return bool(np.shares_memory(a.obj, b.obj, max_work=1 << 20)) if a.obj.size and b.obj.size else False
    (a0, a1), (b0, b1) = a.extent(), b.extent()
    return a.device == b.device and a0 < b1 and b0 < a1


def _tile(tile) -> Tuple[int, int]:
    if not isinstance(tile, (tuple, list)) or len(tile) != 2:
        raise ValueError(f"tile: expected (rows, cols), not {tile!r}")
    try:
        return tuple(operator.index(t) for t in tile if not isinstance(t, bool))  # type: ignore[return-value]
    except TypeError:
        raise TypeError(f"tile: expected two ints (rows, cols), not {tile!r}") from None


def _check_options(op, tile, pingpong, valid, accumulate, dispatch) -> Tuple[int, int]:
    if not isinstance(op, str):
        raise TypeError(f"op: expected 'sum', 'max' or 'min', not {op!r}")
    rows_cols = _tile(tile)
    if len(rows_cols) != 2:
        raise TypeError(f"tile: expected two ints (rows, cols), not {tile!r}")
    if not isinstance(pingpong, (bool, np.bool_)):
        raise TypeError(f"pingpong: expected True or False, not {pingpong!r}")
    if not isinstance(valid, str):
        raise TypeError(f"valid: expected 'dynamic' or 'static', not {valid!r}")
    if accumulate is not None and not isinstance(accumulate, str):
        raise TypeError(f"accumulate: expected None or 'float32', not {accumulate!r}")
    if dispatch is not None and not isinstance(dispatch, str):
        raise TypeError(f"dispatch: expected a variant name, not {dispatch!r}")
    return rows_cols


class _Call:
    """A checked treduce call: its ranks, dst, and bound plan."""

    def __init__(self, group, dst, op, tile, pingpong, valid, accumulate, backend, dispatch):
        if not isinstance(group, ParallelGroup):
            raise TypeError(f"group: expected a tp.comm.ParallelGroup, not {type(group).__name__}")
        rows, cols = _check_options(op, tile, pingpong, valid, accumulate, dispatch)
        adapters = [adapter_for(x) for x in group.tensors]
        if len({a is None for a in adapters}) > 1 or len({type(a) for a in adapters if a is not None}) > 1:
            raise TypeError("tensors: the ranks mix NumPy and device arrays (or libraries); use one kind")
        self.ranks = [_Rank(x, f"tensors[{r}]", a) for r, (x, a) in enumerate(zip(group.tensors, adapters))]
        self.root = group.root
        root = self.ranks[self.root]
        on_device = root.adapter is not None
        if dst is None:
            dst = (root.adapter.empty(group.tensors[self.root], root.shape, root.dtype) if on_device
                   else np.empty(root.shape, numpy_dtype(root.dtype)))
        dst_adapter = adapter_for(dst)
        if on_device and dst_adapter is not root.adapter:
            raise TypeError(f"dst: expected a {root.adapter.library} device array like the ranks' tensors, "
                            f"not {type(dst).__name__}")
        if not on_device and dst_adapter is not None:
            raise TypeError(f"dst: expected a NumPy array for NumPy ranks, not {type(dst).__name__}")
        if not on_device and not isinstance(dst, np.ndarray):
            raise TypeError(f"dst: expected a NumPy array, not {type(dst).__name__}")
        if not on_device and not dst.flags.writeable:
            raise ValueError("dst: the array is read-only")
        self.dst = _Rank(dst, "dst", dst_adapter)
        self.dst.dtype = self.dst.dtype  # checked against the ranks' in C++ (a TypeError naming dst)
        for r, rank in enumerate(self.ranks):
            if r != self.root and _overlaps(self.dst, rank):
                raise ValueError(f"dst: overlaps {rank.arg}, a non-root rank's source that the reduction reads")
        if _overlaps(self.dst, root) and (self.dst.pointer, self.dst.strides) != (root.pointer, root.strides):
            raise ValueError("dst: overlaps the root's tensor without being it; reduce in place with dst=tensors[root]")
        self.backend = resolve_backend(backend, device_operands=on_device)
        key = ("treduce", op, rows, cols, bool(pingpong), valid, accumulate, self.backend, dispatch, self.root,
               self.dst.key(), *[rank.key() for rank in self.ranks])
        self.bound = _MEMO.get(key)
        if self.bound is None:
            self.bound = self._bind(op, rows, cols, pingpong, valid, accumulate, dispatch)
            if len(_MEMO) >= _MEMO_LIMIT:
                _MEMO.clear()
            _MEMO[key] = self.bound

    def _bind(self, op, rows, cols, pingpong, valid, accumulate, dispatch):
        def ref(t: _Rank):
            return _C.TileRef(t.arg, t.dtype, list(t.shape), "global", None, t.device, list(t.strides))
        config = {"op": op, "tile_rows": rows, "tile_cols": cols, "pingpong": bool(pingpong), "valid": valid,
                  "accumulate": accumulate or "", "root": self.root}
        call = _C.OpCall("treduce", [ref(t) for t in self.ranks], ref(self.dst), "thread", 1, [], False, config,
                         dispatch or "")
        devices = [t.device for t in self.ranks] if self.backend == "cuda" else []
        target = default_target(self.backend, self.ranks[self.root].device if devices else 0)
        core = _C.prepare(call, target, self.backend, devices)
        return core, Plan(core.plan, self.ranks[0].shape, bound=core)

    def run(self):
        core, _ = self.bound
        streams = [t.adapter.stream(t.device) if t.adapter is not None else 0 for t in self.ranks]
        core.run_collective([t.pointer for t in self.ranks], [t.device for t in self.ranks], self.dst.pointer,
                            self.dst.device, streams)
        return self.dst.obj


def treduce(group: ParallelGroup, dst=None, op: str = "sum", *, tile=(64, 256), pingpong: bool = False,
            valid: str = "dynamic", accumulate: Optional[str] = None, backend: Optional[str] = None,
            dispatch: Optional[str] = None):
    """Reduce every rank's tensor into the root's ``dst``: at each element the root's value,
    then the other ranks ascending, folded in the operand dtype (bitwise reproducible, whatever
    algorithm, backend, tile or buffering runs).

    Parameters
    ----------
    group : ParallelGroup
        Every rank's tensor and the root.
    dst : array, optional
        Where the result goes (the root's memory; any strides). Allocated when None.
    op : {'sum', 'max', 'min'}
        max/min follow fmax/fmin: a NaN meeting a number gives the number.
    tile : (rows, cols)
        The chunk the reduction slides over the last two dims (outer dims are looped).
    pingpong : bool
        Two receive buffers (the next rank's chunk loads while the current one is folded).
    valid : {'dynamic', 'static'}
        'static' requires the tile to divide rows and cols; 'dynamic' allows a partial last chunk.
    accumulate : {None, 'float32'}
        Fold float16 / bfloat16 in float32, rounding once at the end.
    backend : {'cpu', 'cuda'}, optional
        Default: cpu for NumPy tensors, cuda for device arrays.
    dispatch : {'root_pull', 'scatter_gather'}, optional
        Force an algorithm.

    Returns
    -------
    array
        ``dst`` (allocated at the root when None was given).

    Raises
    ------
    ValueError, TypeError
        Before anything is written: ranks of different shape, dtype or strides, a bad root,
        a dst of the wrong shape, dtype or device or overlapping a non-root source, bad options.
    tp.DispatchError
        When no algorithm accepts the call (e.g. scatter_gather with 2 ranks).

    Examples
    --------
    >>> xs = [np.full((2, 3), r, np.float32) for r in range(4)]
    >>> tp.comm.treduce(tp.comm.ParallelGroup(xs, root=0), op="sum", tile=(1, 2))
    array([[6., 6., 6.],
           [6., 6., 6.]], dtype=float32)
    """
    return _Call(group, dst, op, tile, pingpong, valid, accumulate, backend, dispatch).run()


def _plan(group: ParallelGroup, dst=None, op: str = "sum", *, tile=(64, 256), pingpong: bool = False,
          valid: str = "dynamic", accumulate: Optional[str] = None, backend: Optional[str] = None,
          dispatch: Optional[str] = None) -> Plan:
    return _Call(group, dst, op, tile, pingpong, valid, accumulate, backend, dispatch).bound[1]


treduce._tp_planner = _plan  # tp.plan(tp.comm.treduce, group, ...)
