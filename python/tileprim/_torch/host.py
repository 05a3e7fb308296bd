"""PyTorch CPU tensors: read through NumPy views of their memory (no copy when C-contiguous),
run on the host like NumPy arrays, and returned as torch tensors sharing the result's memory.
``out=`` is written in place through its NumPy view."""
from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

from .._arrays.adapters import PLACED_KEYS
from .._calls.prepared import OPERAND_KEYS
from .arrays import refuse_unusual, refuse_unwritable, torch_adapter

__all__ = ["is_host_tensor", "to_numpy", "to_torch", "TorchHostCall", "on_host_tensors"]


def is_host_tensor(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor) and x.device.type == "cpu"


def to_numpy(x, contiguous: bool = True):
    """A NumPy view of a CPU tensor (bfloat16 through ml_dtypes); NumPy arrays and scalars as they are."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor):
        return x
    refuse_unusual(x, "operands")
    if x.is_neg():
        raise TypeError("operands: a torch tensor's negative bit is set (a lazy view such as z.conj().imag); "
                        "pass x.resolve_neg()")
    x = x.detach()
    if contiguous:
        x = x.contiguous()
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.numpy()


def to_torch(result: np.ndarray):
    """A CPU tensor sharing the NumPy result's memory (bfloat16 through its int16 bits)."""
    import torch
    if result.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(result.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(result)


def _same(x):
    return x


def on_host_tensors(values, prepare) -> "TorchHostCall":
    """The call on these values, some of them torch CPU tensors, prepared (``prepare(views)``) on
    NumPy views of them; later calls' tensors are keyed as torch keys them."""
    torch_keys = torch_adapter()
    for x in values:
        if is_host_tensor(x):
            OPERAND_KEYS[type(x)], PLACED_KEYS[type(x)] = torch_keys.dense_key, torch_keys.placed_key
    return TorchHostCall(prepare([to_numpy(x) for x in values]), values)


class TorchHostCall:
    """A host call prepared on NumPy views (``inner``), taking and returning torch CPU tensors
    (a tuple of them for a program returning several). Which operands are tensors, their dtypes
    and negative bits are in the call's key: a run only takes the views."""

    def __init__(self, inner, values):
        import torch
        self.inner, self.plan = inner, inner.plan
        bf16 = torch.bfloat16

        def view(x):
            x = (x.detach() if x.requires_grad else x).contiguous()
            return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16) if x.dtype is bf16 else x.numpy()
        self.views = [view if isinstance(x, torch.Tensor) else _same for x in values]

    def run(self, values, out):
        inputs = [v(x) for v, x in zip(self.views, values)]
        if out is not None:
            import torch
            for o in out if type(out) is tuple else (out,):
                if not isinstance(o, torch.Tensor):  # as NumPy operands refuse a tensor out=
                    raise TypeError(f"out: expected a torch CPU tensor for torch operands, not {type(o).__name__}")
                refuse_unwritable(o, "out")
            views = tuple(to_numpy(o, contiguous=False) for o in out) if type(out) is tuple else \
                to_numpy(out, contiguous=False)
            self.inner.run(inputs, views)
            return out
        result = self.inner.run(inputs, None)
        return tuple(map(to_torch, result)) if type(result) is tuple else to_torch(result)
