"""treduce with one process per rank. Every rank posts its call (a signature every rank must
share, and where its data is) in the rendezvous and reads every rank's: ranks whose calls
differ (the root included) or failed their own checks all raise the same error, worked out from
the same descriptions. Otherwise the root makes the checks that need the data (dst), says so (or
the error every rank then raises), and runs the one-process treduce over every rank's data as
its transport exposes it; where the ranks work apart (scatter_gather over CUDA IPC) each rank
runs its own part of that plan. So the fold order, the plan and the bits are the one-process ones.

Transports (the communicator's): 'shm' (_shm.py), each rank's source copied into its own
shared-memory buffer, which the root maps; 'cuda_ipc' (_ipc.py), the root maps each rank's GPU
buffer and GPU-side flags order the ranks' streams; 'nccl' (_nccl.py), each rank sends its source
to the root, which folds it chunk by chunk as it lands."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from .._interop import PLACED_KEYS, Unkeyable, adapter_for, array_pointer, placed_key, remember_device_type
from .._errors import DispatchError
from ._errors import CallTypeError, CommError, CommTimeout
from ._group import DistributedGroup, ParallelGroup
from ._ipc import IpcSources
from ._nccl import NcclSources
from ._one_process import RankTensor, bound_call, check_options, options_keyable
from ._shm import ShmSources

__all__ = ["distributed_treduce", "distributed_plan"]

_FAILED = b"!"  # a description that is a rank's own error, not a call: then b"T" (a TypeError) or b"V", and its text
_TOLD = "+"  # a verdict that accepts the call and tells the others what the root's transport told them


_CHECKED: dict = {}  # (tensor key, options) -> a _Local already checked: a repeated call re-reads the pointer only
_CHECKED_LIMIT = 1024


def _local(group: DistributedGroup, op, tile, pingpong, valid, accumulate, dispatch) -> "_Local":
    x = group.tensor
    key = local = None
    if options_keyable(tile, pingpong):
        try:
            key = (PLACED_KEYS[type(x)](x), op, tuple(tile), pingpong, valid, accumulate, dispatch, group.root,
                   group.comm.job)  # not id(): a later communicator may reuse a closed one's
            local = _CHECKED.get(key)
        except (KeyError, TypeError, AttributeError):  # an array of a type not yet keyed; an unhashable option
            key = None
    if local is not None:
        local.tensor.pointer = local.tensor.adapter.pointer(x) if local.tensor.adapter else array_pointer(x)
        return local
    local = _Local(group, op, tile, pingpong, valid, accumulate, dispatch)
    if key is not None:
        if len(_CHECKED) >= _CHECKED_LIMIT:
            _CHECKED.clear()
        _CHECKED[key] = local
    return local


class _Local:
    """This rank's part of the call, checked: its tensor, and the signature all ranks must share."""

    def __init__(self, group: DistributedGroup, op, tile, pingpong, valid, accumulate, dispatch):
        check_options(op, tile, pingpong, valid, accumulate, dispatch)
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
        strides = f" strides={self.tensor.strides}" if comm.transport == "cuda_ipc" else ""
        self.options = (op, tuple(tile), bool(pingpong), valid, accumulate, dispatch)
        self.apart = None  # whether the ranks work apart on this call: the transport decides, once
        self.signature = (f"treduce(op={op!r}, {self.tensor.dtype} {tuple(self.tensor.shape)}{strides}, "
                          f"root={group.root}, tile={tuple(tile)}, pingpong={bool(pingpong)}, valid={valid!r}, "
                          f"accumulate={accumulate!r}, dispatch={dispatch!r})").encode()


def _disagreement(descriptions: List[bytes]) -> Optional[BaseException]:
    """The error every rank raises for this call (each works it out from the same descriptions),
    or None: the ranks' own failures, else the ways their calls differ."""
    failed = [(r, d[1:2], d[2:].decode()) for r, d in enumerate(descriptions) if d.startswith(_FAILED)]
    if failed:
        kind = CallTypeError if any(k == b"T" for _, k, _ in failed) else ValueError
        return kind("; ".join(f"rank {r}: {why}" for r, _, why in failed))
    signatures = [d.split(b"\0", 1)[0].decode() for d in descriptions]
    if len(set(signatures)) == 1:
        return None
    groups: dict = {}
    for r, s in enumerate(signatures):
        groups.setdefault(s, []).append(r)
    return ValueError("the ranks called differently (every rank's tensor has one shape, dtype and layout, and the "
                      "options agree): " + "; ".join(f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}: {s}"
                                                     for s, rs in groups.items()))


_SOURCES = {"shm": ShmSources, "cuda_ipc": IpcSources, "nccl": NcclSources}


def _transport(comm):
    """The communicator's transport, made at its first call (every rank's first call: collective)."""
    state = comm.state
    if "sources" not in state:
        try:
            state["sources"] = _SOURCES[comm.transport](comm)
        except CommError as e:
            comm.broken = str(e)
            raise
    return state["sources"]


