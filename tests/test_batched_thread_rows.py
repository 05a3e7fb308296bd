"""Batched thread-scope row reductions, the CPU's packed path (32 tiles at once, their rows read
in place or staged through a transpose) and the GPU's: every row folded in order, compared bit
for bit with an in-order fold in NumPy of the row's own dtype, across batch sizes around the
pack width, row lengths around the vector and cache-line blocks, the hard values and accum."""
import numpy as np
import pytest

import tileprim as tp
from conftest import NP, bits_equal, random_tile

OPS = ("sum", "max", "min")


def _zero_rule(a, b, r, op):
    """max(-0, +0) is +0 and min(-0, +0) is -0, whichever comes first."""
    both_zero = (a == 0) & (b == 0)
    if op == "max":
        zero = np.where(np.signbit(a) & np.signbit(b), -0.0, 0.0)
    else:
        zero = np.where(np.signbit(a) | np.signbit(b), -0.0, 0.0)
    return np.where(both_zero, zero.astype(r.dtype), r)


def _step(op, propagate_nan):
    if op == "sum":
        return np.add
    pick = {("max", False): np.fmax, ("max", True): np.maximum,
            ("min", False): np.fmin, ("min", True): np.minimum}[op, propagate_nan]
    return lambda a, b: _zero_rule(a, b, pick(a, b), op)


def in_order_fold(x: np.ndarray, op: str, propagate_nan=False, old=None) -> np.ndarray:
    """Each row of ``x`` (last axis) folded left to right in x's dtype, from the op's identity or
    from ``old``: one exactly rounded step per element (16-bit adds through float32 are exact)."""
    dtype = x.dtype
    identity = {"sum": -0.0, "max": -np.inf if propagate_nan else np.nan,
                "min": np.inf if propagate_nan else np.nan}[op]
    acc = np.full(x.shape[:-1], identity, dtype) if old is None else old.astype(dtype).copy()
    step = _step(op, propagate_nan)
    with np.errstate(invalid="ignore"):  # inf - inf, NaN compared: the op's own rules apply
        for j in range(x.shape[-1]):
            acc = np.asarray(step(acc, x[..., j])).astype(dtype)
    return acc


def rows_with_hard_values(rng, tiles: int, k: int, dtype: str) -> np.ndarray:
    x = random_tile(rng, (tiles, k), dtype)
    flat = x.reshape(-1)
    if flat.size >= 8:  # zeros of both signs next to each other, and a row of only NaN
        at = rng.choice(flat.size - 1, size=max(1, flat.size // 32), replace=False)
        flat[at] = NP[dtype].type(-0.0)
        flat[at + 1] = NP[dtype].type(0.0)
    if tiles > 2:
        x[tiles // 2] = np.nan
    return x


@pytest.mark.parametrize("tiles", [1, 5, 31, 32, 33, 70])
@pytest.mark.parametrize("k", [1, 3, 4, 15, 16, 17, 64, 100, 257])
@pytest.mark.parametrize("op", OPS)
def test_batched_float32_rows_equal_the_in_order_fold_bit_for_bit(tiles, k, op, backend, rng):
    x = rows_with_hard_values(rng, tiles, k, "float32")
    out = np.full((tiles,), 7.0, np.float32)  # poison: an unwritten row shows
    result = getattr(tp.thread, op)(x, axes=-1, batch_dims=1, out=out, backend=backend)
    assert result is out
    assert bits_equal(out, in_order_fold(x, op)), (out, in_order_fold(x, op))


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("op, propagate_nan", [("sum", False), ("max", False), ("min", False),
                                               ("max", True), ("min", True)])
def test_batched_rows_of_every_dtype_and_nan_rule_equal_the_in_order_fold(dtype, op, propagate_nan, backend, rng):
    x = rows_with_hard_values(rng, 45, 77, dtype)
    got = getattr(tp.thread, op)(x, axes=-1, batch_dims=1, backend=backend,
                                 **({"propagate_nan": True} if propagate_nan else {}))
    assert bits_equal(got, in_order_fold(x, op, propagate_nan))


@pytest.mark.parametrize("op", OPS)
def test_batched_rows_with_accum_fold_the_old_output_in_first(op, backend, rng):
    x = rows_with_hard_values(rng, 40, 33, "float32")
    old = random_tile(rng, (40,), "float32")
    out = old.copy()
    getattr(tp.thread, op)(x, axes=-1, batch_dims=1, out=out, accum=True, backend=backend)
    assert bits_equal(out, in_order_fold(x, op, old=old))


@pytest.mark.parametrize("op", OPS)
def test_batched_column_major_tiles_take_the_staged_path_with_the_same_bits(op, backend, rng):
    # each tile is held column-major (thread slots run down the columns): not one run from slot 0
    x = rows_with_hard_values(rng, 37 * 6, 5, "float32").reshape(37, 6, 5)
    got = getattr(tp.thread, op)(x, axes=-1, batch_dims=1, layout=tp.S[(6, 5):(1, 6)], backend=backend)
    assert bits_equal(got, in_order_fold(x, op))


def long_rows_with_extremes(rng, dtype: str, k: int) -> np.ndarray:
    """Rows of k >= 256 elements whose max or min is each kind the any-order fold must get right:
    a number, +-0 of both signs (in either order), +-inf alone, NaN among numbers, only NaN."""
    x = random_tile(rng, (16, k), dtype, special=False)
    zero = NP[dtype].type
    x[0, :] = -np.abs(x[0, :]) - 1
    x[0, 200], x[0, 3] = zero(-0.0), zero(0.0)       # max is +0 after -0; min is a number
    x[1, :] = np.abs(x[1, :]) + 1
    x[1, k - 1], x[1, 100] = zero(0.0), zero(-0.0)   # min is -0, +0 in the tail
    x[2, :] = zero(-0.0)                             # only -0
    x[3, :] = -np.inf                                # only -inf: the max is -inf
    x[4, :] = np.inf
    x[5, 17] = np.nan                                # one NaN among numbers
    x[6, :] = np.nan                                 # only NaN
    x[7, k - 2] = np.nan                             # a NaN in the tail
    x[8, 5], x[8, 250] = np.inf, -np.inf
    return x


@pytest.mark.parametrize("k", [256, 257, 1000, 1024])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op, propagate_nan", [("max", False), ("min", False), ("max", True), ("min", True)])
def test_long_rows_of_max_and_min_fold_in_any_order_to_the_in_order_bits(k, dtype, op, propagate_nan, backend, rng):
    # the CPU folds rows of 256 or more across the row (max and min are exact in any order),
    # checking the answers a comparison alone cannot give: zeros and NaN
    x = long_rows_with_extremes(rng, dtype, k)
    options = {"propagate_nan": True} if propagate_nan else {}
    out = np.full((x.shape[0],), 7.0, NP[dtype])
    getattr(tp.thread, op)(x, axes=-1, batch_dims=1, out=out, backend=backend, **options)
    assert bits_equal(out, in_order_fold(x, op, propagate_nan))
    old = random_tile(rng, (x.shape[0],), dtype)
    out = old.copy()
    getattr(tp.thread, op)(x, axes=-1, batch_dims=1, out=out, accum=True, backend=backend, **options)
    assert bits_equal(out, in_order_fold(x, op, propagate_nan, old=old))
