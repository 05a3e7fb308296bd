"""treduce in one process (every rank's tensor at hand): the call checked here and in the C++ core
before anything is written, bound to its plan, and run; a repeated call of one signature reuses
its bound plan."""
from __future__ import annotations

import functools
import operator
from typing import Dict, List, Tuple

import numpy as np

from .. import _C
from .._backends import default_target, resolve_backend
from .._checks import OPTIONAL_STR, expect, plain_ndarray
from .._dtypes import dtype_name, numpy_dtype
from .._interop import PLACED_KEYS, adapter_for, array_pointer, remember_device_type
from .._plan import Plan
from ._communicator import DEFAULT_TIMEOUT
from ._group import ParallelGroup

__all__ = ["run_call", "bound_call", "contiguous_core", "laid_out_core", "check_options", "options_keyable",
           "RankTensor", "DTYPES"]

DTYPES = ("float32", "float16", "bfloat16", "int32")
_MEMO: Dict[tuple, "_Bound"] = {}
_MEMO_LIMIT = 1024
# Per options and array type: its repeated calls in C++ (_C.RepeatedCollective), or False for a
# type that publishes no DLPack C exchange table (its calls stay on the memo path).
_REPEATS: Dict[tuple, object] = {}
_REPEATS_LIMIT = 256


