"""The pieces of the transports' watchdog that run without a GPU: the thread that breaks a
communicator once its transport says why the calls in flight cannot finish (then ends the
waits), and the host flag that ends them, which only rises."""
from __future__ import annotations

import gc
import threading
import time

import numpy as np

from tileprim import _C
from tileprim.comm.transports.watchdog import WATCH_S, Watchdog, exited_ranks


class FakeRendezvous:
    def __init__(self):
        self.gone = []

    def exited(self):
        return list(self.gone)


class FakeComm:
    def __init__(self):
        self.rank, self.broken, self.rendezvous = 0, None, FakeRendezvous()


def wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(WATCH_S / 10)
    return condition()


def test_the_watchdog_breaks_the_communicator_with_the_reason_and_abandons_once():
    comm, abandoned = FakeComm(), []
    dog = Watchdog(comm, exited_ranks, lambda c: abandoned.append(c.broken), "test")
    try:
        time.sleep(3 * WATCH_S)
        assert comm.broken is None and not abandoned  # every rank alive: nothing happens
        comm.rendezvous.gone = [1, 3]
        assert wait_for(lambda: abandoned)
        assert comm.broken == "ranks 1, 3 exited" and abandoned == ["ranks 1, 3 exited"]
        assert wait_for(lambda: not dog.thread.is_alive())  # its work is done
    finally:
        dog.stop()
    assert abandoned == ["ranks 1, 3 exited"]


def test_the_watchdog_holds_its_communicator_weakly_and_stops_when_told():
    comm = FakeComm()
    dog = Watchdog(comm, exited_ranks, lambda c: None, "test")
    del comm
    gc.collect()
    assert wait_for(lambda: not dog.thread.is_alive())
    other = FakeComm()
    dog = Watchdog(other, exited_ranks, lambda c: None, "test")
    dog.stop()
    assert not dog.thread.is_alive() and other.broken is None


def test_a_host_flag_only_rises_also_when_threads_race():
    flag = np.zeros(1, np.uint64)
    address = flag.__array_interface__["data"][0]
    _C.raise_flag(address, 5)
    _C.raise_flag(address, 3)
    assert flag[0] == 5 and _C.observe_flag(address) == 5
    threads = [threading.Thread(target=lambda k=k: [_C.raise_flag(address, v) for v in range(k, 20000, 7)])
               for k in range(7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert flag[0] == 19999
