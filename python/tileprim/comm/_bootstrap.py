"""How the ranks of a multi-process job find each other: the launcher's environment names the
rank and world size, and the engine the program already runs exchanges the few bytes each rank
must tell the others once (an initialised torch.distributed group, mpi4py under mpirun, or a
file every rank can see). Nothing here moves tensors."""
from __future__ import annotations

import errno
import json
import os
import re
import socket
import stat
import time
import uuid
from typing import List, Optional, Tuple

from ._errors import CommError, CommTimeout

__all__ = ["rank_and_world", "local_rank", "Bootstrap", "choose_bootstrap", "host_id", "is_job"]

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


def _launcher() -> Tuple[Optional[int], Optional[int], str]:
    for rank_name, size_name in _RANK_VARIABLES:
        rank, size = _env_int(rank_name), _env_int(size_name)
        if rank is not None and size is not None:
            return rank, size, f"{rank_name}/{size_name}"
    return None, None, ""


def _torch_group():
    """torch.distributed's default group when the program initialised one (never imports torch)."""
    import sys
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


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
    env_rank, env_size = (dist.get_rank(), dist.get_world_size()) if dist is not None else _launcher()[:2]
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


class Bootstrap:
    """Every rank's bytes to every rank (all_gather), through the program's own engine."""

    name = "single"

    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size = rank, world_size

    def all_gather(self, payload: bytes, timeout: float) -> List[bytes]:
        return [payload]

    def close(self) -> None:
        pass


class _TorchBootstrap(Bootstrap):
    name = "torch.distributed"

    def __init__(self, rank, world_size, dist):
        super().__init__(rank, world_size)
        self.dist = dist

    def all_gather(self, payload, timeout):
        out: List = [None] * self.world_size
        self.dist.all_gather_object(out, payload)
        return out


class _MpiBootstrap(Bootstrap):
    name = "mpi4py"

    def __init__(self, rank, world_size, world):
        super().__init__(rank, world_size)
        self.world = world

    def all_gather(self, payload, timeout):
        return self.world.allgather(payload)


# The init file: this JSON object, nothing else (a rank reads it before it knows anything of the job).
_INIT_FORMAT, _INIT_VERSION, _INIT_MAX = "tileprim-init-file", 1, 4096
# An exchange file: this header, then the payload's bytes as the caller gave them (plain data).
_EXCHANGE_HEADER, _EXCHANGE_MAX = b"tileprim-exchange 1\n", 1 << 20
_JOB = re.compile(r"[0-9a-f]{32}")


def is_job(value) -> bool:
    """A job name as tp.comm.init makes them (uuid4 hex): safe in file and segment names."""
    return isinstance(value, str) and _JOB.fullmatch(value) is not None


def _read_regular_file(path: str, limit: int) -> Optional[bytes]:
    """The bytes of the regular file at `path` (None while there is none). ValueError naming
    init_file for anything else there: the open does not block (a FIFO would wait for a writer
    forever) nor follow a link (one to /dev/zero never ends); fstat says what was opened, and
    no more than `limit` bytes are read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        why = "a symbolic link" if e.errno == errno.ELOOP else e.strerror
        raise ValueError(f"init_file: {path} cannot be read ({why}); the ranks meet in regular files") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"init_file: {path} is not a regular file; the ranks meet in regular files beside "
                             "init_file (use a fresh path per run)")
        if info.st_size > limit:
            raise ValueError(f"init_file: {path} holds {info.st_size} bytes, more than the bootstrap writes there "
                             f"({limit}); it is not this job's (use a fresh path per run)")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise ValueError(f"init_file: {path} grew past {limit} bytes while read; it is not this job's")
        return data
    finally:
        os.close(fd)


def _init_record(data: bytes, path: str) -> Tuple[str, int]:
    """(job, world size) from the init file's JSON, each field checked."""
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        record = None
    if (not isinstance(record, dict) or set(record) != {"format", "version", "job", "world_size"}
            or record["format"] != _INIT_FORMAT):
        raise ValueError(f"init_file: {path} is not a tileprim init file (a JSON object "
                         f"{{'format': {_INIT_FORMAT!r}, 'version', 'job', 'world_size'}}); use a fresh path per run")
    if record["version"] != _INIT_VERSION:
        raise ValueError(f"init_file: {path} is of version {record['version']!r}; this tileprim reads version "
                         f"{_INIT_VERSION} (every rank runs one tileprim)")
    job, size = record["job"], record["world_size"]
    if not is_job(job) or isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"init_file: {path} names job {job!r} of {size!r} ranks; expected 32 hex digits and a "
                         "positive int")
    return job, size


