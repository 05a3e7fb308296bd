"""On a GPU: every elementwise op gives the CPU backend's bits in every dtype (the op table's
same_bits), over at least 10^6 inputs per op and dtype (every input for the 16-bit one-operand
ops): random bit patterns (every exponent, subnormals, NaN, +-inf, +-0) and the overflow and
underflow thresholds of exp and exp2. Tiles of 8 and of 7 elements: 16-bit maps that pair two
registers per instruction must give each lane the bits of the lone last one."""
import ml_dtypes
import numpy as np
import pytest

import tileprim as tp
from tileprim_bench import accuracy
from conftest import DTYPES, NP, bits_equal, cuda_usable
from test_float_divisor import near_midpoints

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]

TABLE = tp.op_table()
ELEMENTWISE = sorted(name for name, spec in TABLE.items() if spec["family"] == "elementwise")
INPUTS = 1 << 20


def random_bits(rng, dtype, n):
    t = NP[dtype]
    width = np.dtype(t).itemsize * 8
    uint = {16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
    return rng.integers(0, np.iinfo(uint).max, n, dtype=uint, endpoint=True).view(t)


def operand(rng, dtype, op):
    """One operand of INPUTS values (all 65,536 16-bit ones, repeated); for the one-operand ops
    in float32/float64 also the sampled inputs of the accuracy measurement (thresholds, specials)."""
    if np.dtype(NP[dtype]).itemsize == 2:
        every = np.arange(1 << 16, dtype=np.uint16).view(NP[dtype])
        return np.tile(every, INPUTS >> 16)
    x = random_bits(rng, dtype, INPUTS)
    if op in accuracy.OPS:
        edges = accuracy.float_inputs(op, dtype, INPUTS >> 4, rng)[:INPUTS]
        x[: edges.size] = edges
    return x


def both(fn, *args, **kwargs):
    cpu = fn(*args, backend="cpu", **kwargs)
    gpu = fn(*args, backend="cuda", **kwargs)
    return np.asarray(cpu), np.asarray(gpu)


@pytest.mark.parametrize("tile", [8, 7])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ELEMENTWISE)
def test_every_elementwise_op_gives_the_cpu_bits_on_the_gpu(op, dtype, tile, rng):
    spec = TABLE[op]
    assert dtype in spec["same_bits"]
    fn = getattr(tp, op)
    rows = INPUTS // tile
    arrays = [operand(rng, dtype, op)[: rows * tile].reshape(rows, tile) for _ in spec["operands"]]
    if op == "zero":
        calls = [((arrays[0],), {})]
    elif op == "fill":
        calls = [((arrays[0], v), {}) for v in (-1.75, 3e38, np.nan)]
    elif op == "cast":
        calls = [((arrays[0], dst), {}) for dst in DTYPES]
    else:
        calls = [(tuple(arrays), {})]
        if "propagate_nan" in spec["options"]:
            calls.append((tuple(arrays), {"propagate_nan": True}))
    for args, kwargs in calls:
        cpu, gpu = both(fn, *args, batch_dims=1, **kwargs)
        differ = np.sum(cpu.view(f"u{cpu.itemsize}") != gpu.view(f"u{gpu.itemsize}"))
        assert bits_equal(cpu, gpu), (op, dtype, kwargs, differ)


