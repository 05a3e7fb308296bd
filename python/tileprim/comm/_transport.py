"""What a transport of treduce across processes does, in the order a call does it (every rank
calls treduce; _distributed.py runs the rendezvous around these steps)."""
from __future__ import annotations

from typing import Callable, List

from ._one_process import laid_out_core

__all__ = ["Transport"]


class Transport:
    """One rank's end of a transport, made at the communicator's first call (collectively)."""

    shards_apart = False  # whether each rank runs its own shard of a scatter_gather call (works_apart)

    def offer(self, t, x) -> bytes:
        """Where this rank's source lies, for the root (posted with the call's signature); or, in a
        call whose ranks work apart, for every rank."""
        raise NotImplementedError

    def works_apart(self, local, root: int) -> bool:
        """Whether every rank runs its own share of this call (scatter_gather, where the transport
        reaches every rank: shards_apart): then the root offers its source too, and the others
        start once they hear the root's verdict (which may tell them where dst lies). Decided once
        per checked call, from the signature every rank shares, as the root's plan decides it."""
        if not self.shards_apart:
            return False
        if local.apart is None:
            try:
                local.apart = self.rank_core(local, root, local.tensor.strides).plan.variant == "scatter_gather"
            except (TypeError, ValueError):  # the root's plan fails too: its verdict says why
                local.apart = False
        return local.apart

    def rank_core(self, local, root: int, dst_strides):
        """The bound plan a rank runs on pointers: every rank laid out as this one, dst with `dst_strides`."""
        t, comm = local.tensor, self.comm
        return laid_out_core(comm.world_size, root, t.dtype, tuple(t.shape), tuple(t.strides), tuple(dst_strides),
                             comm.device, *local.options, comm.transport)

    def arrive(self, root: int, epoch: int, local, timeout: float) -> None:
        """A non-root rank whose own checks passed, right after posting and before the root's
        verdict: what it can start already (the verdict's round trip is then off the critical
        path); `timeout` is the call's. Undone by cancel(). Should it fail, nothing may wait for
        it (the call may go on)."""

    def cancel(self, root: int, epoch: int) -> None:
        """The call failed after arrive() (an error verdict, a timeout, the root's own failure)."""

    def finish_non_root(self, root: int, epoch: int, local, timeout: float, what: str, wheres: List[bytes],
                        told: str) -> None:
        """A non-root rank's end of an accepted call whose ranks lie at `wheres`; `told`: what the
        root's prepare told the others with its verdict."""

    def bind(self, group, wheres: List[bytes], local, dst, call) -> Callable:
        """The root's run of a call whose ranks lie at `wheres`, in two steps:
        prepare(x, dst, timeout) makes the checks that depend on this call's root tensor x and
        dst (before the verdict, so every rank hears of a failure) and returns (go, told):
        go(epoch) runs the call (given `timeout` seconds) and returns its result; told is a text
        the others hear with the verdict ('' for none). A repeated call whose ranks post the same
        descriptions reuses prepare, so it keeps nothing that may change between calls of one
        signature (the root's tensor object, dst, their pointers)."""
        raise NotImplementedError

    def release(self) -> None:
        """Frees what the transport holds (the communicator closes)."""
