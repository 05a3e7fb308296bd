"""Layout syntax of the seeds: ``S[(32, 8) : (1 @ laneid, 1)] + R[32 : 1 @ laneid]``.

``S[extents : strides]`` is the shard, ``R[extents : strides]`` a replica, ``value @ axis`` puts a
stride or an offset on a named axis (a bare number is on the memory axis ``m``), and ``+ k @ axis``
adds an offset. ``S[8, 4]`` gives extents only, with row-major strides on ``m``. What it spells is
a ``LayoutExpr``, the parts of a layout; ``TileLayout`` (``value``) makes the layout of them. The
algebra itself lives in C++ (``csrc/layout``); this module only spells it.
"""
from __future__ import annotations

import operator
from typing import Dict, List, Optional

import tileprim._C as _C

__all__ = ["Axis", "OnAxis", "LayoutExpr", "S", "R", "Iter", "m", "laneid", "warpid", "tx", "wgid",
           "tid_in_wg", "wid_in_wg", "THREAD_WEIGHT", "axis_rank", "layout_int", "as_tuple", "row_major"]

_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1
# Canonical axis order (m, then the thread axes), and each thread axis' weight in a thread index.
_AXIS_ORDER = {name: k for k, name in enumerate(_C.axis_names())}
THREAD_WEIGHT = {name: _C.thread_weight(name) for name in _AXIS_ORDER if name != "m"}


def axis_rank(name: str) -> int:
    """The axis' place in the canonical order; ValueError for a name that is no axis."""
    if name not in _AXIS_ORDER:
        raise ValueError(f"axis: unknown axis {name!r}; the axes are {', '.join(_AXIS_ORDER)}")
    return _AXIS_ORDER[name]


def layout_int(v, what: str) -> int:
    """An int from anything with ``__index__`` (NumPy integers too) except bool, within int64: the
    core stores every layout number as a 64-bit integer."""
    if isinstance(v, bool) or not hasattr(type(v), "__index__"):
        raise TypeError(f"layout: {what} {v!r} must be an integer")
    i = operator.index(v)
    if not _INT64_MIN <= i <= _INT64_MAX:
        raise ValueError(f"layout: {what} {i} does not fit in int64 (-2**63 .. 2**63 - 1)")
    return i


Iter = _C.Iter  # its constructor converts extent and stride with layout_int


class Axis:
    """A named axis: ``m`` (memory) or a thread axis. ``4 @ laneid`` is a stride or offset on it."""

    def __init__(self, name: str):
        axis_rank(name)
        self.name = name
        self._on: Dict[int, OnAxis] = {}

    def __rmatmul__(self, value) -> "OnAxis":
        if type(value) is int:  # the common spelling, ``1 @ laneid``: one object per value
            on = self._on.get(value)
            if on is None and len(self._on) < 256:
                on = self._on[value] = OnAxis(layout_int(value, f"stride or offset on {self.name}"), self)
            if on is not None:
                return on
        return OnAxis(layout_int(value, f"stride or offset on {self.name}"), self)

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other) -> bool:
        return isinstance(other, Axis) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("Axis", self.name))


m, laneid, warpid, tx, wgid, tid_in_wg, wid_in_wg = (
    Axis(n) for n in ("m", "laneid", "warpid", "tx", "wgid", "tid_in_wg", "wid_in_wg"))


class OnAxis:
    """``value @ axis``: a stride inside ``S[...]``/``R[...]``, an offset after ``+``. A value:
    equal and hashed by (value, axis), never changed."""
    __slots__ = ("value", "axis", "_hash")

    def __init__(self, value: int, axis: Axis):
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "axis", axis)
        object.__setattr__(self, "_hash", hash((value, axis.name)))

    def __setattr__(self, name, value):
        raise AttributeError("OnAxis is read-only")

    def __eq__(self, other) -> bool:
        return type(other) is OnAxis and other.value == self.value and other.axis == self.axis

    def __hash__(self) -> int:
        return self._hash

    def __add__(self, other):
        return LayoutExpr(offset={self.axis.name: self.value}) + other

    __radd__ = __add__

    def __repr__(self) -> str:
        return f"{self.value}@{self.axis.name}"


def as_tuple(v) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def _iters(key, what: str) -> List[Iter]:
    """Iters from ``S[...]``'s key: ``extents : strides`` or extents alone (row-major on m)."""
    if isinstance(key, slice):
        if key.step is not None:
            raise ValueError(f"layout: {what}[extents : strides] takes no third part")
        extents = [layout_int(e, "extent") for e in as_tuple(key.start)]
        strides = as_tuple(key.stop)
        if len(strides) != len(extents):
            raise ValueError(f"layout: {what}[...] has {len(extents)} extents but {len(strides)} strides")
        iters = []
        for e, s in zip(extents, strides):
            if isinstance(s, OnAxis):
                iters.append(Iter(e, s.value, s.axis.name))
            else:
                iters.append(Iter(e, layout_int(s, "stride"), "m"))
        return iters
    return list(row_major([layout_int(e, "extent") for e in as_tuple(key)]).shard)


