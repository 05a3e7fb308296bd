"""RankPart: this rank's part of a treduce call across processes, checked: its tensor, the
call's options, and the signature every rank's call must share. A repeated call's part comes
from the memo (by the options, this rank's array signature and the job), its pointer read anew."""
from __future__ import annotations

from typing import Dict, Optional

from ..._arrays.adapters import PLACED_KEYS, adapter_for, array_pointer, remember_device_type
from .._options import TreduceOptions
from ..one_process.rank_tensor import RankTensor

__all__ = ["RankPart", "rank_part"]

# (options, this rank's array key, the job) -> its checked part; the job, not the communicator's
# id(): a later communicator may reuse a closed one's
_PARTS: Dict[tuple, "RankPart"] = {}
_PARTS_LIMIT = 1024


class RankPart:
    """This rank's part of the call, checked: its tensor, the options, and the signature all
    ranks must share."""

    def __init__(self, group, options: TreduceOptions):
        comm = group.comm
        adapter = adapter_for(group.tensor)
        if comm.backend == "cpu" and adapter is not None:
            raise TypeError("x: the cpu communicator reduces NumPy arrays; this is a device array "
                            "(use tp.comm.init(backend='cuda'))")
        if comm.backend == "cuda" and adapter is None:
            raise TypeError("x: the cuda communicator reduces device arrays; this is a NumPy array "
                            "(use tp.comm.init(backend='cpu'))")
        self.tensor = RankTensor(group.tensor, "x", adapter)
        if adapter is not None:
            remember_device_type(group.tensor, adapter)
        if adapter is not None and self.tensor.device != comm.device:
            raise ValueError(f"x: is on GPU {self.tensor.device}, but this rank's communicator uses GPU {comm.device}")
        self.options = options
        # the variant every rank's plan of this call names, where every rank runs its own part (its
        # transport decides, once: Transport.planned_variant); None until asked
        self.variant: Optional[str] = None
        strides = f" strides={self.tensor.strides}" if comm.transport == "cuda_ipc" else ""
        o = options
        self.signature = (f"treduce(op={o.op!r}, {self.tensor.dtype} {tuple(self.tensor.shape)}{strides}, "
                          f"root={o.root}, tile={o.tile}, pingpong={o.pingpong}, valid={o.valid!r}, "
                          f"accumulate={o.accumulate!r}, dispatch={o.dispatch!r})").encode()


def rank_part(group, options: TreduceOptions) -> RankPart:
    """This rank's checked part of the call, from the memo or checked now."""
    x = group.tensor
    try:
        key = (options, PLACED_KEYS[type(x)](x), group.comm.job)
        part = _PARTS.get(key)
    except (KeyError, TypeError, AttributeError):  # an array of a type not yet keyed: the checks take it
        return RankPart(group, options)
    if part is not None:
        part.tensor.pointer = part.tensor.adapter.pointer(x) if part.tensor.adapter else array_pointer(x)
        return part
    part = RankPart(group, options)
    if len(_PARTS) >= _PARTS_LIMIT:
        _PARTS.clear()
    _PARTS[key] = part
    return part
