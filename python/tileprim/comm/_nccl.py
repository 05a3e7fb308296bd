"""The 'nccl' transport of treduce across processes (cuda backend): the one that reaches ranks on
other hosts. A non-root rank sends its source, packed, to the root with ncclSend, chunk by chunk;
the root receives every rank's next chunk into ping/pong staging buffers on its own stream while
its caller's stream folds the last one with the one-process treduce over the staged chunks, so
the order and the bits are the one-process ones. NCCL is loaded at the communicator's first call.

A call returns once its NCCL work is enqueued, so a rank that dies mid-transfer is seen by the
watchdog (_watchdog.py): while a call is in flight it looks for NCCL's asynchronous error, a rank
whose process exited (one host) or a call older than its timeout, and then aborts the NCCL
communicator (its streams go on) and breaks the tileprim communicator."""
from __future__ import annotations

import functools
from typing import List

import numpy as np

from .. import _C
from .._backends import nccl_status
from .._interop import c_strides
from ._errors import CommError
from ._group import ParallelGroup
from ._one_process import RankTensor, bound_call, contiguous_core
from ._transport import Transport
from ._watchdog import Watchdog, exited_ranks

__all__ = ["NcclSources"]

CHUNK_BYTES = 8 << 20  # per rank per staging slot: large enough that enqueueing keeps ahead of NVLink


class NcclSources(Transport):
    def __init__(self, comm):
        self.comm, self.device = comm, comm.device
        status = nccl_status()
        if not status["ok"]:
            mine = b"!" + status["error"].encode()
        else:
            mine = b"+" + (_C.nccl.unique_id() if comm.rank == 0 else b"")
        gathered = comm._bootstrap.all_gather(mine, comm.timeout)
        failed = [f"rank {r}: {g[1:].decode()}" for r, g in enumerate(gathered) if g.startswith(b"!")]
        if failed:
            raise CommError("transport 'nccl': NCCL could not be loaded on every rank (tp.info()['nccl'] says "
                            "where it looked): " + "; ".join(failed))
        self.nccl = _C.nccl.Communicator(gathered[0][1:], comm.world_size, comm.rank, comm.device)
        self.pending = None  # a non-root rank's packed source, between offer and finish_non_root
        self.watchdog = Watchdog(comm, functools.partial(_look, self.nccl), functools.partial(_abandon, self.nccl),
                                 "nccl")

    def offer(self, t: RankTensor, x) -> bytes:
        """Packs this rank's source (a strided one is copied by its library); nothing to tell the root."""
        self.pending = None
        nbytes = int(np.prod(t.shape)) * t.itemsize
        if nbytes:
            self.pending = (t.adapter, t.adapter.contiguous(x), nbytes)
        return b""

    def finish_non_root(self, root: int, epoch: int, local, timeout: float, what: str, wheres, told: str) -> None:
        """Sends the packed source on this rank's stream (it may be reused in that stream's order)."""
        if self.pending is None:
            return
        adapter, packed, nbytes = self.pending
        self.pending = None
        stream = adapter.stream(self.device)
        self.nccl.send(adapter.pointer(packed), nbytes, _chunk(nbytes, local.tensor.itemsize), root, stream)
        self.nccl.watch(stream, timeout)

    def bind(self, group, wheres: List[bytes], local, dst, call):
        """The root's run of this call: every rank's chunks received and folded as they land."""
        root, t = group.root, local.tensor
        bound = bound_call(ParallelGroup([group.tensor] * len(wheres), root), dst, *call)  # checks dst; the plan
        adapter, device, dtype, itemsize = t.adapter, self.device, t.dtype, t.itemsize
        n = int(np.prod(t.shape))
        peers = [r for r in range(len(wheres)) if r != root]
        op, tile, pingpong, _, accumulate, backend, _, transport = call
        tile = tuple(tile)

        def prepare(x, dst, timeout: float):
            at, tensors = [0] * len(wheres), [None] * len(wheres)  # the others' data is not here yet
            at[root], tensors[root] = adapter.pointer(x), x
            out = bound.checked_dst(at, tensors, dst)
            return (lambda epoch: out if n == 0 else receive_and_fold(x, out, timeout)), ""

        def receive_and_fold(x, out, timeout: float):
            source = adapter.contiguous(x)
            packed_out = out if _is_contiguous(adapter, out, t.shape) else adapter.empty(x, t.shape, dtype)
            stream = adapter.stream(device)
            source_at, out_at = adapter.pointer(source), adapter.pointer(packed_out)
            devices, streams = [device] * len(wheres), [stream] * len(wheres)

            def fold(offset: int, length: int, staged: List[int]):
                pointers = list(staged)
                pointers.insert(root, source_at + offset)
                core = contiguous_core(len(wheres), root, length // itemsize, dtype, device, op, tile, pingpong,
                                       accumulate, transport)
                core.run_collective(pointers, devices, out_at + offset, device, streams)

            self.nccl.gather(n * itemsize, _chunk(n * itemsize, itemsize), peers, stream, fold)
            self.nccl.watch(stream, timeout)
            if packed_out is not out:  # a strided dst: the packed result copied in (a treduce of one rank)
                bound_call(ParallelGroup([packed_out], 0), out, op, tile, pingpong, "dynamic", None, backend, None
                           ).run([packed_out], out)
            return out
        return prepare

    def release(self) -> None:
        self.watchdog.stop()
        self.nccl = None  # ncclCommDestroy, once this rank's pending operations are done


def _look(nccl, comm) -> str:
    """Why the oldest call in flight cannot finish, or ''."""
    oldest = nccl.oldest_in_flight()
    if oldest is None:
        return ""
    age, timeout = oldest
    error = nccl.async_error()
    why = (exited_ranks(comm) or (f"NCCL reports: {error}" if error else "")
           or (f"it did not finish within its timeout ({timeout:g} s)" if age > timeout else ""))
    return f"a call's NCCL transfer was abandoned: {why}; the NCCL communicator was aborted" if why else ""


def _abandon(nccl, comm) -> None:
    nccl.abort()


def _chunk(nbytes: int, itemsize: int) -> int:
    return min(nbytes, CHUNK_BYTES // itemsize * itemsize)


def _is_contiguous(adapter, x, shape) -> bool:
    return all(s == c or d == 1 for s, c, d in zip(adapter.strides(x), c_strides(shape), shape))
