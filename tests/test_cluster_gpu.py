"""The cluster scope on a GPU with thread-block clusters (sm_90 and later): the four programs at
named clusters and with no scope named (the planner's cluster for long rows) give the CPU
backend's bits, outputs poisoned first; a standalone batched call at a cluster; the shared staging's
per-CTA shares, even and padded rows, aligned and not. Skips without a GPU, or on one older than
sm_90. The sanitizer subset: `-k "small"` (small rows: every path, quick under compute-sanitizer)."""
import numpy as np
import pytest

import tileprim as tp
from conftest import bits_equal, cuda_usable, random_tile

from test_cluster import PROGRAMS, arguments, poisoned


def _clusters() -> bool:
    from tileprim._platform.backends import device_arch
    return tp._C.sm_version(device_arch(0)) >= 90


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU"),
              pytest.mark.skipif(cuda_usable() and not _clusters(), reason="the GPU has no thread-block clusters")]


def on_gpu(name, args, scope, staging=None):
    import cupy as cp  # device arrays in, poisoned device arrays out
    dev = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    outs = tuple(cp.asarray(o) for o in poisoned(name, args))
    prog = PROGRAMS[name] if staging is None else tp.program(PROGRAMS[name]._fn, staging=staging)
    prog(*dev, batch_dims=1, scope=scope, out=outs if len(outs) > 1 else outs[0])
    return tuple(cp.asnumpy(o) for o in outs)


def on_cpu(name, args, scope):
    outs = poisoned(name, args)
    PROGRAMS[name](*args, batch_dims=1, scope=scope, backend="cpu", out=outs if len(outs) > 1 else outs[0])
    return outs


def same_bits(a, b):
    return all(bits_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("n, scope", [(65536, tp.cluster(2)), (65537, tp.cluster(4)), (131072, tp.cluster(8)),
                                      (262144, tp.cluster(8)), (262144, tp.cluster(16)),
                                      (4096, tp.cluster(2, threads=128)), (4099, tp.cluster(4, threads=64))],
                         ids=lambda v: str(v))
def test_cluster_program_gpu_bits_equal_cpu(name, dtype, n, scope, rng):
    args = arguments(name, rng, 3, n, dtype, special=True)
    assert same_bits(on_gpu(name, args, scope), on_cpu(name, args, scope))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("staging", ["registers", "shared", "streamed"])
@pytest.mark.parametrize("n", [2048, 2050, 2051, 65536, 65537])
@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "add_rmsnorm"])
def test_cluster_stagings_gpu_bits_equal_cpu(name, n, staging, dtype, rng):
    """Each staging a cluster takes (registers; shared: each CTA's share by cp.async in runs of 16,
    8 or 4 bytes, through registers in runs of 2: rows of 4k, 4k + 2 and odd lengths, whose runs
    are 4, 2 and 1 elements; streamed), even and padded rows. small: the 2048-2051 cases."""
    scope = tp.cluster(4, threads=128) if n < 10_000 else tp.cluster(8, threads=256)
    args = arguments(name, rng, 3, n, dtype, special=True)
    assert same_bits(on_gpu(name, args, scope, staging), on_cpu(name, args, scope))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("n", [65536, 131072, 262144])
def test_no_scope_long_rows_gpu_bits_equal_cpu(name, dtype, n, rng):
    """With no scope named the planner's choice (a cluster for these rows, on an H100/H200) runs, and
    the CPU backend (modelling the same target) gives its bits."""
    args = arguments(name, rng, 3, n, dtype, special=True)
    import cupy as cp
    dev = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    gpu = PROGRAMS[name](*dev, batch_dims=1)
    gpu = tuple(cp.asnumpy(g) for g in (gpu if isinstance(gpu, tuple) else (gpu,)))
    cpu = PROGRAMS[name](*args, batch_dims=1, backend="cpu")
    cpu = cpu if isinstance(cpu, tuple) else (cpu,)
    assert same_bits(gpu, cpu)


@pytest.mark.parametrize("n", [1000, 65537])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_small_and_long_standalone_call_at_a_cluster_gpu(op, n, rng):
    import cupy as cp
    x = random_tile(rng, (5, n), "float32", special=True)
    out = cp.full(5, cp.nan, cp.float32)
    getattr(tp, op)(cp.asarray(x), axes=-1, batch_dims=1, scope=tp.cluster(4), out=out)
    want = getattr(tp, op)(x, axes=-1, batch_dims=1, scope=tp.cluster(4), backend="cpu")
    assert bits_equal(cp.asnumpy(out), want)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_small_cluster_programs_gpu(name, rng):
    """Small rows at every cluster size: the sanitizers' subset (every exchange path: warp, CTA,
    cluster; clusters of 2 to 16)."""
    args = arguments(name, rng, 5, 2051, "float32", special=True)
    for scope in (tp.cluster(2, threads=64), tp.cluster(4, threads=128), tp.cluster(8, threads=32),
                  tp.cluster(16, threads=64)):
        assert same_bits(on_gpu(name, args, scope), on_cpu(name, args, scope)), scope
