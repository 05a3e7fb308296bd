"""elementwise -> reg: every op over backend x dtype x scope/layout, with scalars, broadcasting
and batch_dims, against float64 NumPy. Ops that round once (the op table's exactly_rounded) must
match NumPy's rounding of the float64 result bit for bit; the others stay within the op table's
measured max_ulp (tests/test_numerics.py measures them properly)."""
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import tileprim as tp
from tileprim import R, S, laneid, tid_in_wg, tx
from conftest import DTYPES, NP, bits_equal, finfo, random_tile

SCOPES = [
    pytest.param(tp.thread, None, (6, 5), id="thread"),
    pytest.param(tp.warp, S[(32, 8):(1 @ laneid, 1)], (32, 8), id="warp-lane-rows"),
    pytest.param(tp.warp, S[8:1] + R[32:1 @ laneid], (8,), id="warp-replicated"),
    pytest.param(tp.warpgroup, S[(128, 3):(1 @ tid_in_wg, 1)], (128, 3), id="warpgroup"),
    pytest.param(tp.cta(96), S[(96, 2):(1 @ tx, 1)], (96, 2), id="cta96"),
]


def silu(x):
    """x sigmoid(x), written to stay finite: x e / (1 + e) with e = exp(x) for x < 0."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, x / (1 + e), np.where(x == -np.inf, -0.0, x * e / (1 + e)))


def sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


UNARY = {
    "sqrt": np.sqrt, "exp": np.exp, "exp2": np.exp2, "log2": np.log2, "log": np.log,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x, "silu": silu,
    "tanh": np.tanh, "erf": np.vectorize(math.erf, otypes=[np.float64]), "sigmoid": sigmoid,
}
COMPARISONS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
               "ge": np.greater_equal}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "fdiv": np.divide, "maximum": np.fmax,
          **{op: (lambda f: lambda a, b: f(a, b).astype(np.float64))(f) for op, f in COMPARISONS.items()}}


TABLE = tp.op_table()


def exact(op, dtype):
    """Ops that round once (the op table's exactly_rounded; fma's float64 oracle here rounds twice)."""
    return dtype in TABLE[op]["exactly_rounded"] and op != "fma"


def assert_elementwise(got, expected64, dtype, op):
    """Bit for bit the rounding of the float64 result where the op rounds once; else within the
    op table's measured max_ulp (half an ulp more for fma, whose oracle rounds twice)."""
    got = np.asarray(got)
    assert got.dtype == NP[dtype] and got.shape == expected64.shape
    with np.errstate(all="ignore"):
        rounded = expected64.astype(NP[dtype])
    if exact(op, dtype):
        assert bits_equal(got, rounded) or _equal_up_to_zero_sign(got, rounded), (got, rounded)
        return
    g = got.astype(np.float64)
    e = rounded.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
    inf = np.isinf(e)
    np.testing.assert_array_equal(g[inf], e[inf])
    fin = np.isfinite(e)
    ulps = 1.0 if op == "fma" else TABLE[op]["max_ulp"][dtype]
    assert ulps <= 1.0
    if dtype == "float64":
        # the oracle's own error (NumPy's exp, log, the C library's erf; silu's and sigmoid's 3 roundings)
        ulps += 3.0 if op in ("silu", "sigmoid") else 1.0
    exact64 = expected64[fin]
    binade = np.floor(np.log2(np.maximum(np.abs(exact64), float(finfo(dtype).smallest_normal))))
    ulp = float(finfo(dtype).eps) * np.exp2(binade)
    assert np.all(np.abs(g[fin] - exact64) <= ulps * ulp), np.max(np.abs(g[fin] - exact64) / ulp)


def _equal_up_to_zero_sign(a, b):
    return np.array_equal(a.astype(np.float64), b.astype(np.float64), equal_nan=True)


