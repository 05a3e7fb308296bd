"""A tile program of maps alone, called over rows with no scope named, takes its rows as tiles of
``TILE`` elements: each element's result reads that element of each argument alone, so any tiling
of the same elements gives the same bits, and contiguous rows of n (a multiple of TILE) are n / TILE
such tiles with no copy. A thread's tiles then sweep the arrays in order, as an eager library's
elementwise kernels do, where a scope a row (the planner's choice for a row) keeps a row or a chunk
of it per warp or CTA. One H200, bfloat16 8192 x 14336, ms: SwiGLU's ``silu_mul`` 0.195 as tiles
against 0.350-0.366 at the best scopes a row, GELU (erf) 0.566 against 0.568-0.626; at 8192 x 4096
the planner's scope a row took 2.3-2.4x the tiles' time (its registers: 185-231 a thread).

A program is of maps alone where, traced at the call's tile and at TILE elements, every step is an
elementwise op with no layout, storage or scope named and the two tracings record the same steps
(a body that reads its tile's shape, say to divide by it, records other constants: it keeps its
rows). Every array argument has the call's shape, as does ``out=``; each library says where its
array is such a view (``ArrayLibrary.flat_tiles``), and none is traced or transformed by its
library's machinery (``keeps_shapes``: torch.compile and torch.func, whose graphs keep the rows).
A standalone map is the program of one map: ``op_tiles`` takes its call so, with no body to trace,
where it names no scope, storage, layout or variant (the op functions ask it: ``_ops.functions``)."""
from __future__ import annotations

import copy
import math
import weakref
from typing import Dict, Optional


from .._arrays.dtypes import VALUE_DTYPES, dtype_name
from .._arrays.routing import flat_tiles, keeps_shapes
from .._opspec.table import SPECS
from .trace import SCALAR_TYPES

__all__ = ["TILE", "MapTiles", "map_tiles", "op_tiles"]

TILE = 8  # 16 bytes of a 16-bit dtype, a thread's tile in the maps' benchmark (tests/test_bench)

_MAPS_ALONE: Dict[tuple, bool] = {}  # (program, tile shape, dtypes and scalars) -> maps alone
_MAPS_ALONE_LIMIT = 4096
_ROWS_PLANS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # a tiles' plan -> its copies for rows


