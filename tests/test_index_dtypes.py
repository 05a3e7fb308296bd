"""int32 and int64 tiles (labels, indices): cast to every float dtype rounds once (int64 past 2^53
too), comparisons and where take them, every other op refuses them naming the argument, a scalar
beside them must be one of their integers, and programs take them as inputs, broadcast per row
like any argument. Checked on both backends; the GPU's kernels also compile here (NVRTC)."""
import numpy as np
import pytest

import tileprim as tp
from conftest import DTYPES, NP, bits_equal, finfo

INDEX = ("int32", "int64")


def correctly_rounded(values, dtype: str) -> np.ndarray:
    """Python ints rounded once, to nearest even, to dtype (an oracle that never goes through a
    narrower float: ml_dtypes rounds float64 to bfloat16 through float32, twice)."""
    bits = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}[dtype]
    out = []
    for v in values:
        v = int(v)
        shift = abs(v).bit_length() - bits
        if shift > 0:
            q, r = divmod(abs(v), 1 << shift)
            half = 1 << (shift - 1)
            q += 1 if r > half or (r == half and q % 2) else 0
            v = (q << shift) * (1 if v > 0 else -1)
        out.append(float(v) if abs(v) <= float(finfo(dtype).max) else np.copysign(np.inf, v))
    return np.array(out).astype(NP[dtype])  # exact: every value is of dtype already


def index_values(rng, dtype: str, n: int) -> np.ndarray:
    """Random indices of every magnitude, the extremes and the 16-bit and float32 rounding ties."""
    info = np.iinfo(dtype)
    width = 31 if dtype == "int32" else 63
    magnitudes = rng.integers(0, width, n)
    x = rng.integers(0, 1 << 62, n, dtype=np.int64) >> (62 - magnitudes)
    x = np.where(rng.random(n) < 0.5, -x, x)
    ties = [(1 << 24) + 1, (1 << 24) + 3, 2049, 2051, 257, 259, 65519, 65520, -((1 << 25) + 2)]
    if dtype == "int64":
        ties += [(1 << 62) + (1 << 54) + 1, (1 << 62) + (1 << 54), (1 << 53) + 1, -(1 << 60) - 3]
    edges = np.array([info.min, info.max, 0, -1, 1] + ties, np.int64)
    return np.concatenate([edges, x]).astype(dtype)


