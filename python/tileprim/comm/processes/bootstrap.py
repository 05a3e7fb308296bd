"""Bootstrap: how the ranks of a job tell each other the few bytes they exchange once (and, across
hosts, every call's descriptions): every rank's bytes to every rank, through an engine the
program already runs. The init-file engine is init_file.py's."""
from __future__ import annotations

from typing import List

__all__ = ["Bootstrap", "TorchBootstrap", "StoreBootstrap", "MpiBootstrap"]


class Bootstrap:
    """Every rank's bytes to every rank (all_gather), through the program's own `engine` (none
    for a world of one)."""

    name = "single"

    def __init__(self, rank: int, world_size: int, engine=None):
        self.rank, self.world_size, self.engine = rank, world_size, engine

    def all_gather(self, payload: bytes, timeout: float) -> List[bytes]:
        return [payload]

    def close(self) -> None:
        pass


class TorchBootstrap(Bootstrap):
    """Through torch.distributed's default group (the engine: torch.distributed)."""

    name = "torch.distributed"

    def all_gather(self, payload, timeout):
        out: List = [None] * self.world_size
        self.engine.all_gather_object(out, payload)
        return out


class StoreBootstrap(Bootstrap):
    """Through the key-value store torchrun's agent keeps for its workers (the engine: a client of
    torch.distributed's TCPStore at MASTER_ADDR:MASTER_PORT, as torch's env:// rendezvous reaches it),
    where the program initialised no process group. Each communicator's exchanges are keyed apart:
    the n-th init of every rank shares one prefix (each rank counts its own), each exchange a round."""

    name = "torchrun's store"

    def __init__(self, rank: int, world_size: int, store):
        super().__init__(rank, world_size, store)
        self._prefix = f"tileprim/{store.add(f'tileprim/inits/{rank}', 1)}/"
        self._round = 0

    def all_gather(self, payload, timeout):
        from datetime import timedelta
        keys = [f"{self._prefix}{self._round}/{r}" for r in range(self.world_size)]
        self._round += 1
        self.engine.set(keys[self.rank], payload)
        self.engine.wait(keys, timedelta(seconds=min(timeout, 1e6)))
        return [bytes(self.engine.get(k)) for k in keys]


class MpiBootstrap(Bootstrap):
    """Through mpi4py (the engine: COMM_WORLD)."""

    name = "mpi4py"

    def all_gather(self, payload, timeout):
        return self.engine.allgather(payload)
