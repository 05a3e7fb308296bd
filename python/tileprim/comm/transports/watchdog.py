"""A transport's watchdog thread (as PyTorch's): a call returns once its GPU work is queued, so
a rank that dies while the others' GPUs still wait on it is seen here, not by any call. Every
WATCH_S the thread asks why_stuck(comm) why the calls in flight cannot finish; given a reason, it
breaks the communicator with it (the next call raises CommError saying why) and calls
abandon(comm), which ends the waits. The thread holds the communicator weakly: why_stuck and
abandon must not hold it either."""
from __future__ import annotations

import threading
import weakref
from typing import Callable

__all__ = ["Watchdog", "exited_ranks"]

WATCH_S = 0.1


class Watchdog:
    def __init__(self, comm, why_stuck: Callable[[object], str], abandon: Callable[[object], None], name: str):
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=_watch, args=(weakref.ref(comm), why_stuck, abandon, self.stopped),
                                       name=f"tileprim-{name}-watchdog-{comm.rank}", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


def _watch(comm_ref, why_stuck, abandon, stopped: threading.Event) -> None:
    while not stopped.wait(WATCH_S):
        comm = comm_ref()
        if comm is None:
            return
        why = why_stuck(comm)
        if why:
            comm.broken = why
            abandon(comm)
            return
        del comm


def exited_ranks(comm) -> str:
    """'rank 1 exited' (the ranks whose processes are gone: one host only), or ''."""
    gone = comm.rendezvous.exited()
    return f"rank{'s' if len(gone) > 1 else ''} {', '.join(map(str, gone))} exited" if gone else ""
