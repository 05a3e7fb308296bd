"""IpcTransport, 'cuda_ipc': treduce across the processes of one host on the cuda backend. Every rank
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
exits while the others' GPUs may wait on it is seen by the watchdog (watchdog.py), which
abandons this rank's calls so far: its kernels stop waiting and touch no other rank's memory
again (the results of calls in flight are undefined).

scatter_gather and chain (3+ ranks, large messages) run their parts on the ranks: every rank
describes its source, the root tells the others where its dst lies with its verdict, and each
non-root rank runs its part on its own GPU. scatter_gather: a rank maps every rank's memory and
reduces its shard into dst; the root's `arrive` kernel says "ready" to every worker and holds its
stream until every worker is done. chain: every rank (the root too) runs its step of the chain,
pushing its partial into its successor's staging, which lies after that rank's signal pad (mapped
at the first call with it); the last rank writes dst. A rank that cannot run its part raises every
other rank's flags (pad and chain), so no GPU waits for it."""
from __future__ import annotations

import functools
import struct
from typing import Dict, List

import tileprim._C as _C
from .._errors import CommError
from ..one_process.calls import bound_treduce
from ..one_process.rank_tensor import RankTensor
from .transport import RUNS_ON_RANKS, Transport
from .watchdog import Watchdog, exited_ranks

__all__ = ["IpcTransport"]

