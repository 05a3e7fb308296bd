"""take_along_axis (NumPy's meaning, an index outside [-n, n) giving NaN) and its derivative
scatter_add_along_axis (a scatter into zeros in idx's order), standalone and in tile programs, on
every float dtype with int32 and int64 indices, against NumPy; their gradients against torch's; the
errors; and their kernels compiled for the GPU (NVRTC, no GPU needed)."""
import numpy as np
import pytest

import tileprim as tp
from conftest import DTYPES, NP, bits_equal, finfo, random_tile

INDEX = ("int32", "int64")
SCOPES = [pytest.param(tp.thread, id="thread"), pytest.param(tp.warp, id="warp"),
          pytest.param(tp.cta(96), id="cta96")]


def indices(rng, shape, n, dtype):
    """Every position, negative ones (counted from the end) and a few outside [-n, n)."""
    idx = rng.integers(-n, n, shape)
    flat = idx.reshape(-1)
    info = np.iinfo(dtype)
    flat[: min(flat.size, 6)] = np.array([n, -n - 1, info.max, info.min, n - 1, -n])[: min(flat.size, 6)]
    return idx.astype(dtype)


def take_oracle(x, idx, axis):
    n = x.shape[axis]
    inside = (idx >= -n) & (idx < n)
    picked = np.take_along_axis(x, np.where(inside, idx, 0).astype(np.int64), axis)
    return np.where(inside, picked, np.array(np.nan, x.dtype))


def scatter_oracle(x, idx, src, axis):
    n = x.shape[axis]
    out = np.zeros(x.shape, np.float64)
    moved_src, moved_idx, moved_out = (np.moveaxis(a, axis, -1) for a in (src, idx, out))
    for pos in np.ndindex(moved_idx.shape[:-1]):
        for j, i in enumerate(moved_idx[pos]):
            if -n <= i < n:
                moved_out[pos + (int(i) % n,)] += np.float64(moved_src[pos + (j,)])
    return out


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("index", INDEX)
@pytest.mark.parametrize("dtype", DTYPES)
def test_take_along_axis_is_numpys_with_nan_outside_the_row(dtype, index, scope, backend, rng):
    x = random_tile(rng, (6, 37), dtype)  # NaN, infinities, subnormals, -0: moved bit for bit
    for idx_shape, axis in [((6, 5), -1), ((6, 1), 1), ((4, 37), 0), ((6, 37), -1)]:
        idx = indices(rng, idx_shape, x.shape[axis], index)
        got = tp.take_along_axis(x, idx, axis, scope=scope, backend=backend)
        assert got.dtype == x.dtype and bits_equal(got, take_oracle(x, idx, axis))


@pytest.mark.parametrize("index", INDEX)
def test_take_along_axis_over_a_batch_with_labels_per_row_and_3_dims(index, backend, rng):
    x = random_tile(rng, (9, 4, 50), "float32")
    labels = indices(rng, (9, 1, 1), 50, index)  # one label per batch entry, broadcast over dim 1
    got = tp.take_along_axis(x, np.broadcast_to(labels, (9, 4, 1)), batch_dims=1, backend=backend)
    assert bits_equal(got, take_oracle(x, np.broadcast_to(labels, (9, 4, 1)), -1))
    first = indices(rng, (9, 3, 50), 4, index)  # along the first axis of the 2-d tiles (the array's middle one)
    assert bits_equal(tp.take_along_axis(x, first, 0, batch_dims=1, backend=backend), take_oracle(x, first, 1))
    shared_x = x[0]  # one x for the whole batch, an index tile per entry
    rows = indices(rng, (9, 4, 2), 50, index)
    assert bits_equal(tp.take_along_axis(shared_x, rows, batch_dims=1, backend=backend),
                      take_oracle(np.broadcast_to(shared_x, (9, 4, 50)), rows, -1))


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_add_along_axis_sums_into_zeros_in_index_order(dtype, scope, backend, rng):
    x = random_tile(rng, (5, 23), dtype)  # read only for its shape
    idx = indices(rng, (5, 9), 23, "int64")
    idx[:, 6:] = idx[:, :3]  # repeats: summed in idx's order
    src = random_tile(rng, (5, 9), dtype, special=False)
    got = tp.scatter_add_along_axis(x, idx, src, -1, scope=scope, backend=backend)
    want = scatter_oracle(x, idx, src, -1)
    assert got.dtype == x.dtype
    in_order = np.zeros(x.shape, NP[dtype])  # the sums of 1 to 3 values in order, each add rounded in the dtype
    for r, j in np.ndindex(idx.shape):
        if -23 <= idx[r, j] < 23:
            in_order[r, idx[r, j] % 23] += src[r, j]
    assert bits_equal(got, in_order)
    bound = 3 * float(finfo(dtype).eps) * 3 * np.abs(src.astype(np.float64)).max()  # at most 3 adds of 3 values
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)
    assert not np.any(np.signbit(got[got == 0].astype(np.float64)))  # +0 where nothing lands


