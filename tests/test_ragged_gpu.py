"""Ragged rows padded on the GPU: the fused program kernels and the batched standalone calls on rows
the scope's threads do not divide give the CPU backend's bits (the same device templates; the tail
slots predicated off the same way), and outputs are written exactly (poisoned first). Skips without
a GPU."""
import numpy as np
import pytest

import tileprim as tp
from conftest import bits_equal, cuda_usable, random_tile
import programs
from test_ragged import ROWS, STRADDLING, biased_rows, case, maps_only, row_sum, scaled_by_row_sums

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]


def on_gpu(prog, args, scope, shape):
    import cupy as cp  # the GPU machine has CuPy; device arrays in, a poisoned device array out
    dev = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    out = cp.full(shape, cp.nan, dtype=cp.float32)
    prog(*dev, batch_dims=1, scope=scope, out=out)
    return cp.asnumpy(out)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize("name", ["softmax", "logsumexp", "rmsnorm", "layernorm"])
def test_ragged_program_gpu_bits_equal_cpu(name, n, dtype, rng):
    prog, args, want = case(name, n, dtype, rng)
    cpu = prog(*args, batch_dims=1, scope=tp.cta(256), backend="cpu")
    gpu = prog(*args, batch_dims=1, scope=tp.cta(256), backend="cuda")  # NumPy in: staged, copied back
    assert bits_equal(np.asarray(gpu), np.asarray(cpu))


@pytest.mark.parametrize("staging", ["shared", "streamed"])
@pytest.mark.parametrize("n", [4097, 50257])
@pytest.mark.parametrize("name", ["softmax", "logsumexp", "rmsnorm"])
def test_padded_rows_in_passes_gpu_bits_equal_cpu(name, n, staging, rng):
    """The passes over a padded row's chunks (its last chunks' slots past the end folded as the
    identity, skipped by loads and stores) give the CPU's bits."""
    prog, args, _ = case(name, n, "float32", rng)
    staged = tp.program(getattr(programs, name), scope=tp.cta(256), staging=staging)
    cpu = prog(*args, batch_dims=1, scope=tp.cta(256), backend="cpu")
    assert bits_equal(np.asarray(staged(*args, batch_dims=1, backend="cuda")), np.asarray(cpu))


@pytest.mark.parametrize("scope", [tp.warp, tp.cta(128), tp.cta(1024)], ids=str)
@pytest.mark.parametrize("n", [7, 1000, 4097])
def test_ragged_softmax_other_scopes_gpu(n, scope, rng):
    prog, args, _ = case("softmax", n, "float32", rng)
    cpu = prog(*args, batch_dims=1, scope=scope, backend="cpu")
    assert bits_equal(np.asarray(prog(*args, batch_dims=1, scope=scope, backend="cuda")), np.asarray(cpu))


@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize("op,propagate_nan", [("sum", False), ("max", False), ("min", False), ("max", True),
                                              ("min", True)])
def test_batched_standalone_reductions_gpu(op, n, propagate_nan, rng):
    x = random_tile(rng, (5, n), "float32", special=True)
    x[4, :] = np.nan
    x[3, n - 1] = np.inf
    kw = {"propagate_nan": True} if propagate_nan else {}
    fn = getattr(tp, op)
    cpu = fn(x, axes=-1, batch_dims=1, scope=tp.cta(256), backend="cpu", **kw)
    gpu = fn(x, axes=-1, batch_dims=1, scope=tp.cta(256), backend="cuda", **kw)
    assert bits_equal(np.asarray(gpu), np.asarray(cpu))


@pytest.mark.parametrize("n", [7, 1000, 4097, 50257])
def test_maps_on_ragged_rows_gpu(n, rng):
    x = random_tile(rng, (3, n), "float32")
    y = random_tile(rng, (3, n), "float32")
    cpu = maps_only(x, y, batch_dims=1, scope=tp.cta(256), backend="cpu")
    gpu = maps_only(x, y, batch_dims=1, scope=tp.cta(256), backend="cuda")
    assert bits_equal(np.asarray(gpu), np.asarray(cpu))


@pytest.mark.parametrize("n", [1000, 4097, 50257])
def test_ragged_rows_on_device_arrays_write_every_element(n, rng):
    """Device arrays in and a poisoned device out=: every element written, none past the row."""
    pytest.importorskip("cupy")
    prog, args, want = case("softmax", n, "float32", rng)
    got = on_gpu(prog, args, tp.cta(256), want.shape)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())


@pytest.mark.parametrize("scope", [tp.warp, tp.cta(32)], ids=str)
def test_tiles_of_several_dims_gpu(scope, rng):
    x = random_tile(rng, (6, 3, 5, 7), "float32")
    b = random_tile(rng, (7,), "float32")
    cpu = biased_rows(x, b, batch_dims=1, scope=scope, backend="cpu")
    assert bits_equal(np.asarray(biased_rows(x, b, batch_dims=1, scope=scope, backend="cuda")), np.asarray(cpu))


@pytest.mark.parametrize("shape,scope", STRADDLING, ids=lambda v: str(v))
def test_tiles_whose_dims_the_spread_straddles_gpu(shape, scope, rng):
    x = random_tile(rng, (5,) + shape, "float32")
    w = random_tile(rng, shape[-1:], "float32")
    cpu = scaled_by_row_sums(x, w, batch_dims=1, scope=scope, backend="cpu")
    assert bits_equal(np.asarray(scaled_by_row_sums(x, w, batch_dims=1, scope=scope, backend="cuda")), np.asarray(cpu))


@pytest.mark.parametrize("scope", [tp.cta(96), tp.cta(192), tp.cta(768)], ids=str)
@pytest.mark.parametrize("n", [1000, 4097, 50257, 65536])
@pytest.mark.parametrize("name", ["softmax", "rmsnorm"])
def test_rows_over_warps_no_power_of_two_gpu_bits_equal_cpu(name, n, scope, rng):
    prog, args, _ = case(name, n, "float32", rng)
    cpu = prog(*args, batch_dims=1, scope=scope, backend="cpu")
    assert bits_equal(np.asarray(prog(*args, batch_dims=1, scope=scope, backend="cuda")), np.asarray(cpu))


def test_the_warps_of_a_row_fold_in_order_on_the_gpu():
    x = np.zeros((2, 96), np.float32)
    x[:, 0], x[:, 32], x[:, 64] = 1e8, 1.0, -1e8
    x[1, 33] = 2.0
    out = np.full((2, 1), np.nan, np.float32)
    row_sum(x, batch_dims=1, scope=tp.cta(96), backend="cuda", out=out)
    assert out.tolist() == [[0.0], [0.0]]
