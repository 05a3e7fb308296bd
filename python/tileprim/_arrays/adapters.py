"""Device arrays from PyTorch, CuPy, JAX or anything with ``__cuda_array_interface__``: one
adapter per library gives an array's signature, pointer, device and the library's current
stream, and allocates results in the caller's own library. Here: what every adapter is
(``Adapter``), the ``__cuda_array_interface__`` one, and the keys a call signature takes of an
array; each library's own adapter lives with it (``_torch.arrays``, ``_jax.arrays``,
``_arrays.cupy``) and answers through the routing table (``routing``).

Inputs are used in place (zero copy) when C-contiguous; the kernel runs on the library's
current stream (PyTorch, CuPy, the interface's ``stream``), so it is ordered after the work that
produced the inputs. JAX has no streams: its inputs are awaited and its result is handed over
through DLPack once the kernel is done."""
from __future__ import annotations

import functools
from typing import Callable, Dict, List, Optional

import numpy as np

import tileprim._C as _C
from .dtypes import dtype_name, numpy_dtype
from .routing import library_of

__all__ = ["adapter_for", "Adapter", "OwnedArray", "c_strides", "Unkeyable", "remember_device_type",
           "placed_key", "PLACED_KEYS", "array_pointer"]


class Adapter:
    """How tileprim reads and makes one library's device arrays."""

    library = ""

    def key(self, x) -> tuple:
        """What a call signature needs of an array read where it lies: dtype, shape, strides, device."""
        raise NotImplementedError

    def placed_key(self, x) -> tuple:
        """key() after the array's type (PLACED_KEYS)."""
        return (type(x), self.key(x))

    def dense_key(self, x) -> tuple:
        """What a call signature needs of an array read through ``contiguous``: its dtype, shape and
        device, told apart from other libraries' keys (the strides decide nothing there). Called on
        every repeated call."""
        raise NotImplementedError

    # A method of the library's arrays whose true answer means the memory does not hold the values
    # the array reads as (a lazy view); "" where there are none. Such arrays are refused.
    lazy_view = ""

    def check_stored(self, x, arg: str) -> None:
        """Raises TypeError where `x` is a lazy view: its memory does not hold its values."""

    def check_written(self, x, arg: str) -> None:
        """Raises where the library refuses an in-place write of `x` (an out= array) now."""

    def runnable(self, x) -> bool:
        """Whether a kernel may run on `x` now, outside a call's own route (autotuning times a few):
        false for a library's stand-ins such as torch's fake tensors under torch.compile."""
        return True

    def dtype(self, x, arg: str, allowed=None) -> str:
        kw = {} if allowed is None else {"allowed": allowed}
        return dtype_name(x.dtype, arg, **kw)

    def shape(self, x) -> tuple:
        return tuple(x.shape)

    def device(self, x) -> int:
        raise NotImplementedError

    def strides(self, x) -> tuple:
        """Element strides (C order when the library keeps none)."""
        return c_strides(self.shape(x))

    def contiguous(self, x):
        """x itself when C-contiguous, else a C-contiguous copy made by its library."""
        raise NotImplementedError

    def pointer(self, x) -> int:
        raise NotImplementedError

    def stream(self, device: int) -> int:
        return 0

    def streams(self, devices: List[int]) -> List[int]:
        """The current stream of each of `devices`."""
        return [self.stream(d) for d in devices]

    def empty(self, template, shape, dtype: str):
        return OwnedArray(tuple(shape), dtype, self.device(template))

    def allocator(self, shape, dtype: str, device: int):
        """A maker of new results of a call signature (its shape, dtype and device are fixed)."""
        return functools.partial(OwnedArray, tuple(shape), dtype, device)

    def result_pointer(self, result) -> int:
        """The device pointer of what ``allocator`` made."""
        return result.buffer.ptr

    def stream_of(self, device: int):
        """A maker of ``device``'s current stream in this library."""
        return functools.partial(self.stream, device)

    def finish(self, result, device: int, stream: int):
        """The result as the caller's library returns it."""
        return result

    def broadcast(self, x, shape):
        raise TypeError(f"operands: broadcasting a {self.library} array is not supported; pass arrays of the "
                        "result's shape")


