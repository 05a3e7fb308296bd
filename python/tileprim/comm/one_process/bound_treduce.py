"""BoundTreduce: a treduce signature's bound plan, and what a call of it still does per call:
find where its arrays lie, check dst against them (the dst rule), run."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

import tileprim._C as _C
from ..._arrays.adapters import array_pointer
from ..._arrays.dtypes import numpy_dtype
from .._timeout import DEFAULT_TIMEOUT
from .dst_overlap import raise_dst_overlap
from .rank_tensor import RankTensor

__all__ = ["BoundTreduce"]


class BoundTreduce:
    """The C++ core's bound plan of a treduce signature and its Plan, for calls whose ranks and
    dst are laid out as `ranks` and `dst` were when it was bound."""

    def __init__(self, core, plan, ranks: List[RankTensor], dst: RankTensor, root: int):
        self.core, self.plan, self.root = core, plan, root
        self.devices = [t.device for t in ranks]
        self.dst_device = dst.device
        self.adapter = ranks[0].adapter
        self.null_streams = [0] * len(ranks)  # host memory: no streams to order
        shape, dtype = ranks[0].shape, ranks[0].dtype
        self.allocate = ((lambda x: self.adapter.empty(x, shape, dtype)) if self.adapter
                         else (lambda x: np.empty(shape, numpy_dtype(dtype))))
        self.pointer_of = self.adapter.pointer if self.adapter else array_pointer

    def run(self, tensors: list, dst):
        """Runs on every rank's array (one process) into dst (allocated when None); returns dst."""
        pointers = list(map(self.pointer_of, tensors))
        dst = self.checked_dst(pointers, tensors, dst)
        return self.launch(pointers, dst, self.adapter.streams(self.devices) if self.adapter else self.null_streams)

    def checked_dst(self, pointers: List[int], tensors: Sequence, dst):
        """dst (allocated when None) once it passes the dst rule against the ranks' data at
        `pointers` (0: not in this process). tensors[r]: rank r's array where this process
        holds it, else None."""
        dst = self.allocate(tensors[self.root]) if dst is None else dst
        raise_dst_overlap(_C.treduce_dst_overlaps(self.core, pointers, self.pointer_of(dst)), self.root, tensors, dst)
        return dst

    def launch(self, pointers: List[int], dst, streams: List[int], signal_pads: List[int] = (), epoch: int = 0,
               timeout: float = DEFAULT_TIMEOUT, abandoned: int = 0, self_rank: int = -1):
        """Runs on every rank's data at `pointers` into a checked dst; returns dst. With every
        rank's signal pad (ranks in other processes), rank `self_rank`'s part as call `epoch`,
        which this process gives up on by raising its host flag at `abandoned`; a GPU waiting
        longer than `timeout` for another rank's stream traps."""
        self.core.run_collective(pointers, self.devices, self.pointer_of(dst), self.dst_device, streams, signal_pads,
                                 epoch, timeout, abandoned, self_rank)
        return dst
