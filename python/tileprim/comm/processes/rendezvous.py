"""The per-call meeting of the ranks of one host, in a POSIX shared-memory segment: one slot per
rank. For call number `epoch`, each rank writes what it brings (its call's signature and where
its data is) into its slot and publishes `posted`; the root reads every slot, checks that the
ranks agree, publishes its `verdict` (empty, or the error every rank raises) and, once done with
the others' data, `released`. Flags are ordered stores and loads (_C.publish_flag /
observe_flag). A wait ends with CommTimeout after `timeout`, or at once when the rank it waits
for has exited."""
from __future__ import annotations

import mmap
import os
import re
import stat
import struct
import tempfile
import time
from typing import Iterable, List, Optional, Sequence

import tileprim._C as _C
from .._errors import CommError, CommTimeout

__all__ = ["Rendezvous", "SharedFile", "remove_segment", "source_segment"]

SLOT = 16384
POSTED, VERDICT, RELEASED, PID = 0, 64, 128, 192  # flags on their own cache lines
# Call `epoch`'s description goes to DESCRIPTIONS[epoch % 2]: every rank reads every rank's, and
# a rank that has read them all may post its next call while a slower one still reads (never two
# calls ahead: finishing a call needs every rank's post of it).
DESCRIPTIONS, DESCRIPTION_MAX = (256, 4352), 3840
VERDICT_TEXT, VERDICT_MAX = 8448, 3968
# where each text's version lies (how often it changed): a reader re-reads a changed text only
VERSION = {DESCRIPTIONS[0]: 200, DESCRIPTIONS[1]: 208, VERDICT_TEXT: 216}
SPIN_S = 1e-3  # observe without sleeping first: a small call's ranks arrive microseconds apart


