"""The 'shm' transport of treduce across processes (cpu backend): a rank's source is copied into
its own shared-memory file; the root maps every rank's and runs the one-process treduce over
them, then releases them (the next call may overwrite them)."""
from __future__ import annotations

import os
import struct
from typing import List, Optional

import numpy as np

from .._dtypes import numpy_dtype
from .._interop import array_pointer
from ._group import ParallelGroup
from ._one_process import RankTensor, bound_call
from ._rendezvous import SharedFile, source_segment
from ._errors import CommError
from ._transport import Transport

__all__ = ["ShmSources"]


class ShmSources(Transport):
    """The 'shm' transport: a rank's source copied into its own shared-memory file (grown, never
    shrunk, a new generation each time it grows or lost its name); the root maps each rank's
    current one and removes its name."""

    def __init__(self, comm):
        self.comm = comm
        self.own: Optional[SharedFile] = None
        self.generation = 0
        self.mapped = {}  # rank -> (generation, SharedFile)

    def offer(self, t: RankTensor, x) -> bytes:
        nbytes = int(np.prod(t.shape)) * t.itemsize
        # a root that mapped the buffer removed its name (so nothing is left should a rank die):
        # another root needs a new one
        if nbytes and (self.own is None or self.own.size < nbytes or not os.path.exists(self.own.path)):
            self._grow(nbytes)
        if nbytes:
            np.copyto(np.ndarray(t.shape, numpy_dtype(t.dtype), buffer=self.own.map), x)
        return struct.pack("<qq", self.generation, nbytes)

    def _grow(self, nbytes: int) -> None:
        if self.own is not None:
            self.own.close()
            self.own.unlink()
        self.generation += 1
        size = 1 << max(16, (nbytes - 1).bit_length())
        self.own = SharedFile(source_segment(self.comm.job, self.comm.rank, self.generation), size, create=True)

    def bind(self, group, wheres: List[bytes], local, dst, call):
        """The root's run of this call: the one-process treduce over every rank's shared buffer."""
        root = group.root
        tensors = [np.ascontiguousarray(group.tensor) if r == root else  # one layout for every rank
                   self._source(r, where, local.tensor.shape, local.tensor.dtype) for r, where in enumerate(wheres)]
        bound = bound_call(ParallelGroup(tensors, root), dst, *call)

        def prepare(x, dst, timeout: float):
            now = tensors[:root] + [np.ascontiguousarray(x)] + tensors[root + 1:]
            pointers = [array_pointer(t) for t in now]
            dst = bound.checked_dst(pointers, now, dst)
            # `held` keeps the root's packed copy (pointers[root]) alive until the run
            return (lambda epoch, held=now: bound.launch(pointers, dst, bound.no_streams)), ""
        return prepare

    def _source(self, rank: int, where: bytes, shape, dtype: str) -> np.ndarray:
        dtype = numpy_dtype(dtype)
        generation, nbytes = struct.unpack("<qq", where) if len(where) == 16 else (0, -1)
        if nbytes != int(np.prod(shape)) * dtype.itemsize or (nbytes and generation < 1):
            raise CommError(f"rank {rank} described its shared buffer as {where!r}, not one of this call's data")
        if not nbytes:
            return np.empty(shape, dtype)
        have = self.mapped.get(rank)
        if have is None or have[0] != generation:
            if have is not None:
                have[1].close()
            have = self.mapped[rank] = (generation, SharedFile(source_segment(self.comm.job, rank, generation)))
            have[1].unlink()  # mapped by both: its name is needed no more (nothing is left should they die)
        if have[1].size < nbytes:
            raise CommError(f"rank {rank}'s shared buffer holds {have[1].size} bytes, less than its data's {nbytes}")
        return np.ndarray(shape, dtype, buffer=have[1].map)

    def finish_non_root(self, root: int, epoch: int, local, timeout: float, what: str, wheres, told: str) -> None:
        """A non-root rank's end of the call: the root is done with its buffer."""
        self.comm.rendezvous.released(root, epoch, timeout, what)

    def release(self) -> None:
        if self.own is not None:
            self.own.close()
            self.own.unlink()
            self.own = None
        for _, mapping in self.mapped.values():
            mapping.close()
        self.mapped.clear()
