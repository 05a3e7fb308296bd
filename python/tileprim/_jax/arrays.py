"""JAX arrays: a GPU array is used in place (awaited first: JAX has no streams) and its result
handed back through DLPack once the kernel is done; a CPU array is read by NumPy; a tracer (inside
``jax.jit``, ``vmap``...) takes the host callback (``jit``). Registered in the routing table at
``import tileprim``; JAX itself loads with the caller's first array."""
from __future__ import annotations

import sys

import tileprim._C as _C
from .._arrays.adapters import Adapter
from .._arrays.routing import ArrayLibrary, register as register_library
from .jit import JaxCallback

__all__ = ["register"]


class JaxAdapter(Adapter):
    library = "jax"

    def key(self, x):
        return (x.dtype, x.shape, self.device(x))

    def dense_key(self, x):
        return ("jax", *self.key(x))

    def device(self, x):
        (dev,) = x.devices()
        return dev.id

    def contiguous(self, x):
        return x

    def pointer(self, x):
        x.block_until_ready()
        return x.unsafe_buffer_pointer()

    def finish(self, result, device, stream):
        import jax.dlpack
        _C.cuda.synchronize(stream, device)
        return jax.dlpack.from_dlpack(result)

    def broadcast(self, x, shape):
        import jax.numpy as jnp
        return jnp.broadcast_to(x, tuple(shape))


class _Jax(ArrayLibrary):
    def __init__(self):
        self.adapter = JaxAdapter()

    def device_adapter(self, x):
        return self.adapter if any(d.platform == "gpu" for d in x.devices()) else None

    def route_call(self, values, out, call, prepare):
        tracer = sys.modules["jax"].core.Tracer  # loaded: one of values is its array
        if not any(isinstance(x, tracer) for x in values):
            return None
        options = call["options"]
        if call["keepdims"]:  # the eager call inside the callback takes keepdims as a keyword
            options = {**options, "config": {**options["config"], "keepdims": True}}
        return JaxCallback(call["op"], call["axes"], call["accum"], options), False

    def stop_gradient(self, x):
        return sys.modules["jax"].lax.stop_gradient(x)  # loaded: x is its array


def register() -> None:
    register_library(("jax", "jaxlib"), _Jax())