@pytest.mark.parametrize("scope", [tp.warp, tp.cta(96), None])
@pytest.mark.parametrize("index", INDEX)
def test_scatter_of_one_value_per_row_is_held_by_every_thread(index, scope, backend, rng):
    """One index and value per row (take's gradient at a label): both in every thread's registers
    (scatter_held), each thread summing its own elements; +0 where nothing lands, NaN-free."""
    x = random_tile(rng, (40, 333), "float32")
    idx = rng.integers(-340, 340, (40, 1)).astype(index)  # some outside the row: nothing added
    src = random_tile(rng, (40, 1), "float32", special=False)
    src[0] = -0.0  # +0 + -0: +0
    got = tp.scatter_add_along_axis(x, idx, src, batch_dims=1, scope=scope, backend=backend)
    want = np.zeros(x.shape, np.float32)
    for r in range(40):
        if -333 <= idx[r, 0] < 333:
            want[r, idx[r, 0]] += src[r, 0]
    assert bits_equal(got, want) and not np.signbit(got[got == 0]).any()
    plan = tp.plan(tp.scatter_add_along_axis, x, idx, src, batch_dims=1, scope=scope, backend=backend)
    assert plan.steps[0].variant == "scatter_held"


@pytest.mark.parametrize("through", ["cast", "map"])
def test_take_along_axis_in_a_program_beside_maps_and_reductions(through, backend, rng):
    """A pick through a cast of an input reads the input where it lies (gather_global); a pick of a
    row the program computed takes it where the program holds it, in registers (gather)."""
    @tp.program
    def picked_minus_max(x, label):
        xf = tp.cast(x, "float32") if through == "cast" else tp.cast(x, "float32") * 2.0
        return tp.take_along_axis(xf, label) - tp.max(xf, axes=-1, keepdims=True)

    x = random_tile(rng, (20, 70), "bfloat16", special=False)
    label = rng.integers(-70, 80, (20, 1))
    got = picked_minus_max(x, label, batch_dims=1, backend=backend)
    xf = x.astype(np.float32) * (1 if through == "cast" else 2)
    want = take_oracle(xf, label, -1) - xf.max(-1, keepdims=True)
    assert bits_equal(got, want) and np.isnan(got[label[:, 0] >= 70]).all()
    plan = tp.plan(picked_minus_max, x, label, batch_dims=1, backend="cpu")
    step = next(s for s in plan.steps if s.op == "take_along_axis")
    variant, where = ("gather_global", "global") if through == "cast" else ("gather", "registers")
    assert step.variant == variant and step.params["wide_side"] == where  # the row stays where it is


