"""Ragged tiles are padded, never replicated (DESIGN §2): a row the scope's threads do not divide
is spread over all of them, ceil(n / threads) slots each, the slots past its end holding nothing:
loads and stores skip them, every reduction folds them as its identity. On the CPU backend (the
same device templates as the GPU) programs and batched standalone calls on such rows match float64
NumPy, and their plans for sm_90a neither refuse nor spill."""
import ml_dtypes
import numpy as np
import pytest

import tileprim as tp
from conftest import random_tile
import programs

ROWS = [7, 100, 1000, 2047, 4097, 50257]
softmax = tp.program(programs.softmax)
logsumexp = tp.program(programs.logsumexp)
rmsnorm = tp.program(programs.rmsnorm)


@tp.program
def layernorm(x, w, b, eps):
    wide = (lambda t: tp.cast(t, "float32")) if x.dtype == "bfloat16" else (lambda t: t)
    xf = wide(x)
    mean = tp.sum(xf, axes=-1, keepdims=True) / x.shape[-1]
    d = xf - mean
    var = tp.sum(d * d, axes=-1, keepdims=True) / x.shape[-1]
    y = d * tp.rsqrt(var + eps) * wide(w) + wide(b)
    return tp.cast(y, x.dtype) if x.dtype == "bfloat16" else y


def layernorm64(x, w, b, eps):
    x = np.asarray(x, np.float64)
    d = x - x.mean(axis=-1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps) * np.asarray(w, np.float64) + np.asarray(b, np.float64)


def numpy_dtype(dtype):
    return ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32


