"""Backends: which one serves a call and which architecture it models.

The CUDA backend loads the driver (libcuda.so.1) and NVRTC on first use, never at import; when
either is missing, tp.info() says which, where it looked and why, and calls run on the CPU."""
from __future__ import annotations

import functools
import site
import sys
from typing import Dict, Tuple

import tileprim._C as _C
from .._version import __version__

__all__ = ["resolve_backend", "default_target", "device_arch", "BACKENDS", "cuda_status", "cuda_details",
           "nccl_status"]

BACKENDS = ("cpu", "cuda")


def _site_dirs():
    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    user = getattr(site, "getusersitepackages", lambda: None)()
    return dirs + ([user] if user else []) + [p for p in sys.path if p.endswith("site-packages")]


@functools.lru_cache(maxsize=None)
def cuda_details() -> Dict[str, object]:
    """Loads NVRTC and the driver once; what loaded, from where, and the devices."""
    from importlib import resources
    cuda = _C.cuda
    cuda.configure(__version__, str(resources.files("tileprim") / "include"), _site_dirs())
    details: Dict[str, object] = {"nvrtc": dict(cuda.nvrtc_status()), "driver": dict(cuda.driver_status()),
                                  "devices": []}
    if details["driver"]["ok"]:
        try:
            details["devices"] = [dict(cuda.device_info(i)) for i in range(cuda.device_count())]
        except RuntimeError as e:
            details["driver"] = {**details["driver"], "ok": False, "error": str(e)}
    return details


def nccl_status() -> Dict[str, object]:
    """Loads NCCL (the NCCL transport's library) on the first call; what loaded, or why not."""
    status = dict(_C.nccl.load(_site_dirs()))
    v = status.pop("version")
    status["version"] = f"{v // 10000}.{v // 100 % 100}.{v % 100}" if status["ok"] else ""
    return status


def cuda_status() -> Tuple[bool, str]:
    """(usable, reason): whether the CUDA backend can run kernels here."""
    d = cuda_details()
    if not d["nvrtc"]["ok"]:
        return False, d["nvrtc"]["error"]
    if not d["driver"]["ok"]:
        return False, d["driver"]["error"]
    if not d["devices"]:
        return False, "the CUDA driver loaded but reports no device"
    return True, ""


def resolve_backend(backend, device_operands: bool = False) -> str:
    if backend is None:
        if device_operands:
            return "cuda"
        return "cuda" if cuda_status()[0] else "cpu"
    if backend not in BACKENDS:
        raise ValueError(f"backend: {backend!r} is not 'cpu' or 'cuda'")
    if backend == "cpu" and device_operands:
        raise ValueError("backend: 'cpu' cannot read device arrays; pass NumPy arrays or use backend='cuda'")
    if backend == "cuda":
        usable, reason = cuda_status()
        if not usable:
            raise ValueError(f"backend: 'cuda' is not usable here: {reason}")
    return backend


def device_arch(device: int = 0) -> str:
    """The architecture string dispatch models for a device: sm_90a on an H100."""
    return _C.sm_target(cuda_details()["devices"][device]["cc"])


def default_target(backend: str, device: int = 0) -> str:
    """The architecture dispatch models when target= is not given: the GPU's, none on the CPU."""
    return device_arch(device) if backend == "cuda" else ""
