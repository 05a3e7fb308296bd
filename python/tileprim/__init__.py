"""tileprim: GPU tile primitives with a dispatch registry, NVRTC-compiled CUDA kernels and a CPU
backend that runs every variant step for step.

    import tileprim as tp
    from tileprim import S, R, TileLayout, laneid
    tp.sum(A, axes=-1, scope=tp.cta(32), storage="shared")
    tp.plan(tp.sum, A, scope=tp.thread, target="sm_100a")     # which variant, and why
"""
from __future__ import annotations

from . import _C  # noqa: F401  (the compiled core, tileprim._C)
from ._layout import (R, S, Axis, DimInfo, Iter, Position, Swizzle, TileLayout, laneid, m, tid_in_wg, tx,
                      wgid, wid_in_wg, warpid)
from ._ops import OPS as _OPS
from ._ops import DispatchError, plan, variants
from ._plan import Plan
from ._scope import STORAGE_SCOPES, ExecScope, cta, thread, warp, warpgroup, wg
from ._info import info
from ._kernel import Kernel, lower
from . import cache

__version__ = "0.1.0"

sum = _OPS["sum"]  # noqa: A001 - the op is called sum, like numpy.sum
max = _OPS["max"]  # noqa: A001
min = _OPS["min"]  # noqa: A001
zero = _OPS["zero"]
fill = _OPS["fill"]
reciprocal = _OPS["reciprocal"]
sqrt = _OPS["sqrt"]
exp = _OPS["exp"]
exp2 = _OPS["exp2"]
log2 = _OPS["log2"]
silu = _OPS["silu"]
add = _OPS["add"]
sub = _OPS["sub"]
mul = _OPS["mul"]
fdiv = _OPS["fdiv"]
maximum = _OPS["maximum"]
fma = _OPS["fma"]
cast = _OPS["cast"]

__all__ = [
    "S", "R", "TileLayout", "Swizzle", "Iter", "Position", "DimInfo", "Axis",
    "m", "laneid", "warpid", "tx", "wgid", "tid_in_wg", "wid_in_wg",
    "thread", "warp", "warpgroup", "wg", "cta", "ExecScope", "STORAGE_SCOPES",
    "sum", "max", "min", "zero", "fill", "reciprocal", "sqrt", "exp", "exp2", "log2", "silu",
    "add", "sub", "mul", "fdiv", "maximum", "fma", "cast",
    "plan", "lower", "variants", "info", "cache", "Plan", "Kernel", "DispatchError",
]
