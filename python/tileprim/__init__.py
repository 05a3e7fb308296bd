"""tileprim: GPU tile primitives with a dispatch registry, NVRTC-compiled CUDA kernels and a CPU
backend that runs every variant step for step.

    import tileprim as tp
    from tileprim import S, R, TileLayout, laneid
    tp.sum(A, axes=-1, scope=tp.cta(32), storage="shared")
    tp.plan(tp.sum, A, scope=tp.thread, target="sm_100a")     # which variant, and why

The ops (tp.sum, tp.sqrt, tp.fma, ...) are generated from the C++ op table; tp.op_table() lists
them with their dtypes, NaN rule and numerics.
"""

from . import _C  # noqa: F401  (the compiled core, tileprim._C)
from ._version import __version__  # noqa: F401
from ._layout import (R, S, Axis, DimInfo, Iter, Position, Swizzle, TileLayout, laneid, m, tid_in_wg,
                      tx, wgid, wid_in_wg, warpid)
from ._scope import STORAGE_SCOPES, ExecScope, cta, thread, warp, warpgroup, wg
from ._ops import OPS as _OPS
from ._ops import op_table, plan, variants
from ._errors import DispatchError
from ._plan import Plan
from ._info import info
from ._kernel import Kernel, lower
from ._program.plan import ProgramPlan
from ._program.program import Program, program
from ._program.tile import Tile
from . import cache
from . import comm

globals().update(_OPS)  # tp.sum, tp.max, ..., tp.cast: one function per op table entry

from . import layers  # noqa: E402  (tile programs of the ops above)
from ._torch_ops import register_when_torch_loads as _register_torch_ops  # noqa: E402

_register_torch_ops()  # torch.ops.tileprim.*, once torch is loaded

__all__ = [
    "S", "R", "TileLayout", "Swizzle", "Iter", "Position", "DimInfo", "Axis",
    "m", "laneid", "warpid", "tx", "wgid", "tid_in_wg", "wid_in_wg",
    "thread", "warp", "warpgroup", "wg", "cta", "ExecScope", "STORAGE_SCOPES",
    *_OPS,
    "program", "Program", "Tile", "ProgramPlan",
    "plan", "lower", "variants", "op_table", "info", "cache", "comm", "layers", "Plan", "Kernel", "DispatchError",
]
