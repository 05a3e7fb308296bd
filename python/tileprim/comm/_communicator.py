"""tp.comm.init: this process's membership of a multi-process job (torchrun, mpirun, or any
launcher with a shared init file). The ranks meet once through the bootstrap, agree on the
backend and transport, and, on one host, share a rendezvous segment that every later call meets
in (across hosts, calls meet through the bootstrap)."""
from __future__ import annotations

import json
import os
import uuid
import weakref
from typing import Dict, List, Optional

from .._platform.backends import cuda_details, resolve_backend
from ._errors import CommError
from ._timeout import DEFAULT_TIMEOUT, check_timeout
from .processes.bootstrap import Bootstrap
from .processes.init_file import is_job
from .processes.launcher import choose_bootstrap, host_id, local_rank, rank_and_world
from .processes.rendezvous import SLOT, Rendezvous, SharedFile, remove_segment
from .processes.rendezvous_hosts import HostsRendezvous
from .transports import TRANSPORTS

__all__ = ["Communicator", "init", "default_communicator"]

_DEFAULT: Optional["Communicator"] = None


def _choose_device(backend: str, device) -> Optional[int]:
    if backend != "cuda":
        if device is not None:
            raise ValueError("device: only the cuda backend runs on a GPU; leave it None with backend='cpu'")
        return None
    count = len(cuda_details()["devices"])
    if device is None:
        device = (local_rank() or 0) % count
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device: expected a CUDA ordinal (int), not {device!r}")
    if not 0 <= device < count:
        raise ValueError(f"device: GPU {device} does not exist here ({count} visible)")
    return device


def _choose_transport(transport: Optional[str], backend: str, hosts: int) -> str:
    """The transport asked for, checked; by default shared memory or CUDA IPC on one host, NCCL
    across hosts (the only transport that leaves a host)."""
    if transport is None:
        if hosts > 1 and backend == "cpu":
            raise CommError(f"backend: the ranks run on {hosts} hosts, and the cpu backend's transport (shared "
                            "memory) reaches one host's ranks only; use backend='cuda' (NCCL between hosts)")
        return "nccl" if hosts > 1 else {"cpu": "shm", "cuda": "cuda_ipc"}[backend]
    if hosts > 1 and transport != "nccl":
        raise CommError(f"transport: {transport!r} reaches one host's ranks only, and they run on {hosts} hosts; "
                        "use transport='nccl'")
    return transport


_INFO_VERSION = 1
_INFO_FIELDS = {"version", "host", "pid", "backend", "device", "job", "transport"}


def _peer_info(data: bytes, rank: int) -> dict:
    """Rank `rank`'s bootstrap message (JSON), each field checked: plain data, never code."""
    try:
        info = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        info = None
    if not isinstance(info, dict) or set(info) != _INFO_FIELDS or info["version"] != _INFO_VERSION:
        raise CommError(f"the bootstrap: rank {rank} sent no tileprim message of version {_INFO_VERSION} "
                        f"(a JSON object of {', '.join(sorted(_INFO_FIELDS))}); every rank runs one tileprim")

    def integer(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)
    checks = {"host": isinstance(info["host"], str) and 0 < len(info["host"]) <= 1024,
              "pid": integer(info["pid"]) and 0 < info["pid"] < 1 << 31,
              "backend": info["backend"] in ("cpu", "cuda"),
              "device": info["device"] is None or (integer(info["device"]) and 0 <= info["device"] < 1 << 16),
              "job": is_job(info["job"]),
              "transport": info["transport"] is None or info["transport"] in TRANSPORTS}
    for field, ok in checks.items():
        if not ok:
            raise CommError(f"the bootstrap: rank {rank} sent {field}={info[field]!r}, which no rank sends")
    return info


def _agree(name: str, choices: List[str]) -> None:
    if len(set(choices)) > 1:
        raise CommError(f"{name}: the ranks chose differently: " +
                        ", ".join(f"rank {r} {c}" for r, c in enumerate(choices)) + f"; pass one {name}= on every rank")


