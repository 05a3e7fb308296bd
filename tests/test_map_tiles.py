"""A program of maps alone called over rows with no scope named takes its rows as tiles of 8
(``_program.map_tiles``): the bits of the same call on tiles of 8, its plan saying so; programs
that read a row whole, read their tile's shape, name a scope or staging, broadcast an argument, or
whose arrays are no such view keep their rows."""
import ml_dtypes
import numpy as np
import pytest

import tileprim as tp
from conftest import bits_equal, cuda_usable, random_tile

BF16 = ml_dtypes.bfloat16


@tp.program
def scaled_gate(a, b, k):
    return tp.where(a > 0.0, a * k, tp.exp(b) - 1.0)


@tp.program
def two_maps(x):
    return tp.sigmoid(x), tp.cast(x * x, "float32")


@tp.program
def by_tile_length(x):  # reads its tile's shape: taken as tiles it would divide by 8
    return x * (1.0 / x.shape[-1])


@tp.program
def row_mean_removed(x):
    return x - tp.sum(x, axes=-1, keepdims=True) / x.shape[-1]


def _as_tiles(program, *args, **kwargs):
    flat = [a.reshape(-1, 8) if isinstance(a, np.ndarray) else a for a in args]
    return program(*flat, batch_dims=1, backend="cpu", **kwargs)


@pytest.mark.parametrize("shape", [(3, 4096), (2, 5, 1000), (7, 24)])
def test_a_map_program_over_rows_gives_the_bits_of_its_tiles_of_8(shape, rng):
    a, b = random_tile(rng, shape, "bfloat16"), random_tile(rng, shape, "bfloat16")
    batch = len(shape) - 1
    got = scaled_gate(a, b, 1.5, batch_dims=batch, backend="cpu")
    want = _as_tiles(scaled_gate, a, b, 1.5).reshape(shape)
    assert got.shape == shape and bits_equal(got, want)
    plan = tp.plan(scaled_gate, a, b, 1.5, batch_dims=batch, backend="cpu")
    assert plan.map_tiles.startswith(f"maps alone, no scope named: the rows of {int(np.prod(shape[batch:]))} "
                                     f"elements taken as tiles of 8")
    assert str(plan).startswith(plan.map_tiles) and plan.out_shapes == [shape]
    assert plan.scope == "thread"
    # the tiles' own plan is not changed by the rows' (a plan memo shared by both calls)
    assert tp.plan(scaled_gate, a.reshape(-1, 8), b.reshape(-1, 8), 1.5, batch_dims=1).map_tiles is None


def test_results_and_out_keep_the_rows_shape(rng):
    x = random_tile(rng, (4, 64), "float32")
    s, sq = two_maps(x, batch_dims=1, backend="cpu")
    ts, tsq = _as_tiles(two_maps, x)
    assert s.shape == sq.shape == (4, 64)
    assert bits_equal(s, ts.reshape(4, 64)) and bits_equal(sq, tsq.reshape(4, 64))
    out = (np.full((4, 64), np.nan, np.float32), np.full((4, 64), np.nan, np.float32))
    got = two_maps(x, batch_dims=1, backend="cpu", out=out)
    assert got is out and bits_equal(out[0], s) and bits_equal(out[1], sq)
    one = np.full((4, 64), np.nan, np.float32)
    assert tp.layers.gelu_erf(x, batch_dims=1, backend="cpu", out=one) is one
    assert bits_equal(one, tp.layers.gelu_erf(x.reshape(-1, 8), batch_dims=1, backend="cpu").reshape(4, 64))


def test_programs_that_are_not_maps_alone_keep_their_rows(rng):
    x = random_tile(rng, (3, 64), "float32")
    w = random_tile(rng, (64,), "float32")
    kept = [
        tp.plan(by_tile_length, x, batch_dims=1),                       # reads x.shape[-1]
        tp.plan(row_mean_removed, x, batch_dims=1),                     # a reduction
        tp.plan(tp.layers.rms_norm, x, w, 1e-6, batch_dims=1),          # one, and a weight broadcast
        tp.plan(scaled_gate, x, x, 2.0, batch_dims=1, scope=tp.cta(32)),  # a scope named
        tp.plan(tp.program(scaled_gate._fn, staging="registers"), x, x, 2.0, batch_dims=1),
        tp.plan(tp.program(scaled_gate._fn, scope=tp.warp), x, x, 2.0, batch_dims=1),
        tp.plan(scaled_gate, x, x[:, :1], 2.0, batch_dims=1),           # an argument broadcast along the row
        tp.plan(scaled_gate, x[:, :63], x[:, :63], 2.0, batch_dims=1),  # rows of 63: no tiles of 8
        tp.plan(scaled_gate, x[:, ::2], x[:, ::2], 2.0, batch_dims=1),  # not a view as tiles
        tp.plan(scaled_gate, x[0], x[0], 2.0),                          # one tile: the seeds' thread
    ]
    for plan in kept:
        assert plan.map_tiles is None
    got = by_tile_length(x, batch_dims=1, backend="cpu")
    assert bits_equal(got, (x * np.float32(1 / 64)).astype(np.float32))


