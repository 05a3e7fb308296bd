"""The 'cuda_ipc' transport of treduce across the processes of one host (cuda backend). Every rank
owns a signal pad in its GPU's memory and maps every other rank's (once, at the first call).
Per call, a rank tells the root which allocation its source lies in (a CUDA IPC handle and an
offset); the root maps it (once per allocation) and runs the one-process treduce kernel over
every rank's memory, on its own stream. Ordering is on the GPUs, through the pads: a rank's
`arrive` kernel says "ready" in the root's pad once its stream reached the call (its source is
complete) and holds its stream until the root's kernel says "done" in the rank's own pad; so a
source is released in stream order, and no rank's host waits for the reduction. A rank arrives
as soon as it has posted its call, before the root's verdict; a call that then fails ends that
wait (cancel: this rank's host abandons it, raising a flag in pinned host memory its GPU polls;
no driver call, which another thread's synchronous copy could hold up). A rank whose process
exits while the others' GPUs may wait on it is seen by the watchdog (_watchdog.py), which
abandons this rank's calls so far: its kernels stop waiting and touch no other rank's memory
again (the results of calls in flight are undefined).

scatter_gather (3+ ranks, large messages) works apart: every rank offers its source, the root
tells the others where its dst lies with its verdict, and each non-root rank maps every rank's
memory and runs its shard on its own GPU; the root's `arrive` kernel says "ready" to every worker
and holds its stream until every worker is done."""
from __future__ import annotations

import functools
import pickle
import struct
from typing import Dict, List

from .. import _C
from ._group import ParallelGroup
from ._errors import CommError
from ._one_process import RankTensor, bound_call
from ._transport import Transport
from ._watchdog import Watchdog, exited_ranks

__all__ = ["IpcSources"]

PAD_BYTES = 4096  # a tp::signals::Pad (ready and done epochs of up to kMaxGroupSize ranks), rounded up
HANDLE_BYTES = 64
# An arrive kernel's limit, past the call's timeout: the host gives up on the root's verdict after
# 1.1 timeout + 1 s (and ends the wait), the root's kernel waits at most timeout for the others.
ARRIVE_WAIT = (2.2, 60.0)