class RankTensor:
    """One tensor as treduce reads it: where it lies, and how."""

    def __init__(self, x, arg: str, adapter):
        self.obj, self.arg, self.adapter = x, arg, adapter
        if adapter is None:
            if not isinstance(x, np.ndarray):
                raise TypeError(f"{arg}: expected a NumPy or device array, not {type(x).__name__}")
            x = plain_ndarray(x, arg)
            if not x.dtype.isnative:
                raise TypeError(f"{arg}: dtype {x.dtype} is not in native byte order; convert it with "
                                f"{arg}.astype({x.dtype.newbyteorder('=').name!r})")
            self.dtype = dtype_name(x.dtype, arg, allowed=DTYPES)
            self.itemsize = x.itemsize
            if any(s % x.itemsize for s in x.strides):
                raise ValueError(f"{arg}: strides {x.strides} are not whole elements")
            self.shape, self.strides = x.shape, tuple(s // x.itemsize for s in x.strides)
            self.pointer, self.device = x.__array_interface__["data"][0], -1
        else:
            adapter.check_stored(x, arg)
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


def _overlaps(a: RankTensor, b: RankTensor) -> bool:
    if a.adapter is None and b.adapter is None:
        return bool(np.shares_memory(a.obj, b.obj, max_work=1 << 20)) if a.obj.size and b.obj.size else False
    (a0, a1), (b0, b1) = a.extent(), b.extent()
    return a.device == b.device and a0 < b1 and b0 < a1


_TILE_MAX = (1 << 63) - 1  # a tile past the tensor is one chunk of it; beyond int64 nothing is a tile


def _tile(tile) -> Tuple[int, int]:
    if not isinstance(tile, (tuple, list)) or len(tile) != 2:
        raise ValueError(f"tile: expected (rows, cols), not {tile!r}")
    try:
        rows_cols = tuple(operator.index(t) for t in tile if not isinstance(t, bool))
    except TypeError:
        raise TypeError(f"tile: expected two ints (rows, cols), not {tile!r}") from None
    if len(rows_cols) != 2:
        raise TypeError(f"tile: expected two ints (rows, cols), not {tile!r}")
    if not all(1 <= t <= _TILE_MAX for t in rows_cols):
        raise ValueError(f"tile: {tile!r} needs rows and cols from 1 to 2**63 - 1")
    return rows_cols  # type: ignore[return-value]


def options_keyable(tile, pingpong) -> bool:
    """Options a call memo may key as they are: those equal only to themselves once checked (1.0
    equals 1 and True equals 1, yet neither is a tile size; 1 equals True, yet is no pingpong).
    Others take the checking path on every call."""
    return (type(tile) in (tuple, list) and len(tile) == 2 and type(tile[0]) is int and type(tile[1]) is int
            and type(pingpong) is bool)


def check_options(op, tile, pingpong, valid, accumulate, dispatch) -> Tuple[int, int]:
    expect(op, str, "op", "'sum', 'max' or 'min'")
    rows_cols = _tile(tile)
    expect(pingpong, (bool, np.bool_), "pingpong", "True or False")
    expect(valid, str, "valid", "'dynamic' or 'static'")
    expect(accumulate, OPTIONAL_STR, "accumulate", "None or 'float32'")
    if accumulate == "":
        raise ValueError("accumulate: '' is not an accumulator dtype; use None (the operand dtype) or 'float32'")
    expect(dispatch, OPTIONAL_STR, "dispatch", "a variant name")
    if dispatch == "":
        raise ValueError("dispatch: '' is not a variant name; use None to let dispatch choose")
    return rows_cols


class _Call:
    """A checked treduce call: its ranks, dst, and bound plan."""

    def __init__(self, group, dst, op, tile, pingpong, valid, accumulate, backend, dispatch, processes=""):
        if not isinstance(group, ParallelGroup):
            raise TypeError(f"group: expected a tp.comm.ParallelGroup, not {type(group).__name__}")
        rows, cols = check_options(op, tile, pingpong, valid, accumulate, dispatch)
        adapters = [adapter_for(x) for x in group.tensors]
        if len({a is None for a in adapters}) > 1 or len({type(a) for a in adapters if a is not None}) > 1:
            raise TypeError("tensors: the ranks mix NumPy and device arrays (or libraries); use one kind")
        self.ranks = [RankTensor(x, f"tensors[{r}]", a) for r, (x, a) in enumerate(zip(group.tensors, adapters))]
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
        self.dst = RankTensor(dst, "dst", dst_adapter)
        self.dst.dtype = self.dst.dtype  # checked against the ranks' in C++ (a TypeError naming dst)
        for r, rank in enumerate(self.ranks):  # across processes, the others' tensors here only show their layout
            if r != self.root and not processes and _overlaps(self.dst, rank):
                raise ValueError(f"dst: overlaps {rank.arg}, a non-root rank's source that the reduction reads")
        if _overlaps(self.dst, root) and (self.dst.pointer, self.dst.strides) != (root.pointer, root.strides):
            raise ValueError("dst: overlaps the root's tensor without being it; reduce in place with dst=tensors[root]")
        if backend is None and not on_device:  # NumPy ranks meet in host memory: the CPU backend's transport
            backend = "cpu"
        self.backend = resolve_backend(backend, device_operands=on_device)
        if on_device:
            remember_device_type(group.tensors[0], root.adapter)
        self.bound = self._bind(op, rows, cols, pingpong, valid, accumulate, dispatch, processes)

    def _bind(self, op, rows, cols, pingpong, valid, accumulate, dispatch, processes):
        def ref(t: RankTensor):
            return _C.TileRef(t.arg, t.dtype, list(t.shape), "global", None, t.device, list(t.strides))
        devices = [t.device for t in self.ranks] if self.backend == "cuda" else []
        core = _prepare([ref(t) for t in self.ranks], ref(self.dst), self.root, self.backend, devices, op, rows, cols,
                        pingpong, valid, accumulate, dispatch, processes)
        return _Bound(core, Plan(core.plan, self.ranks[0].shape, bound=core), self.ranks, self.dst, self.root)


def _prepare(ranks, dst, root: int, backend: str, devices, op, rows, cols, pingpong, valid, accumulate, dispatch,
             processes):
    """The C++ core's bound plan of a treduce over these TileRefs (cuda: on these devices)."""
    config = {"op": op, "tile_rows": rows, "tile_cols": cols, "pingpong": bool(pingpong), "valid": valid,
              "accumulate": accumulate or "", "root": root, "processes": processes}
    call = _C.OpCall("treduce", ranks, dst, "thread", 1, [], False, config, dispatch or "")
    return _C.prepare(call, default_target(backend, devices[root] if devices else 0), backend, devices)


@functools.lru_cache(maxsize=256)
def laid_out_core(world_size: int, root: int, dtype: str, shape: tuple, strides: tuple, dst_strides: tuple,
                  device: int, op, tile, pingpong, valid, accumulate, dispatch, processes: str):
    """The bound plan (C++ core) of a treduce of `world_size` ranks whose tensors are laid out alike
    (shape, element strides) on `device`, into a dst of that shape with `dst_strides`: for a rank
    that runs on pointers only, where there are no arrays to check (the root checked the call)."""
    rows, cols = check_options(op, tile, pingpong, valid, accumulate, dispatch)
    refs = [_C.TileRef(f"tensors[{r}]", dtype, list(shape), "global", None, device, list(strides))
            for r in range(world_size)]
    return _prepare(refs, _C.TileRef("dst", dtype, list(shape), "global", None, device, list(dst_strides)), root,
                    "cuda", [device] * world_size, op, rows, cols, pingpong, valid, accumulate, dispatch, processes)


def contiguous_core(world_size: int, root: int, n: int, dtype: str, device: int, op, tile, pingpong, accumulate,
                    processes: str):
    """The bound plan of a treduce whose tensors and dst are all n contiguous elements: for a
    transport that stages the ranks' data itself, where there are only its buffers' pointers (all
    on this rank's GPU: root_pull's fold, whatever the call's algorithm)."""
    return laid_out_core(world_size, root, dtype, (n,), (1,), (1,), device, op, tuple(tile), pingpong, "dynamic",
                         accumulate, "root_pull", processes)


class _Bound:
    """A treduce signature's bound plan, and the checks a repeated call still makes: those that
    depend on where the tensors are (dst must not overlap a non-root source)."""

    def __init__(self, core, plan, ranks: List[RankTensor], dst: RankTensor, root: int):
        self.core, self.plan, self.root = core, plan, root
        self.devices = [t.device for t in ranks]
        self.dst_device = dst.device
        self.beside_dst = [r for r, d in enumerate(self.devices) if d == dst.device]  # the ranks dst may overlap
        self.adapter = ranks[0].adapter
        self.no_streams = [0] * len(ranks)
        low, high = ranks[0].extent()
        self.span = (low - ranks[0].pointer, high - ranks[0].pointer)  # bytes around each rank's pointer
        low, high = dst.extent()
        self.dst_span = (low - dst.pointer, high - dst.pointer)
        self.allocate = ((lambda t: self.adapter.empty(t, ranks[0].shape, ranks[0].dtype)) if self.adapter
                         else (lambda t: np.empty(ranks[0].shape, numpy_dtype(ranks[0].dtype))))
        self.pointer = self.adapter.pointer if self.adapter else array_pointer

    def run(self, tensors, dst):
        pointers = list(map(self.pointer, tensors))
        dst = self.checked_dst(pointers, tensors, dst)
        return self.launch(pointers, dst, self.adapter.streams(self.devices) if self.adapter else self.no_streams)

    def checked_dst(self, pointers: List[int], tensors, dst):
        """dst (allocated when None) once this call's pointers pass the checks that depend on where
        the data lies. tensors[r]: rank r's array where this process holds it, else None."""
        dst = self.allocate(tensors[self.root]) if dst is None else dst
        out = self.pointer(dst)
        d0, d1 = out + self.dst_span[0], out + self.dst_span[1]
        low, high = self.span
        for r in self.beside_dst:
            p = pointers[r]
            if d0 < p + high and p + low < d1:
                self._check_overlap(tensors, dst, r)
        return dst

    def launch(self, pointers: List[int], dst, streams: List[int], signal_pads: List[int] = (), epoch: int = 0,
               timeout: float = DEFAULT_TIMEOUT, abandoned: int = 0, self_rank: int = -1):
        """Runs on every rank's data at `pointers` into a checked dst; returns dst. With every
        rank's signal pad (ranks in other processes), rank `self_rank`'s part as call `epoch`,
        which this process gives up on by raising its host flag at `abandoned`; a GPU waiting
        longer than `timeout` for another rank's stream traps."""
        self.core.run_collective(pointers, self.devices, self.pointer(dst), self.dst_device, streams, signal_pads,
                                 epoch, timeout, abandoned, self_rank)
        return dst

    def _check_overlap(self, tensors, dst, r: int) -> None:
        """Their extents meet: an exact look (NumPy, both at hand) decides, else they overlap."""
        exact = (type(dst) is np.ndarray and tensors[r] is not None
                 and not np.shares_memory(dst, tensors[r], max_work=1 << 20))
        if exact:
            return
        if r != self.root:
            raise ValueError(f"dst: overlaps tensors[{r}], a non-root rank's source that the reduction reads")
        if (array_pointer(dst), tuple(getattr(dst, "strides", ()))) != (array_pointer(tensors[r]),
                                                                   tuple(getattr(tensors[r], "strides", ()))):
            raise ValueError("dst: overlaps the root's tensor without being it; reduce in place with dst=tensors[root]")


def bound_call(group, dst, op, tile, pingpong, valid, accumulate, backend, dispatch, processes="") -> "_Bound":
    """The call's bound plan from the memo, or checked and bound now."""
    key = bound = None
    if options_keyable(tile, pingpong):
        try:
            keys = PLACED_KEYS
            key = (op, tuple(tile), pingpong, valid, accumulate, backend, dispatch, processes, group.root,
                   None if dst is None else keys[type(dst)](dst), *[keys[type(x)](x) for x in group.tensors])
            bound = _MEMO.get(key)
        except (KeyError, TypeError, AttributeError):  # an array of a type not yet keyed; an unhashable option
            key = None
    if bound is None:
        bound = _Call(group, dst, op, tile, pingpong, valid, accumulate, backend, dispatch, processes).bound
        if key is not None:
            if len(_MEMO) >= _MEMO_LIMIT:
                _MEMO.clear()
            _MEMO[key] = bound
    return bound


def run_call(group, dst, op, tile, pingpong, valid, accumulate, backend, dispatch):
    """Runs the call. A repeated call on device arrays into a given dst is read, matched and
    launched in C++ where the arrays' type publishes DLPack's C exchange table; any other call is
    checked (or found in the memo), run, and then remembered there."""
    key = repeat = None
    if dst is not None and options_keyable(tile, pingpong):
        key = (op, *tile, pingpong, valid, accumulate, backend, dispatch, group.root, type(dst))
        try:
            repeat = _REPEATS.get(key)
        except TypeError:  # an unhashable option: the checking path names it
            key = None
        if repeat:
            out = repeat.run(group.tensors, dst)
            if out is not None:
                return out
    bound = bound_call(group, dst, op, tile, pingpong, valid, accumulate, backend, dispatch)
    out = bound.run(group.tensors, dst)
    if key is not None and bound.adapter is not None:
        if repeat is None:
            if len(_REPEATS) >= _REPEATS_LIMIT:
                _REPEATS.clear()
            repeat = _REPEATS[key] = _repeated_calls(type(dst), bound.adapter.lazy_view)
        if repeat:
            repeat.remember(bound.core, group.tensors, out, group.root, bound.span, bound.dst_span)
    return out


def _repeated_calls(array_type: type, lazy_view: str):
    try:
        return _C.RepeatedCollective(array_type, lazy_view)
    except ValueError:  # no DLPack C exchange table
        return False
