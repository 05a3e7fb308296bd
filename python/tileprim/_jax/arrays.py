"""JAX arrays: a GPU array is used in place (awaited first: JAX has no streams) and its result
handed back through DLPack once the kernel is done; a CPU array is read by NumPy and its result
handed back as a JAX array (``host``); a tracer (inside
``jax.jit``, ``vmap``...) takes the host callback (``jit``). Registered in the routing table at
``import tileprim``; JAX itself loads with the caller's first array."""
from __future__ import annotations

import sys

import numpy as np

import tileprim._C as _C
from .._arrays.adapters import Adapter
from .._arrays.routing import UNROUTED, ArrayLibrary, register as register_library
from .._calls.prepared import OPERAND_KEYS
from .host import JaxHostCall, is_host_array
from .jit import JaxCallback, traced_program

__all__ = ["register"]


class JaxAdapter(Adapter):
    library = "jax"

    def key(self, x):  # the platform too: a CPU array's device 0 is not the GPU's
        (dev,) = x.devices()
        return (x.dtype, x.shape, dev.platform, dev.id)

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

    def is_host_array(self, x):
        return is_host_array(x)

    def on_host(self, values, prepare):
        for x in values:  # later calls' arrays keyed as a device array's are (platform included)
            if is_host_array(x):
                OPERAND_KEYS[type(x)] = self.adapter.dense_key
        return JaxHostCall(prepare([np.asarray(x) if is_host_array(x) else x for x in values]))

    def route_call(self, values, out, call, prepare):
        tracer = sys.modules["jax"].core.Tracer  # loaded: one of values is its array
        if not any(isinstance(x, tracer) for x in values):
            return None
        options = call["options"]
        if call["keepdims"]:  # the eager call inside the callback takes keepdims as a keyword
            options = {**options, "config": {**options["config"], "keepdims": True}}
        return JaxCallback(call["op"], call["axes"], call["accum"], options), False

    def route_program(self, program, args, out, batch_dims, scope, backend, target, fastmath):
        jax = sys.modules.get("jax")  # asked on every program call: JAX may never have loaded
        if jax is None or not any(isinstance(x, jax.core.Tracer) for x in args):
            return UNROUTED
        return traced_program(program, args, out, dict(batch_dims=batch_dims, scope=scope, backend=backend,
                                                       target=target, fastmath=fastmath))

    def refuse_plan(self, what, values):
        jax = sys.modules["jax"]  # loaded: one of values is its array
        if any(isinstance(x, jax.core.Tracer) for x in values):
            raise TypeError(f"{what}: tp.plan needs concrete arrays, not JAX tracers; call it outside jax.jit")

    def stop_gradient(self, x):
        return sys.modules["jax"].lax.stop_gradient(x)  # loaded: x is its array

    def flat_tiles(self, x, tile):
        return x.reshape(-1, tile)  # a JAX array has no strides: any reshape is its elements in order


def register() -> None:
    register_library(("jax", "jaxlib"), _Jax())