# a rank's memory every other rank maps: its tp::signals::Pad (ready and done epochs of up to
# kMaxGroupSize ranks), then its chain flags and staging, in whole pages
RANK_BYTES = -(-_C.cuda.RANK_MEMORY_BYTES // 4096) * 4096
HANDLE_BYTES = _C.cuda.IPC_HANDLE_BYTES
# An arrive kernel's limit, past the call's timeout: the host gives up on the root's verdict after
# 1.1 timeout + 1 s (and ends the wait), the root's kernel waits at most timeout for the others.
ARRIVE_WAIT = (2.2, 60.0)


class IpcTransport(Transport):
    name = "cuda_ipc"
    backend = "cuda"
    reaches_every_rank = True  # each rank maps every rank's memory and the root's dst

    def __init__(self, comm):
        super().__init__(comm)
        self.device = comm.device
        self.own_pad = _C.cuda.DeviceBuffer(RANK_BYTES, self.device)
        self.own_pad.zero()
        self.abandoned = _C.cuda.MappedHostBuffer(8, self.device)  # the last call this rank's host gave up on
        handle, offset = _C.cuda.ipc_export(self.own_pad.ptr, self.device)
        self.mapped: Dict[bytes, int] = {}  # a handle -> its allocation's base, mapped here
        self.pads: List[int] = []
        # plain bytes, as every place is described (no pickle: a planted exchange runs no code)
        for r, place in enumerate(comm._bootstrap.all_gather(handle + struct.pack("<Q", offset), comm.timeout)):
            if not isinstance(place, bytes) or len(place) != HANDLE_BYTES + 8:
                raise CommError(f"rank {r}: its signal pad's description is not an IPC handle and an offset "
                                f"({HANDLE_BYTES + 8} bytes)")
            self.pads.append(self.own_pad.ptr if r == comm.rank else self._map(place))
        self.watchdog = Watchdog(comm, _why_stuck, functools.partial(_abandon_calls, self.abandoned.ptr), "cuda-ipc")

    def describe_source(self, t: RankTensor, x) -> bytes:
        """Where this rank's source lies, for the root to map: its allocation's IPC handle and
        the offset in it."""
        if not t.shape or 0 in t.shape:
            return b""
        handle, offset = _C.cuda.ipc_export(t.pointer, self.device)
        return handle + struct.pack("<Q", offset)

    def arrive(self, root: int, epoch: int, part, timeout: float) -> None:
        """"Ready" on this rank's stream, which then waits for the root's "done" (the host does not).
        Should the launch fail, "ready" is said from the host, so the root's kernel does not wait."""
        rank, scale, slack = self.comm.rank, *ARRIVE_WAIT
        try:
            _C.cuda.arrive(self.pads, self.abandoned.ptr, epoch, rank, 1 << root, scale * timeout + slack,
                           self.device, part.tensor.adapter.stream(self.device))
        except BaseException:
            self._raise_flag(self.pads[root], rank, epoch, done=False)
            raise

    def cancel(self, root: int, epoch: int) -> None:
        """A non-root abandons the call; the root (whose run failed after its verdict) says "ready"
        and "done" in every other rank's pad, for whichever the others' kernels wait."""
        if self.comm.rank != root:
            _C.raise_flag(self.abandoned.ptr, epoch)
            return
        self._release_the_others(root, epoch)

    def _release_the_others(self, rank: int, epoch: int) -> None:
        """Says "ready" and "done" as rank `rank` in every other rank's pad, and raises every
        other rank's chain flags past this call's last step (a chain's neighbours wait on those)."""
        for r, pad in enumerate(self.pads):
            if r != rank:
                self._raise_flag(pad, rank, epoch, done=False)
                self._raise_flag(pad, rank, epoch, done=True)
                try:
                    _C.cuda.raise_chain_flags(pad, epoch, self.device)
                except RuntimeError:  # a failing call's cleanup: another rank's memory may be gone with it
                    pass

    def finish_non_root(self, root: int, epoch: int, part, timeout: float, call_label: str,
                        source_places: List[bytes], root_message: str) -> None:
        """A rank that runs its part (a shard, a chain's step) does so now that the root said where
        dst lies (root_message). Should that fail, it says "ready" and "done" from the host and
        raises its neighbours' chain flags, so no GPU waits for it (its part of dst is then not
        written, or garbage), and raises."""
        runs_part = self.runs_on_ranks(part)
        if not root_message:
            if runs_part:  # the root's plan is root_pull after all: this rank arrives now
                self.arrive(root, epoch, part, timeout)
            return
        if not runs_part:  # its arrive kernel waits for a root that runs no share; the workers wait for its share
            self.cancel(root, epoch)
            self._release_the_others(self.comm.rank, epoch)
            raise CommError(f"{call_label}: the root runs a plan whose every rank runs a part, which this rank's "
                            f"plan of the same call did not choose (GPUs of different kinds?)")
        rank, t = self.comm.rank, part.tensor
        reads_others = self.planned_variant(part) != "chain"  # a chain's rank reads its own source only
        try:
            dst_place, strides = root_message.split(":", 1)
            dst_pointer = self._map(bytes.fromhex(dst_place))
            core = self.rank_plan(part, [int(s) for s in strides.split(",") if s])
            pointers = [t.pointer if r == rank else self._map(place) if reads_others else 0
                        for r, place in enumerate(source_places)]
            stream = t.adapter.stream(self.device)
            core.run_collective(pointers, [self.device] * len(pointers), dst_pointer, self.device,
                                [stream] * len(pointers), self.pads, epoch, timeout, self.abandoned.ptr, rank)
        except BaseException:
            self._release_the_others(rank, epoch)
            raise

    def _raise_flag(self, pad: int, rank: int, epoch: int, done: bool) -> None:
        try:
            _C.cuda.raise_flag(pad, epoch, rank, done, self.device)
        except RuntimeError:  # a failing call's cleanup: another rank's memory may be gone with it
            pass

    def bind_root(self, x, source_places: List[bytes], part, dst):
        """The root's run of this call, ordered by the pads: root_pull, its kernel over every
        rank's mapped memory; scatter_gather, its wait for the others' shards; chain, its step (its
        source pushed to the next rank, then its wait for the last rank's dst); the last two once
        it told the others where dst lies (its allocation's handle and offset, and its strides)."""
        root, ranks = part.options.root, len(source_places)
        bound = bound_treduce([x] * ranks, dst, part.options)  # x shows every rank's layout
        runs_on_ranks = bound.plan.variant in RUNS_ON_RANKS
        if runs_on_ranks != self.runs_on_ranks(part):
            raise CommError("the root's plan with this dst differs from the plan every rank made of the call")
        others = [0 if r == root or runs_on_ranks else self._map(place) for r, place in enumerate(source_places)]
        adapter, pads, abandoned = part.tensor.adapter, self.pads, self.abandoned.ptr

        def check_call(x, dst, timeout: float):
            pointers = list(others)  # the others' stand while they post the same descriptions
            pointers[root] = adapter.pointer(x)
            tensors = [None] * ranks
            tensors[root] = x
            dst = bound.checked_dst(pointers, tensors, dst)
            streams = [adapter.stream(self.device)] * ranks
            message = self._dst_place(RankTensor(dst, "dst", adapter)) if runs_on_ranks else ""
            return (lambda epoch: bound.launch(pointers, dst, streams, pads, epoch, timeout, abandoned, root)), message
        return check_call

    def _dst_place(self, dst: RankTensor) -> str:
        """dst as a rank that runs its shard maps it: 'place:strides' (place: hex of handle and offset)."""
        place = self.describe_source(dst, None).hex()
        return place + ":" + ",".join(map(str, dst.strides))

    def _map(self, place: bytes) -> int:
        """The address here of memory another rank described (an allocation's handle and offset)."""
        if not place:
            return 0
        handle, (offset,) = place[:HANDLE_BYTES], struct.unpack("<Q", place[HANDLE_BYTES:])
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


def _why_stuck(comm) -> str:
    """Why this rank's calls in flight cannot finish (the watchdog asks), or ''."""
    gone = exited_ranks(comm)
    return (f"{gone}; this rank's GPU stopped waiting for calls up to {comm.calls} (the results of any still in "
            f"flight are undefined)") if gone else ""


def _abandon_calls(abandoned: int, comm) -> None:
    _C.raise_flag(abandoned, comm.calls)
