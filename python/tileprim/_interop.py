"""Device arrays from PyTorch, CuPy, JAX or anything with ``__cuda_array_interface__``: their
pointer, dtype, device and stream; and results allocated in the caller's own library.

Inputs are used in place (zero copy) when C-contiguous; the kernel runs on the library's
current stream (PyTorch, CuPy, the interface's ``stream``), so it is ordered after the work that
produced the inputs. JAX has no streams: its inputs are awaited and its result is handed over
through DLPack once the kernel is done."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from . import _C
from ._arrays import dtype_name, numpy_dtype

__all__ = ["DeviceArray", "device_array", "is_device_array"]


def _library(x) -> str:
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        return "torch"
    if mod == "cupy":
        return "cupy"
    if mod in ("jax", "jaxlib"):
        return "jax"
    return "cuda_array_interface"


def is_device_array(x) -> bool:
    if isinstance(x, np.ndarray):
        return False
    lib = _library(x)
    if lib == "torch":
        return bool(getattr(x, "is_cuda", False))
    if lib == "jax":
        return any(d.platform == "gpu" for d in x.devices())
    return hasattr(x, "__cuda_array_interface__")


@dataclass
class DeviceArray:
    obj: object                 # the library's array (made C-contiguous)
    library: str
    ptr: int
    shape: Tuple[int, ...]
    dtype: str
    device: int
    stream: int                 # the stream the kernel must run on (0: legacy default)

    # ---- shape changes, done by the array's own library ---------------------------------------
    def broadcast_to(self, shape) -> "DeviceArray":
        if tuple(shape) == self.shape:
            return self
        if self.library == "torch":
            return device_array(self.obj.broadcast_to(shape).contiguous(), "operand")
        if self.library == "cupy":
            import cupy
            return device_array(cupy.ascontiguousarray(cupy.broadcast_to(self.obj, shape)), "operand")
        if self.library == "jax":
            import jax.numpy as jnp
            return device_array(jnp.broadcast_to(self.obj, shape), "operand")
        raise TypeError("operands: broadcasting a __cuda_array_interface__ array needs PyTorch, CuPy or JAX; "
                        "pass arrays of the result's shape")

    def empty(self, shape, dtype: str):
        """A new array of ``shape`` and ``dtype`` on the same device, in the same library."""
        if self.library == "torch":
            import torch
            return self.obj.new_empty(tuple(shape), dtype=getattr(torch, dtype))
        if self.library == "cupy":
            import cupy
            with cupy.cuda.Device(self.device):
                return cupy.empty(tuple(shape), dtype=numpy_dtype(dtype))
        return _OwnedArray(tuple(shape), dtype, self.device)

    def finish(self, result):
        """The result as the caller's library returns it (JAX: after the kernel, via DLPack)."""
        if self.library != "jax":
            return result
        import jax.dlpack
        _C.cuda.synchronize(self.stream, self.device)
        return jax.dlpack.from_dlpack(result)


class _OwnedArray:
    """Device memory tileprim allocated for a result (JAX and interface-only libraries); exports
    DLPack and ``__cuda_array_interface__`` so any library takes it without a copy."""

    def __init__(self, shape, dtype: str, device: int):
        self.shape, self.dtype_name, self.device = shape, dtype, device
        nbytes = int(np.prod(shape, dtype=np.int64)) * numpy_dtype(dtype).itemsize
        self.buffer = _C.cuda.DeviceBuffer(nbytes, device)

    @property
    def ptr(self) -> int:
        return self.buffer.ptr

    def __dlpack__(self, stream=None, **_):
        return self.buffer.dlpack(list(self.shape), self.dtype_name)

    def __dlpack_device__(self):
        return (2, self.device)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": numpy_dtype(self.dtype_name).str, "data": (self.ptr, False),
                "version": 3, "strides": None}


def _torch_view(x, arg) -> DeviceArray:
    import torch
    if not x.is_contiguous():
        x = x.contiguous()
    name = str(x.dtype).replace("torch.", "")
    dtype_name(name, arg)
    dev = x.device.index if x.device.index is not None else torch.cuda.current_device()
    stream = torch.cuda.current_stream(dev).cuda_stream
    return DeviceArray(x, "torch", x.data_ptr(), tuple(x.shape), name, dev, stream)


def _cupy_view(x, arg) -> DeviceArray:
    import cupy
    if not x.flags.c_contiguous:
        x = cupy.ascontiguousarray(x)
    return DeviceArray(x, "cupy", x.data.ptr, tuple(x.shape), dtype_name(x.dtype, arg), x.device.id,
                       cupy.cuda.get_current_stream().ptr)


def _jax_view(x, arg) -> DeviceArray:
    x.block_until_ready()
    (dev,) = x.devices()
    ptr = x.unsafe_buffer_pointer()
    return DeviceArray(x, "jax", ptr, tuple(x.shape), dtype_name(x.dtype, arg), dev.id, 0)


def _interface_view(x, arg) -> DeviceArray:
    cai = x.__cuda_array_interface__
    shape = tuple(cai["shape"])
    dtype = dtype_name(np.dtype(cai["typestr"]), arg)
    strides = cai.get("strides")
    if strides is not None and tuple(strides) != tuple(np.empty(shape, numpy_dtype(dtype)).strides):
        raise ValueError(f"{arg}: only C-contiguous __cuda_array_interface__ arrays are taken; copy it first")
    ptr = cai["data"][0]
    device = _C.cuda.pointer_device(ptr) if ptr else 0
    return DeviceArray(x, "cuda_array_interface", ptr, shape, dtype, device, int(cai.get("stream") or 0))


def device_array(x, arg: str) -> DeviceArray:
    lib = _library(x)
    view = {"torch": _torch_view, "cupy": _cupy_view, "jax": _jax_view}.get(lib, _interface_view)
    return view(x, arg)


def pointer_of(result) -> int:
    """The device pointer of an array made by DeviceArray.empty."""
    if isinstance(result, _OwnedArray):
        return result.ptr
    mod = type(result).__module__.split(".")[0]
    if mod == "torch":
        return result.data_ptr()
    if mod == "cupy":
        return result.data.ptr
    return result.__cuda_array_interface__["data"][0]


def check_device_out(out, template: DeviceArray, shape, dtype: str) -> Optional[DeviceArray]:
    """out= for device operands: the same library and device, the result's shape and dtype,
    C-contiguous (the kernel writes into it)."""
    if out is None:
        return None
    if template.library == "jax":
        raise TypeError("out: JAX arrays are immutable; use the returned array")
    if not is_device_array(out) or _library(out) != template.library:
        raise TypeError(f"out: expected a {template.library} device array like the operands, not {type(out).__name__}")
    view = device_array(out, "out")
    if view.obj is not out:
        raise ValueError("out: must be C-contiguous; the kernel writes into it")
    if view.dtype != dtype:
        raise TypeError(f"out: dtype {view.dtype} differs from the result's {dtype}")
    if view.shape != tuple(shape) and view.shape != tuple(shape) + (1,):
        raise ValueError(f"out: shape {view.shape} differs from the result's {tuple(shape)}")
    if view.device != template.device:
        raise ValueError(f"out: is on device {view.device}, the operands on device {template.device}")
    return view
