"""What tp.comm.init takes from disk and from /dev/shm: plain data only (no pickle: a planted
file runs no code), each field checked; a file beside init_file that is not a regular file of
the bootstrap's making raises ValueError naming init_file at once (never blocks past the timeout,
never reads without end); a failed init leaves no segment in /dev/shm and no temp file."""
from __future__ import annotations

import json
import os
import pickle
import threading
import time
import uuid

import numpy as np
import pytest

import tileprim as tp
from tileprim.comm import _communicator
from tileprim.comm.processes import init_file as file_bootstrap, launcher


class _Planted:
    """Unpickling this creates `marker`: code run from the init file, if anything unpickles it."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def init_rank_1(init_file, timeout=30.0, world_size=2):
    return tp.comm.init(backend="cpu", rank=1, world_size=world_size, init_file=init_file, timeout=timeout)


def init_record(job=None, world_size=2, **changes) -> bytes:
    record = {"format": "tileprim-init-file", "version": 1, "job": job or uuid.uuid4().hex, "world_size": world_size}
    record.update(changes)
    return json.dumps(record).encode()


def test_a_pickle_planted_as_the_init_file_runs_no_code(tmp_path):
    marker = tmp_path / "marker"
    (tmp_path / "init").write_bytes(pickle.dumps(_Planted(marker)))
    with pytest.raises(ValueError, match=r"init_file: .*init is not a tileprim init file"):
        init_rank_1(tmp_path / "init")
    assert not marker.exists(), "the init file's pickle ran"


def test_a_pickle_planted_as_rank_0s_exchange_file_runs_no_code(tmp_path):
    marker, job = tmp_path / "marker", uuid.uuid4().hex
    (tmp_path / "init").write_bytes(init_record(job))
    (tmp_path / f"init.{job}.1.0").write_bytes(pickle.dumps(_Planted(marker)))
    with pytest.raises(ValueError, match=r"init_file: .*\.1\.0 is not a tileprim exchange file"):
        init_rank_1(tmp_path / "init")
    assert not marker.exists(), "the exchange file's pickle ran"


def test_a_forged_peer_message_is_refused_field_by_field(tmp_path):
    """Rank 0's exchange file of the right format, whose JSON names a job that is a path."""
    job = uuid.uuid4().hex
    (tmp_path / "init").write_bytes(init_record(job))
    forged = {"version": 1, "host": "h", "pid": 1, "backend": "cpu", "device": None, "job": "../../etc/passwd",
              "transport": None}
    (tmp_path / f"init.{job}.1.0").write_bytes(b"tileprim-exchange 1\n" + json.dumps(forged).encode())
    with pytest.raises(tp.comm.CommError, match=r"rank 0 sent job='\.\./\.\./etc/passwd'"):
        init_rank_1(tmp_path / "init")


@pytest.mark.parametrize("content,match", [
    (b"\x80\x04garbage", "is not a tileprim init file"),
    (b"[1, 2]", "is not a tileprim init file"),
    (init_record(version=2), "is of version 2"),
    (init_record(job="../../tmp/x"), "names job '../../tmp/x'"),
    (init_record(world_size=True), "of True ranks"),
    (b"x" * 5000, "holds 5000 bytes, more than the bootstrap writes there"),
], ids=["garbage", "not-an-object", "version", "job-is-a-path", "world-size-bool", "too-large"])
def test_an_init_file_that_does_not_parse_raises_valueerror_naming_it(tmp_path, content, match):
    (tmp_path / "init").write_bytes(content)
    with pytest.raises(ValueError, match="init_file: .*" + match.replace("(", r"\(").replace(".", r"\.")):
        init_rank_1(tmp_path / "init")


@pytest.mark.parametrize("kind,match", [("fifo", "is not a regular file"), ("directory", "is not a regular file"),
                                        ("link-to-dev-zero", "a symbolic link")])
