"""What the test session leaves behind: it runs in a temp directory of its own ($TMPDIR, with the
kernel cache in it: $TILEPRIM_CACHE_DIR), which must hold no tileprim temp file at the end, and
/dev/shm must hold no tileprim segment it did not hold at the start. Only this user's segments
count, so another user's jobs on a shared host do not fail this one's suite."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from typing import List, Optional

SHM = "/dev/shm"
# tileprim's temp files: the bootstrap's beside init_file, the kernel cache's in its directory
TEMP_FILE = re.compile(r".*\.[0-9]+\.[0-9a-f]{32}\.tmp|\.[0-9a-f]{64}\.tmp\..*")


def shm_segments() -> set:
    try:
        names = os.listdir(SHM)
    except OSError:
        return set()
    mine = set()
    for name in names:
        try:
            if name.startswith("tileprim-") and os.lstat(os.path.join(SHM, name)).st_uid == os.geteuid():
                mine.add(name)
        except OSError:  # removed meanwhile
            pass
    return mine


SESSION = "TILEPRIM_TEST_SESSION"  # set for the session's processes: theirs is the session's check


class LeakCheck:
    """Started by the session's process at import (before tileprim reads its environment);
    finish() names what leaked and removes the session's directory, so the real temp directory
    is left as it was. Processes the tests start (which import conftest too) start none."""

    @classmethod
    def start(cls) -> Optional["LeakCheck"]:
        return None if os.environ.get(SESSION) else cls()

    def __init__(self):
        self.shm_before = shm_segments()
        self.root = tempfile.mkdtemp(prefix="tileprim-tests-")
        self.cache = os.path.join(self.root, "kernel-cache")
        os.environ[SESSION] = self.root
        os.environ["TMPDIR"] = self.root  # child processes too
        os.environ["TILEPRIM_CACHE_DIR"] = self.cache
        tempfile.tempdir = self.root

    def finish(self) -> List[str]:
        leaks = [f"{SHM}/{name}" for name in sorted(shm_segments() - self.shm_before)]
        for folder, _, names in os.walk(self.root):
            leaks += [os.path.join(folder, name) for name in names if TEMP_FILE.fullmatch(name)]
        expected = {"kernel-cache"} | {n for n in os.listdir(self.root) if n.startswith("pytest-of-")}
        leaks += [os.path.join(self.root, name) for name in sorted(set(os.listdir(self.root)) - expected)]
        shutil.rmtree(self.root, ignore_errors=True)
        return leaks
