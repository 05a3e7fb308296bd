"""Bootstrap: how the ranks of a job tell each other the few bytes they exchange once (and, across
hosts, every call's descriptions): every rank's bytes to every rank, through an engine the
program already runs. The init-file engine is init_file.py's."""
from __future__ import annotations

from typing import List

__all__ = ["Bootstrap", "TorchBootstrap", "MpiBootstrap"]


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


class MpiBootstrap(Bootstrap):
    """Through mpi4py (the engine: COMM_WORLD)."""

    name = "mpi4py"

    def all_gather(self, payload, timeout):
        return self.engine.allgather(payload)
