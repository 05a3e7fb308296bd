"""A broadcast operand's gradient (a norm's weight and bias, a bias added to rows) summed over the
batch by tileprim's own sums, not torch's sum_to_size (whose order differs between its CPU and CUDA
kernels): against float64 (gradcheck), and bit for bit the fold sum_to does (whole chunks of rows
folded in order in float32 from -0, then each column of the chunks' sums and the rows past the last
whole chunk summed as a row by the program sum_to runs), so that the CPU
and the GPU agree (tests/test_layers_gpu.py checks the GPU)."""
import numpy as np
import pytest

import tileprim as tp
from conftest import NP, bits_equal

torch = pytest.importorskip("torch")
import tileprim._torch.sum_to as sum_to_module  # noqa: E402
from tileprim._torch.sum_to import _chunking, _row_sums, _row_sums_of_two, sum_to  # noqa: E402


def fold_chunk(rows: np.ndarray) -> np.ndarray:
    acc = np.full(rows.shape[-1], -0.0, rows.dtype)  # the sum's identity: -0 + -0 is -0
    for row in rows:
        with np.errstate(invalid="ignore"):  # +inf + -inf: NaN, as on the device
            acc = acc + row
    return acc


def folded(rows: np.ndarray, dtype: str, of_two: bool = False) -> np.ndarray:
    """The fold sum_to runs down (B, N) rows, emulated in float32 (float64 for float64): each whole
    chunk's rows added in order from -0 (where there are two chunks or more), then the chunks' sums
    and the rows past the last whole chunk, in order, folded so again while there are more than
    sum_to's _TURNED elements, then summed per column as rows by the program sum_to runs, rounding
    to ``dtype`` (its scope, the planner's, may differ with the dtype written and with a second
    gradient summed beside it, ``of_two``: so may its order)."""
    wide = np.float64 if rows.dtype == np.float64 else np.float32
    x = rows.astype(wide)
    while True:
        per_chunk = _chunking(*x.shape)[1]
        chunks = len(x) // per_chunk
        if chunks < 2:
            break
        sums = [fold_chunk(x[k * per_chunk:(k + 1) * per_chunk]) for k in range(chunks)]
        x = np.concatenate([np.stack(sums), x[chunks * per_chunk:]])
        if x.size <= sum_to_module._TURNED:
            break
    turned = np.ascontiguousarray(x.T)[None]
    if of_two:
        return _row_sums_of_two(dtype)(turned, turned, batch_dims=2, backend="cpu")[0][0]
    return _row_sums(dtype)(turned, batch_dims=2, backend="cpu")[0]


def as_numpy(t):
    t = t.detach()
    return t.view(torch.int16).numpy().view(NP["bfloat16"]) if t.dtype == torch.bfloat16 else t.numpy()


