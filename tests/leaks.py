"""What the test session leaves behind. It runs in a temp directory of its own ($TMPDIR, with the
kernel cache in it: $TILEPRIM_CACHE_DIR) and puts tileprim's shared memory in a directory of its
own in /dev/shm ($TILEPRIM_SHM_DIR: the same tmpfs and code, but only this session's segments,
where /dev/shm itself is shared with every other session of the user). At the end both must hold
no tileprim file: no segment, no temp file (the kernel cache's entries may stay). A session killed
before its end leaves its directories, named with its pid: the next session removes them."""
from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from typing import List, Optional

SESSION = "TILEPRIM_TEST_SESSION"  # set for the session's processes: theirs is the session's check
# tileprim's temp files: the bootstrap's beside init_file, the kernel cache's in its directory
TEMP_FILE = re.compile(r".*\.[0-9]+\.[0-9a-f]{32}\.tmp|\.[0-9a-f]{64}\.tmp\..*")


SESSION_DIR = re.compile(r"tileprim-tests-([0-9]+)-.*")


def _remove_dead_sessions(*folders: Optional[str]) -> None:
    """The directories of sessions whose process is gone: killed (a timeout, SIGKILL), they never
    reached their atexit removal. A live session's (another checkout's, a helper's) stay."""
    for folder in filter(None, folders):
        for name in os.listdir(folder):
            match = SESSION_DIR.fullmatch(name)
            if match and not _alive(int(match.group(1))):
                shutil.rmtree(os.path.join(folder, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class LeakCheck:
    """Started by the session's process at import (before tileprim reads its environment);
    finish() names what leaked and removes the session's directories, so the real temp
    directory and /dev/shm are left as they were. Processes the tests start (which import
    conftest too) start none: they inherit the session's environment."""

    @classmethod
    def start(cls) -> Optional["LeakCheck"]:
        return None if os.environ.get(SESSION) else cls()

    def __init__(self):
        shm_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
        _remove_dead_sessions(tempfile.gettempdir(), shm_dir)
        prefix = f"tileprim-tests-{os.getpid()}-"  # the pid: a later session removes it if this one was killed
        self.root = tempfile.mkdtemp(prefix=prefix)
        self.cache = os.path.join(self.root, "kernel-cache")
        self.shm = tempfile.mkdtemp(prefix=prefix, dir=shm_dir)
        os.environ[SESSION] = self.root
        os.environ["TMPDIR"] = self.root  # child processes too
        os.environ["TILEPRIM_CACHE_DIR"] = self.cache
        os.environ["TILEPRIM_SHM_DIR"] = self.shm
        tempfile.tempdir = self.root
        # a session that never reaches its end (a usage error, conftest imported by a script)
        # still leaves /dev/shm and the temp directory as they were
        atexit.register(self.remove)

    def finish(self) -> List[str]:
        leaks = [os.path.join(self.shm, name) for name in sorted(os.listdir(self.shm))]
        for folder, _, names in os.walk(self.root):
            leaks += [os.path.join(folder, name) for name in names if TEMP_FILE.fullmatch(name)]
        # pytest's own temp dirs, the compile cache torch.compile's tests make under $TMPDIR, and
        # torchrun's run directories (the multi-process tests launch ranks through it)
        expected = {"kernel-cache"} | {n for n in os.listdir(self.root)
                                       if n.startswith(("pytest-of-", "torchinductor_", "torchelastic_"))}
        leaks += [os.path.join(self.root, name) for name in sorted(set(os.listdir(self.root)) - expected)]
        self.remove()
        return leaks

    def remove(self) -> None:
        shutil.rmtree(self.shm, ignore_errors=True)
        shutil.rmtree(self.root, ignore_errors=True)
