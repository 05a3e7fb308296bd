"""The run-time CUDA layer (tileprim._C.cuda): SHA-256, NVRTC, the driver's absence, and the
kernel cache. Runs without a GPU. Loading is once per process, so anything that depends on
environment variables or on a fresh cache runs in a child process."""
from __future__ import annotations

import hashlib
import json
import os
import statistics
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from tileprim import _C

cuda = _C.cuda

VERSION = "test-0"
KERNEL = 'extern "C" __global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }\n'
OTHER_KERNEL = 'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n'
WARNING = "tileprim: warning: kernel cache directory"

# The child: compiles each requested source through the cache and prints one JSON list.
CHILD = textwrap.dedent("""
    import hashlib, json, os, sys, time
    from tileprim import _C
    requests = json.loads(sys.argv[1])
    start_at = float(os.environ.get("START_AT", "0"))
    while time.time() < start_at:
        time.sleep(0.001)
    results = []
    for source in requests:
        t0 = time.perf_counter()
        r = _C.cuda.cache_get_or_compile(%r, "headers-0", "sm_90a", ["-default-device"], source)
        results.append({"origin": r["origin"], "cubin": hashlib.sha256(r["cubin"]).hexdigest(),
                        "ptx_len": len(r["ptx"]), "compile_ms": r["compile_ms"],
                        "call_ms": (time.perf_counter() - t0) * 1e3})
    print(json.dumps({"results": results, "disk": _C.cuda.cache_disk_enabled(),
                      "directory": _C.cuda.cache_directory(%r)}))
""" % (VERSION, VERSION))


def child_env(**overrides) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILEPRIM_")}
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def compile_in_child(cache_dir, *sources, **env):
    """Runs CHILD in a fresh process; returns (parsed stdout, stderr)."""
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(list(sources or [KERNEL]))],
                          env=child_env(TILEPRIM_CACHE_DIR=cache_dir, **env), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def origins(out) -> list:
    return [r["origin"] for r in out["results"]]


def entries(cache_dir) -> list:
    return sorted(os.listdir(cache_dir)) if os.path.isdir(cache_dir) else []


def require_nvrtc():
    status = cuda.nvrtc_status()
    if not status["ok"]:
        pytest.skip(f"NVRTC not found: {status['error']}")