def test_gradients_of_take_along_axis_are_torchs_gather_backward():
    torch = pytest.importorskip("torch")
    @tp.program(scope=tp.warp)
    def picked(x, label):
        return tp.take_along_axis(x * x, label) * 3.0

    g = torch.Generator().manual_seed(3)
    x = torch.rand((6, 40), generator=g, dtype=torch.float64).requires_grad_()
    label = torch.randint(-40, 40, (6, 4), generator=g)
    label[:, 3] = label[:, 0]  # a repeated pick sums its gradients
    assert torch.autograd.gradcheck(lambda x: picked(x, label, batch_dims=1, backend="cpu"), (x,))
    (got,) = torch.autograd.grad(picked(x, label, batch_dims=1, backend="cpu").sum(), x)
    (want,) = torch.autograd.grad((torch.gather(x * x, 1, label % 40) * 3.0).sum(), x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    standalone = tp.take_along_axis(x, label.to(torch.int32), batch_dims=1, backend="cpu")
    (got,) = torch.autograd.grad(standalone.sum(), x)
    (want,) = torch.autograd.grad(torch.gather(x, 1, label % 40).sum(), x)
    assert torch.equal(got, want)
    outside = torch.full((6, 1), 40)  # an index outside the row: NaN, and no gradient anywhere
    y = tp.take_along_axis(x, outside, batch_dims=1, backend="cpu")
    assert torch.isnan(y).all()
    (got,) = torch.autograd.grad(y, x, torch.ones_like(y))
    assert torch.equal(got, torch.zeros_like(x))


def test_errors_name_the_operand_and_the_rule():
    x = np.ones((4, 8), np.float32)
    with pytest.raises(TypeError, match=r"test_gather.py:\d+: take_along_axis: idx: dtype float32 is not supported by "
                                        r"take_along_axis; idx takes int32"):
        tp.take_along_axis(x, np.ones((4, 1), np.float32))
    with pytest.raises(TypeError, match=r"x: dtype int32 is not supported by take_along_axis; x takes float16"):
        tp.take_along_axis(x.astype(np.int32), np.ones((4, 1), np.int32))
    with pytest.raises(ValueError, match=r"idx: shape \(3, 1\) does not fit x's \(4, 8\) along axis 1"):
        tp.take_along_axis(x, np.ones((3, 1), np.int64))
    with pytest.raises(ValueError, match=r"axis: axis 2 is out of range for a tile of rank 2"):
        tp.take_along_axis(x, np.ones((4, 1), np.int64), 2)
    for axis in (None, "a", 1.0, True):  # checked as an axis, not taken for an array argument
        with pytest.raises(TypeError, match=rf"^axis: expected an int, not {axis!r}$"):
            tp.take_along_axis(x, np.ones((4, 1), np.int64), axis=axis)
    with pytest.raises(ValueError, match=r"src: shape \(4, 2\) differs from idx's \(4, 1\)"):
        tp.scatter_add_along_axis(x, np.ones((4, 1), np.int64), np.ones((4, 2), np.float32))
    with pytest.raises(TypeError, match=r"src: dtype float64 differs from x's float32"):
        tp.scatter_add_along_axis(x, np.ones((4, 1), np.int64), np.ones((4, 1), np.float64))

    @tp.program
    def by_scalar(x):
        return tp.take_along_axis(x, 3)

    with pytest.raises(TypeError, match=r"test_gather.py:\d+: take_along_axis: idx: take_along_axis takes tiles, not a scalar"):
        by_scalar(x)


@pytest.mark.parametrize("scope,n", [(tp.thread, 200), (tp.cta(128), 1000)])  # a thread's registers hold 200
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_gather_kernels_compile_for_the_gpu(scope, n, target):
    x = np.ones((4, n), np.float32)
    label = np.ones((4, 1), np.int64)
    take = tp.lower(tp.take_along_axis, x, label, batch_dims=1, scope=scope, target=target)
    assert take.source.count("__global__") == 1 and "tp::take_along_axis" in take.source and take.cubin

    @tp.program
    def loss(x, label):
        xf = tp.cast(x, "float32")
        lse = tp.log(tp.sum(tp.exp(xf), axes=-1, keepdims=True))
        return lse - tp.take_along_axis(xf, label)

    kernel = tp.lower(loss, x.astype(np.float16), label, batch_dims=1, scope=scope, target=target)
    assert kernel.source.count("__global__") == 1 and kernel.cubin
    scatter = tp.lower(tp.scatter_add_along_axis, x, label, np.ones((4, 1), np.float32), batch_dims=1, scope=scope,
                       target=target)
    one_held = scope is not tp.thread  # one value per row, held by every thread: scatter_held
    assert ("tp::scatter_one_held" if one_held else "tp::scatter_add_along_axis") in scatter.source and scatter.cubin
    picks = tp.lower(tp.scatter_add_along_axis, x, np.ones((4, 3), np.int64), np.ones((4, 3), np.float32),
                     batch_dims=1, scope=scope, target=target)  # several: gather's, in shared memory
    assert "tp::scatter_add_along_axis" in picks.source and picks.cubin


def test_the_op_table_states_takes_nan_rule():
    assert "outside [-n, n)" in tp.op_table()["take_along_axis"]["nan_rule"]
    assert "where" in tp.op_table()["where"]["nan_rule"]
