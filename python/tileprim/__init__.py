"""tileprim: GPU tile primitives with a dispatch registry, NVRTC-compiled CUDA kernels and a CPU
backend that runs every variant step for step.

    import tileprim as tp
    from tileprim import S, R, TileLayout, laneid
    tp.sum(A, axes=-1, scope=tp.cta(32), storage="shared")
    tp.plan(tp.sum, A, scope=tp.thread, target="sm_100a")     # which variant, and why

The ops (tp.sum, tp.sqrt, tp.fma, ...) are generated from the C++ op table; tp.op_table() lists
them with their dtypes, NaN rule and numerics.
"""

import tileprim._C as _C  # noqa: F401  (the compiled core, tileprim._C)
from ._version import __version__  # noqa: F401
from ._layout import (R, S, Axis, DimInfo, Iter, Position, Swizzle, TileLayout, laneid, m, tid_in_wg,
                      tx, wgid, wid_in_wg, warpid)
from ._calls.scope import STORAGE_SCOPES, ExecScope, cluster, cta, thread, warp, warpgroup, wg
from ._ops.public import OPS as _OPS
from ._ops.public import op_table, plan, variants
from ._errors import DispatchError
from ._calls.plan import Plan
from ._platform.info import info
from ._ops.lower import Kernel, lower
from ._program.plan import ProgramPlan
from ._program.program import Program, program
from ._program.stop_gradient import stop_gradient
from ._program.tile import Tile
from . import cache
from . import comm

globals().update(_OPS)  # tp.sum, tp.max, ..., tp.cast: one function per op table entry

from . import layers  # noqa: E402  (tile programs of the ops above)
from ._arrays.cupy import register as _register_cupy  # noqa: E402
from ._jax.arrays import register as _register_jax  # noqa: E402
from ._torch.library import register as _register_torch  # noqa: E402

# the array libraries' entries in the routing table (none of them is imported here): CuPy's and
# JAX's now, torch's and torch.ops.tileprim.* once torch is loaded
_register_cupy()
_register_jax()
_register_torch()


__all__ = [
    "S", "R", "TileLayout", "Swizzle", "Iter", "Position", "DimInfo", "Axis",
    "m", "laneid", "warpid", "tx", "wgid", "tid_in_wg", "wid_in_wg",
    "thread", "warp", "warpgroup", "wg", "cta", "cluster", "ExecScope", "STORAGE_SCOPES",
    *_OPS,
    "program", "Program", "Tile", "ProgramPlan", "stop_gradient",
    "plan", "lower", "variants", "op_table", "info", "cache", "comm", "layers", "Plan", "Kernel", "DispatchError",
]


def __getattr__(name):
    """``tp.nn``, the torch modules, imported at its first use (it imports torch, which
    ``import tileprim`` does not)."""
    if name == "nn":
        import importlib
        return importlib.import_module(".nn", __name__)
    raise AttributeError(f"module 'tileprim' has no attribute {name!r}")