class MapTiles:
    """The call's arguments and out= as rows of TILE, and the shape its results take back."""

    __slots__ = ("args", "out", "shape")

    def __init__(self, args: tuple, out, shape: tuple):
        self.args, self.out, self.shape = args, out, shape

    def results(self, result, out):
        """The call's result in the shape of its rows: ``out`` itself where given."""
        if out is not None:
            return out
        if isinstance(result, (tuple, list)):
            return type(result)(r.reshape(self.shape) for r in result)
        return result.reshape(self.shape)

    def plan(self, tiles_plan, batch_dims: int):
        """A copy of the tiles' plan (theirs unchanged: the memo shares it) with the rows' result
        shapes and a word on the tiling (``map_tiles``); the same copy for the same rows, as a
        repeated call's plan is the same plan."""
        copies = _ROWS_PLANS.setdefault(tiles_plan, {})
        plan = copies.get((self.shape, batch_dims))
        if plan is not None:
            return plan
        plan = copies[(self.shape, batch_dims)] = copy.copy(tiles_plan)
        if hasattr(plan, "out_shapes"):  # a program's
            plan.out_shapes = [self.shape] * len(plan.out_shapes)
        else:
            plan.out_shape = self.shape
        row, flat = math.prod(self.shape[batch_dims:]), (math.prod(self.shape) // TILE, TILE)
        plan.map_tiles = (f"maps alone, no scope named: the rows of {row} elements taken as tiles of {TILE} "
                          f"({self.shape} as {flat}, a view), the same bits at any tiling")
        return plan


def map_tiles(program, args: tuple, batch_dims, scope, out) -> Optional[MapTiles]:
    """The call as rows of TILE where its program is of maps alone (the module's doc), else None.
    Asked on every call of a program: a dictionary lookup past the shapes where it was asked before."""
    if scope is not None or program._scope is not None or program._staging is not None:
        return None
    shape = _rows(args, batch_dims, out)
    if shape is None:
        return None
    kinds = tuple((type(x), x if x == x else "nan") if isinstance(x, SCALAR_TYPES) else x.dtype for x in args)
    key = (program, shape[batch_dims:], kinds)
    alone = _MAPS_ALONE.get(key)
    if alone is None:
        if len(_MAPS_ALONE) >= _MAPS_ALONE_LIMIT:  # a new scalar each call: start over
            _MAPS_ALONE.clear()
        alone = _MAPS_ALONE[key] = _traced_alike(program, args, kinds, shape[batch_dims:])
    return _flat(args, out, shape) if alone else None


def op_tiles(operands: tuple, batch_dims, out) -> Optional[MapTiles]:
    """A standalone elementwise call (the program of one map) over rows, with no scope, storage,
    layout or variant named, as rows of TILE: as ``map_tiles``, with no body to trace."""
    shape = _rows(operands, batch_dims, out)
    return None if shape is None else _flat(operands, out, shape)


def _rows(values, batch_dims, out) -> Optional[tuple]:
    """The shape every array of ``values`` (and out=) has, where its tiles are rows of a multiple of
    TILE elements, more than TILE, and no library traces the arrays; else None. The first array's
    tile decides most calls (tiles of 8 or fewer: about 1 us on a 2-core CPU)."""
    if type(batch_dims) is not int or batch_dims < 1:
        return None
    shape = None
    for x in values:
        if isinstance(x, SCALAR_TYPES):
            continue
        s = getattr(x, "shape", None)
        if s is None:
            return None
        if shape is None:
            n = math.prod(s[batch_dims:]) if len(s) > batch_dims else 0
            # a traced size (torch.compile's) is no int; torch.compile and torch.func keep the rows
            if not isinstance(n, int) or n <= TILE or n % TILE or keeps_shapes(x):
                return None
            shape = s
        elif s != shape:
            return None
    if shape is None:
        return None
    if any(getattr(o, "shape", None) != shape for o in _outs(out)):
        return None
    return tuple(shape)


def _flat(values, out, shape) -> Optional[MapTiles]:
    """``values`` and out= as views of rows of TILE (``ArrayLibrary.flat_tiles``), else None."""
    flat = [x if isinstance(x, SCALAR_TYPES) else flat_tiles(x, TILE) for x in values]
    flat_outs = [flat_tiles(o, TILE) for o in _outs(out)]
    if any(f is None for f in flat) or any(f is None for f in flat_outs):
        return None
    flat_out = None if out is None else tuple(flat_outs) if isinstance(out, tuple) else flat_outs[0]
    return MapTiles(tuple(flat), flat_out, shape)


def _outs(out) -> tuple:
    """out= as a tuple of arrays (none, one, or the tuple given)."""
    return out if isinstance(out, tuple) else () if out is None else (out,)


def _traced_alike(program, args, kinds, tile_shape) -> bool:
    """Whether the program traced at ``tile_shape`` and at (TILE,) records the same elementwise
    steps, none naming a layout, storage, scope or variant."""
    try:
        kinds = [k if isinstance(k, tuple) else dtype_name(k, "x", VALUE_DTYPES) for k in kinds]
    except TypeError:  # a dtype no tile holds: the call itself says so
        return False
    recorded = []
    for shape in (tile_shape, (TILE,)):
        try:
            trace, outputs = program._traced(args, kinds, shape)
        except Exception:  # the call itself raises it, at its own tile
            return False
        if trace.scope is not None or None in outputs:
            return False
        steps = []
        for step in trace.steps:
            if (SPECS[step["op"]]["family"] != "elementwise" or step["layout"] is not None
                    or step["out_layout"] is not None or step["storage"] or step["dispatch"]):
                return False
            steps.append({k: v for k, v in step.items() if k not in ("where", "name")})
        recorded.append((steps, outputs))
    return recorded[0] == recorded[1]