def case(name, n, dtype, rng):
    """(program, args, float64 oracle) on 3 rows of n finite values with negatives and subnormals."""
    x = random_tile(rng, (3, n), dtype, special=False).astype(numpy_dtype(dtype))
    x.reshape(-1)[:: max(1, n // 5)] = 1e-40  # subnormal (bfloat16 and float32 both keep some)
    w = (rng.uniform(0.5, 1.5, n)).astype(x.dtype)
    b = (rng.standard_normal(n)).astype(x.dtype)
    if name == "softmax":
        return softmax, (x,), programs.softmax64(x)
    if name == "logsumexp":
        return logsumexp, (x,), programs.logsumexp64(x)
    if name == "rmsnorm":
        return rmsnorm, (x, w, 1e-6), programs.rmsnorm64(x, w, 1e-6)
    return layernorm, (x, w, b, 1e-5), layernorm64(x, w, b, 1e-5)


def close(got, want, dtype, scale=1.0):
    got = np.asarray(got, np.float64)
    tol = (2e-2 if dtype == "bfloat16" else 2e-5) * scale
    assert np.all(np.isfinite(got)), "a slot past the row's end leaked into the result"
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize("name", ["softmax", "logsumexp", "rmsnorm", "layernorm"])
def test_ragged_rows_at_cta256_match_float64(name, n, dtype, rng):
    prog, args, want = case(name, n, dtype, rng)
    out = np.full(want.shape, np.nan, numpy_dtype(dtype))  # poisoned: every element must be written
    assert prog(*args, batch_dims=1, scope=tp.cta(256), backend="cpu", out=out) is out
    close(out, want, dtype, scale=10.0 if name == "logsumexp" else 1.0)


@pytest.mark.parametrize("scope", [tp.warp, tp.cta(128), tp.cta(1024)], ids=str)
@pytest.mark.parametrize("n", [7, 1000, 4097])
@pytest.mark.parametrize("name", ["softmax", "rmsnorm"])
def test_ragged_rows_at_other_scopes(name, n, scope, rng):
    prog, args, want = case(name, n, "float32", rng)
    close(prog(*args, batch_dims=1, scope=scope, backend="cpu"), want, "float32")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize("name", ["softmax", "logsumexp", "rmsnorm", "layernorm"])
def test_ragged_plans_pad_and_never_spill(name, n, dtype, rng):
    prog, args, _ = case(name, n, dtype, rng)
    plan = tp.plan(prog, *args, batch_dims=1, scope=tp.cta(256), target="sm_90a")
    assert plan.staging in ("registers", "shared", "streamed"), str(plan)
    text = str(plan)
    assert "replica" not in text and "divide" not in text
    if n % 256:
        assert f"padded({n})" in text, text
    if n == 50257:  # 197 elements per thread: staged, in passes over chunks
        assert plan.staging in ("shared", "streamed")


def test_a_padded_row_holds_ceil_n_over_threads_slots():
    x = np.ones((2, 4097), np.float32)
    plan = tp.plan(softmax, x, batch_dims=1, scope=tp.cta(256), target="sm_90a")
    assert "S[(20, 256) : (1, 1@tx)] padded(4097)" in str(plan)  # 20 slots, not 4097; runs of one: 4097 is odd
    assert "20 slots per thread" in str(plan)


@pytest.mark.parametrize("n, threads, layout", [
    (32000, 256, "S[(32, 256, 4) : (4, 1@tx, 1)] padded(32000)"),  # 125 a thread: runs of 4 padded to 128
    (11008, 256, "S[(11, 256, 4) : (4, 1@tx, 1)] padded(11008)"),  # 43 a thread (hidden 11008)
    (768, 256, "S[(256, 3) : (1@tx, 1)]"),  # one run each: 3 consecutive elements a thread
])
def test_a_row_the_threads_divide_but_not_their_runs_keeps_warps_loads_contiguous(n, threads, layout):
    """A row of t * k elements, k no multiple of the run, is padded to whole runs like a ragged row:
    never a block of k consecutive elements per thread, whose loads a warp spreads over 32 lines
    (32000 at 256 threads ran at 0.02-0.1x of the copy bandwidth that way)."""
    x = np.ones((2, n), np.float32)
    plan = tp.plan(softmax, x, batch_dims=1, scope=tp.cta(threads), target="sm_90a")
    assert layout in str(plan), str(plan)
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32)
    close(softmax(x, batch_dims=1, scope=tp.cta(threads), backend="cpu"), programs.softmax64(x), "float32")


@pytest.mark.parametrize("n, layout", [
    (50257, "S[(200, 256) : (1, 1@tx)] padded(50257)"),  # odd: runs of one element
    (4098, "S[(10, 256, 2) : (2, 1@tx, 1)] padded(4098)"),  # 2 mod 4: runs of two
    (4100, "S[(5, 256, 4) : (4, 1@tx, 1)] padded(4100)"),  # a multiple of 4: runs of four
])
def test_runs_divide_the_row_so_every_row_of_a_batch_starts_on_a_whole_run(n, layout):
    """Rows laid end to end start on a whole run only where the run divides the row: runs of 4 over
    rows of 50257 cut 3 rows in 4 and moved them element by element at a stride of 4 (a quarter of
    each sector used a load; partial writes a store)."""
    x = np.ones((2, n), np.float32)
    plan = tp.plan(softmax, x, batch_dims=1, scope=tp.cta(256), target="sm_90a")
    assert layout in str(plan), str(plan)
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32)
    close(softmax(x, batch_dims=1, scope=tp.cta(256), backend="cpu"), programs.softmax64(x), "float32")


def reference(op, x, propagate_nan):
    x = np.asarray(x, np.float64)
    if op == "sum":
        return x.sum(axis=-1)
    if propagate_nan:
        return (np.max if op == "max" else np.min)(x, axis=-1)
    with np.errstate(invalid="ignore"):
        return (np.fmax if op == "max" else np.fmin).reduce(x, axis=-1)


@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize("op,propagate_nan", [("sum", False), ("max", False), ("min", False), ("max", True),
                                              ("min", True)])
def test_batched_standalone_reductions_on_ragged_rows(op, n, propagate_nan, rng):
    x = random_tile(rng, (4, n), "float32", special=op != "sum")
    if op != "sum":
        x[3, :] = np.nan  # a row of NaN only: NaN either way
        x[2, n - 1] = np.inf if op == "max" else -np.inf  # the last element, in the tail slot
        if n > 2:
            x[1, 1] = np.nan
    kw = {"propagate_nan": True} if propagate_nan else {}
    got = getattr(tp, op)(x, axes=-1, batch_dims=1, scope=tp.cta(256), backend="cpu", **kw)
    want = reference(op, x, propagate_nan)
    got = np.asarray(got, np.float64).reshape(want.shape)
    if op == "sum":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(x).sum(axis=-1).max())
    else:
        np.testing.assert_array_equal(got, want)  # max and min are exact: NaN where NaN