# ---- SHA-256 ----------------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 3, 55, 56, 63, 64, 65, 119, 120, 128, 1000, 1 << 20])
def test_sha256_matches_hashlib(size):
    data = bytes((i * 131 + 7) % 256 for i in range(size))
    assert cuda.sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_sha256_known_vectors():
    assert cuda.sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert cuda.sha256_hex(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


# ---- loading ----------------------------------------------------------------------------

def test_import_loads_no_cuda_library():
    script = "import tileprim; print(open('/proc/self/maps').read())"
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("needs /proc/self/maps")
    maps = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "libnvrtc" not in maps and "libcuda" not in maps


def test_nvrtc_loads():
    status = cuda.nvrtc_status()
    assert status["ok"], status["error"]
    major, minor = status["version"]
    assert major in (12, 13) and minor >= 0
    assert f"libnvrtc.so.{major}" in status["path"]
    assert os.path.basename(status["tried"][-1]) == os.path.basename(status["path"])  # the last try loaded
    print(f"\nNVRTC {major}.{minor} from {status['path']}; archs {cuda.supported_archs()}")


def test_supported_archs_and_include_dir():
    require_nvrtc()
    assert 90 in cuda.supported_archs()
    include = cuda.toolkit_include_dir()
    assert include and os.path.isfile(os.path.join(include, "cuda_fp16.h"))


def test_bad_nvrtc_override_is_reported(tmp_path):
    require_nvrtc()
    bogus = str(tmp_path / "nowhere" / "libnvrtc.so.13")
    script = "import json; from tileprim import _C; print(json.dumps(_C.cuda.nvrtc_status()))"
    done = subprocess.run([sys.executable, "-c", script], env=child_env(TILEPRIM_NVRTC=bogus),
                          capture_output=True, text=True, check=True)
    status = json.loads(done.stdout)
    assert status["tried"][0] == bogus
    assert status["ok"]  # then found in the usual places
    assert "TILEPRIM_NVRTC" in done.stderr and bogus in done.stderr


def test_an_nvrtc_without_its_builtins_is_passed_over(tmp_path):
    # a libnvrtc alone in its directory cannot compile (it opens libnvrtc-builtins at the first
    # compile): the search must go on to one that can, saying why
    require_nvrtc()
    lonely = tmp_path / "libnvrtc.so.13"
    shutil.copy(cuda.nvrtc_status()["path"], lonely)
    script = "import json; from tileprim import _C; print(json.dumps(_C.cuda.nvrtc_status()))"
    done = subprocess.run([sys.executable, "-c", script], env=child_env(TILEPRIM_NVRTC=str(lonely)),
                          capture_output=True, text=True, check=True)
    status = json.loads(done.stdout)
    assert status["tried"][0] == str(lonely) and status["ok"] and status["path"] != str(lonely)
    assert "libnvrtc-builtins" in done.stderr


def test_no_driver_is_a_clean_error():
    status = cuda.driver_status()
    if status["ok"]:
        pytest.skip("a CUDA driver is present")
    assert "libcuda.so.1" in status["error"]
    assert status["tried"] == ["libcuda.so.1"]
    for call in (cuda.device_count, lambda: cuda.device_info(0), lambda: cuda.make_current(0)):
        with pytest.raises(RuntimeError, match="libcuda.so.1"):
            call()


# ---- NVRTC compile ----------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_compile_ptx_and_cubin(arch):
    require_nvrtc()
    out = cuda.compile(KERNEL, "add_one.cu", [f"--gpu-architecture={arch}"], True)
    assert f".target {arch}" in out["ptx"]
    assert ".visible .entry add_one" in out["ptx"]
    assert isinstance(out["cubin"], bytes) and out["cubin"].startswith(b"\x7fELF")
    assert out["ms"] > 0
    print(f"\ncold NVRTC compile for {arch}: {out['ms']:.1f} ms")


def test_compile_ptx_only_for_virtual_arch():
    require_nvrtc()
    out = cuda.compile(KERNEL, "add_one.cu", ["--gpu-architecture=compute_90"], False)
    assert ".target sm_90" in out["ptx"] and out["cubin"] == b""


def test_compile_error_shows_the_offending_line():
    require_nvrtc()
    bad_line = "  x[threadIdx.x] += not_declared_anywhere;"
    source = 'extern "C" __global__ void broken(float* x) {\n' + bad_line + "\n}\n"
    with pytest.raises(cuda.CompileError) as caught:
        cuda.compile(source, "broken.cu", ["--gpu-architecture=sm_90a"], True)
    message = str(caught.value)
    assert isinstance(caught.value, RuntimeError)
    assert "not_declared_anywhere" in message and "is undefined" in message
    assert "2 | " + bad_line in message  # the numbered source


# ---- kernel cache -----------------------------------------------------------------------

def test_cache_memory_then_disk(tmp_path):
    require_nvrtc()
    cache_dir = str(tmp_path / "cache")
    first, _ = compile_in_child(cache_dir, KERNEL, KERNEL)
    assert origins(first) == ["compiled", "memory"]
    assert first["directory"] == cache_dir and first["disk"]
    files = entries(cache_dir)
    assert len(files) == 1 and files[0].endswith(".bin") and len(files[0]) == 64 + 4
    second, _ = compile_in_child(cache_dir, KERNEL)
    assert origins(second) == ["disk"]
    assert second["results"][0]["cubin"] == first["results"][0]["cubin"]


def test_cache_key_covers_source_and_options(tmp_path):
    require_nvrtc()
    cache_dir = str(tmp_path / "cache")
    out, _ = compile_in_child(cache_dir, KERNEL, OTHER_KERNEL, KERNEL + " ")
    assert origins(out) == ["compiled", "compiled", "compiled"]
    assert len(entries(cache_dir)) == 3


@pytest.mark.parametrize("damage", ["truncate", "flip_payload_byte", "flip_length"])
def test_cache_damaged_entry_is_recompiled(tmp_path, damage):
    require_nvrtc()
    cache_dir = str(tmp_path / "cache")
    good, _ = compile_in_child(cache_dir)
    (name,) = entries(cache_dir)
    path = os.path.join(cache_dir, name)
    data = bytearray(open(path, "rb").read())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip_payload_byte":
        data[-1] ^= 0x01
    else:  # move one byte from the PTX to the CUBIN: same total, different split
        ptx_len, cubin_len = (int.from_bytes(data[at:at + 8], "little") for at in (36, 44))
        data[36:52] = (ptx_len - 1).to_bytes(8, "little") + (cubin_len + 1).to_bytes(8, "little")
    open(path, "wb").write(bytes(data))

    again, _ = compile_in_child(cache_dir)
    assert origins(again) == ["compiled"]
    assert again["results"][0]["cubin"] == good["results"][0]["cubin"]
    healed, _ = compile_in_child(cache_dir)
    assert origins(healed) == ["disk"]
    assert entries(cache_dir) == [name]


def test_cache_unwritable_directory_warns_once(tmp_path):
    require_nvrtc()
    (tmp_path / "afile").write_text("not a directory")
    cache_dir = str(tmp_path / "afile" / "cache")
    out, stderr = compile_in_child(cache_dir, KERNEL, OTHER_KERNEL, KERNEL)
    assert origins(out) == ["compiled", "compiled", "memory"]
    assert not out["disk"]
    warnings = [line for line in stderr.splitlines() if WARNING in line]
    assert len(warnings) == 1, stderr
    assert cache_dir in warnings[0] and "Not a directory" in warnings[0]


def test_cache_disabled_by_environment(tmp_path):
    require_nvrtc()
    cache_dir = str(tmp_path / "cache")
    out, stderr = compile_in_child(cache_dir, KERNEL, KERNEL, TILEPRIM_CACHE="0")
    assert origins(out) == ["compiled", "memory"]
    assert not out["disk"] and entries(cache_dir) == [] and WARNING not in stderr


def test_cache_default_directory_follows_xdg(tmp_path):
    script = f"from tileprim import _C; print(_C.cuda.cache_directory({VERSION!r}))"
    env = child_env(XDG_CACHE_HOME=str(tmp_path / "xdg"))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(tmp_path / "xdg" / "tileprim" / VERSION)


def test_cache_two_processes_at_once(tmp_path):
    require_nvrtc()
    cache_dir = str(tmp_path / "cache")
    start_at = str(time.time() + 2.0)  # both past their imports, then compile together
    env = child_env(TILEPRIM_CACHE_DIR=cache_dir, START_AT=start_at)
    children = [subprocess.Popen([sys.executable, "-c", CHILD, json.dumps([KERNEL])], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [child.communicate(timeout=120) for child in children]
    for child, (stdout, stderr) in zip(children, outputs):
        assert child.returncode == 0, stderr
        assert WARNING not in stderr
    cubins = {json.loads(stdout)["results"][0]["cubin"] for stdout, _ in outputs}
    assert len(cubins) == 1
    files = entries(cache_dir)
    assert len(files) == 1 and files[0].endswith(".bin"), files  # no temp files left
    after, _ = compile_in_child(cache_dir)
    assert origins(after) == ["disk"] and after["results"][0]["cubin"] in cubins


def test_cache_clear_removes_entries(tmp_path):
    require_nvrtc()
    cache_dir = str(tmp_path / "cache")
    compile_in_child(cache_dir, KERNEL, OTHER_KERNEL)
    (tmp_path / "cache" / "unrelated.txt").write_text("keep me")
    assert len(entries(cache_dir)) == 3
    script = textwrap.dedent(f"""
        import json
        from tileprim import _C
        c = _C.cuda
        get = lambda: c.cache_get_or_compile({VERSION!r}, "headers-0", "sm_90a", ["-default-device"],
                                             {KERNEL!r})
        seen = [get()["origin"], get()["origin"]]
        c.cache_clear(True, {VERSION!r})
        seen.append(get()["origin"])
        print(json.dumps(seen))
    """)
    done = subprocess.run([sys.executable, "-c", script], env=child_env(TILEPRIM_CACHE_DIR=cache_dir),
                          capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == ["disk", "memory", "compiled"]
    files = entries(cache_dir)
    assert "unrelated.txt" in files and len(files) == 2  # the recompiled kernel was written again


def test_cache_timings(tmp_path):
    """Prints cold compile, disk load and in-process hit times; asserts only a sanity bound."""
    require_nvrtc()
    cache_dir = str(tmp_path / "cache")
    script = textwrap.dedent(f"""
        import json, statistics, time
        from tileprim import _C
        get = lambda: _C.cuda.cache_get_or_compile({VERSION!r}, "headers-0", "sm_90a", [], {KERNEL!r})
        first = get()
        hits = []
        for _ in range(1000):
            t0 = time.perf_counter_ns()
            r = get()
            hits.append(time.perf_counter_ns() - t0)
            assert r["origin"] == "memory"
        print(json.dumps({{"origin": first["origin"], "ms": first["compile_ms"],
                           "hit_us": statistics.median(hits) / 1e3}}))
    """)
    env = child_env(TILEPRIM_CACHE_DIR=cache_dir)
    cold = json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                     check=True).stdout)
    warm = json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                     check=True).stdout)
    assert cold["origin"] == "compiled" and warm["origin"] == "disk"
    hit_us = statistics.median([cold["hit_us"], warm["hit_us"]])
    print(f"\ncold compile {cold['ms']:.1f} ms, disk load {warm['ms']:.3f} ms, "
          f"memory hit {hit_us:.2f} us (median of 1000, from Python)")
    assert hit_us < 1000.0
