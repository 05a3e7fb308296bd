"""torch.func's transforms over tileprim's ops: ``grad``, ``vjp``, ``jacrev``, ``vmap``, and forward
mode (``jvp``, ``jacfwd``, ``hessian``). A custom op's autograd (``torch.library.register_autograd``)
is an autograd.Function that torch.func refuses (its forward takes the context); where a transform
is active, an op's call runs instead through a Function of the ``setup_context`` style with the
op's own forward, backward and Jacobian-vector product, and with a vmap rule: each vmapped
operand's dim moved to the front, the op called with one more batch dim (an op's batch_dims are
each sample's). A tile program does the same but for forward mode (``program_op``)."""
from __future__ import annotations

import sys
from typing import Callable, Dict

__all__ = ["transforms_active", "unroutable", "transformable", "to_the_front"]

_FUNCTIONS: Dict[str, type] = {}


def transforms_active() -> bool:
    """Whether a torch.func transform is active (torch's private test; absent, assume one is)."""
    if not _ACTIVE:  # asked on calls of plain tensors: the test looked up once
        _ACTIVE.append(getattr(sys.modules["torch"]._C, "_are_functorch_transforms_active", lambda: True))
    return _ACTIVE[0]()


_ACTIVE: list = []


def unroutable(tensors) -> bool:
    """Whether no route takes a call of ``tensors``: plain tensors (their exact type: no fake,
    functional or parameter ones) outside grad mode and outside torch.func's transforms, as inside
    autograd's backward of a plain call."""
    torch = sys.modules["torch"]
    return not torch.is_grad_enabled() and all(type(t) is torch.Tensor for t in tensors) and not transforms_active()


def to_the_front(args, in_dims) -> list:
    """``args`` with each vmapped tensor's dim ``in_dims[i]`` moved to the front and, where a sample of it
    has fewer dims than another operand's, 1s after it: the samples' shapes broadcast as before (from
    the right), the vmapped dim outside them all."""
    torch = sys.modules["torch"]
    vmapped = [isinstance(a, torch.Tensor) and isinstance(d, int) for a, d in zip(args, in_dims)]
    rank = max(a.dim() - v for a, v in zip(args, vmapped) if isinstance(a, torch.Tensor))
    moved = []
    for a, d, v in zip(args, in_dims, vmapped):
        if v:
            a = a.movedim(d, 0)
            a = a.reshape(a.shape[:1] + (1,) * (rank + 1 - a.dim()) + a.shape[1:])
        moved.append(a)
    return moved


def transformable(name: str, impl: Callable, backward: Callable, setup: Callable, jvp: Callable,
                  batched: Callable) -> Callable:
    """op ``name``'s call as torch.func takes it (made once an op): ``impl`` its forward, ``backward`` and
    ``setup`` as ``register_autograd`` takes them, ``jvp`` forward mode's product, ``batched(args,
    in_dims)`` the arguments of the call over a vmapped batch (its result's vmapped dim the first)."""
    call = _FUNCTIONS.get(name)
    if call is None:
        torch = sys.modules["torch"]

        class Transformable(torch.autograd.Function):
            @staticmethod
            def forward(*args):
                return impl(*args)

            @staticmethod
            def setup_context(ctx, inputs, output):
                setup(ctx, inputs, output)

            @staticmethod
            def backward(ctx, *grads):
                return backward(ctx, *grads)

            @staticmethod
            def jvp(ctx, *tangents):
                return jvp(ctx, *tangents)

            @staticmethod
            def vmap(info, in_dims, *args):
                return Transformable.apply(*batched(args, in_dims)), 0

        Transformable.__name__ = Transformable.__qualname__ = f"tileprim_{name}"
        call = _FUNCTIONS[name] = Transformable
    return call.apply