def row_major(shape):
    """The core of the row-major memory layout of ``shape``."""
    return _C.TileLayoutCore.row_major([layout_int(d, "shape dim") for d in as_tuple(shape)])


class LayoutExpr:
    """The sum ``S[...] + R[...] + k@axis`` before it becomes a TileLayout."""

    def __init__(self, shard=None, replica=(), offset=None):
        self.shard: Optional[List[Iter]] = shard
        self.replica: List[Iter] = list(replica)
        self.offset: Dict[str, int] = dict(offset or {})

    def __add__(self, other) -> "LayoutExpr":
        if isinstance(other, OnAxis):
            other = LayoutExpr(offset={other.axis.name: other.value})
        elif hasattr(type(other), "__index__"):  # a bare number is an offset on m
            other = LayoutExpr(offset={"m": layout_int(other, "offset on m")})
        if not isinstance(other, LayoutExpr):
            return NotImplemented
        if self.shard is not None and other.shard is not None:
            raise ValueError("layout: a layout has one shard S[...]; add replicas R[...] and offsets k@axis to it")
        offset = dict(self.offset)
        for k, v in other.offset.items():
            offset[k] = offset.get(k, 0) + v
        return LayoutExpr(self.shard if self.shard is not None else other.shard,
                          self.replica + other.replica, offset)

    __radd__ = __add__

    # a whole layout (one with a shard) equals, and hashes as, the TileLayout it spells; a part of
    # one (replicas or offsets alone) is only itself
    def __eq__(self, other) -> bool:
        if isinstance(other, LayoutExpr):
            return self is other if self.shard is None or other.shard is None else self._value() == other._value()
        if self.shard is not None and hasattr(other, "_core"):  # a TileLayout
            return self._value() == other._core
        return NotImplemented

    def __hash__(self) -> int:
        return object.__hash__(self) if self.shard is None else hash(self._value())

    def _value(self):
        """The core of the TileLayout a whole expression spells (no swizzle), made once."""
        core = self.__dict__.get("_core_value")
        if core is None:
            core = self._core_value = _C.TileLayoutCore(self.shard, self.replica, self.offset, (0, 0, 0))
        return core

    def __repr__(self) -> str:
        if self.shard is None:
            return f"LayoutExpr(replica={self.replica})"
        return str(self._value())  # printed as the TileLayout it spells prints


# S[...] written inline in a call builds the same expression on every call: the expressions are
# kept by the syntax's value, so a repeated call gets the same TileLayout (and hits the call memo).
_SHARD_CACHE: Dict[tuple, LayoutExpr] = {}
_SHARD_CACHE_LIMIT = 1024


def _syntax_key(key) -> Optional[tuple]:
    """``key`` of ``S[key]`` as a dictionary key, or None where it holds anything but ints and
    ``v @ axis`` (a float 8.0 equals 8 but is no extent: it must reach the checks)."""
    parts = (key.start, key.stop, key.step) if type(key) is slice else (key,)
    for part in parts:
        for v in (part if type(part) is tuple else (part,)):
            if type(v) is not int and type(v) is not OnAxis and v is not None:
                return None
    return parts if type(key) is slice else (None, key)


class _ShardSyntax:
    """``S[shape : stride]``: a layout's shard, the part of a tile each thread holds, as CuTe writes
    it: ``S[(32, 8): (1 @ laneid, 1)]`` puts row r on lane r and its 8 elements in 8 registers.
    Strides name thread axes with ``@`` (laneid, warpid, tx, ...) or stay in memory/registers (m).
    Combine with ``R[...]`` (replicas) by ``+``; pass it as ``layout=`` or to ``tp.TileLayout``.

    Examples
    --------
    >>> tp.TileLayout(tp.S[(32, 8): (1 @ tp.laneid, 1)]).shape
    (32, 8)
    """

    def __getitem__(self, key) -> LayoutExpr:
        cache_key = _syntax_key(key)
        expr = _SHARD_CACHE.get(cache_key) if cache_key is not None else None
        if expr is None:
            expr = LayoutExpr(shard=_iters(key, "S"))
            if cache_key is not None:
                if len(_SHARD_CACHE) >= _SHARD_CACHE_LIMIT:
                    _SHARD_CACHE.clear()
                _SHARD_CACHE[cache_key] = expr
        return expr

    def __repr__(self) -> str:
        return "S"


class _ReplicaSyntax:
    """``R[extent : thread axis]``: a layout's replicas, threads holding the same elements:
    ``S[8:1] + R[32 : 1 @ laneid]`` gives every lane of a warp all 8 elements.

    Examples
    --------
    >>> tp.TileLayout(tp.S[8:1] + tp.R[32: 1 @ tp.laneid]).shape
    (8,)
    """

    def __getitem__(self, key) -> LayoutExpr:
        return LayoutExpr(replica=_iters(key, "R"))

    def __repr__(self) -> str:
        return "R"


S = _ShardSyntax()
R = _ReplicaSyntax()
