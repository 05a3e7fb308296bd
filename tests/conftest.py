"""Shared fixtures: backends (GPU cases skip, not fail, without a GPU), fresh random inputs with
the hard values mixed in, and the float64 NumPy oracles. The session runs in a temp directory of
its own (kernel cache included: never the user's) with its shared memory in a /dev/shm directory
of its own, and fails at the end when tileprim left a temp file or a segment (tests/leaks.py)."""
from __future__ import annotations

import os
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

from leaks import LeakCheck

# Workers share the GPU (pytest -n 8): JAX would take 75 % of its memory at its first GPU array,
# and a launch of a kernel with spilled registers in another worker would find none left
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

LEAK_CHECK = LeakCheck.start()  # before tileprim is imported: it reads TILEPRIM_CACHE_DIR

import tileprim as tp  # noqa: E402

# The benchmark suite (benchmarks/tileprim_bench) is not installed with tileprim: its tests import
# it from this checkout.
sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))

DTYPES = ("float32", "float64", "float16", "bfloat16")
NP = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16),
      "float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}


def cuda_usable() -> bool:
    return tp.info()["backends"]["cuda"] == "available"


def gpu_count() -> int:
    return len(tp.info()["devices"]) if cuda_usable() else 0


def pytest_sessionfinish(session, exitstatus):
    """Fails the run where tileprim left something behind (what is named on the terminal)."""
    leaks = LEAK_CHECK.finish() if LEAK_CHECK is not None else []
    if leaks:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("tileprim left behind (the suite must leave shared memory and the temp directory "
                                "as it found them):", red=True)
            for leak in leaks:
                reporter.write_line(f"  {leak}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_runtest_setup(item):
    """gpu: skip, not fail, where no CUDA GPU is usable (torch installed without one included);
    multi_gpu(n): where fewer than n are."""
    if item.get_closest_marker("gpu") is not None and not cuda_usable():
        pytest.skip("needs a usable CUDA GPU")
    marker = item.get_closest_marker("multi_gpu")
    if marker is not None and gpu_count() < marker.args[0]:
        pytest.skip(f"needs {marker.args[0]} CUDA GPUs; {gpu_count()} usable")


def pytest_runtest_teardown(item):
    """What a GPU test's frameworks keep cached goes back to the GPU the workers share."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized() and torch.cuda.memory_reserved() > 1 << 30:
        torch.cuda.empty_cache()
    cupy = sys.modules.get("cupy")
    if cupy is not None and cupy.get_default_memory_pool().total_bytes() > 1 << 30:
        cupy.get_default_memory_pool().free_all_blocks()


BACKENDS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu,
                                           pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]),
]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def rng(request) -> np.random.Generator:
    """Fresh entropy per test; the seed is in the test id's failure report via the fixture name."""
    seed = np.random.SeedSequence().entropy
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)


def finfo(dtype: str):
    return ml_dtypes.finfo(NP[dtype]) if dtype == "bfloat16" else np.finfo(NP[dtype])


def random_tile(rng: np.random.Generator, shape, dtype: str, special: bool = True, low=None, high=None) -> np.ndarray:
    """Random values with negatives; with ``special``, a sprinkle of NaN, +-inf, subnormals and -0."""
    if low is not None:
        x = rng.uniform(low, high, size=shape)
    else:
        x = rng.standard_normal(size=shape) * 4.0
    x = np.asarray(x, dtype=np.float64)
    if special and x.size >= 4:
        flat = x.reshape(-1)
        tiny = float(finfo(dtype).smallest_normal)
        picks = rng.choice(flat.size, size=max(1, flat.size // 16), replace=False)
        for i in picks:
            flat[i] = rng.choice([np.nan, np.inf, -np.inf, tiny / 4, -tiny / 2, -0.0])
    return x.astype(NP[dtype])


def unit_roundoff(dtype: str) -> float:
    return float(finfo(dtype).eps) / 2


@np.errstate(all="ignore")
def reduce_oracle(op: str, x: np.ndarray, axes, propagate_nan: bool = False) -> np.ndarray:
    """float64 reduction with tileprim's decided semantics: fmax/fmin (NaN loses; NaN is their
    identity, so a slice of only NaNs gives NaN), or NaN-propagating maximum/minimum."""
    x64 = x.astype(np.float64)
    axes = tuple(axes)
    if op == "sum":
        return np.sum(x64, axis=axes)
    fn = {("max", False): np.fmax, ("min", False): np.fmin,
          ("max", True): np.maximum, ("min", True): np.minimum}[(op, propagate_nan)]
    return fn.reduce(x64, axis=axes)


@np.errstate(all="ignore")
def assert_reduced(result: np.ndarray, x: np.ndarray, op: str, axes, dtype: str, old=None,
                   propagate_nan=False) -> None:
    """max/min exactly; sums within the rigorous bound for any summation order,
    |err| <= (n + 1) * u * (sum|x| + |old|), with NaN/inf exactly where float64 has them.
    ``old``: the output's previous values, folded in by accum=True."""
    expected = reduce_oracle(op, x, axes, propagate_nan)
    x64 = x.astype(np.float64)
    mag = np.sum(np.abs(np.where(np.isfinite(x64), x64, 0)), axis=tuple(axes))
    n = int(np.prod([x.shape[a] for a in axes]))
    if old is not None:
        old64 = np.asarray(old, dtype=np.float64).reshape(expected.shape)
        fold = {"sum": np.add, "max": np.maximum if propagate_nan else np.fmax,
                "min": np.minimum if propagate_nan else np.fmin}[op]
        expected = fold(old64, expected)
        mag = mag + np.abs(np.where(np.isfinite(old64), old64, 0))
        n += 1
    got = np.asarray(result).astype(np.float64)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if op != "sum":
        assert np.array_equal(got, expected.astype(NP[dtype]).astype(np.float64), equal_nan=True), (got, expected)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    inf = np.isinf(expected)
    np.testing.assert_array_equal(got[inf], expected[inf])
    finite = np.isfinite(expected)
    assert np.all(np.isfinite(got[finite])), "finite sums came out NaN/inf"
    bound = (n + 1) * unit_roundoff(dtype) * mag + float(finfo(dtype).smallest_subnormal)
    err = np.abs(got - expected)
    assert np.all(err[finite] <= bound[finite]), f"max excess {np.max((err - bound)[finite])}"
    if dtype == "float32" and np.all(finite) and np.linalg.norm(mag) > 0:
        # relative to sum|x| (the sum's conditioning): |sum x| can be tiny after cancellation
        rel = np.linalg.norm(got - expected) / np.linalg.norm(mag)
        assert rel < 1e-5, rel


def fma32(a, b, c):
    """fma in float32, rounded once: the float64 sum's error kept, rounded to odd, then to float32."""
    a, b, c = (np.asarray(v, np.float64) for v in (a, b, c))
    p = a * b  # exact: 24 + 24 bits
    with np.errstate(invalid="ignore", over="ignore"):
        s = p + c
        t = s - p
        err = (p - (s - t)) + (c - t)
        odd = (err != 0) & ((s.view(np.uint64) & 1) == 0) & np.isfinite(s)
        s = np.where(odd, np.nextafter(s, np.copysign(np.inf, err)), s)  # s + err is s: toward err's sign
    return s.astype(np.float32)


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise equality, every NaN counting as equal to every NaN."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    ua = a.view(f"u{a.dtype.itemsize}")
    ub = b.view(f"u{b.dtype.itemsize}")
    nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return bool(np.all((ua == ub) | nan))
