"""tileprim's own transcendentals (transcendental.cuh) on the CPU backend, which gives the GPU's
bits: every float16/bfloat16 input rounds correctly, float32/float64 samples (specials,
overflow/underflow thresholds, subnormals, random bit patterns) stay within the op table's
max_ulp, IEEE's special values, and the op table's facts."""
import math

import numpy as np
import pytest

import tileprim as tp
from tileprim_bench import accuracy
from conftest import DTYPES, NP, bits_equal

TABLE = tp.op_table()
ELEMENTWISE = sorted(name for name, spec in TABLE.items() if spec["family"] == "elementwise")
TRANSCENDENTAL = ("exp", "exp2", "log", "log2", "rsqrt", "silu", "tanh", "erf", "sigmoid")


@pytest.mark.parametrize("op", accuracy.OPS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_every_16_bit_input_rounds_correctly(op, dtype):
    r = accuracy.measure(op, dtype)
    assert r.inputs == 1 << 16
    assert r.not_correctly_rounded == 0, r
    assert r.max_ulp <= 0.5


@pytest.mark.parametrize("op", ["exp", "exp2", "log", "log2"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_normal_forms_give_the_general_bits(op, dtype):
    # a bundle (a tile of 8) whose every x lies in the op's normal range takes its shorter form
    # (maps.cuh's normal_registers), the GPU's too; calls of fewer than 4096 elements compute every
    # bundle (larger ones look results up in a table the general form filled)
    x = np.arange(1 << 16, dtype=np.uint16).view(NP[dtype])
    table = getattr(tp, op)(x.reshape(-1, 8), batch_dims=1, backend="cpu").reshape(-1)
    for start in range(0, x.size, 4088):
        part = x[start:start + 4088]
        got = getattr(tp, op)(part.reshape(-1, 8), batch_dims=1, backend="cpu").reshape(-1)
        assert bits_equal(got, table[start:start + part.size]), (op, dtype, start)


def test_bfloat16_silu_of_a_subnormal_rounds_past_the_tie():
    # silu x = x/2 + x^2/4 - ...: x/2 of an odd multiple j of bfloat16's smallest subnormal is a tie,
    # which x^2/4 breaks away from 0 for x > 0 and toward 0 for x < 0 (an oracle that rounds float64
    # to bfloat16 through float32, as ml_dtypes does, rounds it to even instead)
    j = np.arange(1, 128)
    x = (j * 2.0 ** -133).astype(NP["bfloat16"])
    want = np.concatenate([(j + 1) // 2 * 2.0 ** -133, -(j // 2 * 2.0 ** -133)])  # -0 for j = 1
    got = tp.silu(np.concatenate([x, -x]).reshape(-1, 2), batch_dims=1, backend="cpu").reshape(-1)
    assert bits_equal(got, want.astype(NP["bfloat16"])), got


@pytest.mark.parametrize("op", accuracy.OPS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_wide_types_stay_within_the_published_max_ulp(op, dtype, rng):
    r = accuracy.measure(op, dtype, samples=1 << 17, seed=int(rng.integers(1 << 31)))
    assert r.max_ulp <= TABLE[op]["max_ulp"][dtype] <= 1.0, r


@pytest.mark.parametrize("dtype", DTYPES)
def test_ieee_special_values(dtype):
    nan, inf = np.nan, np.inf
    x = np.array([nan, inf, -inf, 0.0, -0.0, 1.0, -1.0], NP[dtype])
    expected = {
        "exp": [nan, inf, 0.0, 1.0, 1.0, np.e, 1 / np.e],
        "exp2": [nan, inf, 0.0, 1.0, 1.0, 2.0, 0.5],
        "log": [nan, inf, nan, -inf, -inf, 0.0, nan],
        "log2": [nan, inf, nan, -inf, -inf, 0.0, nan],
        "rsqrt": [nan, 0.0, nan, inf, -inf, 1.0, nan],
        "silu": [nan, inf, -0.0, 0.0, -0.0, 1 / (1 + np.exp(-1.0)), -1 / (1 + np.e)],
        "tanh": [nan, 1.0, -1.0, 0.0, -0.0, np.tanh(1.0), -np.tanh(1.0)],
        "erf": [nan, 1.0, -1.0, 0.0, -0.0, math.erf(1.0), -math.erf(1.0)],
        "sigmoid": [nan, 1.0, 0.0, 0.5, 0.5, 1 / (1 + np.exp(-1.0)), 1 / (1 + np.e)],
    }
    for op, want in expected.items():
        got = getattr(tp, op)(x, backend="cpu")
        assert bits_equal(got, np.array(want).astype(NP[dtype])), (op, got)
        # a NaN result is the GPU's canonical one (sign clear, every other bit set) on the CPU too
        bits = got.view(f"u{got.itemsize}")[np.isnan(got.astype(np.float64))]
        assert np.all(bits == np.iinfo(f"u{got.itemsize}").max >> 1), (op, bits)


@pytest.mark.parametrize("op", ["exp", "exp2"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_overflow_and_underflow_thresholds_are_exact(op, dtype):
    # the inputs around each threshold: infinity exactly where the result rounds past the max,
    # zero exactly where it rounds below half the smallest subnormal, every result within an ulp
    import mpmath as mp
    mp.mp.prec = 160
    t = NP[dtype]
    fi = np.finfo(t)
    uint = np.uint32 if t == np.float32 else np.uint64
    base = {"exp": np.log, "exp2": np.log2}[op]
    for edge in (base(float(fi.max)), base(float(fi.smallest_subnormal)) - base(2.0)):  # half the subnormal
        at = np.array([edge], t)
        x = (at.view(uint) + np.arange(-64, 65, dtype=np.int64).astype(uint)).view(t)
        if dtype == "float32":
            exact = accuracy._float64_oracle(op, x)
            with np.errstate(over="ignore"):
                rounded = exact.astype(t)
        else:
            exact = [accuracy._mpmath_oracle(op)(mp.mpf(float(v))) for v in x]
            rounded = np.array([float(v) for v in exact])
        got = accuracy.apply(op, x)
        np.testing.assert_array_equal(np.isinf(got), np.isinf(rounded))
        np.testing.assert_array_equal(got == 0, rounded == 0)
        assert np.any(np.isinf(got) | (got == 0)) and np.any(np.isfinite(got) & (got != 0))
        assert np.max(accuracy.ulps(got, exact, dtype)) <= 1.0


def test_silu_is_finite_and_accurate_where_exp_of_minus_x_overflows():
    x = np.linspace(-103.0, -88.5, 4001, dtype=np.float32)  # exp(-x) > float32's max
    got = tp.silu(x.reshape(-1, 1), batch_dims=1, backend="cpu").reshape(-1)
    assert np.all(got < 0)
    assert np.max(accuracy.ulps(got, accuracy._float64_oracle("silu", x), "float32")) <= 1.0


@pytest.mark.parametrize("op", list(TRANSCENDENTAL) + ["sqrt", "reciprocal"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_bits_do_not_depend_on_the_host_loop_vectorizing(op, dtype, rng):
    # tiles of 1024 run the vector clones of the host loop, tiles of one element its scalar code
    with np.errstate(invalid="ignore"):  # the float16 NaNs among the random bit patterns
        halves = rng.integers(0, 1 << 16, 192).astype(np.uint16).view(np.float16)
        x = np.concatenate([rng.standard_normal(4000) * 30, rng.uniform(0, 3, 4000), halves])
        x = x.astype(NP[dtype])
    x = x[: x.size // 1024 * 1024]
    wide = getattr(tp, op)(x.reshape(-1, 1024), batch_dims=1, backend="cpu").reshape(-1)
    narrow = getattr(tp, op)(x.reshape(-1, 1), batch_dims=1, backend="cpu").reshape(-1)
    assert bits_equal(wide, narrow)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_division_rounds_once(dtype, rng):
    # bfloat16 quotients can be float subnormals, where a float quotient rounded again to
    # bfloat16 would round twice; tileprim divides in double there
    t = NP[dtype]
    a = rng.integers(0, 1 << 16, 200_000).astype(np.uint16).view(t)
    b = rng.integers(0, 1 << 16, 200_000).astype(np.uint16).view(t)
    if dtype == "bfloat16":  # tiny over huge: quotients below float's smallest normal
        a[:50_000] = (rng.uniform(1, 2, 50_000) * 2.0 ** rng.integers(-133, -100, 50_000)).astype(t)
        b[:50_000] = (rng.uniform(1, 2, 50_000) * 2.0 ** rng.integers(0, 127, 50_000)).astype(t)
    got = tp.fdiv(a.reshape(-1, 8), b.reshape(-1, 8), batch_dims=1, backend="cpu").reshape(-1)
    with np.errstate(all="ignore"):  # float64's quotient rounded once more: exact (53 >= 2 * 11 + 2)
        assert bits_equal(got, (a.astype(np.float64) / b.astype(np.float64)).astype(t))
    rcp = tp.reciprocal(b.reshape(-1, 8), batch_dims=1, backend="cpu").reshape(-1)
    with np.errstate(all="ignore"):
        assert bits_equal(rcp, (1.0 / b.astype(np.float64)).astype(t))


def test_the_op_table_says_every_elementwise_op_gives_the_same_bits_everywhere():
    pairs = 0
    for op in ELEMENTWISE:
        spec = TABLE[op]
        assert sorted(spec["same_bits"]) == sorted(spec["dtypes"]) and set(DTYPES) <= set(spec["dtypes"]), op
        assert set(spec["dtypes"]) <= set(DTYPES) | {"int32", "int64"}, op  # cast, comparisons, where take them
        pairs += len(spec["same_bits"]) - len(set(spec["dtypes"]) - set(DTYPES))
        assert set(spec["max_ulp"]) == set(spec["dtypes"]), op  # an accuracy for every dtype
        for dtype, ulp in spec["max_ulp"].items():
            if dtype in spec["exactly_rounded"]:
                rounds_nothing = op in ("zero", "fill", "where", "eq", "ne", "lt", "le", "gt", "ge")
                assert ulp == (0.0 if rounds_nothing else 0.5), (op, dtype, ulp)
            else:
                assert 0.5 < ulp <= 1.0, (op, dtype, ulp)
    assert pairs == 4 * len(ELEMENTWISE)
    for op in TRANSCENDENTAL:  # correctly rounded in 16 bits, not (provably) in 32 and 64
        assert sorted(TABLE[op]["exactly_rounded"]) == ["bfloat16", "float16"]


def test_the_op_table_says_copy_moves_values_and_how_treduce_meets_nan():
    copy = TABLE["copy"]
    assert set(copy["max_ulp"].values()) == {0.0} and copy["nan_rule"].startswith("move"), copy
    x = np.array([np.nan, -np.nan, np.inf, -0.0, 1e-45, 3.0], np.float32)
    x[0] = np.frombuffer(np.uint32(0x7fc01234).tobytes(), np.float32)[0]  # a NaN with a payload
    np.testing.assert_array_equal(tp.copy(x).view(np.uint32), x.view(np.uint32))
    rule = TABLE["treduce"]["nan_rule"]
    assert "'sum': IEEE" in rule and "fmax / fmin" in rule, rule


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["exp", "exp2"])
def test_exp_of_a_bundle_within_the_normal_range_gives_the_same_bits(op, dtype, rng):
    """A bundle whose every x lies within +-86 (exp; exp2 +-124; float64 +-700, +-1020) scales by
    adding k to the exponent (every result normal); one with an x beyond takes the clamps and
    two-step scaling. The same x give the same bits either way; float32 stays on the float64
    oracle (float64's is the accuracy tests', against mpmath)."""
    bound = {("exp", "float32"): 86.0, ("exp", "float64"): 700.0, ("exp2", "float32"): 124.0,
             ("exp2", "float64"): 1020.0}[(op, dtype)]
    fn, oracle = getattr(tp, op), getattr(np, op)
    t = np.dtype(dtype).type
    x = rng.uniform(-bound, bound, (4096, 8)).astype(dtype)
    edges = [bound, -bound, np.nextafter(t(bound), t(0)), np.nextafter(t(-bound), t(0)), 0.0, -0.0,
             np.finfo(dtype).smallest_subnormal, -1e-30, 0.5 * np.log(2), -0.5 * np.log(2)]
    x.flat[: len(edges)] = edges
    within = fn(x, batch_dims=1, backend="cpu")
    mixed = x.copy()
    mixed[:, 7] = 2 * bound  # beyond: the result overflows or nearly
    general = fn(mixed, batch_dims=1, backend="cpu")
    assert bits_equal(within[:, :7], general[:, :7])
    if dtype == "float32":
        want = oracle(x.astype(np.float64))
        bound_ulp = TABLE[op]["max_ulp"][dtype]
        assert np.all(np.abs(within - want) <= bound_ulp * np.spacing(want.astype(dtype)).astype(np.float64))