class _FileBootstrap(Bootstrap):
    """Files beside `init_file`, plain data only: rank 0 names the job in init_file (JSON), then
    each exchange is one file per rank (a header and the payload's bytes), written whole (temp
    file + rename) and read once every rank's is there; a file that is not a regular file of
    the bootstrap's own making raises ValueError naming init_file at once."""

    name = "init_file"

    def __init__(self, rank, world_size, path: str, timeout: float):
        super().__init__(rank, world_size)
        try:
            self.path = os.fsdecode(os.fspath(path))
        except TypeError:
            raise TypeError(f"init_file: expected a path (str or os.PathLike), not {type(path).__name__}") from None
        self.exchanges, self.written = 0, []
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise ValueError(f"init_file: {self.path}: its directory {folder} does not exist (the ranks meet in files "
                             "beside init_file, in a directory every rank can see)")
        if rank == 0:
            record = {"format": _INIT_FORMAT, "version": _INIT_VERSION, "job": uuid.uuid4().hex,
                      "world_size": world_size}
            try:
                self._write(self.path, json.dumps(record).encode())
            except OSError as e:
                raise ValueError(f"init_file: {self.path} cannot be written here ({e.strerror})") from None
        data = self._read_when_there(self.path, _INIT_MAX, timeout, "rank 0 to create init_file")
        job, size = _init_record(data, self.path)
        if size != world_size:
            raise CommError(f"init_file: {self.path} belongs to a job of {size} ranks, this one has {world_size}; "
                            "use a fresh path per run")
        self.job = job

    @staticmethod
    def _write(path: str, data: bytes) -> None:
        """`data` at `path`, whole or not at all: its temp file goes whatever fails."""
        temp = f"{path}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temp, path)
        except BaseException:
            try:
                os.remove(temp)
            except OSError:
                pass
            raise

    @staticmethod
    def _read_when_there(path: str, limit: int, timeout: float, what: str) -> bytes:
        deadline, pause = time.monotonic() + timeout, 1e-4
        while True:
            data = _read_regular_file(path, limit)
            if data is not None:
                return data
            if time.monotonic() > deadline:
                raise CommTimeout(f"init_file: waited {timeout:g} s for {what} ({path})")
            time.sleep(pause)
            pause = min(2 * pause, 0.05)

    def all_gather(self, payload, timeout):
        if len(payload) > _EXCHANGE_MAX - len(_EXCHANGE_HEADER):
            raise CommError(f"init_file: an exchange of {len(payload)} bytes; the bootstrap's files hold at most "
                            f"{_EXCHANGE_MAX - len(_EXCHANGE_HEADER)}")
        self.exchanges += 1
        name = f"{self.path}.{self.job}.{self.exchanges}"
        mine = f"{name}.{self.rank}"
        try:
            self._write(mine, _EXCHANGE_HEADER + payload)
        except OSError as e:
            raise CommError(f"init_file: {mine} cannot be written ({e.strerror})") from None
        self.written.append(mine)
        return [payload if r == self.rank else self._payload(f"{name}.{r}", timeout, r)
                for r in range(self.world_size)]

    def _payload(self, path: str, timeout: float, rank: int) -> bytes:
        data = self._read_when_there(path, _EXCHANGE_MAX, timeout, f"rank {rank}")
        if not data.startswith(_EXCHANGE_HEADER):
            raise ValueError(f"init_file: {path} is not a tileprim exchange file (rank {rank}'s); use a fresh path "
                             "per run, in a directory only the job's user writes")
        return data[len(_EXCHANGE_HEADER):]

    def close(self):
        """Removes this rank's files but its last exchange's, which another rank may still be
        reading (it raised or finished first): those few bytes stay beside init_file."""
        for path in self.written[:-1] + ([self.path] if self.rank == 0 and self.exchanges > 0 else []):
            try:
                os.remove(path)
            except OSError:
                pass
        self.written = self.written[-1:]


def choose_bootstrap(rank: int, world_size: int, init_file, timeout: float) -> Bootstrap:
    """An explicit init_file, else torch.distributed's initialised group, else mpi4py under an MPI
    launcher; a world of one needs none."""
    if init_file is not None:
        return _FileBootstrap(rank, world_size, init_file, timeout)
    dist = _torch_group()
    if dist is not None:
        return _TorchBootstrap(rank, world_size, dist)
    world = _mpi_world()
    if world is not None:
        return _MpiBootstrap(rank, world_size, world)
    if world_size == 1:
        return Bootstrap(rank, world_size)
    raise ValueError("init_file: the ranks need a way to meet: initialise torch.distributed, run under mpirun "
                     "with mpi4py installed, or pass init_file= (a path every rank can see)")


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
