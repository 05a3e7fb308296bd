"""The kernel cache under fault, through tp.lower: damaged entries, entries swapped on disk, files
under an entry's name that are no entry (a FIFO, a link to /dev/zero, a huge file), a directory
that cannot be written, a write that runs out of space, and several processes filling one
directory at once. Needs NVRTC, not a GPU. Every case runs in child processes (the cache
directory is read from the environment once per process); each child lowers tp.sum (or the op
named) over float32 vectors for sm_90a."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import tileprim as tp

if not tp.info()["nvrtc"]["ok"]:
    pytest.skip(f"needs NVRTC: {tp.info()['nvrtc']['error']}", allow_module_level=True)

WARNING = "tileprim: warning: kernel cache directory"
ENTRY_WARNING = "tileprim: warning: kernel cache entry"

# argv[1]: JSON list of what to lower, in order: a vector length n (tp.sum) or [op, n];
# argv[2]: Python run after the imports, before the first lower (sets limits, drops privileges,
# waits at a barrier).
CHILD = textwrap.dedent("""
    import hashlib, json, os, sys, time
    import numpy as np
    import tileprim as tp
    exec(sys.argv[2])
    results = []
    for spec in json.loads(sys.argv[1]):
        op, n = spec if isinstance(spec, list) else ("sum", spec)
        k = tp.lower(getattr(tp, op), np.ones(n, "f4"), target="sm_90a")
        results.append({"op": op, "n": n, "origin": k.origin, "entry": ".entry tp_kernel" in k.ptx,
                        "cubin": hashlib.sha256(k.cubin).hexdigest(), "cubin_bytes": len(k.cubin),
                        "elf": k.cubin[:4] == b"\\x7fELF"})
    print(json.dumps({"results": results, "disk": tp.cache.disk_enabled(),
                      "directory": tp.cache.directory()}))
""")

# RLIMIT_FSIZE stands in for a full disk: writes past 4 KiB fail with EFBIG (SIGXFSZ ignored,
# else it would kill the process), after the first 4 KiB of the entry went out.
FILE_SIZE_LIMIT = textwrap.dedent("""
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
""")

# chmod 0555 does not stop root: root writes through CAP_DAC_OVERRIDE. Drop that capability
# from the effective set (capget/capset), then check that the directory really refuses a file.
READ_ONLY = textwrap.dedent("""
    import ctypes
    if os.geteuid() == 0:
        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]
        libc = ctypes.CDLL(None, use_errno=True)
        header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3
        if libc.capget(ctypes.byref(header), data) == 0:
            data[0].effective &= ~(1 << 1)  # CAP_DAC_OVERRIDE
            libc.capset(ctypes.byref(header), data)
    probe = os.path.join(os.environ["TILEPRIM_CACHE_DIR"], "probe")
    try:
        open(probe, "w").close()
    except PermissionError:
        pass
    else:
        os.unlink(probe)
        print(json.dumps({"skip": "the read-only directory accepts files here (root without capset?)"}))
        sys.exit(0)
""")

# Waits until every sibling has imported tileprim, so that all compile at the same moment.
BARRIER = textwrap.dedent("""
    ready, count = os.environ["BARRIER_DIR"], int(os.environ["BARRIER_COUNT"])
    open(os.path.join(ready, str(os.getpid())), "w").close()
    deadline = time.time() + 120
    while len(os.listdir(ready)) < count and time.time() < deadline:
        time.sleep(0.002)
""")


def child_env(cache_dir, **overrides) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILEPRIM_")}
    # The children import the tileprim this process imported (an install, a source tree, or
    # .ci/sanitize's staged copy).
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(tp.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
    env["TILEPRIM_CACHE_DIR"] = str(cache_dir)
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def spawn(cache_dir, sizes=(37,), preamble="", **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(list(sizes)), preamble],
                            env=child_env(cache_dir, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(child: subprocess.Popen, timeout: float = 300):
    """(parsed stdout, stderr) of a child that must have exited 0 within `timeout` seconds."""
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail(f"the child hung (still running after {timeout} s)")
    assert child.returncode == 0, f"child exited {child.returncode}:\n{stderr}"
    return json.loads(stdout), stderr


def lower_in_child(cache_dir, sizes=(37,), preamble="", **env):
    return finish(spawn(cache_dir, sizes, preamble, **env))


def origins(out) -> list:
    return [r["origin"] for r in out["results"]]


def warnings(stderr, which=WARNING) -> list:
    return [line for line in stderr.splitlines() if which in line]


def files(cache_dir) -> list:
    """Everything in the directory, hidden temp files included."""
    return sorted(os.listdir(cache_dir)) if os.path.isdir(cache_dir) else []


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The cubin digests of a cache-free compile: {n: sha256}."""
    out, _ = lower_in_child(tmp_path_factory.mktemp("nocache"), (37, 38), TILEPRIM_CACHE="0")
    assert origins(out) == ["compiled", "compiled"]
    return {r["n"]: r["cubin"] for r in out["results"]}


