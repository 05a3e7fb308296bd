"""torch's entry in the routing table, registered once torch loads (with ``torch.ops.tileprim.*``):
CUDA tensors through their adapter (``arrays``), CPU tensors through NumPy views (``host``),
standalone calls that need autograd or meet fake/functional tensors through the custom ops
(``ops``), tile programs under ``torch.compile`` or autograd through their program op
(``program_op``)."""
from __future__ import annotations

import sys

from .._arrays.routing import UNROUTED, ArrayLibrary, register as register_library
from .after_load import after_load
from .arrays import torch_adapter
from .func import transforms_active
from .host import is_host_tensor, on_host_tensors, to_numpy, to_torch
from .ops import Routed, refuse_autograd, register as register_ops, routing
from .program_op import call_program_op

__all__ = ["register"]


class _Torch(ArrayLibrary):
    def device_adapter(self, x):
        return torch_adapter() if getattr(x, "is_cuda", False) else None

    def is_host_array(self, x):
        return is_host_tensor(x)

    def on_host(self, values, prepare):
        return on_host_tensors(values, prepare)

    def host_views(self, values):
        return [to_numpy(x, contiguous=False) for x in values]  # strides kept: the call reads them

    def from_host_view(self, result):
        return to_torch(result)

    def route_call(self, values, out, call, prepare):
        always = routing(values, out)  # tensors that need autograd, or fake/functional ones
        if always is None:
            return None
        # a subclass's call is never kept: its key would meet the plain tensor's
        return Routed(always, call["op"], call["axes"], call["accum"], call["options"], prepare,
                      call["keepdims"]), not always

    def route_program(self, program, args, out, batch_dims, scope, backend, target, fastmath):
        torch = sys.modules["torch"]  # loaded: this entry registers as torch loads
        if torch.compiler.is_compiling():
            return call_program_op(program, args, batch_dims, scope, backend, target, out, fastmath)
        always = routing(args, out)  # tensors that need a gradient, or fake/functional ones
        if always is not None and transforms_active():  # under torch.func: the op's setup_context-style Function
            return call_program_op(program, args, batch_dims, scope, backend, target, out, fastmath, eager=True)
        if always:
            return call_program_op(program, args, batch_dims, scope, backend, target, out, fastmath)
        if always is False and torch.is_grad_enabled():  # plain tensors under autograd
            return call_program_op(program, args, batch_dims, scope, backend, target, out, fastmath, eager=True)
        return UNROUTED

    def refuse_gradient(self, what, values):
        refuse_autograd(what, values)

    def stop_gradient(self, x):
        return x.detach()

    def keeps_shapes(self, x):
        return sys.modules["torch"].compiler.is_compiling() or transforms_active()

    def flat_tiles(self, x, tile):
        return x.reshape(-1, tile) if x.is_contiguous() else None


def _on_load() -> None:
    register_library(("torch",), _Torch())
    register_ops()


def register() -> None:
    """torch's routes and custom ops, now where torch is loaded, else right after it loads."""
    after_load("torch", _on_load)