class IpcSources(Transport):
    shards_apart = True  # each worker maps every rank's memory and the root's dst

    def __init__(self, comm):
        self.comm, self.device = comm, comm.device
        self.own_pad = _C.cuda.DeviceBuffer(PAD_BYTES, self.device)
        self.own_pad.zero()
        self.abandoned = _C.cuda.MappedHostBuffer(8, self.device)  # the last call this rank's host gave up on
        mine = pickle.dumps(_C.cuda.ipc_export(self.own_pad.ptr, self.device))
        self.mapped: Dict[bytes, int] = {}  # a handle -> its allocation's base, mapped here
        self.pads: List[int] = []
        for r, payload in enumerate(comm._bootstrap.all_gather(mine, comm.timeout)):
            handle, offset = pickle.loads(payload)
            self.pads.append(self.own_pad.ptr if r == comm.rank else self._map(handle + struct.pack("<Q", offset)))
        self.watchdog = Watchdog(comm, _look, functools.partial(_abandon, self.abandoned.ptr), "cuda-ipc")

    def offer(self, t: RankTensor, x) -> bytes:
        """Where this rank's source lies, for the root to map."""
        if not t.shape or 0 in t.shape:
            return b""
        handle, offset = _C.cuda.ipc_export(t.pointer, self.device)
        return handle + struct.pack("<Q", offset)

    def arrive(self, root: int, epoch: int, local, timeout: float) -> None:
        """"Ready" on this rank's stream, which then waits for the root's "done" (the host does not).
        Should the launch fail, "ready" is said from the host, so the root's kernel does not wait."""
        rank, scale, slack = self.comm.rank, *ARRIVE_WAIT
        try:
            _C.cuda.arrive(self.pads, self.abandoned.ptr, epoch, rank, 1 << root, scale * timeout + slack,
                           self.device, local.tensor.adapter.stream(self.device))
        except BaseException:
            self._raise_flag(self.pads[root], rank, epoch, done=False)
            raise

    def cancel(self, root: int, epoch: int) -> None:
        """A non-root abandons the call; the root (whose run failed after its verdict) says "ready"
        and "done" in every other rank's pad, for whichever the others' kernels wait."""
        if self.comm.rank != root:
            _C.raise_flag(self.abandoned.ptr, epoch)
            return
        self._free_the_others(root, epoch)

    def _free_the_others(self, rank: int, epoch: int) -> None:
        for r, pad in enumerate(self.pads):
            if r != rank:
                self._raise_flag(pad, rank, epoch, done=False)
                self._raise_flag(pad, rank, epoch, done=True)

    def finish_non_root(self, root: int, epoch: int, local, timeout: float, what: str, wheres: List[bytes],
                        told: str) -> None:
        """A rank that works apart runs its shard now that the root said where dst lies. Should
        that fail, it says "ready" and "done" from the host, so no GPU waits for it (its shard of
        dst is then not written), and raises."""
        apart = self.works_apart(local, root)
        if not told:
            if apart:  # the root's plan is root_pull after all: this rank arrives now
                self.arrive(root, epoch, local, timeout)
            return
        if not apart:  # its arrive kernel waits for a root that runs no share; the workers wait for its share
            self.cancel(root, epoch)
            self._free_the_others(self.comm.rank, epoch)
            raise CommError(f"{what}: the root runs scatter_gather, which this rank's plan of the same call "
                            f"did not choose (GPUs of different kinds?)")
        rank, t = self.comm.rank, local.tensor
        try:
            where, strides = told.split(":", 1)
            dst_at = self._map(bytes.fromhex(where))
            core = self.rank_core(local, root, [int(s) for s in strides.split(",") if s])
            at = [t.pointer if r == rank else self._map(w) for r, w in enumerate(wheres)]
            stream = t.adapter.stream(self.device)
            core.run_collective(at, [self.device] * len(at), dst_at, self.device, [stream] * len(at), self.pads,
                                epoch, timeout, self.abandoned.ptr, rank)
        except BaseException:
            self._free_the_others(rank, epoch)
            raise

    def _raise_flag(self, pad: int, rank: int, epoch: int, done: bool) -> None:
        try:
            _C.cuda.raise_flag(pad, epoch, rank, done, self.device)
        except RuntimeError:  # a failing call's cleanup: another rank's memory may be gone with it
            pass

    def bind(self, group, wheres: List[bytes], local, dst, call):
        """The root's run of this call, ordered by the pads: root_pull, its kernel over every
        rank's mapped memory; scatter_gather, its wait for the others' shards, once it told them
        where dst lies (its allocation's handle and offset, and its strides)."""
        root, x = group.root, group.tensor
        bound = bound_call(ParallelGroup([x] * len(wheres), root), dst, *call)  # x shows every rank's layout
        apart = bound.plan.variant == "scatter_gather"
        if apart != self.works_apart(local, root):
            raise CommError("the root's plan with this dst differs from the plan every rank made of the call")
        pointers = [0 if r == root or apart else self._map(where) for r, where in enumerate(wheres)]
        adapter, pads, ranks, abandoned = local.tensor.adapter, self.pads, len(wheres), self.abandoned.ptr

        def prepare(x, dst, timeout: float):
            at = list(pointers)  # the others' stand while they post the same descriptions
            at[root] = local.tensor.pointer
            tensors = [None] * ranks
            tensors[root] = x
            dst = bound.checked_dst(at, tensors, dst)
            streams = [adapter.stream(self.device)] * ranks
            told = self._where_dst(RankTensor(dst, "dst", adapter)) if apart else ""
            return (lambda epoch: bound.launch(at, dst, streams, pads, epoch, timeout, abandoned, root)), told
        return prepare

    def _where_dst(self, dst: RankTensor) -> str:
        """dst as a rank that works apart maps it: 'where:strides' (where: hex of handle and offset)."""
        where = self.offer(dst, None).hex()
        return where + ":" + ",".join(map(str, dst.strides))

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
        self.watchdog.stop()
        for base in self.mapped.values():
            try:
                _C.cuda.ipc_close(base, self.device)
            except RuntimeError:
                pass
        self.mapped.clear()


def _look(comm) -> str:
    gone = exited_ranks(comm)
    return (f"{gone}; this rank's GPU stopped waiting for calls up to {comm.calls} (the results of any still in "
            f"flight are undefined)") if gone else ""


def _abandon(abandoned: int, comm) -> None:
    _C.raise_flag(abandoned, comm.calls)