def assert_correct(out, reference):
    for r in out["results"]:
        assert r["op"] == "sum", "the reference holds tp.sum's cubins"
        assert r["entry"], "PTX lacks .entry tp_kernel"
        assert r["cubin_bytes"] > 0 and r["elf"], r
        assert r["cubin"] == reference[r["n"]], f"cubin for n={r['n']} differs from a cache-free compile"


# ---- (a), (b): a damaged entry is a miss; it is recompiled and rewritten ---------------------

def damage_entry(path, damage):
    data = bytearray(open(path, "rb").read())
    header = 4 + 32 + 16
    ptx_len = int.from_bytes(data[36:44], "little")
    if damage == "empty":  # shorter than the header
        data = b""
    elif damage == "truncate_payload":  # the lengths no longer add up
        data = data[: len(data) // 2]
    elif damage == "corrupt_ptx":  # the payload hash no longer matches
        for at in range(header + 100, header + 108):
            data[at] ^= 0x5A
    elif damage == "corrupt_cubin":
        at = header + ptx_len + 64
        data[at:at + 4] = b"\x00\x00\x00\x00" if data[at:at + 4] != b"\x00\x00\x00\x00" else b"\xff\xff\xff\xff"
    elif damage == "garbage":  # no magic
        data = bytes(range(256)) * (len(data) // 256)
    with open(path, "wb") as f:
        f.write(bytes(data))


@pytest.mark.parametrize("damage", ["empty", "garbage", "truncate_payload", "corrupt_ptx", "corrupt_cubin"])
def test_damaged_entry_is_recompiled_then_served_from_disk(tmp_path, reference, damage):
    cache_dir = tmp_path / "cache"
    first, _ = lower_in_child(cache_dir)
    assert origins(first) == ["compiled"] and first["disk"]
    (name,) = files(cache_dir)
    damage_entry(cache_dir / name, damage)

    again, stderr = lower_in_child(cache_dir, (37, 37))
    assert origins(again) == ["compiled", "memory"]
    assert_correct(again, reference)
    assert again["disk"] and not warnings(stderr), stderr
    (warning,) = warnings(stderr, ENTRY_WARNING)
    assert name in warning and ("damaged" in warning or "not a tileprim kernel cache entry" in warning), warning
    assert files(cache_dir) == [name]  # rewritten in place, no temp file left

    healed, _ = lower_in_child(cache_dir)
    assert origins(healed) == ["disk"]
    assert_correct(healed, reference)


def test_entries_swapped_on_disk_are_told_apart_and_recompiled(tmp_path, reference):
    """Two valid entries, each under the other's name: each records its own key, so tp.sum never
    gets tp.max's kernel from disk."""
    cache_dir = tmp_path / "cache"
    lower_in_child(cache_dir, (37,))
    (sum_entry,) = files(cache_dir)
    maxed, _ = lower_in_child(cache_dir, (["max", 37],))
    (max_entry,) = set(files(cache_dir)) - {sum_entry}
    assert maxed["results"][0]["cubin"] != reference[37], "the two kernels must differ for this test to mean anything"
    sum_bytes, max_bytes = (cache_dir / sum_entry).read_bytes(), (cache_dir / max_entry).read_bytes()
    (cache_dir / sum_entry).write_bytes(max_bytes)
    (cache_dir / max_entry).write_bytes(sum_bytes)

    out, stderr = lower_in_child(cache_dir, (37,))
    assert origins(out) == ["compiled"]
    assert_correct(out, reference)
    (warning,) = warnings(stderr, ENTRY_WARNING)
    assert sum_entry in warning and "another kernel's entry" in warning, warning

    healed, stderr = lower_in_child(cache_dir, (37,))  # rewritten with its own key
    assert origins(healed) == ["disk"] and not warnings(stderr, ENTRY_WARNING)
    assert_correct(healed, reference)


def plant(path, kind: str) -> None:
    path.unlink()
    if kind == "fifo":  # an open() that blocks until a writer comes: never
        os.mkfifo(path)
    elif kind == "link-to-dev-zero":  # a read that never ends
        os.symlink("/dev/zero", path)
    elif kind == "huge":  # 300 MiB (sparse): larger than any entry may be
        with open(path, "wb") as f:
            f.truncate(300 << 20)


@pytest.mark.parametrize("kind,why", [("fifo", "not a regular file"), ("link-to-dev-zero", "a symbolic link"),
                                      ("huge", "more than an entry may hold")])
def test_a_file_under_an_entrys_name_that_is_no_entry_is_recompiled_at_once(tmp_path, reference, kind, why):
    cache_dir = tmp_path / "cache"
    lower_in_child(cache_dir)
    (name,) = files(cache_dir)
    plant(cache_dir / name, kind)

    out, stderr = finish(spawn(cache_dir, (37, 37)), timeout=120)
    assert origins(out) == ["compiled", "memory"] and out["disk"]
    assert_correct(out, reference)
    (warning,) = warnings(stderr, ENTRY_WARNING)
    assert name in warning and why in warning, warning
    assert files(cache_dir) == [name] and (cache_dir / name).is_file() and not (cache_dir / name).is_symlink()

    healed, _ = lower_in_child(cache_dir)
    assert origins(healed) == ["disk"]
    assert_correct(healed, reference)


# ---- (c) a directory that cannot be written ----------------------------------------------

@pytest.mark.parametrize("populated", [False, True], ids=["empty", "populated"])
def test_read_only_directory_serves_from_memory_with_one_warning(tmp_path, reference, populated):
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    if populated:  # a shared, read-only cache that holds n=37 already
        lower_in_child(cache_dir)
    before = files(cache_dir)
    os.chmod(cache_dir, 0o555)
    try:
        out, stderr = lower_in_child(cache_dir, (37, 38, 37, 38), READ_ONLY)
    finally:
        os.chmod(cache_dir, 0o755)
    if "skip" in out:
        pytest.skip(out["skip"])
    if populated:
        assert origins(out) == ["disk", "compiled", "memory", "memory"]
    else:
        assert origins(out) == ["compiled", "compiled", "memory", "memory"]
    assert_correct(out, reference)
    assert not out["disk"]  # memory only for the rest of the process
    (warning,) = warnings(stderr)
    assert str(cache_dir) in warning and "Permission denied" in warning
    assert files(cache_dir) == before


def test_directory_below_a_file_serves_from_memory_with_one_warning(tmp_path, reference):
    (tmp_path / "afile").write_text("not a directory")
    cache_dir = tmp_path / "afile" / "cache"
    out, stderr = lower_in_child(cache_dir, (37, 38, 37))
    assert origins(out) == ["compiled", "compiled", "memory"]
    assert_correct(out, reference)
    assert not out["disk"]
    (warning,) = warnings(stderr)
    assert str(cache_dir) in warning
    assert not warnings(stderr, ENTRY_WARNING)  # no directory is no entry: a miss, not a bad entry


# ---- (d) the disk fills up during the write -----------------------------------------------

def test_full_disk_leaves_no_partial_file(tmp_path, reference):
    cache_dir = tmp_path / "cache"
    out, stderr = lower_in_child(cache_dir, (37, 38, 37), FILE_SIZE_LIMIT)
    assert origins(out) == ["compiled", "compiled", "memory"]
    assert_correct(out, reference)
    assert not out["disk"]
    (warning,) = warnings(stderr)
    assert "File too large" in warning or "No space left" in warning, warning
    assert files(cache_dir) == []  # neither the temp file nor a partial entry

    after, stderr = lower_in_child(cache_dir)  # room again: an ordinary miss, then written
    assert origins(after) == ["compiled"] and after["disk"] and not warnings(stderr)
    assert len(files(cache_dir)) == 1


def test_full_disk_keeps_an_existing_entry(tmp_path, reference):
    cache_dir = tmp_path / "cache"
    lower_in_child(cache_dir, (38,))
    before = {name: (cache_dir / name).read_bytes() for name in files(cache_dir)}
    out, stderr = lower_in_child(cache_dir, (38, 37), FILE_SIZE_LIMIT)
    assert origins(out) == ["disk", "compiled"]
    assert_correct(out, reference)
    assert len(warnings(stderr)) == 1
    assert {name: (cache_dir / name).read_bytes() for name in files(cache_dir)} == before


# ---- (e) several processes fill one empty directory at once --------------------------------

def test_processes_compiling_one_kernel_at_once(tmp_path, reference):
    count = 6
    cache_dir, ready = tmp_path / "cache", tmp_path / "ready"
    ready.mkdir()
    children = [spawn(cache_dir, (37,), BARRIER, BARRIER_DIR=ready, BARRIER_COUNT=count) for _ in range(count)]
    outputs = [finish(child) for child in children]
    for out, stderr in outputs:
        assert_correct(out, reference)
        assert out["disk"] and not warnings(stderr), stderr
    seen = [origins(out)[0] for out, _ in outputs]
    assert set(seen) <= {"compiled", "disk"} and "compiled" in seen
    print(f"\n{count} processes at once: {seen.count('compiled')} compiled, {seen.count('disk')} read the entry")
    (name,) = files(cache_dir)  # one entry, no temp files
    assert name.endswith(".bin") and len(name) == 64 + 4

    after, _ = lower_in_child(cache_dir)
    assert origins(after) == ["disk"]
    assert_correct(after, reference)
