"""tp.lower: a call's Plan plus its generated CUDA source, PTX and CUBIN, for any target
architecture; needs NVRTC, not a GPU."""
from __future__ import annotations

import html
from typing import Optional

import tileprim._C as _C
from .._arrays.adapters import adapter_for
from .._calls.plan import Plan
from .._platform.backends import cuda_details, cuda_status, device_arch
from .._program.plan import ProgramPlan
from .._program.program import Program
from .public import plan

__all__ = ["Kernel", "lower", "kernel_origin_words"]


class Kernel:
    """A lowered call: .plan, .source (CUDA C++), .ptx, .cubin, and how it was built: its
    architecture, NVRTC options, launch shape, how each operand is staged (``staging``: name ->
    words), where the binary came from (``origin``: 'compiled', 'disk' or 'memory'), and what it
    takes of an SM, read from the CUBIN without a GPU: ``registers`` and ``local_bytes`` (the stack
    frame: spilled registers, local arrays) per thread, and ``blocks_per_sm``, ``occupancy`` (warps
    an SM holds over its most) and ``residency_why`` (the limit that binds) under CUDA's occupancy
    rules for ``arch``; None for a PTX-only kernel. ``min_blocks``: where registers alone held an
    SM to few blocks, the blocks per SM ptxas was asked to fit (kept only where it spilled nothing),
    else 0."""

    def __init__(self, plan: Plan, built: dict):
        self.plan = plan
        self.source: str = built["source"]
        self.ptx: str = built["ptx"]
        self.cubin: bytes = built["cubin"]
        self.arch: str = built["arch"]
        self.options = list(built["options"])
        self.origin: str = built["origin"]          # compiled, disk or memory
        self.compile_ms: float = built["compile_ms"]
        self.block_threads: int = built["block_threads"]
        self.instances_per_block: int = built["instances"]  # scope instances side by side
        self.tiles_per_block: int = built["tiles_per_block"]  # instances x the tiles each takes in turn
        self.instances_why: str = built["instances_why"]    # why the block is shaped so
        self.shared_bytes: int = built["shared_bytes"]
        self.staging: dict = dict(built.get("staging", {}))  # operand -> how the frame moves it
        self.registers: Optional[int] = built.get("registers")
        self.local_bytes: Optional[int] = built.get("local_bytes")
        self.min_blocks: int = built.get("min_blocks", 0)  # blocks per SM ptxas was asked to fit, 0: none
        residency = built.get("residency")
        self.blocks_per_sm: Optional[int] = residency["blocks"] if residency else None
        self.occupancy: Optional[float] = residency["warps"] / residency["max_warps"] if residency else None
        self.residency_why: str = residency["limit"] if residency else "PTX only: not known until the driver loads it"

    @property
    def origin_words(self) -> str:
        """Where the binary came from, in words: 'compiled now in 31 ms', 'loaded from the disk
        cache in 0.8 ms' or 'cached in this process'."""
        return kernel_origin_words(self.origin, self.compile_ms)

    @property
    def resources_words(self) -> str:
        """What the kernel takes of an SM, in words: '80 registers/thread, 3 blocks/SM (38 % of
        its warps; registers: ...)', with the local memory where it keeps any."""
        if self.registers is None:
            return "registers not known (PTX only)"
        local = f", {self.local_bytes} B local/thread" if self.local_bytes else ""
        asked = f", as asked of ptxas (__launch_bounds__ for {self.min_blocks})" if self.min_blocks else ""
        return (f"{self.registers} registers/thread{local}, {self.blocks_per_sm} blocks/SM{asked} "
                f"({self.occupancy:.0%} of its warps; {self.residency_why})")

    def __repr__(self) -> str:
        what = getattr(self.plan, "variant", None) or f"program {self.plan._core.name}"
        return (f"<tileprim.Kernel {what} for {self.arch}: {self.block_threads} threads/block, "
                f"{self.instances_per_block} instance(s) x {self.tiles_per_block // self.instances_per_block} "
                f"tile(s)/block, {self.shared_bytes} B shared, "
                f"{'PTX only' if not self.cubin else f'{len(self.cubin)} B cubin'}; {self.resources_words}; "
                f"{self.origin_words}>")

    def _repr_html_(self) -> str:
        return (f"<div>{html.escape(repr(self))}{self.plan._repr_html_()}"
                f"<details><summary>CUDA source</summary><pre>{html.escape(self.source)}</pre></details>"
                f"<details><summary>PTX</summary><pre>{html.escape(self.ptx)}</pre></details></div>")


def _ms(ms: float) -> str:
    return f"{ms:.0f}" if ms >= 10 else f"{ms:.1f}"


def kernel_origin_words(origin: str, compile_ms: float) -> str:
    """How a kernel was obtained, in words: origin is the kernel cache's 'compiled', 'disk' or 'memory'."""
    if origin == "compiled":
        return f"compiled now in {_ms(compile_ms)} ms"
    if origin == "disk":
        return f"loaded from the disk cache in {_ms(compile_ms)} ms"
    if origin == "memory":
        return "cached in this process"
    return f"{origin} in {_ms(compile_ms)} ms"


def lower(op, /, *args, target=None, **kwargs) -> Kernel:
    """Plan ``op`` on these arguments and compile its kernel for ``target`` (default: this GPU's
    architecture, or sm_90a without one). Nothing runs; needs NVRTC, not a GPU. A tile op is
    planned for ``target`` too; a tile program gives its one fused kernel (``source`` holds one
    ``__global__`` function); a collective (tp.comm.treduce) shows the kernel each worker runs.

    Parameters
    ----------
    op : op function, scope method, tile program or tp.comm.treduce
        What to lower, with ``*args`` and ``**kwargs`` as its call takes them (nothing runs).
    target : str, optional
        The architecture, such as "sm_90a" or "sm_100a".

    Returns
    -------
    Kernel
        ``.plan`` (its Plan or ProgramPlan), ``.source`` (CUDA C++), ``.ptx``, ``.cubin``.

    Raises
    ------
    RuntimeError
        Where NVRTC cannot be loaded (the reason named).

    Examples
    --------
    >>> k = tp.lower(tp.sum, np.ones(37, "f4"), target="sm_100a")
    >>> k.plan.variant, "add.rn.ftz.f32x2" in k.ptx
    ('sm100_packed', True)
    """
    details = cuda_details()
    if not details["nvrtc"]["ok"]:
        raise RuntimeError(f"tp.lower needs NVRTC: {details['nvrtc']['error']}")
    target = target or (device_arch(0) if cuda_status()[0] else "sm_90a")
    if isinstance(op, Program):  # planned as the CPU backend would for target (its steps are the GPU's),
        # or where device arrays lie
        on_device = any(adapter_for(x) is not None for x in args)
        p = op._tp_planner(*args, target=target, backend="cuda" if on_device else "cpu", **kwargs)
        return Kernel(p, _C.cuda.build_program(p._core, _C.cuda.compile_arch(target)))
    if getattr(op, "_tp_planner", None) is not None:  # a collective: the kernel each worker runs
        p = plan(op, *args, **kwargs)
        return Kernel(p, _C.cuda.build(p._core, _C.cuda.compile_arch(target)))
    # a tile op: the kernel of its program of one step (a gather op's plan is that program's own)
    p = plan(op, *args, target=target, **kwargs)
    program = p._core if isinstance(p, ProgramPlan) else p._bound.plan
    return Kernel(p, _C.cuda.build_program(program, _C.cuda.compile_arch(target)))