class Communicator:
    """One rank of a job: ``rank``, ``world_size``, ``backend`` ('cpu' or 'cuda'), ``device`` (this
    rank's GPU), ``transport`` (how ranks' data meets: 'shm', 'cuda_ipc' or 'nccl') and
    ``bootstrap`` (how the ranks found each other). Made by :func:`tp.comm.init`; ``close()`` (or ``with``) frees it."""

    def __init__(self, rank: int, world_size: int, backend: str, device: Optional[int], bootstrap: Bootstrap,
                 timeout: float, transport: Optional[str] = None):
        self.rank, self.world_size, self.backend, self.device = rank, world_size, backend, device
        self.timeout, self._bootstrap = timeout, bootstrap
        own_info = {"version": _INFO_VERSION, "host": host_id(), "pid": os.getpid(), "backend": backend, "device": device,
                "job": uuid.uuid4().hex, "transport": transport}
        infos = [_peer_info(data, r) for r, data in
                 enumerate(bootstrap.all_gather(json.dumps(own_info).encode(), timeout))]
        self.job: str = infos[0]["job"]
        self.hosts: List[str] = [i["host"] for i in infos]
        self.devices: List[Optional[int]] = [i["device"] for i in infos]
        _agree("backend", [i["backend"] for i in infos])
        hosts = len(set(self.hosts))
        chosen = [_choose_transport(i["transport"], backend, hosts) for i in infos]
        _agree("transport", chosen)
        self.transport = chosen[rank]
        self.rendezvous = self._meet(timeout) if hosts == 1 else HostsRendezvous(bootstrap, rank, timeout)
        self.calls = 0                # collective calls so far: every rank numbers them alike
        self.broken: Optional[str] = None
        # between calls: the transport, the last agreed descriptions, the root's last call
        self.state: Dict[str, object] = {}
        self._finalizer = weakref.finalize(self, _release, self.state, bootstrap)

    def _meet(self, timeout: float) -> Rendezvous:
        """Rank 0 creates the rendezvous segment, every rank maps it, then its name goes (no
        leftovers: where the meeting fails, every rank removes the name, if it is this user's)."""
        name = f"tileprim-{self.job}"
        try:
            segment = SharedFile(name, self.world_size * SLOT, create=True) if self.rank == 0 else None
            self._bootstrap.all_gather(b"", timeout)
            segment = segment or SharedFile(name)
            rendezvous = Rendezvous(segment, self.rank, self.world_size, self.job)
            self._bootstrap.all_gather(b"", timeout)
        except BaseException:
            remove_segment(name)
            raise
        if self.rank == 0:
            segment.unlink()
        rendezvous.learn_pids()
        return rendezvous

    def next_call(self) -> int:
        """This call's number (the same on every rank), once the communicator is usable."""
        if self.broken:
            raise CommError(f"the communicator is broken: {self.broken}; make a new one with tp.comm.init()")
        if self._finalizer.alive is False:
            raise CommError("the communicator is closed")
        self.calls += 1
        return self.calls

    def close(self) -> None:
        """Frees this rank's shared buffers and the bootstrap's files, and removes what ranks that
        died left in shared memory; the communicator is unusable after."""
        if self._finalizer.alive and isinstance(self.rendezvous, Rendezvous):
            self.rendezvous.remove_leftovers()
        self._finalizer()

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f", device={self.device}" if self.device is not None else ""
        return (f"Communicator(rank={self.rank}, world_size={self.world_size}, backend={self.backend!r}{where}, "
                f"transport={self.transport!r}, bootstrap={self._bootstrap.name!r})")


def _release(state: Dict[str, object], bootstrap: Bootstrap) -> None:
    for item in state.values():
        release = getattr(item, "release", None)
        if release is not None:
            release()
    state.clear()
    bootstrap.close()


def init(backend: Optional[str] = None, *, rank: Optional[int] = None, world_size: Optional[int] = None,
         init_file=None, device: Optional[int] = None, timeout: float = DEFAULT_TIMEOUT,
         transport: Optional[str] = None) -> Communicator:
    """This process's communicator; the ranks meet here (every rank calls it).

    Parameters
    ----------
    backend : {'cpu', 'cuda'}, optional
        'cpu': NumPy tensors, ranks meet in POSIX shared memory (one host). 'cuda': device arrays,
        ranks on one host meet through CUDA IPC, ranks on several hosts through NCCL. Default:
        cuda when usable here, else cpu.
    rank, world_size : int, optional
        Default: torch.distributed's group, else the launcher's environment (torchrun's
        RANK/WORLD_SIZE, Open MPI's, PMI's, Slurm's); a process started alone is rank 0 of 1.
    init_file : path, optional
        A path every rank can see, fresh for each run: the ranks meet through files beside it.
        Without it: an initialised torch.distributed group, else mpi4py under mpirun.
    device : int, optional
        This rank's GPU (cuda). Default: LOCAL_RANK modulo the visible GPUs.
    timeout : float
        Seconds to wait for the other ranks here, and the default of every call's ``timeout``.
    transport : {'shm', 'cuda_ipc', 'nccl'}, optional
        How the ranks' data meets (the same on every rank). Default: 'shm' (cpu) or 'cuda_ipc'
        (cuda) on one host, 'nccl' across hosts; 'nccl' may also be asked for on one host.

    Returns
    -------
    Communicator
        Also the default for :meth:`ParallelGroup.distributed` from now on.

    Examples
    --------
    >>> comm = tp.comm.init(backend="cpu")      # a process started alone: rank 0 of 1
    >>> comm.rank, comm.world_size, comm.transport
    (0, 1, 'shm')
    >>> comm.close()
    """
    global _DEFAULT
    timeout = check_timeout(timeout)
    rank, world_size = rank_and_world(rank, world_size)
    if transport is not None and transport not in TRANSPORTS:
        raise ValueError(f"transport: expected one of {', '.join(map(repr, TRANSPORTS))} or None, not {transport!r}")
    backend = resolve_backend(backend if backend is not None or transport is None else TRANSPORTS[transport].backend)
    if transport is not None and TRANSPORTS[transport].backend != backend:
        raise ValueError(f"transport: {transport!r} moves {TRANSPORTS[transport].backend} tensors; the backend is "
                         f"{backend!r}")
    device = _choose_device(backend, device)
    bootstrap = choose_bootstrap(rank, world_size, init_file, timeout)
    try:
        _DEFAULT = Communicator(rank, world_size, backend, device, bootstrap, timeout, transport)
    except BaseException:
        bootstrap.close()
        raise
    return _DEFAULT


def default_communicator() -> Communicator:
    if _DEFAULT is None or not _DEFAULT._finalizer.alive:
        raise ValueError("comm: no communicator; call tp.comm.init() first, or pass comm=")
    return _DEFAULT
