"""NcclTransport, 'nccl': treduce across processes on the cuda backend, the transport that
reaches ranks on other hosts. root_pull: a non-root rank sends its source, packed, to the root with ncclSend, chunk
by chunk; the root receives every rank's next chunk into ping/pong staging buffers on its own
stream while its caller's stream folds the last one with the one-process treduce over the staged
chunks. scatter_gather (3+ ranks): the packed tensor is cut into one shard per non-root rank (a
worker); every rank sends each worker its slice of the worker's shard, the worker folds them with
the same one-process treduce and sends the result to the root, step by step, so the root takes in
one tensor instead of N - 1 and every rank's link carries about one tensor each way. chain: the
root sends its packed source to the next rank in the fold order chunk by chunk; each rank folds
its own chunk into the partial it receives (the one-process treduce of the two, the partial
first) and sends the result on, the last to the root, so every link carries one tensor. Every
way the order and the bits are the one-process ones. NCCL is loaded at the communicator's first
call; ranks of one host that share a GPU are refused before it (NCCL takes one GPU per rank).

A call returns once its NCCL work is enqueued, so a rank that dies mid-transfer is seen by the
watchdog (watchdog.py): while a call is in flight it looks for NCCL's asynchronous error, a rank
whose process exited (one host) or a call older than its timeout, and then aborts the NCCL
communicator (its streams go on) and breaks the tileprim communicator."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import socket
from typing import List

import numpy as np

import tileprim._C as _C
from ..._arrays.adapters import c_strides
from ..._platform.backends import nccl_status
from .._errors import CommError
from .._options import TreduceOptions
from ..one_process.calls import bound_treduce
from ..one_process.core_plan import contiguous_plan, fold_options
from ..one_process.rank_tensor import RankTensor
from .transport import RUNS_ON_RANKS, Transport
from .watchdog import Watchdog, exited_ranks

__all__ = ["NcclTransport"]

CHUNK_BYTES = 8 << 20  # per rank per staging slot: large enough that enqueueing keeps ahead of NVLink
# scatter_gather exchanges a shard in steps, a worker's result one step behind its slices (steps + 1
# NCCL groups in all): about SHARD_STEPS of them, each from MIN_STEP_BYTES to CHUNK_BYTES of a shard
SHARD_STEPS = 16
MIN_STEP_BYTES = 1 << 20
ALIGN = 4096  # shard and step bounds: whole 16-byte vectors for the fold, whole elements of every dtype
# the chain sends its partial in about CHAIN_CHUNKS chunks of MIN_CHAIN_CHUNK to CHUNK_BYTES each: every
# chunk costs each rank's host an NCCL group and a fold (tens of microseconds), and the chain fills
# in a chunk per hop (csrc/variants/comm/treduce_choice.cc models the same)
CHAIN_CHUNKS = 8
MIN_CHAIN_CHUNK = 4 << 20
_ONE_GPU_PER_RANK = ("NCCL takes one GPU per rank on a host (it tells hosts apart by $NCCL_HOSTID, else the "
                     "hostname): give every rank a GPU of its own, or on one host use transport='cuda_ipc'")


class NcclTransport(Transport):
    name = "nccl"
    backend = "cuda"
    reaches_every_rank = True  # sends and receives reach every rank: a scatter_gather shard, the chain's steps

    def __init__(self, comm):
        super().__init__(comm)
        self.device = comm.device
        status = nccl_status()
        # each rank's host as NCCL tells hosts apart, its GPU, and whether NCCL loaded (rank 0: the id)
        where = json.dumps([os.environ.get("NCCL_HOSTID") or socket.gethostname(), comm.device]).encode()
        if not status["ok"]:
            loaded = b"!" + where + b"\0" + status["error"].encode()
        else:
            loaded = b"+" + where + b"\0" + (_C.nccl.unique_id() if comm.rank == 0 else b"")
        gathered = [(g[:1], *g[1:].split(b"\0", 1)) for g in comm._bootstrap.all_gather(loaded, comm.timeout)]
        failed = [f"rank {r}: {text.decode()}" for r, (state, _, text) in enumerate(gathered) if state == b"!"]
        if failed:
            raise CommError("transport 'nccl': NCCL could not be loaded on every rank (tp.info()['nccl'] says "
                            "where it looked): " + "; ".join(failed))
        shared = _shared_gpus([json.loads(w) for _, w, _ in gathered])
        if shared:  # NCCL refuses them, or (on a host of several GPUs) waits in its init past the timeout
            raise CommError(f"transport 'nccl': {shared}: {_ONE_GPU_PER_RANK}")
        try:
            self.nccl = _C.nccl.Communicator(gathered[0][2], comm.world_size, comm.rank, comm.device, comm.timeout)
        except RuntimeError as e:  # ranks whose GPUs are one under other numbers (CUDA_VISIBLE_DEVICES)
            if "invalid usage" not in str(e):
                raise
            raise CommError(f"transport 'nccl': {e}. {_ONE_GPU_PER_RANK}") from e
        self.pending_source = None  # a non-root rank's source, between describe_source and finish_non_root
        self.watchdog = Watchdog(comm, functools.partial(_why_stuck, self.nccl),
                                 functools.partial(_abandon_calls, self.nccl), "nccl")

    def describe_source(self, t: RankTensor, x) -> bytes:
        """Keeps this rank's source for its send; nothing to tell the others."""
        nbytes = int(np.prod(t.shape)) * t.itemsize
        self.pending_source = (t.adapter, x, nbytes) if nbytes else None
        return b""

    def finish_non_root(self, root: int, epoch: int, part, timeout: float, call_label: str, source_places,
                        root_message: str) -> None:
        """Sends the source, packed (a strided one is copied by its library), on this rank's stream,
        to the root or, where the ranks run their shards, as slices to every worker, folding its
        own shard in between; the source may be reused in that stream's order."""
        if self.pending_source is None:
            return
        adapter, x, nbytes = self.pending_source
        self.pending_source = None
        packed, stream, itemsize = adapter.contiguous(x), adapter.stream(self.device), part.tensor.itemsize
        world_size = self.comm.world_size
        with self._enqueueing(stream, timeout):
            variant = self.planned_variant(part)
            if variant == "chain":
                source = adapter.pointer(packed)
                fold = _link_fold(part.options, part.tensor.dtype, itemsize, self.device, stream, source)
                self.nccl.chain(source, 0, nbytes, _chain_chunk_bytes(nbytes), _fold_order(world_size, root), stream,
                                fold, timeout)
            elif variant == "scatter_gather":
                fold = _shard_fold(part.options, world_size, part.tensor.dtype, itemsize, self.device, stream)
                self.nccl.exchange_shards(adapter.pointer(packed), 0, *_shards(nbytes, world_size, root),
                                          root, _step_bytes(nbytes, world_size), stream, fold, timeout)
            else:
                self.nccl.send(adapter.pointer(packed), nbytes, _chunk_bytes(nbytes, itemsize), root, stream, timeout)

    def bind_root(self, x, source_places: List[bytes], part, dst):
        """The root's run of this call: every rank's chunks received and folded as they land; or,
        where the ranks run their shards, its slices sent to the workers and their shards received;
        or, along the chain, its source sent to the next rank and the last rank's result received."""
        options, t, ranks = part.options, part.tensor, len(source_places)
        root = options.root
        bound = bound_treduce([x] * ranks, dst, options)  # checks dst; the plan
        variant = bound.plan.variant
        if (variant in RUNS_ON_RANKS) != self.runs_on_ranks(part):
            raise CommError("the root's plan with this dst differs from the plan every rank made of the call")
        adapter, device, dtype, itemsize = t.adapter, self.device, t.dtype, t.itemsize
        nbytes = int(np.prod(t.shape)) * itemsize
        peers = [r for r in range(ranks) if r != root]
        # a strided dst gets the packed result by a treduce of one rank (a copy)
        copy_options = dataclasses.replace(options, root=0, valid="dynamic", accumulate=None, dispatch=None,
                                           transport="")

        def check_call(x, dst, timeout: float):
            self.pending_source = None  # what the root described: it sends from x itself
            pointers, tensors = [0] * ranks, [None] * ranks  # the others' data is not here yet
            pointers[root], tensors[root] = adapter.pointer(x), x
            out = bound.checked_dst(pointers, tensors, dst)
            return (lambda epoch: out if nbytes == 0 else run(x, out, timeout)), ""

        def run(x, out, timeout: float):
            source = adapter.contiguous(x)
            packed_out = out if _is_contiguous(adapter, out, t.shape) else adapter.empty(x, t.shape, dtype)
            stream = adapter.stream(device)
            source_at, out_at = adapter.pointer(source), adapter.pointer(packed_out)
            with self._enqueueing(stream, timeout):
                if variant == "chain":
                    self.nccl.chain(source_at, out_at, nbytes, _chain_chunk_bytes(nbytes), _fold_order(ranks, root),
                                    stream, None, timeout)
                elif variant == "scatter_gather":
                    self.nccl.exchange_shards(source_at, out_at, *_shards(nbytes, ranks, root), root,
                                              _step_bytes(nbytes, ranks), stream, None, timeout)
                else:
                    fold = _shard_fold(options, ranks, dtype, itemsize, device, stream)

                    def staged_fold(offset: int, length: int, staged: List[int]):
                        pointers = list(staged)
                        pointers.insert(root, source_at + offset)
                        fold(offset, length, pointers, out_at + offset)

                    self.nccl.gather(nbytes, _chunk_bytes(nbytes, itemsize), peers, stream, staged_fold, timeout)
            if packed_out is not out:
                bound_treduce([packed_out], out, copy_options).run([packed_out], out)
            return out
        return check_call

    @contextlib.contextmanager
    def _enqueueing(self, stream: int, timeout: float):
        """This rank's NCCL work of a call: watched once enqueued, even where a fold failed (its
        peers' operations were all matched); a call that could not enqueue all of it aborted NCCL,
        and breaks the communicator."""
        try:
            yield
        except RuntimeError as e:
            if self.nccl.aborted() and not self.comm.broken:
                self.comm.broken = f"rank {self.comm.rank}'s NCCL transfer failed: {e}"
            raise
        finally:
            self.nccl.watch(stream, timeout)

    def release(self) -> None:
        self.watchdog.stop()
        self.nccl = None  # ncclCommDestroy, once this rank's pending operations are done


