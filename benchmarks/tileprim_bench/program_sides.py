"""What the tile-program cases run on (benchmarks/programs.py): a side makes the inputs, names the
peers, holds the timers and the shapes. The CPU side runs the CPU backend beside NumPy on tiny
shapes; the GPU side runs tileprim on PyTorch CUDA tensors beside PyTorch eager, torch.compile,
torch's rms_norm and Liger (on CPU tensors too: the tests' dry run). The forward + backward cases
need torch tensors (autograd): on the CPU, the CPU side lends them a GPU side on CPU tensors, the
CPU backend beside PyTorch eager."""
from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from tileprim._arrays.dtypes import numpy_dtype

from .baselines import GpuLibrary, NumpyLibrary
from .program_workloads import Workload
from .report import reason
from .timing import CudaEventTimer, HostWallTimer, WallTimer

__all__ = ["GPU_SHAPES", "GPU_EXTRA_SHAPES", "CPU_SHAPES", "side_for"]

# issue 49's rows: 32768 of each length up to 32000, then as many as 8 GiB holds of four float32
# operands' rows (add+RMSNorm's x, r and two results)
GPU_SHAPES = tuple((32768, n) for n in (1000, 2048, 4096, 4097, 8192, 16384, 32000)) + tuple(
    (min(32768, (8 << 30) // (16 * n)), n) for n in (50257, 65536, 131072, 262144))
GPU_EXTRA_SHAPES = ((32768, 4096), (32768, 16384))  # fastmath=True and forward + backward too
CPU_SHAPES = ((100, 1024), (24, 4096), (6, 16384), (3, 65536))


class _CpuSide:
    """The CPU backend beside NumPy on NumPy arrays: tiny shapes, every code path, no GPU."""

    repeats, inner, small_inner = 7, 1, 20

    def __init__(self, lib: NumpyLibrary):
        self.lib, self.options = lib, dict(lib.tileprim_options)
        self._rng = np.random.default_rng(0)
        self.timer = WallTimer(self.repeats)
        self.small_timer = HostWallTimer(lambda: None, self.repeats, self.small_inner)
        self._autograd = None

    @staticmethod
    def shapes(quick: bool):
        return tuple((max(1, m // 4) if quick else m, n) for m, n in CPU_SHAPES)

    extra_shapes = shapes  # every case on every shape

    @staticmethod
    def copy_timed(x) -> None:
        """No device copy to measure on the CPU side."""
        return None

    def inputs(self, shape: tuple, dtype: str):
        dt = numpy_dtype(dtype)
        x = (self._rng.standard_normal(shape) * 2).astype(dt)
        r = self._rng.standard_normal(shape).astype(dt)
        return x, r, self._rng.uniform(0.5, 1.5, shape[-1]).astype(dt)

    def peers(self, workload: Workload, args: tuple):
        return {"numpy": functools.partial(workload.numpy_peer, *args)}, {}

    def autograd(self) -> "_GpuSide":
        """The forward + backward cases' side: the CPU backend on torch CPU tensors (a program's
        gradient goes through torch autograd) beside PyTorch eager, timed as this side times.

        Raises
        ------
        ImportError
            torch is not importable (the cases are n/a with this reason).
        """
        if self._autograd is None:
            try:
                import torch
            except ImportError as e:
                raise ImportError(f"a program's gradient goes through torch autograd: {reason(e)}") from None
            side = _GpuSide(GpuLibrary(torch), device="cpu")
            side.options = {"backend": "cpu"}  # CPU tensors would go to the GPU where there is one
            # compiling for the CPU is slow: the tests' dry run compiles once
            side.gpu_only = "timed on the GPU only"
            side.timer, side.small_timer = self.timer, self.small_timer
            self._autograd = side
        return self._autograd

    @staticmethod
    def device(result):
        return np.asarray(result)

    @staticmethod
    def float64(a):
        return a.astype(np.float64)

    @staticmethod
    def host(a) -> np.ndarray:
        return np.asarray(a)


class _GpuSide:
    """tileprim on PyTorch CUDA tensors beside PyTorch eager, torch.compile of the same code,
    torch's rms_norm and Liger (imported on first use; n/a with the reason without it).
    ``device="cpu"``: the same on CPU tensors (the tests' dry run; ``options`` then says which
    backend, and ``gpu_only``, where set, why torch.compile and Liger are left out)."""

    repeats, inner, small_inner = 15, 5, 200

    def __init__(self, lib: GpuLibrary, device: str = "cuda"):
        self.lib, self.torch, self.device_name = lib, lib.torch, device  # "cpu": the tests' dry run
        self.options = dict(lib.tileprim_options)
        self.gpu_only: Optional[str] = None
        self._generator = None
        self._liger = None
        self.timer = CudaEventTimer(self.torch, self.repeats, self.inner, budget_s=None)
        self.small_timer = HostWallTimer(self.torch.cuda.synchronize, self.repeats, self.small_inner)

    @staticmethod
    def shapes(quick: bool):
        return tuple((m // 4 if quick else m, n) for m, n in GPU_SHAPES)

    @staticmethod
    def extra_shapes(quick: bool):
        return tuple((m // 4 if quick else m, n) for m, n in GPU_EXTRA_SHAPES)

    def copy_timed(self, x) -> Optional[float]:
        """ms of one device-to-device copy of x (read once, written once), timed as the cases are."""
        if self.device_name != "cuda":
            return None
        out = self.torch.empty_like(x)
        return self.timer(lambda: out.copy_(x))

    def _random(self, shape: tuple, dtype: str, normal: bool = True):
        """Standard normal (``normal``) or uniform [0.5, 1.5) values, drawn on the device in float32
        from the side's one generator, then cast to ``dtype``."""
        torch = self.torch
        if self._generator is None:
            self._generator = torch.Generator(device=self.device_name).manual_seed(0)
        draw = torch.randn if normal else torch.rand
        a = draw(shape, device=self.device_name, generator=self._generator)
        return (a if normal else a.add_(0.5)).to(getattr(torch, dtype))

    def inputs(self, shape: tuple, dtype: str):
        x = self._random(shape, "float32").mul_(2).to(getattr(self.torch, dtype))
        return x, self._random(shape, dtype), self._random(shape[-1:], dtype, normal=False)

    def gradient_inputs(self, shape: tuple, dtype: str):
        """x (times 2) and w as :meth:`inputs` makes them, needing a gradient, and the fixed
        gradient g of the result (standard normal)."""
        x = self._random(shape, "float32").mul_(2).to(getattr(self.torch, dtype)).requires_grad_()
        w = self._random(shape[-1:], dtype, normal=False).requires_grad_()
        return x, w, self._random(shape, dtype)

    def autograd(self) -> "_GpuSide":
        """The forward + backward cases' side: this one (it is on torch tensors already)."""
        return self

    def _liger_functional(self):
        """liger_kernel.transformers.functional, or the reason it cannot be had."""
        if self._liger is None:
            try:
                import liger_kernel.transformers.functional as functional
                self._liger = functional
            except Exception as e:  # not installed, or its Triton does not load
                self._liger = f"liger_kernel not importable: {reason(e)}"
        return self._liger

    def peers(self, workload: Workload, args: tuple):
        torch = self.torch
        fns = {"torch": functools.partial(workload.torch_peer, *args)}
        if workload.torch_rms_norm is not None:
            fns["torch rms_norm"] = functools.partial(workload.torch_rms_norm, *args)
        if self.gpu_only:
            return fns, {"torch.compile": self.gpu_only, "liger": self.gpu_only}
        torch.compiler.reset()  # each case compiles afresh: no recompile limit, no other shape's code
        fns["torch.compile"] = functools.partial(torch.compile(workload.torch_peer, dynamic=False), *args)
        missing = {}
        liger = self._liger_functional()
        if workload.liger is None:
            missing["liger"] = f"Liger has no {workload.name} op"
        elif isinstance(liger, str):
            missing["liger"] = liger
        else:
            fns["liger"] = functools.partial(workload.liger, liger, *args)
        return fns, missing

    def device(self, result):
        """The result as a torch tensor (from DLPack where the call gave another library's array)."""
        return result if self.torch.is_tensor(result) else self.torch.from_dlpack(result)

    @staticmethod
    def float64(a):
        return a.detach().double()

    def host(self, a) -> np.ndarray:
        a = a.detach().contiguous().cpu()
        if a.dtype == self.torch.bfloat16:  # NumPy has no bfloat16 of its own: the same bits as ml_dtypes'
            return a.view(self.torch.int16).numpy().view(numpy_dtype("bfloat16"))
        return a.numpy()


def side_for(lib):
    """What the tile-program cases run on beside ``lib`` (a GpuLibrary or NumpyLibrary): its
    inputs, peers, timers and shapes."""
    return _GpuSide(lib) if lib.backend == "cuda" else _CpuSide(lib)