def distributed_treduce(group: DistributedGroup, dst, op, tile, pingpong, valid, accumulate, backend, dispatch,
                        timeout: float):
    comm = group.comm
    if backend is not None and backend != comm.backend:
        raise ValueError(f"backend: {backend!r}, but the communicator's is {comm.backend!r}")
    epoch = comm.next_call()
    rendezvous, root = comm.rendezvous, group.root
    what = f"treduce (call {epoch}, rank {comm.rank})"
    sources = _transport(comm)
    local_error: Optional[BaseException] = None
    local, apart = None, False
    try:
        local = _local(group, op, tile, pingpong, valid, accumulate, dispatch)
        apart = sources.works_apart(local, root)
        where = sources.offer(local.tensor, group.tensor) if comm.rank != root or apart else b""
        description = local.signature + b"\0" + where
    except (TypeError, ValueError) as e:
        local_error = e
        description = _FAILED + (b"T" if isinstance(e, TypeError) else b"V") + str(e).encode()
    arrived = False
    try:
        rendezvous.post(epoch, description)
        if comm.rank != root and local_error is None and not apart:
            try:
                sources.arrive(root, epoch, local, timeout)
                arrived = True
            except Exception as e:  # noqa: BLE001 - this rank's own failure, told to the others at the verdict
                local_error = e
        try:
            descriptions = rendezvous.descriptions(epoch, timeout, what)
            _agree(comm, descriptions, local_error)
        except BaseException:
            if arrived:
                sources.cancel(root, epoch)
            raise
        if comm.rank != root:
            _non_root(sources, rendezvous, root, epoch, local_error, local, timeout, what, descriptions)
            return None
        return _root(comm, group, local, epoch, timeout, what,
                     dst, (op, tile, pingpong, valid, accumulate, comm.backend, dispatch, comm.transport))
    except CommError as e:
        comm.broken = str(e)
        raise


def _agree(comm, descriptions: List[bytes], local_error) -> None:
    """Every rank, root or not, checks the call's descriptions itself: ranks that disagree on the
    root would otherwise wait for different judges. A call like the last agreed one is agreed."""
    if descriptions == comm.state.get("agreed"):
        return
    error = _disagreement(descriptions)
    if error is not None:
        raise error from local_error
    comm.state["agreed"] = descriptions


def _non_root(sources, rendezvous, root: int, epoch: int, local_error, local, timeout: float, what: str,
              descriptions: List[bytes]) -> None:
    """A non-root rank's side of a call every rank agreed on: the root's verdict, the finish."""
    try:
        # the root decides within `timeout`; hear its verdict a little longer than that
        verdict = rendezvous.verdict(root, epoch, timeout * 1.1 + 1, what)
    except CommError:
        sources.cancel(root, epoch)
        raise
    if verdict and not verdict.startswith(_TOLD):
        sources.cancel(root, epoch)
        kind, text = verdict.split("\0", 1)
        raise _VERDICTS[kind](text)
    if local_error is not None:  # its arrive failed, yet "ready" was said: the root's run went on
        raise local_error
    sources.finish_non_root(root, epoch, local, timeout, what, [d.split(b"\0", 1)[1] for d in descriptions],
                            verdict[len(_TOLD):])


_VERDICTS = {"ValueError": ValueError, "TypeError": CallTypeError, "DispatchError": DispatchError,
             "CommError": CommError, "CommTimeout": CommTimeout}


def _verdict_of(e: BaseException) -> str:
    """The kind (_VERDICTS) of the root's own failure of a call the ranks agreed on."""
    for kind in ("DispatchError", "TypeError", "ValueError"):
        if isinstance(e, _VERDICTS[kind]):
            return kind
    return "ValueError"


def _root(comm, group, local, epoch, timeout, what, dst, call):
    """The root's side once every rank agreed: the verdict, the one-process run, the release.
    A call whose ranks all post what they posted at the last accepted call, with a dst laid out
    alike, is that call again: its checks and binding stand."""
    rendezvous, root, sources = comm.rendezvous, group.root, comm.state["sources"]
    descriptions = comm.state["agreed"]
    try:
        again = (descriptions, local, None if dst is None else placed_key(dst))
    except Unkeyable:
        again = None
    last = comm.state.get("last_call")
    repeated = again is not None and last is not None and last[0] == again
    try:
        prepare = last[1] if repeated else sources.bind(group, [d.split(b"\0", 1)[1] for d in descriptions],
                                                         local, dst, call)
        go, told = prepare(group.tensor, dst, timeout)
    except Exception as e:  # the others hear it too, whatever it was, instead of waiting for a run
        kind = _verdict_of(e)
        why = str(e) if isinstance(e, (TypeError, ValueError)) else f"{type(e).__name__}: {e}"
        text = f"rank {root} (the root): {why}"
        rendezvous.judge(epoch, f"{kind}\0{text}")
        raise _VERDICTS[kind](text) from e
    if not repeated:
        comm.state["last_call"] = (again, prepare) if again is not None else None
    rendezvous.judge(epoch, _TOLD + told if told else "")
    try:
        return go(epoch)
    except BaseException:
        sources.cancel(root, epoch)  # the others' streams may wait for this call's "done"
        raise
    finally:
        rendezvous.release(epoch)


def distributed_plan(group: DistributedGroup, dst, op, tile, pingpong, valid, accumulate, backend, dispatch):
    """The plan every rank's call gets (nothing is exchanged or run): this rank's tensor standing
    for every rank's, laid out as the transport lays them out."""
    comm = group.comm
    _Local(group, op, tile, pingpong, valid, accumulate, dispatch)
    x = np.ascontiguousarray(group.tensor) if comm.transport == "shm" else group.tensor
    return bound_call(ParallelGroup([x] * comm.world_size, group.root), dst, op, tile, pingpong, valid, accumulate,
                      comm.backend, dispatch, comm.transport).plan
