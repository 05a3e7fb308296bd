"""PyTorch CPU tensors: read through NumPy views of their memory (no copy when C-contiguous),
run on the host like NumPy arrays, and returned as torch tensors sharing the result's memory.
``out=`` is written in place through its NumPy view."""
from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

__all__ = ["is_host_tensor", "to_numpy", "TorchHostBound"]


def is_host_tensor(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor) and x.device.type == "cpu"


def to_numpy(x, contiguous: bool = True):
    """A NumPy view of a CPU tensor (bfloat16 through ml_dtypes); NumPy arrays and scalars as they are."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor):
        return x
    if x.is_neg():
        raise TypeError("operands: a torch tensor's negative bit is set (a lazy view such as z.conj().imag); "
                        "pass x.resolve_neg()")
    x = x.detach()
    if contiguous:
        x = x.contiguous()
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.numpy()


def _to_torch(result: np.ndarray):
    import torch
    if result.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(result.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(result)


class TorchHostBound:
    """A host call signature bound on NumPy views (``inner``), taking and returning torch CPU tensors."""

    def __init__(self, inner):
        self.inner, self.plan = inner, inner.plan

    def run(self, values, out):
        inputs = [to_numpy(x) for x in values]
        if out is not None:
            self.inner.run(inputs, to_numpy(out, contiguous=False))
            return out
        return _to_torch(self.inner.run(inputs, None))
