"""The 'cuda_ipc' transport of treduce across the processes of one host (cuda backend). Every rank
owns a signal pad in its GPU's memory and maps every other rank's (once, at the first call).
Per call, a rank tells the root which allocation its source lies in (a CUDA IPC handle and an
offset); the root maps it (once per allocation) and runs the one-process treduce kernel over
every rank's memory, on its own stream. Ordering is on the GPUs, through the root's pad: a
rank's `arrive` kernel says "ready" once its stream reached the call (its source is complete)
and holds its stream until the root's kernel says "done"; so a source is released in stream
order, and no rank's host waits for the reduction. A rank arrives as soon as it has posted its
call, before the root's verdict; a call that then fails ends that wait (cancel)."""
from __future__ import annotations

import pickle
import struct
from typing import Dict, List

from .. import _C
from ._group import ParallelGroup
from ._one_process import RankTensor, bound_call
from ._transport import Transport

__all__ = ["IpcSources"]

PAD_BYTES = 4096  # a tp::signals::Pad (ready and done epochs of up to kMaxGroupSize ranks), rounded up
HANDLE_BYTES = 64


class IpcSources(Transport):
    def __init__(self, comm):
        self.comm, self.device = comm, comm.device
        self.own_pad = _C.cuda.DeviceBuffer(PAD_BYTES, self.device)
        self.own_pad.zero()
        mine = pickle.dumps(_C.cuda.ipc_export(self.own_pad.ptr, self.device))
        self.mapped: Dict[bytes, int] = {}  # a handle -> its allocation's base, mapped here
        self.pads: List[int] = []
        for r, payload in enumerate(comm._bootstrap.all_gather(mine, comm.timeout)):
            handle, offset = pickle.loads(payload)
            self.pads.append(self.own_pad.ptr if r == comm.rank else self._map(handle + struct.pack("<Q", offset)))

    def offer(self, t: RankTensor, x) -> bytes:
        """Where this rank's source lies, for the root to map."""
        if not t.shape or 0 in t.shape:
            return b""
        handle, offset = _C.cuda.ipc_export(t.pointer, self.device)
        return handle + struct.pack("<Q", offset)

    def arrive(self, root: int, epoch: int, local) -> None:
        """"Ready" on this rank's stream, which then waits for the root's "done" (the host does not).
        Should the launch fail, "ready" is said from the host, so the root's kernel does not wait."""
        try:
            _C.cuda.arrive(self.pads[root], epoch, self.comm.rank, 1 << root, self.device,
                           local.tensor.adapter.stream(self.device))
        except BaseException:
            self._raise_flag(root, epoch, self.comm.rank, done=False)
            raise

    def cancel(self, root: int, epoch: int) -> None:
        self._raise_flag(root, epoch, root, done=True)

    def _raise_flag(self, root: int, epoch: int, rank: int, done: bool) -> None:
        try:
            _C.cuda.raise_flag(self.pads[root], epoch, rank, done, self.device)
        except RuntimeError:  # a failing call's cleanup: the root's memory may be gone with it
            pass

    def bind(self, group, wheres: List[bytes], local, dst, call):
        """The root's run of this call: its kernel over every rank's mapped memory, ordered by its pad."""
        root, x = group.root, group.tensor
        bound = bound_call(ParallelGroup([x] * len(wheres), root), dst, *call)  # x shows every rank's layout
        pointers = [0 if r == root else self._map(where) for r, where in enumerate(wheres)]
        adapter, pad, ranks = local.tensor.adapter, self.pads[root], len(wheres)

        def prepare(x, dst, timeout: float):
            at = list(pointers)  # the others' stand while they post the same descriptions
            at[root] = local.tensor.pointer
            tensors = [None] * ranks
            tensors[root] = x
            dst = bound.checked_dst(at, tensors, dst)
            streams = [adapter.stream(self.device)] * ranks
            return lambda epoch: bound.launch(at, dst, streams, pad, epoch)
        return prepare

    def _map(self, where: bytes) -> int:
        if not where:
            return 0
        handle, (offset,) = where[:HANDLE_BYTES], struct.unpack("<Q", where[HANDLE_BYTES:])
        base = self.mapped.get(handle)
        if base is None:
            base = self.mapped[handle] = _C.cuda.ipc_open(handle, self.device)
        return base + offset

    def release(self) -> None:
        """Unmaps what this rank mapped (the caller's streams must be done with it)."""
        for base in self.mapped.values():
            try:
                _C.cuda.ipc_close(base, self.device)
            except RuntimeError:
                pass
        self.mapped.clear()