def _why_stuck(nccl, comm) -> str:
    """Why the oldest call in flight cannot finish (the watchdog asks), or ''."""
    oldest = nccl.oldest_in_flight()
    if oldest is None:
        return ""
    age, timeout = oldest
    error = nccl.async_error()
    why = (exited_ranks(comm) or (f"NCCL reports: {error}" if error else "")
           or (f"it did not finish within its timeout ({timeout:g} s)" if age > timeout else ""))
    return f"a call's NCCL transfer was abandoned: {why}; the NCCL communicator was aborted" if why else ""


def _abandon_calls(nccl, comm) -> None:
    nccl.abort()


def _shared_gpus(places) -> str:
    """Which ranks on one host (as NCCL tells hosts apart) name the same device ('' for none), for an
    error; places[r]: rank r's [host, device]."""
    first, shared = {}, []
    for r, where in enumerate(map(tuple, places)):
        if where in first:
            shared.append(f"ranks {first[where]} and {r} both use cuda:{where[1]} on host {where[0]!r}")
        first.setdefault(where, r)
    return ", ".join(shared)


def _chunk_bytes(nbytes: int, itemsize: int) -> int:
    """Bytes of a rank's source root_pull sends (and the root stages) at a time."""
    return min(nbytes, CHUNK_BYTES // itemsize * itemsize)


def _shards(nbytes: int, ranks: int, root: int):
    """scatter_gather's shards of a packed tensor: (bounds, workers), shard k = bytes [bounds[k],
    bounds[k + 1]) folded by workers[k] (the non-root ranks ascending); every rank cuts alike."""
    workers = [r for r in range(ranks) if r != root]
    bounds = [nbytes * k // len(workers) // ALIGN * ALIGN for k in range(len(workers))] + [nbytes]
    return bounds, workers


def _step_bytes(nbytes: int, ranks: int) -> int:
    """Bytes of every shard a step exchanges."""
    shard = -(-nbytes // (ranks - 1))
    step = min(CHUNK_BYTES, max(MIN_STEP_BYTES, -(-shard // SHARD_STEPS)))
    return -(-step // ALIGN) * ALIGN


def _shard_fold(options: TreduceOptions, ranks: int, dtype: str, itemsize: int, device: int, stream: int):
    """fold(offset, length, pointers, result): on `stream`, the one-process treduce of every rank's
    copy of bytes [offset, offset + length) (pointers[r]: rank r's, all on this GPU) into `result`."""
    devices, streams, folding = [device] * ranks, [stream] * ranks, fold_options(options)

    def fold(offset: int, length: int, pointers: List[int], result: int) -> None:
        core = contiguous_plan(folding, ranks, length // itemsize, dtype, device)
        core.run_collective(pointers, devices, result, device, streams)
    return fold


def _fold_order(ranks: int, root: int) -> List[int]:
    """The ranks in the order treduce folds them: the root, then the others ascending."""
    return [root] + [r for r in range(ranks) if r != root]


def _chain_chunk_bytes(nbytes: int) -> int:
    """Bytes of the chain's partial a rank receives, folds and sends on at a time."""
    chunk = min(CHUNK_BYTES, max(MIN_CHAIN_CHUNK, -(-nbytes // CHAIN_CHUNKS)))
    return -(-chunk // ALIGN) * ALIGN


def _link_fold(options: TreduceOptions, dtype: str, itemsize: int, device: int, stream: int, source: int):
    """link_fold(offset, length, partial, result): on `stream`, the partial (the chain's so far, in
    the operand dtype) then this rank's own bytes [offset, offset + length) of `source`, folded
    into `result`: the one-process treduce of the two, the partial first."""
    fold = _shard_fold(dataclasses.replace(options, root=0), 2, dtype, itemsize, device, stream)

    def link_fold(offset: int, length: int, partial: int, result: int) -> None:
        fold(offset, length, [partial, source + offset], result)
    return link_fold


def _is_contiguous(adapter, x, shape) -> bool:
    return all(s == c or d == 1 for s, c, d in zip(adapter.strides(x), c_strides(shape), shape))