def random_rows(rng, shape, dtype, special=False):
    """Values of both signs and magnitudes far apart (so that the order of a sum shows); with
    ``special``, a few columns holding NaN, +inf, both infinities, subnormals, and one only -0."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-12, 12, shape))
    if special:
        rows = rng.choice(shape[0], 4, replace=False)
        x[rows[0], 1], x[rows[1], 2], x[rows[2], 3], x[rows[3], 3] = np.nan, np.inf, np.inf, -np.inf
        x[:, 4] = 2.0 ** -140 * rng.standard_normal(shape[0])  # float32 subnormals
        x[:, 5] = -0.0
    return torch.from_numpy(x.astype(np.float32)).to(getattr(torch, dtype))


@pytest.mark.parametrize("turned", [None, 1 << 10], ids=["turned", "folded-again"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("rows,n", [(1000, 4096), (37, 2048), (8, 256), (77, 301), (5, 33), (40, 1000)])
def test_sum_to_is_tileprims_fold_of_the_rows(rows, n, dtype, turned, rng, monkeypatch):
    # folded-again: so few chunk sums turned that 1000x4096 folds its chunk sums once more and 77x301
    # four times more, rows past the last whole chunk at every level
    if turned is not None:
        monkeypatch.setattr(sum_to_module, "_TURNED", turned)
    g = random_rows(rng, (rows, n), dtype, special=True)
    got = sum_to(g, (n,))
    assert got.dtype == g.dtype and got.shape == (n,)
    if _chunking(rows, n)[0] is not None:  # else the planner's scope, in its own order
        want = folded(as_numpy(g), dtype)
        assert bits_equal(as_numpy(got), want)
    assert torch.isnan(got[[1, 3]]).all() and got[2] == float("inf") and got[5] == 0  # NaN; +inf; +inf - inf
    exact, scale = g[:, 6:].double().sum(0), g[:, 6:].double().abs().sum(0)
    bound = (2.0 ** -23 * rows * 2 + (2.0 ** -8 if dtype == "bfloat16" else 0.0)) * scale + 1e-300
    assert torch.all((got[6:].double() - exact).abs() <= bound)


def test_sum_to_sums_leading_middle_and_trailing_dims_as_sum_to_size_does(rng):
    g = random_rows(rng, (3, 20, 4, 48), "float32")
    for shape in [(4, 48), (20, 1, 48), (3, 1, 4, 1), (3, 20, 4, 1), (1, 1), (), (48,), (3, 20, 4, 48)]:
        got = sum_to(g, shape)
        assert got.shape == g.sum_to_size(shape).shape, shape
        # a float32 sum of k terms, in any order, lies within gamma_k = k u / (1 - k u) (u = 2^-24) of the
        # terms' magnitudes from the exact sum
        terms = g.numel() // max(1, g.double().sum_to_size(shape).numel())
        bound = terms * 2.0 ** -24 / (1 - terms * 2.0 ** -24) * g.double().abs().sum_to_size(shape)
        assert torch.all((got.double() - g.double().sum_to_size(shape)).abs() <= bound), shape
    # a trailing dim summed is tp.sum's row reduction, in float32 for bfloat16
    b = random_rows(rng, (24, 40), "bfloat16")
    row = tp.sum(tp.cast(as_numpy(b), "float32", backend="cpu"), axes=-1, batch_dims=1, backend="cpu")
    assert bits_equal(as_numpy(sum_to(b, (24, 1)))[:, 0], row.astype(NP["bfloat16"]))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_norms_weight_and_bias_gradients_are_the_fold_of_the_rows_contributions(dtype, rng):
    """The layer_norm program's w and b gradients: its per-row contributions (the gradients when w
    and b are given one row each) folded by sum_to, not torch's sum of them."""
    x = random_rows(rng, (600, 512), dtype) * 0.001
    w = (torch.rand(512) + 0.5).to(x.dtype)
    b = torch.randn(512).to(x.dtype)
    up = random_rows(rng, (600, 512), dtype)

    def grads(w_in, b_in):
        w_in, b_in = w_in.clone().requires_grad_(), b_in.clone().requires_grad_()
        y = tp.layers.layer_norm(x, w_in, b_in, 1e-5, batch_dims=1, backend="cpu")
        return torch.autograd.grad(y, (w_in, b_in), up)
    gw, gb = grads(w, b)
    per_row_w, per_row_b = grads(w.expand(600, 512), b.expand(600, 512))
    for got, rows in ((gw, per_row_w), (gb, per_row_b)):
        assert bits_equal(as_numpy(got), folded(as_numpy(rows), dtype, of_two=True))


def test_gradients_of_broadcast_operands_against_float64():
    """gradcheck through several chunks and a partial last one (37 rows of 8: 16 + 16 + 5)."""
    g = torch.Generator().manual_seed(12)
    x = (torch.randn((37, 8), generator=g, dtype=torch.float64) * 2 + 0.5).requires_grad_()
    w = (torch.rand(8, generator=g, dtype=torch.float64) + 0.5).requires_grad_()
    b = torch.randn(8, generator=g, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, w, b: tp.layers.layer_norm(x, w, b, 1e-5, batch_dims=1, backend="cpu"),
                                    (x, w, b))
    assert torch.autograd.gradcheck(lambda x, w: tp.layers.rms_norm(x, w, 1e-6, batch_dims=1, backend="cpu"), (x, w))
    column = torch.randn((37, 1), generator=g, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, r, c: tp.add(tp.add(x, r, batch_dims=1, backend="cpu"), c, backend="cpu"),
                                    (x, w, column))


def test_a_standalone_ops_broadcast_operand_gets_the_fold_of_the_rows(rng):
    x = random_rows(rng, (300, 64), "float32").requires_grad_()
    r = random_rows(rng, (64,), "float32").requires_grad_()
    up = random_rows(rng, (300, 64), "float32")
    _, gr = torch.autograd.grad(tp.add(x, r, batch_dims=1, backend="cpu"), (x, r), up)
    assert bits_equal(as_numpy(gr), folded(as_numpy(up), "float32"))


def test_the_benchmark_runs_and_checks_on_the_cpu(capsys):
    broadcast_grads = pytest.importorskip("broadcast_grads")  # benchmarks/ is on sys.path (conftest)
    assert broadcast_grads.main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert out.count("ok against float64") == 2 * len(broadcast_grads.SMOKE_SHAPES) and "WRONG" not in out