@pytest.mark.parametrize("scope,layout,shape", SCOPES)
@pytest.mark.parametrize("op", list(UNARY))
@pytest.mark.parametrize("dtype", DTYPES)
def test_unary(op, dtype, scope, layout, shape, backend, rng):
    x = random_tile(rng, shape, dtype)
    got = getattr(scope, op)(x, layout=layout, backend=backend)
    with np.errstate(all="ignore"):
        expected = UNARY[op](x.astype(np.float64))
    assert_elementwise(got, expected, dtype, op)
    assert tp.plan(getattr(scope, op), x, layout=layout).variant == "reg"


@pytest.mark.parametrize("scope,layout,shape", SCOPES)
@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("dtype", DTYPES)
def test_binary(op, dtype, scope, layout, shape, backend, rng):
    a, b = random_tile(rng, shape, dtype), random_tile(rng, shape, dtype)
    got = getattr(scope, op)(a, b, layout=layout, backend=backend)
    with np.errstate(all="ignore"):
        expected = BINARY[op](a.astype(np.float64), b.astype(np.float64))
    assert_elementwise(got, expected, dtype, op)


@pytest.mark.parametrize("scope,layout,shape", SCOPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fma_rounds_once(dtype, scope, layout, shape, backend, rng):
    a, b, c = (random_tile(rng, shape, dtype, special=False) for _ in range(3))
    got = scope.fma(a, b, c, layout=layout, backend=backend)
    if dtype == "float64":  # the exact a*b + c, rounded once
        exact_value = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
                       for x, y, z in zip(a.ravel(), b.ravel(), c.ravel())]
        assert bits_equal(got, np.array([float(v) for v in exact_value]).reshape(shape))
    else:  # a*b is exact in float64, so this is the exact sum rounded twice: within an ulp
        assert_elementwise(got, a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64), dtype, "fma")


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalars_broadcasting_and_batches(dtype, backend, rng):
    a = random_tile(rng, (5, 32, 8), dtype)
    row = random_tile(rng, (8,), dtype)
    L = S[(32, 8):(1 @ laneid, 1)]
    a64, row64 = a.astype(np.float64), row.astype(np.float64)
    with np.errstate(all="ignore"):
        assert_elementwise(tp.warp.add(a, row, layout=L, batch_dims=1, backend=backend), a64 + row64, dtype, "add")
        assert_elementwise(tp.warp.sub(2.5, a, layout=L, batch_dims=1, backend=backend), 2.5 - a64, dtype, "sub")
        assert_elementwise(tp.fdiv(a, 3.0, batch_dims=1, backend=backend), a64 / NP[dtype].type(3.0), dtype,
                           "fdiv")
        assert_elementwise(tp.mul(a, -0.5, batch_dims=2, backend=backend), a64 * -0.5, dtype, "mul")
        expected = np.fmax(a64, 0.0)
        assert_elementwise(tp.maximum(0.0, a, batch_dims=2, backend=backend), expected, dtype, "maximum")
    got = tp.warp.fma(a, 2.0, row, layout=L, batch_dims=1, backend=backend)
    assert_elementwise(got, a64 * 2.0 + row64, dtype, "fma")