def _shm_dir() -> str:
    """$TILEPRIM_SHM_DIR (a larger tmpfs where /dev/shm is small, as in containers; the same for
    every rank of a host), else /dev/shm, else the temp directory."""
    return os.environ.get("TILEPRIM_SHM_DIR") or ("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())


def source_segment(job: str, rank: int, generation: int) -> str:
    """The name of rank's shared-memory buffer (the 'shm' transport), its `generation`th."""
    return f"tileprim-{job}-{rank}-{generation}"


def _ours(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()


def remove_segment(name: str) -> None:
    """Removes a segment's name where it is this user's regular file (another user's, or a
    link planted under it, stays)."""
    path = os.path.join(_shm_dir(), name)
    try:
        if _ours(os.lstat(path)):
            os.remove(path)
    except OSError:
        pass


def remove_rank_segments(job: str, rank: int) -> None:
    """Removes what rank `rank` of job `job` left in shared memory (it died holding them)."""
    pattern = re.compile(re.escape(source_segment(job, rank, 0)[:-1]) + r"[0-9]+")
    try:
        names = os.listdir(_shm_dir())
    except OSError:
        return
    for name in names:
        if pattern.fullmatch(name):
            remove_segment(name)


class SharedFile:
    """A file in shared memory mapped into this process: created by one rank, opened by the
    others, who map it only where it is a regular file of their own user's (the directory is
    everybody's: another user could plant a file or a link under a name they learnt)."""

    def __init__(self, name: str, size: int = 0, create: bool = False):
        self.path = os.path.join(_shm_dir(), name)
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT | os.O_EXCL if create else os.O_NONBLOCK)
        try:
            fd = os.open(self.path, flags, 0o600)
        except FileNotFoundError:
            if create:
                raise CommError(f"shared memory: its directory {os.path.dirname(self.path)} does not exist "
                                "($TILEPRIM_SHM_DIR)") from None
            raise CommError(f"shared memory: {self.path} is not there (the ranks of a host share one "
                            "$TILEPRIM_SHM_DIR, else /dev/shm)") from None
        try:
            if create:
                os.ftruncate(fd, size)
            elif not _ours(os.fstat(fd)):
                raise CommError(f"shared memory: {self.path} is not a regular file of this user's; "
                                "it is not this job's")
            self.size = os.fstat(fd).st_size
            self.map = mmap.mmap(fd, self.size)
        finally:
            os.close(fd)
        self.address = _C.buffer_address(self.map) if self.size else 0

    def unlink(self) -> None:
        try:
            os.remove(self.path)
        except OSError:
            pass

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:  # a NumPy view still refers to it: the mapping goes with the view
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is gone for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class Rendezvous:
    def __init__(self, segment: SharedFile, rank: int, world_size: int, job: str):
        self.segment, self.rank, self.world_size, self.job = segment, rank, world_size, job
        self.pids = [0] * world_size
        self.written = {}  # field -> the bytes this rank last wrote there (a repeated call rewrites nothing)
        self.versions = {offset: 0 for offset in VERSION}  # of this rank's texts
        self.seen = {}  # (rank, field) -> (version, bytes) last read there
        _C.publish_flag(self._flag(rank, PID), os.getpid())

    def learn_pids(self) -> None:
        """Every rank's pid (after a barrier: each wrote its own at start)."""
        self.pids = [_C.observe_flag(self._flag(r, PID)) for r in range(self.world_size)]

    def _flag(self, rank: int, field: int) -> int:
        return self.segment.address + rank * SLOT + field

    def _text(self, rank: int, offset: int, data: bytes, limit: int, label: str) -> None:
        if self.written.get(offset) == data:
            return
        if len(data) > limit:
            raise CommError(f"{label}: {len(data)} bytes, more than a slot holds ({limit})")
        self.written[offset] = data
        base = rank * SLOT + offset
        self.segment.map[base:base + 8] = struct.pack("<Q", len(data))
        self.segment.map[base + 8:base + 8 + len(data)] = data
        self.versions[offset] += 1
        _C.publish_flag(self._flag(rank, VERSION[offset]), self.versions[offset])

    def _read(self, rank: int, offset: int) -> bytes:
        """Rank's text at `offset` (after observing the flag it published it with)."""
        version = _C.observe_flag(self._flag(rank, VERSION[offset]))
        seen = self.seen.get((rank, offset))
        if seen is not None and seen[0] == version:
            return seen[1]
        base = rank * SLOT + offset
        (n,) = struct.unpack_from("<Q", self.segment.map, base)
        data = bytes(self.segment.map[base + 8:base + 8 + n])
        self.seen[(rank, offset)] = (version, data)
        return data

    # What a rank brings to call `epoch`.
    def post(self, epoch: int, description: bytes) -> None:
        self._text(self.rank, DESCRIPTIONS[epoch & 1], description, DESCRIPTION_MAX, "call description")
        _C.publish_flag(self._flag(self.rank, POSTED), epoch)

    def descriptions(self, epoch: int, timeout: float, label: str) -> List[bytes]:
        """Every rank's description of call `epoch`, once all posted."""
        self.wait(range(self.world_size), POSTED, epoch, timeout, label)
        return [self._read(r, DESCRIPTIONS[epoch & 1]) for r in range(self.world_size)]

    def publish_verdict(self, epoch: int, verdict: str) -> None:
        """The root's verdict on call `epoch`: '' (accepted), or what every rank then hears."""
        self._text(self.rank, VERDICT_TEXT, verdict.encode(), VERDICT_MAX, "verdict")
        _C.publish_flag(self._flag(self.rank, VERDICT), epoch)

    def verdict(self, root: int, epoch: int, timeout: float, label: str) -> str:
        self.wait([root], VERDICT, epoch, timeout, label)
        return self._read(root, VERDICT_TEXT).decode()

    def release(self, epoch: int) -> None:
        _C.publish_flag(self._flag(self.rank, RELEASED), epoch)

    def wait_released(self, root: int, epoch: int, timeout: float, label: str) -> None:
        self.wait([root], RELEASED, epoch, timeout, label)

    def wait(self, ranks: Iterable[int], field: int, epoch: int, timeout: float, label: str) -> None:
        waiting = [r for r in ranks if r != self.rank]
        flags = [self._flag(r, field) for r in waiting]
        start = time.monotonic()
        missing = _C.await_flags(flags, epoch, SPIN_S)
        pause, next_look = 2e-6, start + 0.1
        while missing:
            waiting, flags = [waiting[i] for i in missing], [flags[i] for i in missing]
            now = time.monotonic()
            if now >= next_look:
                self._check_alive(waiting, label)
                next_look = now + 0.1
                if now - start > timeout:
                    raise CommTimeout(f"{label}: rank{'s' if len(waiting) > 1 else ''} "
                                      f"{', '.join(map(str, waiting))} did not arrive within {timeout:g} s "
                                      "(died, hangs, or never called)")
            time.sleep(pause)
            pause = min(2 * pause, 1e-3)
            missing = _C.await_flags(flags, epoch, 0.0)

    def exited(self, ranks: Optional[Sequence[int]] = None) -> List[int]:
        """The ranks (of `ranks`; default every other) whose process is gone."""
        ranks = [r for r in range(self.world_size) if r != self.rank] if ranks is None else ranks
        return [r for r in ranks if self.pids[r] and not _alive(self.pids[r])]

    def _check_alive(self, ranks: Sequence[int], label: str) -> None:
        gone = self.exited(ranks)
        if gone:
            self.remove_leftovers(gone)
            raise CommError(f"{label}: rank {gone[0]} (pid {self.pids[gone[0]]}) exited")

    def remove_leftovers(self, ranks: Optional[Sequence[int]] = None) -> None:
        """Removes the shared memory that ranks which died (of `ranks`; default any) left."""
        for r in self.exited(ranks):
            remove_rank_segments(self.job, r)
