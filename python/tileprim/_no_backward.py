"""The refusal of a call that has no backward where an input needs a gradient (the gradient
would be dropped): a bottom module, so that what refuses (treduce; a custom op registered
without a backward) imports nothing above it."""
from __future__ import annotations

import sys

__all__ = ["refuse_autograd", "no_backward"]


def refuse_autograd(what: str, values) -> None:
    """TypeError where a torch tensor needs a gradient that ``what`` has no backward for."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.is_grad_enabled() and any(
            isinstance(x, torch.Tensor) and x.requires_grad for x in values):
        raise no_backward(what)


def no_backward(what: str) -> TypeError:
    return TypeError(f"{what}: has no backward, and an input requires grad (its gradient would be dropped); "
                     f"pass x.detach() or call it under torch.no_grad()")
