"""Tile layouts: the seeds' syntax (``syntax``: ``S[...]``, ``R[...]``, ``v @ axis``, ``+``), the
value it spells (``value``: ``TileLayout`` and its parts) and layouts written as text (``text``:
read without ``eval``, for the command line). Each imports only those before it.

Here: the names ``tileprim`` exports."""
from .syntax import R, S, Axis, Iter, laneid, m, tid_in_wg, tx, wgid, wid_in_wg, warpid
from .value import DimInfo, Position, Swizzle, TileLayout

__all__ = ["S", "R", "TileLayout", "Swizzle", "Iter", "Position", "DimInfo", "Axis",
           "m", "laneid", "warpid", "tx", "wgid", "tid_in_wg", "wid_in_wg"]