@pytest.mark.parametrize("n", [7, 1000, 4097])
def test_sum_of_a_ragged_row_keeps_negative_zero(n):
    x = np.full((2, n), -0.0, np.float32)
    got = np.asarray(tp.sum(x, axes=-1, batch_dims=1, scope=tp.cta(256), backend="cpu"))
    assert np.all(np.signbit(got)), "the padding folded as +0, not as sum's identity -0"


@tp.program
def maps_only(x, y):
    return tp.exp(x) * y - x


@pytest.mark.parametrize("n", [7, 1000, 4097, 50257])
def test_maps_on_ragged_rows(n, rng):
    x = random_tile(rng, (3, n), "float32")
    y = random_tile(rng, (3, n), "float32")
    out = np.full((3, n), np.nan, np.float32)
    maps_only(x, y, batch_dims=1, scope=tp.cta(256), backend="cpu", out=out)
    with np.errstate(all="ignore"):
        x64, ey = x.astype(np.float64), np.exp(x.astype(np.float64)) * y
        want = ey - x64
        near = np.abs(out - want) <= 1e-6 * (np.abs(ey) + np.abs(x64))  # float32 rounding of each term
    assert np.all(near[np.isfinite(want)])
    assert np.array_equal(np.isnan(out), np.isnan(want))  # the poison is overwritten everywhere
    plan = tp.plan(maps_only, x, y, batch_dims=1, scope=tp.cta(256), target="sm_90a")
    assert plan.staging != "spilled" and (n % 256 == 0 or f"padded({n})" in str(plan))


@tp.program
def biased_rows(x, b):
    y = x + b
    return y - tp.max(y, axes=-1, keepdims=True) + tp.sum(y, axes=(-2, -1), keepdims=True)


@pytest.mark.parametrize("scope", [tp.warp, tp.cta(32), tp.cta(128)], ids=str)
@pytest.mark.parametrize("shape", [(3, 5, 7), (2, 3, 33), (5, 1, 9)])
def test_tiles_of_several_dims_with_a_broadcast_operand(shape, scope, rng):
    """x[B, 3, 5, 7] + b[7] at cta(32): the tile padded flat (4 slots per thread, not 105 held by
    every thread), the broadcast read by element, its reductions over some dims exact."""
    x = random_tile(rng, (4,) + shape, "float32", special=False)
    b = random_tile(rng, shape[-1:], "float32", special=False)
    out = np.full(x.shape, np.nan, np.float32)
    biased_rows(x, b, batch_dims=1, scope=scope, backend="cpu", out=out)
    y = x.astype(np.float64) + b
    want = y - y.max(-1, keepdims=True) + y.sum(axis=(-2, -1), keepdims=True)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.abs(y).sum(axis=(-2, -1)).max())
    plan = tp.plan(biased_rows, x, b, batch_dims=1, scope=scope, target="sm_90a")
    assert plan.staging == "registers" and f"padded({int(np.prod(shape))})" in str(plan)


# tiles whose threads' runs or blocks straddle their dims: (3, 64) over 64 threads (blocks of 3), (6, 128)
# over 256, (4, 5, 64) over 32 (runs of 4, 128 a warp, past a row into a dim of 5), (3, 32) over 64
# (rows of 32 for 64 threads: the threads over two dims)
STRADDLING = [((3, 64), tp.cta(64)), ((3, 32), tp.warp), ((6, 128), tp.cta(256)), ((4, 5, 64), tp.cta(32)),
              ((4, 5, 64), tp.warp), ((4, 5, 64), tp.cta(64)), ((3, 32), tp.cta(64)), ((2, 3, 32), tp.cta(64)),
              ((7, 96), tp.cta(96))]


@tp.program
def scaled_by_row_sums(x, w):  # issue 49's 3-D tile with a broadcast operand
    return tp.sum(x * w, axes=-1, keepdims=True) * x - tp.max(x, axes=0, keepdims=True)