def test_torch_tensors_take_tiles_and_their_gradients_flow_back(rng):
    torch = pytest.importorskip("torch")
    a = torch.tensor(random_tile(rng, (3, 256), "float32", special=False), requires_grad=True)
    b = torch.tensor(random_tile(rng, (3, 256), "float32", special=False), requires_grad=True)
    y = tp.layers.silu_mul(a, b, batch_dims=1)
    a8, b8 = (t.detach().reshape(-1, 8).requires_grad_() for t in (a, b))
    y8 = tp.layers.silu_mul(a8, b8, batch_dims=1)
    assert y.shape == (3, 256) and torch.equal(y, y8.reshape(3, 256))
    g = torch.tensor(random_tile(rng, (3, 256), "float32", special=False))
    y.backward(g)
    y8.backward(g.reshape(-1, 8))
    assert torch.equal(a.grad, a8.grad.reshape(3, 256)) and torch.equal(b.grad, b8.grad.reshape(3, 256))


@pytest.mark.parametrize("call", [
    lambda x, **k: tp.exp(x, **k),
    lambda x, **k: tp.fdiv(x, 3.0, **k),
    lambda x, **k: tp.cast(x, "bfloat16", **k),
    lambda x, **k: tp.where(x > 0.0, x, -1.0, **k),
    lambda x, **k: tp.maximum(x, x * 0.5, propagate_nan=True, **k),
], ids=["exp", "fdiv-scalar", "cast", "where-bool", "maximum-nan"])
def test_a_standalone_map_over_rows_takes_them_as_tiles_of_8(call, rng):
    """The program of one map, as a program of maps alone: the bits of its tiles of 8, out= itself,
    its plan the tiles' saying so; a named scope, storage, layout, variant or a row of no multiple
    of 8 keeps the rows."""
    x = random_tile(rng, (5, 2, 96), "float32")
    got = call(x, batch_dims=2, backend="cpu")
    want = call(x.reshape(-1, 8), batch_dims=1, backend="cpu").reshape(got.shape)
    assert got.shape == x.shape and bits_equal(got, want)
    out = np.full(x.shape, np.nan, got.dtype)
    assert call(x, batch_dims=2, backend="cpu", out=out) is out and bits_equal(out, got)
    plan = tp.plan(tp.exp, x, batch_dims=2)
    assert plan.map_tiles.startswith("maps alone, no scope named: the rows of 96 elements taken as tiles of 8")
    assert plan.out_shape == x.shape and str(plan).startswith(plan.map_tiles)
    for kept in [tp.plan(tp.exp, x, batch_dims=2, scope=tp.thread), tp.plan(tp.exp, x[..., :95], batch_dims=2),
                 tp.plan(tp.exp, x, batch_dims=2, dispatch="reg"), tp.plan(tp.exp, x[0, 0])]:
        assert kept.map_tiles is None


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")
def test_maps_over_rows_of_device_tensors_take_tiles_and_give_the_cpu_bits(rng):
    torch = pytest.importorskip("torch")
    x = random_tile(rng, (6, 4096), "float32")
    w = random_tile(rng, (6, 4096), "float32")
    xt, wt = torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()
    for fn, args, host in [(tp.exp, (xt,), (x,)), (tp.layers.silu_mul, (xt, wt), (x, w)),
                           (scaled_gate, (xt, wt, 0.5), (x, w, 0.5))]:
        cpu = fn(*host, batch_dims=1, backend="cpu")
        gpu = fn(*args, batch_dims=1)
        assert gpu.shape == (6, 4096) and bits_equal(cpu, gpu.cpu().numpy())
        out = torch.full_like(xt, float("nan"))
        assert fn(*args, batch_dims=1, out=out) is out and bits_equal(cpu, out.cpu().numpy())