def midpoint_numerators(odd: int, exponent: int) -> np.ndarray:
    """float32 numerators a whose quotient by odd * 2^exponent is a midpoint between two subnormal
    floats exactly, (2M+1) 2^-150: the product with the divisor's reciprocal may round it the
    wrong way, so the GPU must divide such a bundle as the CPU does."""
    m = np.arange(0, (1 << 24) // (2 * odd), dtype=np.float64)
    a = (odd * (2 * m + 1)) * 2.0 ** (exponent - 150)
    assert np.all(a.astype(np.float32).astype(np.float64) == a)
    return a.astype(np.float32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sixteen_bit_division_by_one_value_gives_the_cpu_bits(dtype, rng):
    """A 16-bit fdiv by a scalar: the GPU divides in float by the divisor's reciprocal and one
    correction (numeric.cuh's FloatDivisor) and rounds once where every quotient of the bundle is a
    normal float, and divides a bundle elsewhere as the host does (bfloat16 in double: its
    quotients can be float subnormals). Every 16-bit numerator, in order (bundles of neighbours:
    most in range, those near zero, infinity and NaN not) and shuffled, over divisors from the
    smallest subnormal to the largest finite value, the specials, and those whose quotients land
    on 16-bit rounding midpoints (3, 7, 0.7's rounding)."""
    t = np.dtype(NP[dtype]).type
    every = np.arange(1 << 16, dtype=np.uint16).view(t)
    info = ml_dtypes.finfo(t)
    with np.errstate(over="ignore", under="ignore"):  # 2^+-100 leave float16's range: inf, 0
        divisors = [t(b) for b in (3.0, 7.0, 0.7, -1.5, 1.0, info.smallest_subnormal, info.smallest_normal,
                                   info.max, -float(info.max) / 3, 2.0**-100, 2.0**100, np.inf, -0.0, 0.0, np.nan)]
    for tile in (8, 7, 1024):
        rows = every.size // tile
        for x in (every, rng.permutation(every)):
            for b in divisors:
                cpu, gpu = both(tp.fdiv, x[: rows * tile].reshape(rows, tile), b, batch_dims=1)
                assert bits_equal(cpu, gpu), (tile, b, int(np.sum(cpu.view(np.uint16) != gpu.view(np.uint16))))
        # a program dividing each row by its own max, in the 16-bit dtype
        rows_of = x[: rows * tile].reshape(rows, tile)
        scope = tp.cta(256) if tile == 1024 else tp.warp
        cpu = over_row_max(rows_of, batch_dims=1, scope=scope, backend="cpu")
        gpu = over_row_max(rows_of, batch_dims=1, scope=scope, backend="cuda")
        assert bits_equal(np.asarray(cpu), np.asarray(gpu)), tile


@tp.program
def over_row_max(x):  # every row divided by one value, its max (as softmax divides by its sum)
    return x / tp.max(x, axes=-1, keepdims=True)


@pytest.mark.parametrize("tile", [8, 7, 1024])
def test_division_by_one_value_gives_the_cpu_bits(tile, rng):
    """fdiv by a scalar, and a program dividing a row by its own statistic: the GPU takes the
    divisor's reciprocal and one correction (numeric.cuh's FloatDivisor) where every value stays
    normal, and divides a bundle elsewhere. Random bit patterns; quotients that lie nearest a
    rounding midpoint (the pairs test_float_divisor enumerates), at the range's edges too (2^-100,
    2^126 times the divisor); quotients that are subnormal midpoints exactly (ties: to even),
    bundles with and without such a quotient."""
    hard = {3.0 * 2**10: midpoint_numerators(3, 10), 6.0: midpoint_numerators(3, 1),
            6145.0 * 2**12: midpoint_numerators(6145, 12)}
    rows = INPUTS // tile
    for b in [*hard, 0.7, 1e-30, -3e38, 2.0**-140, 2.0**126, np.inf, -0.0, np.nan, 1.0]:
        x = random_bits(rng, "float32", rows * tile)
        if b in hard:  # in half the rows, a third of them without one
            n = min(hard[b].size, x.size // 2)
            x[:n] = rng.choice(hard[b], n, replace=False)
            without = x[:n:3].size
            x[:n:3] = x[x.size - without:]
        x = x.reshape(rows, tile)
        cpu, gpu = both(tp.fdiv, x, np.float32(b), batch_dims=1)
        assert bits_equal(cpu, gpu), (b, int(np.sum(cpu.view(np.uint32) != gpu.view(np.uint32))))
    # every row of quotients nearest a midpoint, both signs, in the middle and at the edges of the
    # range the correction takes: |a| from 2^-100, a/b below 2^126, b from 2^-125 to 2^125
    for b_int, b_scale, a_scale in [(0xFCDE3B, 1.0, 1.0), (0xC0000B, 2.0**-125, 2.0**-100),
                                    (0x80000D, 2.0**-125, 2.0**0), (0xA5A5A5, 2.0**124, 2.0**1),
                                    (0x800001, 2.0**2, 2.0**127), (0xFFFFFD, 1.0, 2.0**125)]:
        near = near_midpoints(b_int)
        b = np.float32(b_int * 2.0**-23 * b_scale)
        x = (rng.choice(near, rows * tile) * a_scale * rng.choice([-1.0, 1.0], rows * tile)).astype(np.float32)
        cpu, gpu = both(tp.fdiv, x.reshape(rows, tile), b, batch_dims=1)
        assert bits_equal(cpu, gpu), (b, int(np.sum(cpu.view(np.uint32) != gpu.view(np.uint32))))
    # the program: the rows of hard quotients lead with their divisor, their max; the rest random
    x = random_bits(rng, "float32", rows * tile).reshape(rows, tile)
    for r, b in zip(range(0, rows // 2, 2), np.resize(list(hard), rows // 4)):
        x[r, 0], x[r, 1:] = b, rng.choice(hard[b], tile - 1)
    scope = tp.cta(256) if tile == 1024 else tp.warp
    cpu = over_row_max(x, batch_dims=1, scope=scope, backend="cpu")
    gpu = over_row_max(x, batch_dims=1, scope=scope, backend="cuda")
    assert bits_equal(cpu, gpu)
    assert "ScalarOperand" in tp.lower(over_row_max, x, batch_dims=1, scope=scope).source


@tp.program
def softmax_rows(x):  # a row's exponentials divided by their own sum (the division's FdivOfPart)
    e = tp.exp(x - tp.max(x, axes=-1, keepdims=True))
    return e / tp.sum(e, axes=-1, keepdims=True)


@pytest.mark.parametrize("tile", [7, 1024, 4096])
def test_a_row_divided_by_its_own_sum_gives_the_cpu_bits(tile, rng):
    """softmax's division checks no numerator for being too large (none exceeds its own sum):
    rows whose exponentials span the range, from 1 through 2^-100 (the least numerator the
    reciprocal's path takes) into subnormals and 0; rows of random bits (NaN, infinities, huge
    and tiny); rows of one value; rows holding -inf, +inf or NaN. No scope named and a CTA's."""
    rows = INPUTS // tile
    x = rng.uniform(-110.0, 0.0, (rows, tile)).astype(np.float32)
    x[1::8] = rng.uniform(-200.0, 60.0, x[1::8].shape)
    x[::4] = random_bits(rng, "float32", x[::4].size).reshape(x[::4].shape)
    x[2::16] = 3.0
    x[3::16, 0], x[5::16, tile // 2], x[6::16, tile - 1] = -np.inf, np.nan, np.inf
    for scope in [None, tp.warp if tile == 7 else tp.cta(256)]:
        cpu = softmax_rows(x, batch_dims=1, scope=scope, backend="cpu")
        gpu = softmax_rows(x, batch_dims=1, scope=scope, backend="cuda")
        assert bits_equal(cpu, gpu), (scope, int(np.sum(cpu.view(np.uint32) != gpu.view(np.uint32))))
        assert "tp::map_op::FdivOfPart" in tp.lower(softmax_rows, x, batch_dims=1, scope=scope).source


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("tile", [8, 7, 1024])
@pytest.mark.parametrize("op", ["exp", "exp2"])
def test_exp_within_the_normal_range_gives_the_cpu_bits(op, dtype, tile, rng):
    """exp (exp2) of bundles whose every x lies within +-86 (+-124; float64 +-700, +-1020), which
    add k to the exponent, and of the same x in bundles with one beyond, which take the general
    path: the CPU's bits either way."""
    bound = {("exp", "float32"): 86.0, ("exp", "float64"): 700.0, ("exp2", "float32"): 124.0,
             ("exp2", "float64"): 1020.0}[(op, dtype)]
    fn = getattr(tp, op)
    rows = INPUTS // tile
    x = rng.uniform(-bound, bound, (rows, tile)).astype(dtype)
    x.flat[:6] = [bound, -bound, 0.0, -0.0, np.finfo(dtype).smallest_subnormal, -np.finfo(dtype).smallest_subnormal]
    cpu, gpu = both(fn, x, batch_dims=1)
    assert bits_equal(cpu, gpu)
    x[::2, -1] = np.where(np.arange(x[::2].shape[0]) % 2, np.inf, np.nan)  # every other row beyond
    cpu_mixed, gpu_mixed = both(fn, x, batch_dims=1)
    assert bits_equal(cpu_mixed, gpu_mixed)
    assert bits_equal(gpu_mixed[1::2], gpu[1::2]) and bits_equal(gpu_mixed[::2, :-1], gpu[::2, :-1])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["silu", "sigmoid"])
@pytest.mark.parametrize("scope,n", [(tp.warp, 32 * 20), (tp.cta(128), 128 * 32), (tp.thread, 13)], ids=str)
def test_16_bit_logistics_in_a_programs_long_tile_give_the_cpu_bits(op, dtype, scope, n):
    """silu and sigmoid of a program's 16-bit tile of more than 8 slots a thread (20, 32, 13: groups of
    8 and a shorter last) estimated and checked a group at a time: every 16-bit input, the CPU's bits."""
    fn = getattr(tp, op)
    prog = tp.program(lambda x: fn(x), scope=scope)
    every = np.arange(1 << 16, dtype=np.uint16).view(NP[dtype])
    rows = -(-every.size // n)
    x = np.resize(every, rows * n).reshape(rows, n)
    cpu, gpu = both(prog, x, batch_dims=1)
    assert bits_equal(cpu, gpu), int(np.sum(cpu.view(np.uint16) != gpu.view(np.uint16)))