@pytest.mark.parametrize("shape,scope", STRADDLING, ids=lambda v: str(v))
def test_tiles_whose_dims_the_spread_straddles_plan_and_match_float64(shape, scope, rng):
    """The planner's spread splits into the tile's dims at any scope the tile can be spread over
    (they were refused: 'cannot be split into the dims')."""
    x = random_tile(rng, (3,) + shape, "float32", special=False)
    w = random_tile(rng, shape[-1:], "float32", special=False)
    out = np.full(x.shape, np.nan, np.float32)
    scaled_by_row_sums(x, w, batch_dims=1, scope=scope, backend="cpu", out=out)
    x64 = x.astype(np.float64)
    want = (x64 * w).sum(-1, keepdims=True) * x64 - x64.max(axis=1, keepdims=True)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * (np.abs(x64 * w).sum(-1).max() + 1))
    assert tp.plan(scaled_by_row_sums, x, w, batch_dims=1, scope=scope, target="sm_90a").staging == "registers"


@pytest.mark.parametrize("n,staging", [(4097, "registers"), (4097, "streamed"), (50257, "shared"),
                                       (50257, "streamed")])
def test_padded_rows_lower_without_spills(n, staging):
    """The sm_90a kernel of a padded row (NVRTC, no GPU): its place names the row's elements, the
    tail slots are predicated off in the source, and nothing spills to local memory."""
    prog = tp.program(programs.softmax, scope=tp.cta(256), staging=staging)
    k = tp.lower(prog, np.ones((4, n), np.float32), batch_dims=1, target="sm_90a")
    assert k.plan.staging == staging
    assert f", {n}>" in k.source  # RunPlace<owners, vec, n>
    assert "tp::pad_identity<" in k.source or "tp::padded_copy<" in k.source  # the folds pad the tail
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx


# CTAs of whole warps that are no power of two: no XOR butterfly spans their threads, so a row over
# them folds within each warp, then the warps' results in order (they spilled past registers, or were
# refused past shared memory)
ODD_WARPS = [tp.cta(96), tp.cta(160), tp.cta(192), tp.cta(384), tp.cta(768)]


@pytest.mark.parametrize("scope", ODD_WARPS, ids=str)
@pytest.mark.parametrize("n", [1000, 4097, 50257, 65536])
@pytest.mark.parametrize("name", ["softmax", "rmsnorm"])
def test_rows_over_warps_no_power_of_two_plan_unspilled_and_match_float64(name, n, scope, rng):
    prog, args, want = case(name, n, "float32", rng)
    plan = tp.plan(prog, *args, batch_dims=1, scope=scope, target="sm_90a")
    assert plan.staging in ("registers", "shared", "streamed"), str(plan)
    out = np.full(want.shape, np.nan, np.float32)
    prog(*args, batch_dims=1, scope=scope, backend="cpu", out=out)
    close(out, want, "float32")


@tp.program
def row_sum(x):
    return tp.sum(x, axes=-1, keepdims=True)


def test_the_warps_of_a_row_fold_in_order_warp_0_first():
    """Rows of 96 at cta(96), an element a thread: warp 0's 1e8, warp 1's 1, warp 2's -1e8 fold as
    (1e8 + 1) - 1e8 = 0 in float32 (1e8 + 1 rounds to 1e8); another order would leave the 1."""
    x = np.zeros((2, 96), np.float32)
    x[:, 0], x[:, 32], x[:, 64] = 1e8, 1.0, -1e8
    x[1, 33] = 2.0  # the 1 and the 2 meet within warp 1 first: 3 lost the same way
    plan = tp.plan(row_sum, x, batch_dims=1, scope=tp.cta(96), target="sm_90a")
    step = plan.steps[-1]
    assert step.variant == "cross_warp" and step.params["warps_folded_in_order"] == 3, str(plan)
    assert "warps' results folded in order" in str(step.numerics["order"])
    out = np.full((2, 1), np.nan, np.float32)
    row_sum(x, batch_dims=1, scope=tp.cta(96), backend="cpu", out=out)
    assert out.tolist() == [[0.0], [0.0]]
