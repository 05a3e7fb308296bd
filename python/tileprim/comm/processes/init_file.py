"""The init-file bootstrap: ranks that share only a directory meet in files beside `init_file`,
plain data only (no pickle: a planted file runs no code). Rank 0 names the job in init_file (a
versioned JSON object); each exchange is one file per rank, a header and the payload's bytes,
written whole (temp file + rename) and read once every rank's is there. Every read is of a
regular file of bounded size, opened without blocking; waiting for one ends at the timeout."""
from __future__ import annotations

import errno
import json
import os
import re
import stat
import time
import uuid
from typing import Optional, Tuple

from .._errors import CommError, CommTimeout
from .bootstrap import Bootstrap

__all__ = ["FileBootstrap", "is_job"]

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


class FileBootstrap(Bootstrap):
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
        own_file = f"{name}.{self.rank}"
        try:
            self._write(own_file, _EXCHANGE_HEADER + payload)
        except OSError as e:
            raise CommError(f"init_file: {own_file} cannot be written ({e.strerror})") from None
        self.written.append(own_file)
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