def test_an_init_file_that_is_no_regular_file_raises_at_once_whatever_the_timeout(tmp_path, kind, match):
    path = tmp_path / "init"
    {"fifo": os.mkfifo, "directory": os.mkdir, "link-to-dev-zero": lambda p: os.symlink("/dev/zero", p)}[kind](path)
    started = time.monotonic()
    with pytest.raises(ValueError, match="init_file: .*" + match):
        init_rank_1(path, timeout=60)
    assert time.monotonic() - started < 5


def test_a_rank_that_waits_for_the_init_file_times_out_as_told(tmp_path):
    started = time.monotonic()
    with pytest.raises(tp.comm.CommTimeout, match="rank 0 to create init_file"):
        init_rank_1(tmp_path / "init", timeout=0.5)
    assert time.monotonic() - started < 5


def test_a_failed_rename_leaves_no_temp_file(tmp_path, monkeypatch):
    def fail(source, target):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(file_bootstrap.os, "replace", fail)
    with pytest.raises(ValueError, match="init_file: .* cannot be written here \\(No space left on device\\)"):
        tp.comm.init(backend="cpu", rank=0, world_size=2, init_file=tmp_path / "init", timeout=5)
    assert os.listdir(tmp_path) == []


def test_a_failed_init_leaves_no_rendezvous_segment(tmp_path, monkeypatch):
    """Rank 1 (played here) says who it is, then is gone: rank 0 has made the job's segment and
    times out at the next exchange; the segment's name must go with the failure."""
    job = uuid.uuid4()
    monkeypatch.setattr(_communicator.uuid, "uuid4", lambda: job)
    init = tmp_path / "init"

    def rank_1_says_who_it_is_then_dies():
        while not init.exists():
            time.sleep(0.01)
        init_job = json.loads(init.read_bytes())["job"]
        info = {"version": 1, "host": launcher.host_id(), "pid": os.getpid(), "backend": "cpu", "device": None,
                "job": uuid.uuid4().hex, "transport": None}
        (tmp_path / f"init.{init_job}.1.1").write_bytes(b"tileprim-exchange 1\n" + json.dumps(info).encode())

    rank_1 = threading.Thread(target=rank_1_says_who_it_is_then_dies)
    rank_1.start()
    segment = os.path.join(os.environ["TILEPRIM_SHM_DIR"], f"tileprim-{job.hex}")  # the session's /dev/shm
    seen = []
    made = _communicator.SharedFile.__init__

    def watched(self, name, *args, **kwargs):  # the segment really was made (this test can fail)
        made(self, name, *args, **kwargs)
        seen.append(os.path.exists(segment))
    monkeypatch.setattr(_communicator.SharedFile, "__init__", watched)
    # 3 s: rank 1's thread must answer the first exchange in time on a loaded CI machine too
    with pytest.raises(tp.comm.CommTimeout, match="rank 1"):
        tp.comm.init(backend="cpu", rank=0, world_size=2, init_file=init, timeout=3)
    rank_1.join()
    assert seen == [True]
    assert not os.path.exists(segment)
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


@pytest.mark.parametrize("timeout", [2 ** 1100, float("inf"), float("nan"), -1, 0, 1e300])
def test_timeouts_beyond_a_year_or_not_finite_are_refused_naming_timeout(timeout):
    with pytest.raises(ValueError, match="timeout: .* is not a positive number of seconds up to 31536000"):
        tp.comm.init(backend="cpu", timeout=timeout)
    group = tp.comm.ParallelGroup([np.ones((2, 3), "f4")] * 2, root=0)
    with pytest.raises(ValueError, match="timeout: .* is not a positive number of seconds up to 31536000"):
        tp.comm.treduce(group, timeout=timeout)


def test_the_package_unpickles_nothing():
    """Whatever ranks exchange (init files, the bootstraps, the transports' descriptions of memory) is
    plain data: no module imports pickle, so nothing a peer or a planted file sends can run code."""
    import ast
    import pathlib
    package = pathlib.Path(tp.__file__).resolve().parent
    found = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [(str(path.relative_to(package)), n) for n in names if n.split(".")[0] in ("pickle", "dill")]
    assert found == []
