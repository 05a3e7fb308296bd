"""The cases where the time is not bandwidth: what one small repeated call costs (and, on the GPU,
where its host time goes), and what getting a kernel costs: a cold NVRTC compile, a load from the
disk cache in a fresh process, a hit in the in-process cache."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import List

import numpy as np

import tileprim as tp
from tileprim._platform.backends import cuda_details
from tileprim._calls.call import prepared_call

from .cases import Case, Inputs, Measured
from .timing import per_call_ms, side_by_side_ms

# a fresh interpreter lowers one warp kernel; sm_90a everywhere, so machines compare
_LOWER_IN_CHILD = r"""
import json, time, numpy as np, tileprim as tp
from tileprim import S, laneid
x = np.ones((32, 8), np.float32)
start = time.perf_counter()
k = tp.lower(tp.warp.sum, x, axes=0, layout=S[(32, 8):(1 @ laneid, 1)], target="sm_90a")
lower_ms = (time.perf_counter() - start) * 1e3
print(json.dumps({"origin": k.origin, "build_ms": k.compile_ms, "lower_ms": lower_ms}))
"""

# the steps of a repeated call on a torch tensor, timed alone
HOST_PARTS = ("signature lookup (prepared_call)", "result allocation (torch.empty_like)", "pointers and stream",
              "launch through _C (run_device_one)", "a call with out= (no allocation)")


def _tile() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)


def _small(name: str, measure) -> Case:
    return Case(name, "latency", measure, op="sum", dtype="float32", scope="thread", K=8, shape=(4, 8))


def _beside(ours, baselines: dict, calls: int, sync=None) -> Measured:
    """tileprim's call and the baselines' timed in turn (see ``side_by_side_ms``)."""
    ms = side_by_side_ms({"tileprim": ours, **baselines}, calls, sync)
    return Measured(ms.pop("tileprim"), ms)


def host_small_calls(calls: int) -> List[Case]:
    """A repeated ``tp.plan`` and a repeated 4x8 row sum on the CPU backend, each beside NumPy's
    ``a.sum(-1)``; medians of ``calls`` calls.

    Parameters
    ----------
    calls : int

    Returns
    -------
    list of Case
    """
    a = _tile()

    def versus_numpy(fn):
        return lambda: _beside(fn, {"numpy": lambda: a.sum(-1)}, calls)
    return [_small("small: tp.plan of a 4x8 row sum (cpu)",
                   versus_numpy(lambda: tp.plan(tp.sum, a, axes=-1, backend="cpu"))),
            _small("small: 4x8 row sum, backend='cpu'",
                   versus_numpy(lambda: tp.sum(a, axes=-1, backend="cpu")))]


def gpu_small_calls(torch, inputs: Inputs, calls: int) -> List[Case]:
    """A repeated 4x8 row sum of a torch CUDA tensor beside ``x.sum(-1)`` (wall time with a stream
    synchronize, and host time without one; eager, and both inside ``torch.compile(fullgraph=True)``),
    that host time taken apart (signature lookup, result
    allocation, pointers and stream, the launch through ``tileprim._C``, each timed alone), and the
    NumPy 4x8 round trip through the GPU beside torch's ``from_numpy -> cuda -> sum -> cpu``.

    Parameters
    ----------
    torch : module
    inputs : Inputs
        Holds the 4x8 tensor these cases share.
    calls : int

    Returns
    -------
    list of Case
    """
    a = _tile()

    def tensor():
        return inputs.get(("small tensor",), lambda: torch.from_numpy(a).cuda())

    def versus_torch(with_sync: bool, compiled: bool = False):
        # compiled: both sides inside torch.compile(fullgraph=True), each compiled once beforehand
        wrap = (lambda fn: torch.compile(fn, fullgraph=True)) if compiled else (lambda fn: fn)

        def measure():
            x = tensor()
            ours, theirs = wrap(lambda t: tp.sum(t, axes=-1)), wrap(lambda t: t.sum(-1))
            ours(x), theirs(x)
            sync = torch.cuda.current_stream().synchronize if with_sync else None
            measured = _beside(lambda: ours(x), {"torch": lambda: theirs(x)}, calls, sync)
            torch.cuda.synchronize()
            return measured
        return measure

    def host_part(name: str):
        def measure():
            ms = per_call_ms(_host_parts(torch, tensor())[name], calls)
            torch.cuda.synchronize()
            return Measured(ms)
        return _small("small: host part: " + name, measure)

    def round_trip():
        return _beside(lambda: tp.sum(a, axes=-1, backend="cuda"),
                       {"torch": lambda: torch.from_numpy(a).cuda().sum(-1).cpu()}, calls)
    return [_small("small: 4x8 row sum of a torch CUDA tensor, wall + sync", versus_torch(with_sync=True)),
            _small("small: 4x8 row sum of a torch CUDA tensor, host time", versus_torch(with_sync=False)),
            _small("small: 4x8 row sum of a torch CUDA tensor in torch.compile(fullgraph=True), wall + sync",
                   versus_torch(with_sync=True, compiled=True)),
            _small("small: 4x8 row sum of a torch CUDA tensor in torch.compile(fullgraph=True), host time",
                   versus_torch(with_sync=False, compiled=True)),
            *[host_part(name) for name in HOST_PARTS],
            _small("small: NumPy 4x8 row sum round trip through the GPU", round_trip)]


def _host_parts(torch, x) -> dict:
    """Each step of a repeated ``tp.sum(x, axes=-1)`` on a 4x8 torch tensor, as a call to time:
    the arguments are the generated ``tp.sum``'s own (see ``_ops.functions._source``)."""
    args = ("sum", (x,), -1, None, False, tp.thread, None, None, None, 0, None, None, None, None, {})
    prepared = prepared_call(*args)
    allocate = prepared.allocators[0]
    out = allocate()
    stream = prepared.stream()
    return dict(zip(HOST_PARTS, (
        lambda: prepared_call(*args),
        allocate,
        lambda: (x.data_ptr(), out.data_ptr(), prepared.stream()),
        lambda: prepared.core.run_device_one(x.data_ptr(), out.data_ptr(), 1, 0, stream),
        lambda: tp.sum(x, axes=-1, out=out))))


