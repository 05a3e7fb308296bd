"""Backends: which one serves a call, which architecture it models, and running a plan there.

The CUDA backend loads the driver (libcuda.so.1) and NVRTC on first use, never at import; when
either is missing, tp.info() says which, where it looked and why, and calls run on the CPU."""
from __future__ import annotations

import functools
import math
import site
import sys
from typing import Dict, Tuple

import numpy as np

from . import _C
from ._arrays import numpy_dtype

__all__ = ["resolve_backend", "default_target", "run_plan", "BACKENDS", "cuda_status", "cuda_details"]

BACKENDS = ("cpu", "cuda")


def _site_dirs():
    dirs = list(getattr(site, "getsitepackages", lambda: [])())
    user = getattr(site, "getusersitepackages", lambda: None)()
    return dirs + ([user] if user else []) + [p for p in sys.path if p.endswith("site-packages")]


@functools.lru_cache(maxsize=None)
def cuda_details() -> Dict[str, object]:
    """Loads NVRTC and the driver once; what loaded, from where, and the devices."""
    from importlib import resources
    from . import __version__
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
    cc = cuda_details()["devices"][device]["cc"]
    return f"sm_{cc}{'a' if cc in (90, 100, 103) else ''}"


def default_target(backend: str) -> str:
    """The architecture dispatch models when target= is not given: the GPU's, none on the CPU."""
    return device_arch(0) if backend == "cuda" else ""


def run_plan(prep, out, accum: bool):
    """Runs a prepared call; returns the result (out itself when given)."""
    if prep.backend == "cpu":
        return _run_cpu(prep, out, accum)
    if any(o.kind == "device" for o in prep.operands):
        return _run_cuda_device(prep, out, accum)
    return _run_cuda_numpy(prep, out, accum)


def _shape_of(prep):
    tiles = math.prod(prep.batch_shape)
    out_tile = math.prod(prep.plan._core.call.output.shape)
    return tiles, out_tile


def _run_cpu(prep, out, accum):
    tiles, out_tile = _shape_of(prep)
    out_dtype = numpy_dtype(prep.out_dtype)
    buffer = np.full((tiles, out_tile), np.nan, dtype=out_dtype)  # poison: unwritten slots show
    if accum:
        buffer[...] = np.asarray(out, dtype=out_dtype).reshape(tiles, out_tile)
    inputs = [None if o.scalar else np.ascontiguousarray(o.array).reshape(tiles, -1) for o in prep.operands]
    if tiles:
        _C.run_cpu(prep.plan._core, inputs, buffer, tiles)
    return _deliver(buffer.reshape(prep.result_shape), out)


def _deliver(result: np.ndarray, out):
    if out is None:
        return result
    out[...] = result.reshape(out.shape)
    return out


def _launch(prep, pointers, output_ptr, device, stream):
    tiles, _ = _shape_of(prep)
    scalars = [o.value if o.scalar else 0.0 for o in prep.operands]
    _C.cuda.launch(prep.plan._core, pointers, scalars, output_ptr, tiles, device, stream)


def _run_cuda_numpy(prep, out, accum):
    """NumPy operands on the GPU: copied in, run, copied back (stream 0, synchronous)."""
    tiles, out_tile = _shape_of(prep)
    out_dtype = numpy_dtype(prep.out_dtype)
    device = 0
    keep = []
    pointers = []
    for o in prep.operands:
        if o.scalar:
            pointers.append(0)
            continue
        host = np.ascontiguousarray(o.array)
        buf = _C.cuda.DeviceBuffer(host.nbytes, device)
        buf.upload(host, 0)
        keep.append((buf, host))
        pointers.append(buf.ptr)
    result = np.empty((tiles, out_tile), dtype=out_dtype)
    dst = _C.cuda.DeviceBuffer(result.nbytes, device)
    if accum:
        old = np.ascontiguousarray(np.asarray(out, dtype=out_dtype).reshape(tiles, out_tile))
        dst.upload(old, 0)
        keep.append((dst, old))
    else:
        dst.fill_bytes(0xFF, 0)  # NaN: an element the kernel never writes shows
    _launch(prep, pointers, dst.ptr, device, 0)
    dst.download(result, 0)
    _C.cuda.synchronize(0, device)
    return _deliver(result.reshape(prep.result_shape), out)


def _run_cuda_device(prep, out, accum):
    """Device operands: no copies; the result in the operands' library, on their device."""
    from ._interop import check_device_out, pointer_of
    arrays = [o.array for o in prep.operands if not o.scalar]
    template = arrays[0]
    for a in arrays[1:]:
        if a.device != template.device:
            raise ValueError(f"operands: on devices {template.device} and {a.device}; move them to one device")
    view = check_device_out(out, template, prep.result_shape, prep.out_dtype)
    target = view.obj if view is not None else template.empty(prep.result_shape, prep.out_dtype)
    pointers = [0 if o.scalar else o.array.ptr for o in prep.operands]
    _launch(prep, pointers, pointer_of(target), template.device, template.stream)
    return out if out is not None else template.finish(target)
