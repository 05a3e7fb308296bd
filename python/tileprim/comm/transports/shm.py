"""ShmTransport, 'shm': treduce across the processes of one host on the cpu backend. A rank's
source is copied into its own shared-memory file; the root maps every rank's and runs the
one-process treduce over them, then releases them (the next call may overwrite them)."""
from __future__ import annotations

import os
import struct
from typing import List, Optional

import numpy as np

from ..._arrays.adapters import array_pointer
from ..._arrays.dtypes import numpy_dtype
from .._errors import CommError
from ..one_process.calls import bound_treduce
from ..processes.rendezvous import SharedFile, source_segment
from .transport import Transport

__all__ = ["ShmTransport"]


class ShmTransport(Transport):
    """A rank's source copied into its own shared-memory file (grown, never shrunk, a new
    generation each time it grows or lost its name); the root maps each rank's current one and
    removes its name."""

    name = "shm"
    backend = "cpu"

    def __init__(self, comm):
        super().__init__(comm)
        self.own_buffer: Optional[SharedFile] = None
        self.generation = 0
        self.mapped = {}  # rank -> (generation, SharedFile)

    def describe_source(self, t, x) -> bytes:
        """Copies the source into this rank's buffer: its generation and byte count."""
        nbytes = int(np.prod(t.shape)) * t.itemsize
        # a root that mapped the buffer removed its name (so nothing is left should a rank die):
        # another root needs a new one
        if nbytes and (self.own_buffer is None or self.own_buffer.size < nbytes
                       or not os.path.exists(self.own_buffer.path)):
            self._grow(nbytes)
        if nbytes:
            np.copyto(np.ndarray(t.shape, numpy_dtype(t.dtype), buffer=self.own_buffer.map), x)
        return struct.pack("<qq", self.generation, nbytes)

    def _grow(self, nbytes: int) -> None:
        if self.own_buffer is not None:
            self.own_buffer.close()
            self.own_buffer.unlink()
        self.generation += 1
        size = 1 << max(16, (nbytes - 1).bit_length())
        self.own_buffer = SharedFile(source_segment(self.comm.job, self.comm.rank, self.generation), size,
                                     create=True)

    def bind_root(self, x, source_places: List[bytes], part, dst):
        """The root's run of this call: the one-process treduce over every rank's shared buffer."""
        root, t = part.options.root, part.tensor
        tensors = [np.ascontiguousarray(x) if r == root else  # one layout for every rank
                   self._mapped_source(r, place, t.shape, t.dtype) for r, place in enumerate(source_places)]
        bound = bound_treduce(tensors, dst, part.options)

        def check_call(x, dst, timeout: float):
            now = tensors[:root] + [np.ascontiguousarray(x)] + tensors[root + 1:]
            pointers = [array_pointer(t) for t in now]
            dst = bound.checked_dst(pointers, now, dst)
            # `held` keeps the root's packed copy (pointers[root]) alive until the run
            return (lambda epoch, held=now: bound.launch(pointers, dst, bound.null_streams)), ""
        return check_call

    def _mapped_source(self, rank: int, place: bytes, shape, dtype: str) -> np.ndarray:
        """Rank `rank`'s source in its shared buffer, as it described it."""
        dtype = numpy_dtype(dtype)
        generation, nbytes = struct.unpack("<qq", place) if len(place) == 16 else (0, -1)
        if nbytes != int(np.prod(shape)) * dtype.itemsize or (nbytes and generation < 1):
            raise CommError(f"rank {rank} described its shared buffer as {place!r}, not one of this call's data")
        if not nbytes:
            return np.empty(shape, dtype)
        mapping = self.mapped.get(rank)
        if mapping is None or mapping[0] != generation:
            if mapping is not None:
                mapping[1].close()
            mapping = self.mapped[rank] = (generation, SharedFile(source_segment(self.comm.job, rank, generation)))
            mapping[1].unlink()  # mapped by both: its name is needed no more (nothing is left should they die)
        if mapping[1].size < nbytes:
            raise CommError(f"rank {rank}'s shared buffer holds {mapping[1].size} bytes, less than its data's {nbytes}")
        return np.ndarray(shape, dtype, buffer=mapping[1].map)

    def finish_non_root(self, root: int, epoch: int, part, timeout: float, call_label: str, source_places,
                        root_message: str) -> None:
        """A non-root rank's end of the call: the root is done with its buffer."""
        self.comm.rendezvous.wait_released(root, epoch, timeout, call_label)

    def release(self) -> None:
        if self.own_buffer is not None:
            self.own_buffer.close()
            self.own_buffer.unlink()
            self.own_buffer = None
        for _, mapping in self.mapped.values():
            mapping.close()
        self.mapped.clear()
