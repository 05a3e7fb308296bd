"""The checks of a treduce call's arrays in one process, made on the first call of its
signature before anything is written, and its binding to the C++ core's plan."""
from __future__ import annotations

import numpy as np

import tileprim._C as _C
from ..._arrays.adapters import adapter_for, remember_device_type
from ..._arrays.dtypes import numpy_dtype
from ..._calls.plan import Plan
from ..._platform.backends import resolve_backend
from .._options import TreduceOptions
from .bound_treduce import BoundTreduce
from .core_plan import prepare
from .dst_overlap import raise_dst_overlap
from .rank_tensor import RankTensor

__all__ = ["check_and_bind"]


def check_and_bind(tensors: list, dst, options: TreduceOptions) -> BoundTreduce:
    """The call of every rank's array (tensors[r]) into dst (allocated when None), checked and
    bound. Across processes (options.transport) the tensors stand for the ranks' layout only:
    the root's is the only one here."""
    adapters = [adapter_for(x) for x in tensors]
    if len({a is None for a in adapters}) > 1 or len({type(a) for a in adapters if a is not None}) > 1:
        raise TypeError("tensors: the ranks mix NumPy and device arrays (or libraries); use one kind")
    ranks = [RankTensor(x, f"tensors[{r}]", a) for r, (x, a) in enumerate(zip(tensors, adapters))]
    root = ranks[options.root]
    on_device = root.adapter is not None
    if dst is None:
        dst = (root.adapter.empty(tensors[options.root], root.shape, root.dtype) if on_device
               else np.empty(root.shape, numpy_dtype(root.dtype)))
    dst_adapter = adapter_for(dst)
    if on_device and dst_adapter is not root.adapter:
        raise TypeError(f"dst: expected a {root.adapter.library} device array like the ranks' tensors, "
                        f"not {type(dst).__name__}")
    if not on_device and dst_adapter is not None:
        raise TypeError(f"dst: expected a NumPy array for NumPy ranks, not {type(dst).__name__}")
    if not on_device and not isinstance(dst, np.ndarray):
        raise TypeError(f"dst: expected a NumPy array, not {type(dst).__name__}")
    if not on_device and not dst.flags.writeable:
        raise ValueError("dst: the array is read-only")
    placed_dst = RankTensor(dst, "dst", dst_adapter)  # its dtype is checked against the ranks' in C++
    refs, dst_ref = [t.tile_ref() for t in ranks], placed_dst.tile_ref()
    pointers = [t.pointer if r == options.root or not options.transport else 0 for r, t in enumerate(ranks)]
    raise_dst_overlap(_C.treduce_dst_overlaps(refs, dst_ref, pointers, placed_dst.pointer, options.root),
                      options.root, [t.obj for t in ranks], dst)
    backend = options.backend
    if backend is None and not on_device:  # NumPy ranks meet in host memory: the CPU backend's transport
        backend = "cpu"
    backend = resolve_backend(backend, device_operands=on_device)
    if on_device:
        remember_device_type(tensors[0], root.adapter)
    devices = [t.device for t in ranks] if backend == "cuda" else []
    core = prepare(refs, dst_ref, backend, devices, options)
    return BoundTreduce(core, Plan(core.plan, ranks[0].shape, bound=core), ranks, placed_dst, options.root)
