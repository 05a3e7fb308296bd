"""Transport: what a transport of treduce across processes does, in the order a call does it
(every rank calls treduce; processes/call.py runs the rendezvous around these steps)."""
from __future__ import annotations

from typing import Callable, List

from ..one_process.core_plan import RanksLayout, plan_for_layout

__all__ = ["Transport", "RUNS_ON_RANKS"]

# the variants whose every rank runs a part of its own where the transport reaches every rank
RUNS_ON_RANKS = ("scatter_gather", "chain")


class Transport:
    """One rank's end of a transport, made at the communicator's first call (collectively)."""

    name = ""  # as tp.comm.init(transport=...) names it
    backend = ""  # the backend whose tensors it moves
    # whether every rank can run its own part of a call (a scatter_gather shard, a chain's step):
    # the transport reaches every rank's data from every rank
    reaches_every_rank = False

    def __init__(self, comm):
        self.comm = comm

    def describe_source(self, t, x) -> bytes:
        """Where this rank's source (x, read as RankTensor t) lies, for the root (posted with the
        call's signature); or, in a call whose ranks run their own parts, for every rank."""
        raise NotImplementedError

    def runs_on_ranks(self, part) -> bool:
        """Whether every rank runs its own part of this call (scatter_gather's shard, the chain's
        step, where the transport reaches every rank): then the root describes its source too,
        and the others start once they hear the root's verdict (which may tell them where dst
        lies). Decided once per checked call, from the signature every rank shares, as the
        root's plan decides it."""
        return self.planned_variant(part) in RUNS_ON_RANKS

    def planned_variant(self, part) -> str:
        """The variant every rank's plan of this call names ('' where the transport runs the
        call at the root, or the plan fails: the root's verdict then says why); once per checked call."""
        if not self.reaches_every_rank:
            return ""
        if part.variant is None:
            try:
                part.variant = self.rank_plan(part, part.tensor.strides).plan.variant
            except (TypeError, ValueError):  # the root's plan fails too: its verdict says why
                part.variant = ""
        return part.variant

    def rank_plan(self, part, dst_strides):
        """The bound plan a rank runs on pointers: every rank laid out as this one, dst with `dst_strides`."""
        t, comm = part.tensor, self.comm
        layout = RanksLayout(comm.world_size, t.dtype, tuple(t.shape), tuple(t.strides), tuple(dst_strides),
                             comm.device)
        return plan_for_layout(part.options, layout)

    def arrive(self, root: int, epoch: int, part, timeout: float) -> None:
        """A non-root rank whose own checks passed, right after posting and before the root's
        verdict: what it can start already (the verdict's round trip is then off the critical
        path); `timeout` is the call's. Undone by cancel(). Should it fail, nothing may wait for
        it (the call may go on)."""

    def cancel(self, root: int, epoch: int) -> None:
        """The call failed after arrive() (an error verdict, a timeout, the root's own failure)."""

    def finish_non_root(self, root: int, epoch: int, part, timeout: float, call_label: str,
                        source_places: List[bytes], root_message: str) -> None:
        """A non-root rank's end of an accepted call whose ranks' sources lie at `source_places`
        (as each described it); `root_message`: what the root's check_call told the others with
        its verdict."""

    def bind_root(self, x, source_places: List[bytes], part, dst) -> Callable:
        """The root's run of a call whose ranks' sources lie at `source_places`, in two steps:
        check_call(x, dst, timeout) makes the checks that depend on this call's root tensor x
        and dst (before the verdict, so every rank hears of a failure) and returns (run,
        message): run(epoch) runs the call (given `timeout` seconds) and returns its result;
        message is a text the others hear with the verdict ('' for none). A repeated call whose
        ranks post the same descriptions reuses check_call, so it keeps nothing that may change
        between calls of one signature (the root's tensor object, dst, their pointers)."""
        raise NotImplementedError

    def release(self) -> None:
        """Frees what the transport holds (the communicator closes)."""
