"""How a process learns its place in a multi-process job: the launcher's environment names the
rank and world size (and the rank on its host), and the engine the program already runs, or a
file every rank can see, becomes the bootstrap the ranks meet through once. Nothing here moves
tensors."""
from __future__ import annotations

import os
import socket
import sys
from typing import Optional, Tuple

from .bootstrap import Bootstrap, MpiBootstrap, StoreBootstrap, TorchBootstrap
from .init_file import FileBootstrap

__all__ = ["rank_and_world", "local_rank", "choose_bootstrap", "host_id"]

# (rank, world size) variables, by launcher: torchrun, Open MPI, MPICH/Intel MPI (PMI), Slurm.
_RANK_VARIABLES = (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                   ("PMI_RANK", "PMI_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"))
_LOCAL_RANK_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")


def _env_int(name: str) -> Optional[int]:
    text = os.environ.get(name)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"environment variable {name}={text!r} is not an integer") from None


def _launcher() -> Tuple[Optional[int], Optional[int]]:
    for rank_name, size_name in _RANK_VARIABLES:
        rank, size = _env_int(rank_name), _env_int(size_name)
        if rank is not None and size is not None:
            return rank, size
    return None, None


def _torch_group():
    """torch.distributed's default group when the program initialised one (never imports torch)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def _torchrun_store(timeout: float):
    """A client of the store torchrun's agent runs for its workers (TORCHELASTIC_USE_AGENT_STORE),
    under the prefix of this attempt, as torch's env:// rendezvous reaches it; None elsewhere (where
    rank 0 would have to host a store on MASTER_PORT, which the program's own process group may
    want next)."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True" or "MASTER_ADDR" not in os.environ:
        return None
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    from datetime import timedelta
    port = _env_int("MASTER_PORT")
    if port is None or not dist.is_available():
        return None
    store = dist.TCPStore(os.environ["MASTER_ADDR"], port, is_master=False,
                          timeout=timedelta(seconds=min(timeout, 1e6)))
    return dist.PrefixStore(f"/worker/attempt_{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)


def _mpi_world():
    """mpi4py's COMM_WORLD when this process runs under an MPI launcher and mpi4py is installed."""
    if not any(name in os.environ for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")):
        return None
    try:
        from mpi4py import MPI  # type: ignore[import-not-found]
    except ImportError:
        return None
    return MPI.COMM_WORLD


def rank_and_world(rank: Optional[int], world_size: Optional[int]) -> Tuple[int, int]:
    """The rank and world size from the arguments, else torch.distributed, else the launcher's
    environment; a process started alone is rank 0 of 1. Both checked."""
    dist = _torch_group()
    env_rank, env_size = (dist.get_rank(), dist.get_world_size()) if dist is not None else _launcher()
    rank = env_rank if rank is None else rank
    world_size = env_size if world_size is None else world_size
    if rank is None and world_size in (None, 1):
        rank, world_size = 0, 1
    if rank is None or world_size is None:
        raise ValueError("rank, world_size: pass both, or start the program with a launcher that sets them "
                         "(torchrun: RANK/WORLD_SIZE, mpirun, srun)")
    for name, value in (("rank", rank), ("world_size", world_size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name}: expected an int, not {value!r}")
    if world_size < 1:
        raise ValueError(f"world_size: {world_size} < 1")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank: {rank} is not in 0 .. {world_size - 1} (world_size {world_size})")
    return rank, world_size


def local_rank() -> Optional[int]:
    """This process's index among the ranks of its host, where the launcher says."""
    for name in _LOCAL_RANK_VARIABLES:
        value = _env_int(name)
        if value is not None:
            return value
    return None


def choose_bootstrap(rank: int, world_size: int, init_file, timeout: float) -> Bootstrap:
    """An explicit init_file, else torch.distributed's initialised group, else mpi4py under an MPI
    launcher; a world of one needs none; else torchrun's own store."""
    if init_file is not None:
        return FileBootstrap(rank, world_size, init_file, timeout)
    dist = _torch_group()
    if dist is not None:
        return TorchBootstrap(rank, world_size, dist)
    world = _mpi_world()
    if world is not None:
        return MpiBootstrap(rank, world_size, world)
    if world_size == 1:
        return Bootstrap(rank, world_size)
    store = _torchrun_store(timeout)
    if store is not None:
        return StoreBootstrap(rank, world_size, store)
    raise ValueError("init_file: the ranks need a way to meet: run under torchrun, initialise torch.distributed, "
                     "run under mpirun with mpi4py installed, or pass init_file= (a path every rank can see)")


def host_id() -> str:
    """Which host this process runs on, as the ranks compare it (shared memory and CUDA IPC need
    one): $TILEPRIM_HOST_ID when set (e.g. to run the multi-host path on one machine), else the
    host name and boot id."""
    if os.environ.get("TILEPRIM_HOST_ID"):
        return os.environ["TILEPRIM_HOST_ID"]
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f"{socket.gethostname()}/{f.read().strip()}"
    except OSError:
        return socket.gethostname()