class _Interface(Adapter):
    """Anything with ``__cuda_array_interface__`` (v3)."""

    library = "cuda_array_interface"

    def key(self, x):
        cai = x.__cuda_array_interface__
        return (cai["typestr"], tuple(cai["shape"]), cai.get("strides"), self.device(x))

    def dense_key(self, x):
        # the strides stay: only C-contiguous interface arrays are taken
        return ("cuda_array_interface", *self.key(x))

    def dtype(self, x, arg, allowed=None):
        kw = {} if allowed is None else {"allowed": allowed}
        return dtype_name(np.dtype(x.__cuda_array_interface__["typestr"]), arg, **kw)

    def shape(self, x):
        return tuple(x.__cuda_array_interface__["shape"])

    def device(self, x):
        ptr = self.pointer(x)
        return _C.cuda.pointer_device(ptr) if ptr else 0

    def strides(self, x):
        cai = x.__cuda_array_interface__
        itemsize = np.dtype(cai["typestr"]).itemsize
        return tuple(s // itemsize for s in cai["strides"]) if cai.get("strides") else c_strides(self.shape(x))

    def contiguous(self, x):
        cai = x.__cuda_array_interface__
        strides = cai.get("strides")
        if strides is not None and tuple(strides) != np.empty(tuple(cai["shape"]), np.dtype(cai["typestr"])).strides:
            raise ValueError("operands: only C-contiguous __cuda_array_interface__ arrays are taken; copy it first")
        return x

    def pointer(self, x):
        return x.__cuda_array_interface__["data"][0]

    def stream(self, device):
        return 0


def c_strides(shape) -> tuple:
    strides, step = [], 1
    for d in reversed(tuple(shape)):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


_INTERFACE = _Interface()


def adapter_for(x) -> Optional[Adapter]:
    """The adapter of a device array (its library's, from the routing table, else the
    ``__cuda_array_interface__`` one), or None for anything else (NumPy arrays, host tensors)."""
    library = library_of(x)
    if library is not None:
        return library.device_adapter(x)
    if not isinstance(x, np.ndarray) and hasattr(x, "__cuda_array_interface__"):
        return _INTERFACE
    return None


class Unkeyable(Exception):
    """An array the call memos cannot key (its type not yet seen on a GPU, a masked array, a
    list): the caller takes its checking path."""


_DEVICE_TYPES: Dict[type, Adapter] = {}  # array types seen on a GPU, by their adapter


def _numpy_placed_key(x) -> tuple:
    return (np.ndarray, x.dtype, x.shape, x.strides, x.flags.writeable)


# What a call signature needs of an array read or written where it lies, by the array's type:
# NumPy's dtype, shape, strides and writeable flag, or a device array's adapter key after its
# type (so no two libraries' keys meet). One lookup and one call: this runs for every array of
# every repeated call.
PLACED_KEYS: Dict[type, Callable] = {np.ndarray: _numpy_placed_key}


def remember_device_type(x, adapter: Adapter) -> None:
    """Arrays of x's type are keyed and read through `adapter` from now on."""
    _DEVICE_TYPES[type(x)] = adapter
    PLACED_KEYS[type(x)] = adapter.placed_key


def placed_key(x) -> tuple:
    """The signature key of an array read or written where it lies (PLACED_KEYS)."""
    keyer = PLACED_KEYS.get(type(x))
    if keyer is None:
        raise Unkeyable
    return keyer(x)


def array_pointer(x) -> int:
    """The address of a NumPy array (a subclass too, checked by the caller) or of a device array
    of a remembered type."""
    if type(x) is np.ndarray:
        return x.__array_interface__["data"][0]
    adapter = _DEVICE_TYPES.get(type(x))
    return adapter.pointer(x) if adapter is not None else np.asarray(x).__array_interface__["data"][0]


class OwnedArray:
    """Device memory tileprim allocated for a result (JAX and interface-only libraries); exports
    DLPack and ``__cuda_array_interface__`` so any library takes it without a copy."""

    def __init__(self, shape, dtype: str, device: int):
        self.shape, self.dtype_name, self.device = shape, dtype, device
        nbytes = int(np.prod(shape, dtype=np.int64)) * numpy_dtype(dtype).itemsize
        self.buffer = _C.cuda.DeviceBuffer(nbytes, device)

    @property
    def dtype(self):
        return numpy_dtype(self.dtype_name)

    def __dlpack__(self, stream=None, **_):
        return self.buffer.dlpack(list(self.shape), self.dtype_name)

    def __dlpack_device__(self):
        return (2, self.device)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": numpy_dtype(self.dtype_name).str, "data": (self.buffer.ptr, False),
                "version": 3, "strides": None}