def _lower_in_fresh_process(cache_dir: str) -> dict:
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(tp.__file__)))
    env = {**os.environ, "TILEPRIM_CACHE_DIR": cache_dir,
           "PYTHONPATH": os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH")) if p)}
    env.pop("TILEPRIM_CACHE", None)  # the disk cache must be on for a disk load to happen
    proc = subprocess.run([sys.executable, "-c", _LOWER_IN_CHILD], env=env, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        last = (proc.stderr.strip() or "no message").splitlines()[-1]
        raise RuntimeError(f"the child lowering a kernel failed: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _needs_nvrtc() -> None:
    nvrtc = tp.info()["nvrtc"]
    if not nvrtc["ok"]:
        raise RuntimeError(f"needs NVRTC: {nvrtc['error']}")


def _child_figures(child: dict) -> Measured:
    return Measured(child["build_ms"], detail={"origin": child["origin"], "lower_ms": child["lower_ms"]})


def _cold_compile() -> Measured:
    _needs_nvrtc()
    with tempfile.TemporaryDirectory() as cache_dir:
        return _child_figures(_lower_in_fresh_process(cache_dir))


def _disk_load() -> Measured:
    _needs_nvrtc()
    with tempfile.TemporaryDirectory() as cache_dir:
        _lower_in_fresh_process(cache_dir)  # fills the cache
        return _child_figures(_lower_in_fresh_process(cache_dir))


def kernel_cases(calls: int) -> List[Case]:
    """Getting a kernel: a cold NVRTC compile (a fresh process, an empty cache directory), a load
    from the disk cache (a second fresh process on that directory), and a hit in the in-process
    cache (the median of ``calls`` lookups from Python). Needs NVRTC, not a GPU.

    Parameters
    ----------
    calls : int

    Returns
    -------
    list of Case
    """
    def memory_hit() -> Measured:
        _needs_nvrtc()
        cuda_details()  # loads NVRTC and configures the cache
        cuda = tp._C.cuda
        args = (tp.__version__, cuda.header_digest(), "sm_90a", ["-std=c++17"],
                'extern "C" __global__ void k() {}')
        return Measured(per_call_ms(lambda: cuda.cache_get_or_compile(*args), calls))
    return [Case("kernel: cold NVRTC compile (fresh process)", "kernel", _cold_compile),
            Case("kernel: disk-cache load (fresh process)", "kernel", _disk_load),
            Case("kernel: in-process cache hit", "kernel", memory_hit)]
