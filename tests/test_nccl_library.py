"""NCCL (the NCCL transport's library) is loaded at run time, never at import; tp.info() says
whether it loaded, from where, and, when not, where it looked and why. Each case runs in a
fresh interpreter: the load happens once per process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, tileprim as tp
def nccl_mapped():
    with open("/proc/self/maps") as f:
        return "libnccl" in f.read()
at_import = nccl_mapped()
status = tp.info()["nccl"]
print(json.dumps({"at_import": at_import, "after_info": nccl_mapped(), "status": status}))
"""


def probe(**env) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_import_does_not_load_nccl_and_info_says_what_loaded():
    seen = probe()
    assert seen["at_import"] is False
    status = seen["status"]
    if status["ok"]:  # wherever it was found, it is mapped now and named
        assert seen["after_info"] and os.path.isfile(status["path"]) and "libnccl.so" in status["path"]
        major, minor, _ = map(int, status["version"].split("."))
        assert (major, minor) >= (2, 18) and status["error"] == ""
    else:  # every place it looked, and why each failed
        assert status["tried"] and all(t in status["error"] for t in status["tried"])
        assert "TILEPRIM_NCCL" in status["error"] and status["version"] == ""


def test_an_explicit_library_that_does_not_load_is_the_answer(tmp_path):
    not_a_library = tmp_path / "libnccl.so.2"
    not_a_library.write_bytes(b"\x7fELF but not really")
    for path in (str(tmp_path / "missing" / "libnccl.so.2"), str(not_a_library)):
        status = probe(TILEPRIM_NCCL=path)["status"]
        assert status["ok"] is False and status["tried"] == [path], status
        assert status["error"].startswith("TILEPRIM_NCCL could not be loaded") and path in status["error"]
