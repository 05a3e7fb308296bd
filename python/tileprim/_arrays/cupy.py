"""CuPy arrays: always on a GPU, used in place, ordered on CuPy's current stream of their device;
results are made by CuPy. Registered in the routing table at ``import tileprim`` (CuPy itself
loads with its first array)."""
from __future__ import annotations

import functools

from .adapters import Adapter
from .dtypes import numpy_dtype
from .routing import ArrayLibrary, register as register_library

__all__ = ["register"]


class CupyAdapter(Adapter):
    library = "cupy"

    def __init__(self):
        import cupy
        self._cupy = cupy

    def key(self, x):
        return (x.dtype, x.shape, x.strides, x.device.id)

    def dense_key(self, x):
        return ("cupy", x.dtype, x.shape, x.device.id)

    def device(self, x):
        return x.device.id

    def strides(self, x):
        return tuple(s // x.itemsize for s in x.strides)

    def contiguous(self, x):
        return x if x.flags.c_contiguous else self._cupy.ascontiguousarray(x)

    def pointer(self, x):
        return x.data.ptr

    def stream(self, device):
        with self._cupy.cuda.Device(device):  # CuPy keeps a current stream per device
            return self._cupy.cuda.get_current_stream().ptr

    def empty(self, template, shape, dtype):
        return self._empty_on(template.device.id, tuple(shape), dtype)

    def allocator(self, shape, dtype, device):
        return functools.partial(self._empty_on, device, tuple(shape), dtype)

    def result_pointer(self, result):
        return result.data.ptr

    def _empty_on(self, device, shape, dtype):
        with self._cupy.cuda.Device(device):
            return self._cupy.empty(shape, dtype=numpy_dtype(dtype))

    def broadcast(self, x, shape):
        return self._cupy.ascontiguousarray(self._cupy.broadcast_to(x, tuple(shape)))


class _Cupy(ArrayLibrary):
    def __init__(self):
        self.adapter = None  # made at the first CuPy array (it imports cupy)

    def device_adapter(self, x):
        if self.adapter is None:
            self.adapter = CupyAdapter()
        return self.adapter

    def flat_tiles(self, x, tile):
        return x.reshape(-1, tile) if x.flags.c_contiguous else None


def register() -> None:
    register_library(("cupy",), _Cupy())
