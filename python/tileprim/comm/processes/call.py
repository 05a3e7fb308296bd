"""treduce with one process per rank. Every rank calls it; each posts a description of its call
(its signature, and where its source lies for the root), and every rank checks that all posted
the same descriptions. Otherwise the root makes the checks that need the data (dst), says so (or
the error every rank then raises), and runs the one-process treduce over every rank's data as
its transport exposes it; where the ranks run their own parts (scatter_gather's shards, the
chain's steps, over CUDA IPC or NCCL) each rank runs its own part of that plan. So the fold order, the plan and the bits are the
one-process ones. The transports are in comm/transports/."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from ..._arrays.adapters import Unkeyable, placed_key
from ..._errors import DispatchError
from .._errors import CallTypeError, CommError, CommTimeout
from .._options import treduce_options
from ..one_process.calls import bound_treduce
from ..transports import TRANSPORTS
from .rank_part import RankPart, rank_part

__all__ = ["distributed_treduce", "distributed_plan"]

# A description that is a rank's own error, not a call: then b"T" (a TypeError) or b"V", and its text.
_OWN_ERROR = b"!"
# A verdict that accepts the call and carries a message of the root's transport to the others.
_ACCEPTED_WITH = "+"


def _disagreement(descriptions: List[bytes]) -> Optional[BaseException]:
    """The error every rank raises for this call (each works it out from the same descriptions),
    or None: the ranks' own failures, else the ways their calls differ."""
    failed = [(r, d[1:2], d[2:].decode()) for r, d in enumerate(descriptions) if d.startswith(_OWN_ERROR)]
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


def _source_places(descriptions: List[bytes]) -> List[bytes]:
    """Where each rank's source lies, as it described it for the root (its transport's words)."""
    return [d.split(b"\0", 1)[1] for d in descriptions]


def _transport_of(comm):
    """The communicator's transport, made at its first call (every rank's first call: collective)."""
    state = comm.state
    if "transport" not in state:
        try:
            state["transport"] = TRANSPORTS[comm.transport](comm)
        except CommError as e:
            comm.broken = str(e)
            raise
    return state["transport"]


def distributed_treduce(group, dst, timeout: float, *, op, tile, pingpong, valid, accumulate, backend, dispatch):
    """tp.comm.treduce of a distributed group. The options are checked here, among this rank's
    own checks, so that every rank hears of a rank's bad call and raises its error."""
    comm = group.comm
    if backend is not None and backend != comm.backend:
        raise ValueError(f"backend: {backend!r}, but the communicator's is {comm.backend!r}")
    epoch = comm.next_call()
    rendezvous, root = comm.rendezvous, group.root
    call_label = f"treduce (call {epoch}, rank {comm.rank})"
    transport = _transport_of(comm)
    own_error: Optional[BaseException] = None
    part, runs_on_ranks = None, False
    try:
        options = treduce_options(op, root, tile, pingpong, valid, accumulate, comm.backend, dispatch, comm.transport)
        part = rank_part(group, options)
        runs_on_ranks = transport.runs_on_ranks(part)
        source_place = transport.describe_source(part.tensor, group.tensor) if comm.rank != root or runs_on_ranks else b""
        description = part.signature + b"\0" + source_place
    except (TypeError, ValueError) as e:
        own_error = e
        description = _OWN_ERROR + (b"T" if isinstance(e, TypeError) else b"V") + str(e).encode()
    arrived = False
    try:
        rendezvous.post(epoch, description)
        if comm.rank != root and own_error is None and not runs_on_ranks:
            try:
                transport.arrive(root, epoch, part, timeout)
                arrived = True
            except Exception as e:  # noqa: BLE001 - this rank's own failure, told to the others at the verdict
                own_error = e
        try:
            descriptions = rendezvous.descriptions(epoch, timeout, call_label)
            _check_agreement(comm, descriptions, own_error)
        except BaseException:
            if arrived:
                transport.cancel(root, epoch)
            raise
        if comm.rank != root:
            _finish_non_root(transport, rendezvous, root, epoch, own_error, part, timeout, call_label, descriptions)
            return None
        return _run_root(comm, group, part, epoch, timeout, call_label, dst)
    except CommError as e:
        comm.broken = str(e)
        raise