@pytest.mark.parametrize("src", INDEX)
@pytest.mark.parametrize("dst", DTYPES)
def test_cast_of_an_index_tile_rounds_once(src, dst, backend, rng):
    x = index_values(rng, src, 4000)
    x = x[: x.size // 8 * 8].reshape(-1, 8)
    got = tp.cast(x, dst, batch_dims=1, backend=backend)
    assert got.dtype == NP[dst] and bits_equal(got.reshape(-1), correctly_rounded(x.reshape(-1), dst))


@pytest.mark.parametrize("dtype", INDEX)
@pytest.mark.parametrize("op,fn", [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                                   ("gt", np.greater), ("ge", np.greater_equal)])
def test_comparisons_of_index_tiles_and_scalars(op, fn, dtype, backend, rng):
    a = index_values(rng, dtype, 1000)[:1000].reshape(-1, 8)
    b = a.copy()
    b.reshape(-1)[::2] = rng.integers(-3, 3, b.size // 2)  # ties and differences
    got = getattr(tp, op)(a, b, batch_dims=1, backend=backend)
    assert got.dtype == a.dtype and np.array_equal(got, fn(a, b).astype(dtype))
    assert np.array_equal(getattr(tp, op)(a, -100, batch_dims=1, backend=backend), fn(a, -100).astype(dtype))
    big = min(int(np.iinfo(dtype).max), 1 << 53)  # a scalar at the edge of what it and float64 hold exactly
    assert np.array_equal(getattr(tp, op)(a, big, batch_dims=1, backend=backend), fn(a, big).astype(dtype))


@pytest.mark.parametrize("dtype", INDEX)
def test_where_on_index_tiles(dtype, backend, rng):
    cond = rng.integers(-2, 3, (50, 4)).astype(dtype)
    a, b = index_values(rng, dtype, 200)[:200].reshape(50, 4), index_values(rng, dtype, 200)[:200].reshape(50, 4)
    got = tp.where(cond, a, b, batch_dims=1, backend=backend)
    assert got.dtype == a.dtype and np.array_equal(got, np.where(cond != 0, a, b))
    assert np.array_equal(tp.where(cond, a, -100, batch_dims=1, backend=backend), np.where(cond != 0, a, -100))


@pytest.mark.parametrize("cond_dtype", INDEX + ("float32", "bool"))
@pytest.mark.parametrize("dtype", DTYPES)
def test_where_takes_a_cond_of_another_dtype_as_cond_not_equal_to_zero(cond_dtype, dtype, backend, rng):
    """DESIGN §2: a where cond != 0. A label mask (int), a float32 test beside bfloat16 values or a
    NumPy bool mask picks as its != 0 does: a float32 subnormal, -0 and NaN conds included (a cast
    straight to float16 would flush the subnormal to 0)."""
    n = 37 * 8
    if cond_dtype == "bool":
        cond = rng.random(n) < 0.5
    elif cond_dtype == "float32":
        cond = rng.choice(np.array([0.0, -0.0, 1e-45, np.nan, -3.5, 1e30], np.float32), n)
    else:
        cond = rng.choice(np.array([0, -100, 3, 1 << 30], cond_dtype), n)
    cond = cond.reshape(-1, 8)
    a = rng.standard_normal(cond.shape).astype(NP[dtype])
    b = rng.standard_normal(cond.shape).astype(NP[dtype])
    want = np.where(cond != 0, a, b)
    got = tp.where(cond, a, b, batch_dims=1, backend=backend)
    assert got.dtype == a.dtype and bits_equal(got, want)
    assert bits_equal(tp.where(cond, a, -2.0, batch_dims=1, backend=backend), np.where(cond != 0, a, np.asarray(-2, NP[dtype])))

    @tp.program
    def masked_row_sum(mask, x):
        return tp.sum(tp.where(mask, x, 0.0), axes=-1)

    if cond_dtype != "bool":  # a program's inputs are tiles: a NumPy bool mask is the standalone call's
        want = np.where(cond != 0, a.astype(np.float64), 0).sum(axis=-1)
        got = masked_row_sum(cond, a, batch_dims=1, backend=backend).astype(np.float64)
        assert np.allclose(got, want, rtol=0, atol=8 * 8 * float(finfo(dtype).eps))


def test_a_label_mask_beside_float_values_under_torch_autograd():
    torch = pytest.importorskip("torch")
    labels = torch.tensor([[3, -100, 2, 0], [-100, 1, 1, -100]], dtype=torch.int64)
    x = torch.randn(2, 4, dtype=torch.float32, requires_grad=True)
    y = tp.where(tp.ne(labels, -100, batch_dims=1), x, 0.0, batch_dims=1)
    y.sum().backward()
    keep = labels != -100
    assert torch.equal(y, torch.where(keep, x, 0.0)) and torch.equal(x.grad, keep.float())
    x.grad = None
    tp.where(keep, x, -1.0, batch_dims=1).sum().backward()  # torch's bool mask
    assert torch.equal(x.grad, keep.float())


@pytest.mark.parametrize("dtype", INDEX)
def test_every_other_op_refuses_an_index_tile_naming_the_argument(dtype):
    x = np.arange(8, dtype=dtype)
    f = np.ones(8, np.float32)
    for call, arg in [(lambda: tp.exp(x), "src"), (lambda: tp.add(x, x), "a"), (lambda: tp.sum(x), "src"),
                      (lambda: tp.fma(f, f, x), "c"), (lambda: tp.maximum(x, 1), "a"), (lambda: tp.sqrt(x), "src"),
                      (lambda: tp.tanh(x), "src")]:
        with pytest.raises(TypeError, match=rf"^{arg}: dtype {dtype} is not supported by \w+, which takes float16"):
            call()
    with pytest.raises(TypeError, match=r"b: dtype float32 differs from a's " + dtype):
        tp.ne(x, f)
    with pytest.raises(TypeError, match=r"^dtype: dtype int32 is not supported here; this takes float16"):
        tp.cast(f, "int32")


def test_other_integer_dtypes_are_refused():
    for dtype in ("int8", "int16", "uint8", "uint32", "bool"):
        with pytest.raises(TypeError, match=rf"src: dtype {dtype} is not supported; tiles hold .*int32 or int64"):
            tp.cast(np.zeros(4, dtype), "float32")


@pytest.mark.parametrize("dtype", INDEX)
def test_a_scalar_beside_index_tiles_is_one_of_their_integers(dtype):
    x = np.arange(8, dtype=dtype)
    for bad in (0.5, np.nan, np.inf, 2.0 ** 64, 2 ** 53 + 2 if dtype == "int64" else 2 ** 31):
        with pytest.raises(ValueError, match=rf"b: the scalar .* beside {dtype} tiles must be an integer"):
            tp.ne(x, bad)

    @tp.program
    def half(label):
        return tp.ne(label, 0.5)

    with pytest.raises(ValueError, match=rf"test_index_dtypes.py:\d+: ne: b: the scalar 0.5 beside {dtype}"):
        half(x)


def test_an_int_scalar_past_float64s_integers_is_refused_before_it_rounds():
    """2**53 + 1 would become 2**53 as a float64 (and compare equal to the wrong label): refused, as an
    int, before it is converted; 2**53 itself is one."""
    labels = np.array([2 ** 53 + 1, 2 ** 53], np.int64)
    for call in (lambda: tp.eq(labels, 2 ** 53 + 1), lambda: tp.eq(labels, np.int64(2 ** 53 + 1)),
                 lambda: tp.where(np.ones(1, np.int64), 2 ** 53 + 1, np.zeros(1, np.int64)),
                 lambda: tp.program(lambda t: t == 2 ** 53 + 1)(labels.reshape(2, 1), batch_dims=1)):
        with pytest.raises(ValueError, match=r"the scalar 9007199254740993 beside int64 tiles must be an integer"):
            call()
    assert tp.eq(labels, 2 ** 53).tolist() == [0, 1]  # the labels' own 2**53 + 1 is not converted
    with pytest.raises(ValueError, match=r"mul: the scalar 1000.* \(401 characters\) is beyond float64's range"):
        tp.program(lambda t, y: t * y)(np.ones((2, 3), np.float32), 10 ** 400)


@pytest.mark.parametrize("dtype", INDEX)
def test_programs_take_labels_broadcast_per_row(dtype, backend, rng):
    @tp.program
    def pick_scaled(x, label, ignore):
        keep = tp.cast(tp.ne(label, ignore), x.dtype)
        return tp.where(keep, x * tp.cast(label, x.dtype), -1.0), tp.ge(label, 2)

    x = rng.standard_normal((40, 24)).astype(np.float32)
    label = rng.integers(-1, 6, (40, 1)).astype(dtype)  # one per row
    got, ge = pick_scaled(x, label, -1, batch_dims=1, backend=backend)
    want = np.where(label != -1, x * label.astype(np.float32), np.float32(-1.0))
    assert bits_equal(got, want) and ge.dtype == label.dtype and np.array_equal(ge, (label >= 2).astype(dtype))
    shared = pick_scaled(x, np.array([3], dtype), -1, batch_dims=1, backend=backend)[0]  # one for the batch
    assert bits_equal(shared, x * np.float32(3))
    torch = pytest.importorskip("torch")
    tensors = pick_scaled(torch.from_numpy(x), torch.from_numpy(label), -1, batch_dims=1, backend=backend)
    assert bits_equal(tensors[0].numpy(), want) and tensors[1].dtype == getattr(torch, dtype)


def test_index_tiles_compile_for_the_gpu():
    @tp.program(scope=tp.warp)
    def labels(x, label):
        return tp.where(tp.cast(tp.lt(label, 3), "float32"), x * tp.cast(label, "float32"), 0.0)

    for dtype in INDEX:
        kernel = tp.lower(labels, np.ones((4, 64), np.float32), np.ones((4, 1), dtype), batch_dims=1, target="sm_90a")
        assert "long long" in kernel.source if dtype == "int64" else "int" in kernel.source
        assert kernel.cubin
        for to in DTYPES:
            assert tp.lower(tp.cast, np.ones((8, 4), dtype), to, batch_dims=1, target="sm_90a").cubin
