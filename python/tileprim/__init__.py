"""tileprim: GPU tile primitives with a dispatch registry, NVRTC-compiled CUDA kernels and a CPU
backend that runs every variant step for step.

    import tileprim as tp
    from tileprim import S, R, TileLayout, laneid
    tp.sum(A, axes=-1, scope=tp.cta(32), storage="shared")
    tp.plan(tp.sum, A, scope=tp.thread, target="sm_100a")     # which variant, and why

The ops (tp.sum, tp.sqrt, tp.fma, ...) are generated from the C++ op table; tp.op_table() lists
them with their dtypes, NaN rule and numerics.
"""

__version__ = "0.1.0"

from . import _C  # noqa: E402,F401  (the compiled core, tileprim._C)
from ._layout import (R, S, Axis, DimInfo, Iter, Position, Swizzle, TileLayout, laneid, m, tid_in_wg,  # noqa: E402
                      tx, wgid, wid_in_wg, warpid)
from ._scope import STORAGE_SCOPES, ExecScope, cta, thread, warp, warpgroup, wg  # noqa: E402
from ._ops import OPS as _OPS  # noqa: E402
from ._ops import DispatchError, op_table, plan, variants  # noqa: E402
from ._plan import Plan  # noqa: E402
from ._info import info  # noqa: E402
from ._kernel import Kernel, lower  # noqa: E402
from ._program import Program, ProgramPlan, Tile, program  # noqa: E402
from . import cache  # noqa: E402
from . import comm  # noqa: E402

globals().update(_OPS)  # tp.sum, tp.max, ..., tp.cast: one function per op table entry

from ._torch_ops import register_when_torch_loads as _register_torch_ops  # noqa: E402

_register_torch_ops()  # torch.ops.tileprim.*, once torch is loaded

__all__ = [
    "S", "R", "TileLayout", "Swizzle", "Iter", "Position", "DimInfo", "Axis",
    "m", "laneid", "warpid", "tx", "wgid", "tid_in_wg", "wid_in_wg",
    "thread", "warp", "warpgroup", "wg", "cta", "ExecScope", "STORAGE_SCOPES",
    *_OPS,
    "program", "Program", "Tile", "ProgramPlan",
    "plan", "lower", "variants", "op_table", "info", "cache", "comm", "Plan", "Kernel", "DispatchError",
]