@pytest.mark.parametrize("scope,layout,shape", SCOPES)
@pytest.mark.parametrize("op", list(COMPARISONS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_comparisons_are_ieee_masks(op, dtype, scope, layout, shape, backend, rng):
    """Ties, NaN (comparing false, itself included; ne true), -0 == +0, infinities and subnormals."""
    a = random_tile(rng, shape, dtype)
    b = a.copy()
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    flat_b[::3] = random_tile(rng, flat_b[::3].shape, dtype)  # a third differ
    flat_a[:7] = np.array([np.nan, 0.0, np.inf, -np.inf, 1.0, np.nan, 3.0], np.float64).astype(a.dtype)
    flat_b[:7] = np.array([np.nan, -0.0, np.inf, np.inf, 1.0, 2.0, 2.0], np.float64).astype(a.dtype)
    got = getattr(scope, op)(a, b, layout=layout, backend=backend)
    with np.errstate(invalid="ignore"):
        expected = COMPARISONS[op](a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    assert got.dtype == a.dtype and bits_equal(got, expected)
    assert 0 < np.count_nonzero(expected) < expected.size


@pytest.mark.parametrize("scope,layout,shape", SCOPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_where_moves_the_picked_value_unchanged(dtype, scope, layout, shape, backend, rng):
    """a where cond != 0 (NaN, infinities and subnormals count as nonzero; +-0 do not), else b,
    NaN payloads and signed zeros kept; scalars broadcast."""
    cond, a, b = (random_tile(rng, shape, dtype) for _ in range(3))
    flat = cond.reshape(-1)
    flat[::2] = 0.0
    flat[1:6] = np.array([np.nan, -0.0, np.inf, 1.0, -1.0], np.float64).astype(cond.dtype)
    got = getattr(scope, "where")(cond, a, b, layout=layout, backend=backend)
    picked = cond.astype(np.float64) != 0
    assert got.dtype == a.dtype and bits_equal(got, np.where(picked, a, b))
    assert 0 < np.count_nonzero(picked) < picked.size
    assert bits_equal(getattr(scope, "where")(cond, a, -0.0, layout=layout, backend=backend),
                      np.where(picked, a, np.array(-0.0, a.dtype)))


def test_maximum_nan_rules(backend):
    a = np.array([np.nan, 1.0, -np.inf, np.nan], np.float32)
    b = np.array([2.0, np.nan, 3.0, np.nan], np.float32)
    assert np.array_equal(tp.maximum(a, b, backend=backend), np.fmax(a, b), equal_nan=True)
    assert np.array_equal(tp.maximum(a, b, propagate_nan=True, backend=backend), np.maximum(a, b), equal_nan=True)


@pytest.mark.parametrize("scope,layout,shape", SCOPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_fill(dtype, scope, layout, shape, backend, rng):
    x = random_tile(rng, shape, dtype)
    z = scope.zero(x, layout=layout, backend=backend)
    assert z.dtype == NP[dtype] and np.all(z.astype(np.float64) == 0) and not np.any(np.signbit(z.astype(np.float64)))
    f = scope.fill(x, -1.75, layout=layout, backend=backend)
    assert f.dtype == NP[dtype] and np.all(f.astype(np.float64) == -1.75)


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_cast_rounds_to_nearest_even(src, dst, backend, rng):
    x = random_tile(rng, (7, 9), src)
    x.reshape(-1)[:3] = np.array([65504.0 * 2, 1e-9, 3.0000001], dtype=np.float64).astype(NP[src])
    got = tp.cast(x, dst, backend=backend)
    with np.errstate(all="ignore"):
        assert_elementwise(got, x.astype(np.float64), dst, "cast")
    assert tp.cast(x, ml_dtypes.bfloat16).dtype == NP["bfloat16"]


def test_elementwise_writes_every_element_even_with_gaps(backend, rng):
    """A layout with holes in the register file: unwritten outputs would stay NaN-poisoned."""
    x = random_tile(rng, (32, 4), "float32", special=False, low=0.5, high=2.0)
    L = S[(32, 4):(1 @ laneid, 3)]  # registers 0, 3, 6, 9 of 10
    got = tp.warp.sqrt(x, layout=L, backend=backend)
    assert np.all(np.isfinite(got))
    assert bits_equal(got, np.sqrt(x.astype(np.float64)).astype(np.float32))
    assert tp.plan(tp.warp.sqrt, x, layout=L).params["registers_per_thread"] == 10


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_every_16_bit_input_gives_the_same_bits_in_large_and_small_calls(op, dtype, backend):
    # 65536 elements in one call: the CPU looks each result up in the op's table of every input;
    # calls of one 1024-element tile evaluate the op element by element
    x = np.arange(1 << 16, dtype=np.uint16).view(NP[dtype]).reshape(64, 1024)
    whole = getattr(tp, op)(x, batch_dims=1, backend=backend)
    pieces = np.stack([getattr(tp, op)(row, backend=backend) for row in x])
    assert bits_equal(whole, pieces)
    assert np.sum(np.isfinite(whole.astype(np.float64))) > 1000
