"""The session's leak check (tests/leaks.py, run by conftest at the end of every session) can
fail: a session whose test leaves a segment in its shared memory and a tileprim temp file in its
temp directory exits non-zero and names both (and still removes its directories); a killed
session's directories are removed by the next one."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid

from leaks import SESSION

LEAKY_TEST = """
import os, tempfile
def test_leaves_a_segment_and_a_temp_file():
    open(os.path.join(os.environ["TILEPRIM_SHM_DIR"], "{segment}"), "w").close()
    open(os.path.join(tempfile.gettempdir(), "init.123.{hex}.tmp"), "w").close()
"""


def test_a_session_that_leaves_a_segment_or_a_temp_file_fails(tmp_path):
    segment = f"tileprim-leak-check-{uuid.uuid4().hex}"
    (tmp_path / "test_leaky.py").write_text(LEAKY_TEST.format(segment=segment, hex="a" * 32))
    tests = os.path.dirname(os.path.abspath(__file__))
    env = {k: v for k, v in os.environ.items() if k != SESSION}  # a session of its own, with its own check
    env["PYTHONPATH"] = os.pathsep.join([tests] + sys.path)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
                          "test_leaky.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "1 passed" in run.stdout, run.stdout + run.stderr
    assert run.returncode == 1, run.stdout
    assert segment in run.stdout and f"init.123.{'a' * 32}.tmp" in run.stdout, run.stdout
    shm = os.path.dirname(next(line for line in run.stdout.splitlines() if segment in line).strip())
    assert shm.startswith("/dev/shm/tileprim-tests-") and not os.path.exists(shm)


def test_a_killed_sessions_directories_are_removed_by_the_next_session(tmp_path):
    """A session killed before its end (SIGKILL, a timeout) leaves its directories; the next
    session removes those whose process is gone and keeps a live session's."""
    from leaks import _remove_dead_sessions
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone, live, other = (tmp_path / f"tileprim-tests-{dead.pid}-ab", tmp_path / f"tileprim-tests-{os.getpid()}-cd",
                         tmp_path / "unrelated")
    for folder in (gone, live, other):
        folder.mkdir()
    _remove_dead_sessions(str(tmp_path), None)
    assert not gone.exists() and live.exists() and other.exists()
