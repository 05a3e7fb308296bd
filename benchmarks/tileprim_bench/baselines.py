"""What tileprim is measured against, and on what inputs: NumPy arrays and NumPy's ops for the
CPU backend; PyTorch CUDA tensors with PyTorch's ops and, where CuPy is installed, CuPy's ops on
the same memory (zero-copy through ``__cuda_array_interface__``)."""
from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from typing import Callable, Dict, Optional

import numpy as np

from tileprim._arrays.dtypes import numpy_dtype

# NumPy and CuPy spell these the same; `xp` is the module
_ARRAY_REDUCTIONS = {"sum": lambda x: x.sum(-1), "max": lambda x: x.max(-1), "min": lambda x: x.min(-1)}
_ARRAY_MAPS = {"sqrt": lambda xp, a: xp.sqrt(a), "exp": lambda xp, a: xp.exp(a),
               "log2": lambda xp, a: xp.log2(a), "silu": lambda xp, a: a / (1 + xp.exp(-a)),
               "sigmoid": lambda xp, a: 1 / (1 + xp.exp(-a)), "add": lambda xp, a, b: a + b,
               "fma": lambda xp, a, b, c: a * b + c}
_TORCH_REDUCTIONS = {"sum": lambda x: x.sum(-1), "max": lambda x: x.amax(-1), "min": lambda x: x.amin(-1)}
_TORCH_MAPS = {"sqrt": lambda a: a.sqrt(), "exp": lambda a: a.exp(), "log2": lambda a: a.log2(),
               "silu": lambda a: _torch_functional().silu(a), "sigmoid": lambda a: a.sigmoid(),
               "add": lambda a, b: a + b,
               "fma": lambda a, b, c: c.addcmul(a, b)}


def _torch_functional():
    import torch.nn.functional as functional
    return functional


def _display_driver() -> Optional[str]:
    """The NVIDIA driver's version as nvidia-smi gives it (e.g. 580.159.04), or None without it."""
    try:
        proc = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.split()
    return lines[0] if proc.returncode == 0 and lines else None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class NumpyLibrary:
    """The CPU suite's side: NumPy arrays in, tileprim on ``backend="cpu"``, NumPy as the baseline."""

    backend = "cpu"
    tileprim_options = {"backend": "cpu"}  # NumPy operands would go to the GPU where there is one

    def __init__(self):
        self._rng = np.random.default_rng(0)

    def device(self) -> str:
        return f"{_cpu_model()} ({os.cpu_count()} logical cores)"

    def versions(self) -> Dict[str, str]:
        return {"numpy": np.__version__}

    def normal(self, shape: tuple, dtype: str = "float32"):
        return self._rng.standard_normal(shape, dtype=np.float32).astype(numpy_dtype(dtype))

    def positive(self, shape: tuple, dtype: str):
        return self._rng.uniform(0.5, 1.5, shape).astype(numpy_dtype(dtype))

    def reductions(self, op: str, x) -> Dict[str, Callable[[], object]]:
        return {"numpy": lambda: _ARRAY_REDUCTIONS[op](x)}

    def maps(self, op: str, dtype: str, arrays: tuple) -> Dict[str, Callable[[], object]]:
        return {"numpy": lambda: _ARRAY_MAPS[op](np, *arrays)}

    def free(self) -> None:
        """Nothing to hand back: NumPy frees an array when its last reference goes."""


class GpuLibrary:
    """The GPU suite's side: PyTorch CUDA tensors in (tileprim uses them in place), PyTorch and,
    where installed, CuPy as the baselines.

    Parameters
    ----------
    torch : module
    cupy : module or None
    """

    backend = "cuda"
    tileprim_options: Dict[str, str] = {}

    def __init__(self, torch, cupy=None):
        self.torch, self.cupy = torch, cupy

    def device(self) -> str:
        driver = _display_driver()
        name = self.torch.cuda.get_device_name()
        return f"{name} (driver {driver})" if driver else name

    def versions(self) -> Dict[str, str]:
        found = {"numpy": np.__version__, "torch": self.torch.__version__,
                 "cuda (torch's)": self.torch.version.cuda}
        if self.cupy is not None:
            found["cupy"] = self.cupy.__version__
        for name in ("triton", "liger_kernel"):  # the tile-program peers
            try:
                found[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                pass
        return found

    def normal(self, shape: tuple, dtype: str = "float32"):
        return self.torch.randn(shape, device="cuda", dtype=getattr(self.torch, dtype))

    def positive(self, shape: tuple, dtype: str):
        return self.torch.rand(shape, device="cuda", dtype=getattr(self.torch, dtype)).add_(0.5)

    def reductions(self, op: str, x) -> Dict[str, Callable[[], object]]:
        fns = {"torch": lambda: _TORCH_REDUCTIONS[op](x)}
        if self.cupy is not None:
            xc = self.cupy.asarray(x)
            fns["cupy"] = lambda: _ARRAY_REDUCTIONS[op](xc)
        return fns

    def maps(self, op: str, dtype: str, arrays: tuple) -> Dict[str, Callable[[], object]]:
        fns = {"torch": lambda: _TORCH_MAPS[op](*arrays)}
        if self.cupy is not None and dtype != "bfloat16":  # CuPy has no bfloat16
            views = [self.cupy.asarray(a) for a in arrays]
            fns["cupy"] = lambda: _ARRAY_MAPS[op](self.cupy, *views)
        return fns

    def free(self) -> None:
        """Hands the memory cached by PyTorch's and CuPy's allocators back to the GPU."""
        self.torch.cuda.empty_cache()
        if self.cupy is not None:
            self.cupy.get_default_memory_pool().free_all_blocks()
