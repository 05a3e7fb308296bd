"""Bootstrap: how the ranks of a job tell each other the few bytes they exchange once (and, across
hosts, every call's descriptions): every rank's bytes to every rank, through an engine the
program already runs. The init-file engine is init_file.py's."""
from __future__ import annotations

from typing import List

__all__ = ["Bootstrap", "TorchBootstrap", "MpiBootstrap"]


class Bootstrap:
    """Every rank's bytes to every rank (all_gather), through the program's own engine."""

    name = "single"

    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size = rank, world_size

    def all_gather(self, payload: bytes, timeout: float) -> List[bytes]:
        return [payload]

    def close(self) -> None:
        pass


class TorchBootstrap(Bootstrap):
    name = "torch.distributed"

    def __init__(self, rank, world_size, dist):
        super().__init__(rank, world_size)
        self.dist = dist

    def all_gather(self, payload, timeout):
        out: List = [None] * self.world_size
        self.dist.all_gather_object(out, payload)
        return out


class MpiBootstrap(Bootstrap):
    name = "mpi4py"

    def __init__(self, rank, world_size, world):
        super().__init__(rank, world_size)
        self.world = world

    def all_gather(self, payload, timeout):
        return self.world.allgather(payload)