def _check_agreement(comm, descriptions: List[bytes], own_error) -> None:
    """Every rank, root or not, checks the call's descriptions itself: ranks that disagree on the
    root would otherwise wait for different judges. A call like the last agreed one is agreed."""
    if descriptions == comm.state.get("agreed"):
        return
    error = _disagreement(descriptions)
    if error is not None:
        raise error from own_error
    comm.state["agreed"] = descriptions


def _finish_non_root(transport, rendezvous, root: int, epoch: int, own_error, part: RankPart, timeout: float,
                     call_label: str, descriptions: List[bytes]) -> None:
    """A non-root rank's side of a call every rank agreed on: the root's verdict, the finish."""
    try:
        # the root decides within `timeout`; hear its verdict a little longer than that
        verdict = rendezvous.verdict(root, epoch, timeout * 1.1 + 1, call_label)
    except CommError:
        transport.cancel(root, epoch)
        raise
    if verdict and not verdict.startswith(_ACCEPTED_WITH):
        transport.cancel(root, epoch)
        kind, text = verdict.split("\0", 1)
        raise _VERDICT_ERRORS[kind](text)
    if own_error is not None:  # its arrive failed, yet "ready" was said: the root's run went on
        raise own_error
    transport.finish_non_root(root, epoch, part, timeout, call_label, _source_places(descriptions),
                              verdict[len(_ACCEPTED_WITH):])


_VERDICT_ERRORS = {"ValueError": ValueError, "TypeError": CallTypeError, "DispatchError": DispatchError,
                   "CommError": CommError, "CommTimeout": CommTimeout}


def _verdict_kind(e: BaseException) -> str:
    """The kind (_VERDICT_ERRORS) of the root's own failure of a call the ranks agreed on."""
    for kind in ("DispatchError", "TypeError", "ValueError"):
        if isinstance(e, _VERDICT_ERRORS[kind]):
            return kind
    return "ValueError"


def _run_root(comm, group, part: RankPart, epoch: int, timeout: float, call_label: str, dst):
    """The root's side once every rank agreed: the verdict, the one-process run, the release.
    A call with the options, root tensor layout, descriptions and dst layout of the last accepted
    call is that call again: its checks and binding stand."""
    rendezvous, root, transport = comm.rendezvous, group.root, comm.state["transport"]
    descriptions = comm.state["agreed"]
    try:
        repeat_key = (part.options, placed_key(group.tensor), descriptions,
                      None if dst is None else placed_key(dst))
    except Unkeyable:
        repeat_key = None
    last_call = comm.state.get("last_call")
    repeated = repeat_key is not None and last_call is not None and last_call[0] == repeat_key
    try:
        check_call = (last_call[1] if repeated else
                      transport.bind_root(group.tensor, _source_places(descriptions), part, dst))
        run, message = check_call(group.tensor, dst, timeout)
    except Exception as e:  # the others hear it too, whatever it was, instead of waiting for a run
        kind = _verdict_kind(e)
        why = str(e) if isinstance(e, (TypeError, ValueError)) else f"{type(e).__name__}: {e}"
        text = f"rank {root} (the root): {why}"
        rendezvous.publish_verdict(epoch, f"{kind}\0{text}")
        raise _VERDICT_ERRORS[kind](text) from e
    if not repeated:
        comm.state["last_call"] = (repeat_key, check_call) if repeat_key is not None else None
    rendezvous.publish_verdict(epoch, _ACCEPTED_WITH + message if message else "")
    try:
        return run(epoch)
    except BaseException:
        transport.cancel(root, epoch)  # the others' streams may wait for this call's "done"
        raise
    finally:
        rendezvous.release(epoch)


def distributed_plan(group, dst, *, op, tile, pingpong, valid, accumulate, dispatch):
    """The plan every rank's call gets (nothing is exchanged or run): this rank's tensor standing
    for every rank's, laid out as the transport lays them out."""
    comm = group.comm
    options = treduce_options(op, group.root, tile, pingpong, valid, accumulate, comm.backend, dispatch, comm.transport)
    RankPart(group, options)
    x = np.ascontiguousarray(group.tensor) if comm.transport == "shm" else group.tensor
    return bound_treduce([x] * comm.world_size, dst, options).plan
