"""Autograd through tile programs: the backward derived from the traced steps (a second tile
program, one kernel), checked by torch.autograd.gradcheck in float64 on the CPU backend, against
float64 NumPy gradients for float32 programs, ties of max split as torch.amax splits them, and (on
a GPU) the same bits on the CPU and the GPU."""
import math

import numpy as np
import pytest

import tileprim as tp
from conftest import NP, cuda_usable
import programs

torch = pytest.importorskip("torch")

SCOPES = [pytest.param(tp.thread, id="thread"), pytest.param(tp.warp, id="warp"),
          pytest.param(tp.cta(64), id="cta64")]


def every_map_fn(a, b, c):
    p = tp.sqrt(a) + tp.log(a) - tp.log2(b) + tp.rsqrt(b) * tp.exp2(c) + tp.reciprocal(a)
    q = tp.fma(a, c, tp.silu(c)) / b + tp.maximum(a, c) - 2.5 * tp.exp(c)
    return tp.cast(p * q, "float64") + tp.zero(c) + tp.fill(a, 3.0)


def activations_fn(a, b):
    # comparisons pass no gradient; where routes it to the operand it picked (a scalar included)
    picked = tp.where(tp.gt(a, b), tp.tanh(a) * b, tp.sigmoid(b) - a)
    return tp.where(tp.ne(a, 0.5), picked + tp.erf(a * b), 0.0) * tp.le(b, 1.0)


def tile_broadcast_fn(x, col, row):
    # a 2-d tile: a column (k, 1) and a row (n,) broadcast inside the tile, reductions along both dims
    y = x * col + row
    return tp.sum(y, axes=0, keepdims=True) * tp.max(y, axes=-1, keepdims=True) + tp.sum(y, axes=(0, 1))


def leaf(shape, low=-2.0, high=2.0, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype).requires_grad_()


def gradcheck(fn, *args):
    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("scope", SCOPES)
def test_gradcheck_softmax_rmsnorm_logsumexp(scope):
    softmax, rmsnorm, logsumexp = (tp.program(f, scope=scope)
                                   for f in (programs.softmax, programs.rmsnorm, programs.logsumexp))
    x = leaf((5, 37), seed=1)
    w = leaf((37,), 0.5, 1.5, seed=2)
    gradcheck(lambda x: softmax(x, batch_dims=1, backend="cpu"), x)
    gradcheck(lambda x, w: rmsnorm(x, w, 1e-6, batch_dims=1, backend="cpu"), x, w)
    gradcheck(lambda x: logsumexp(x, batch_dims=1, backend="cpu"), x)


def test_gradcheck_two_results_every_map_and_broadcasts_inside_the_tile():
    add_rmsnorm = tp.program(programs.add_rmsnorm, scope=tp.warp)
    x, r, w = leaf((3, 40), seed=3), leaf((3, 40), seed=4), leaf((40,), 0.5, 1.5, seed=5)
    gradcheck(lambda x, r, w: add_rmsnorm(x, r, w, 1e-6, batch_dims=1, backend="cpu"), x, r, w)
    every_map = tp.program(every_map_fn)
    a, b, c = leaf((4, 9), 0.5, 3.0, seed=6), leaf((4, 9), 0.5, 3.0, seed=7), leaf((4, 9), seed=8)
    gradcheck(lambda a, b, c: every_map(a, b, c, batch_dims=1, backend="cpu"), a, b, c)
    broadcast = tp.program(tile_broadcast_fn, scope=tp.cta(32))
    x, col, row = leaf((2, 6, 11), seed=9), leaf((6, 1), seed=10), leaf((2, 1, 11), seed=11)
    gradcheck(lambda x, col, row: broadcast(x, col, row, batch_dims=1, backend="cpu"), x, col, row)


@pytest.mark.parametrize("scope", SCOPES)
def test_gradcheck_activations_comparisons_and_where(scope):
    program = tp.program(activations_fn, scope=scope)
    a, b = leaf((3, 32), seed=26), leaf((3, 32), seed=27)
    gradcheck(lambda a, b: program(a, b, batch_dims=1, backend="cpu"), a, b)
    grads = torch.autograd.grad(program(a, b, batch_dims=1, backend="cpu").sum(), (a, b))
    want = torch.autograd.grad(torch.where(a != 0.5, torch.where(a > b, torch.tanh(a) * b, torch.sigmoid(b) - a)
                                           + torch.erf(a * b), 0.0).mul(b <= 1.0).sum(), (a, b))
    for got, expected in zip(grads, want):
        torch.testing.assert_close(got, expected, rtol=1e-14, atol=1e-14)


def test_second_derivatives_through_the_backward_programs_own_backward():
    softmax, rmsnorm = tp.program(programs.softmax, scope=tp.warp), tp.program(programs.rmsnorm, scope=tp.cta(64))
    x, w = leaf((3, 9), seed=24), leaf((9,), 0.5, 1.5, seed=25)
    assert torch.autograd.gradgradcheck(lambda x: softmax(x, batch_dims=1, backend="cpu"), (x,))
    assert torch.autograd.gradgradcheck(lambda x, w: rmsnorm(x, w, 1e-6, batch_dims=1, backend="cpu"), (x, w))


def test_float32_gradients_match_float64_numpy():
    rng = np.random.default_rng(12)
    x64 = rng.standard_normal((33, 300)) * 3
    w64 = rng.uniform(0.5, 1.5, 300)
    g64 = rng.standard_normal((33, 300))
    x = torch.tensor(x64, dtype=torch.float32, requires_grad=True)
    w = torch.tensor(w64, dtype=torch.float32, requires_grad=True)
    g = torch.tensor(g64, dtype=torch.float32)
    softmax = tp.program(programs.softmax, scope=tp.cta(64))
    y64 = np.exp(x64 - x64.max(-1, keepdims=True))
    y64 /= y64.sum(-1, keepdims=True)
    want = y64 * (g64 - (g64 * y64).sum(-1, keepdims=True))
    (got,) = torch.autograd.grad(softmax(x, batch_dims=1, backend="cpu"), x, g)
    assert np.max(np.abs(got.numpy() - want)) <= 1e-6 * np.max(np.abs(want))
    rmsnorm = tp.program(programs.rmsnorm, scope=tp.cta(64))
    rstd = 1 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6)
    gw64 = (g64 * x64 * rstd).sum(0)
    gx64 = rstd * (g64 * w64 - x64 * rstd ** 2 * (g64 * w64 * x64).mean(-1, keepdims=True))
    gx, gw = torch.autograd.grad(rmsnorm(x, w, 1e-6, batch_dims=1, backend="cpu"), (x, w), g)
    assert np.max(np.abs(gx.numpy() - gx64)) <= 1e-5 * np.max(np.abs(gx64))
    assert np.max(np.abs(gw.numpy() - gw64)) <= 1e-5 * np.max(np.abs(gw64))


def test_ties_split_as_amax_and_nan_passes_no_gradient():
    @tp.program(scope=tp.warp)
    def row_max(x):
        return tp.max(x, axes=-1)

    x = torch.tensor([[1.0, 3.0, 3.0, -2.0, 3.0], [float("nan"), 2.0, 5.0, 5.0, 0.0]], dtype=torch.float64,
                     requires_grad=True)
    g = torch.tensor([6.0, 4.0], dtype=torch.float64)
    (got,) = torch.autograd.grad(row_max(x, batch_dims=1, backend="cpu"), x, g)
    expected = torch.tensor([[0, 2, 2, 0, 2], [0, 0, 2, 2, 0]], dtype=torch.float64)
    assert torch.equal(got, expected)
    y = torch.tensor([[1.0, 3.0, 3.0, -2.0, 3.0]], dtype=torch.float64, requires_grad=True)
    (amax,) = torch.autograd.grad(torch.amax(y, -1), y, g[:1])
    (ours,) = torch.autograd.grad(row_max(y, batch_dims=1, backend="cpu"), y, g[:1])
    assert torch.equal(ours, amax)


def test_a_gradient_passed_on_unchanged_is_not_copied(rng):
    """A wanted gradient that is a result's gradient unchanged (through a cast to float32 and back,
    or an add) is no result of the backward program: LayerNorm's bias gradient per row is the
    incoming gradient, so the backward returns dx and dw only and b's gradient is the incoming one
    summed over the rows, as a copy of it would have been; an add's two gradients need no program;
    add+RMSNorm's x and r share one gradient, computed and written once."""
    from tileprim._program.backward import derive_backward
    from tileprim._torch.sum_to import sum_to
    x = rng.standard_normal((6, 40)).astype(np.float32)
    for rows in (x, x.astype(NP["bfloat16"])):  # cast to float32: none, and exactly widened and back
        prepared = tp.layers.layer_norm._prepare((rows, rows[0], rows[0], 1e-5), 1, None, "cpu", None)
        fn, wanted, sources = derive_backward(prepared.trace, prepared.output_ids, [True, True, True])
        assert wanted == [0, 1, 2] and sources == [("result", 0), ("result", 1), ("argument", 3)]  # 3: the result's gradient
    bf16 = torch.bfloat16
    xt = torch.from_numpy(x).to(bf16).requires_grad_()
    w, b = (torch.randn(40, dtype=bf16).requires_grad_() for _ in range(2))
    g = torch.from_numpy(rng.standard_normal((6, 40)).astype(np.float32)).to(bf16)
    _, _, db = torch.autograd.grad(tp.layers.layer_norm(xt, w, b, 1e-5, batch_dims=1, backend="cpu"), (xt, w, b), g)
    assert torch.equal(db, sum_to(g, (40,), backend="cpu"))

    @tp.program
    def added(a, r):
        return a + r

    prepared = added._prepare((x, x), 1, None, "cpu", None)
    assert derive_backward(prepared.trace, prepared.output_ids, [True, True]) == (None, [0, 1], [("argument", 2)] * 2)
    a, r = (torch.from_numpy(x).requires_grad_() for _ in range(2))
    ga, gr = torch.autograd.grad(added(a, r, batch_dims=1, backend="cpu"), (a, r), torch.from_numpy(x))
    assert torch.equal(ga, torch.from_numpy(x)) and torch.equal(gr, torch.from_numpy(x))

    add_rmsnorm = tp.program(programs.add_rmsnorm)
    prepared = add_rmsnorm._prepare((x, x, x[0], 1e-6), 1, None, "cpu", None)
    fn, wanted, sources = derive_backward(prepared.trace, prepared.output_ids, [True, True, True])
    assert sources == [("result", 0), ("result", 0), ("result", 1)]
    xt, rt, w = (torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).requires_grad_()
                 for shape in ((6, 40), (6, 40), (40,)))
    y, h = add_rmsnorm(xt, rt, w, 1e-6, batch_dims=1, backend="cpu")
    gx, gr, gw = torch.autograd.grad((y * y).sum() + h.sum(), (xt, rt, w))
    xd, rd, wd = (t.detach().double().requires_grad_() for t in (xt, rt, w))
    hd = xd + rd
    yd = hd * torch.rsqrt((hd * hd).mean(-1, keepdim=True) + 1e-6) * wd
    want = torch.autograd.grad((yd * yd).sum() + hd.sum(), (xd, rd, wd))
    assert torch.equal(gx, gr)
    for got, ref in zip((gx, gr, gw), want):
        torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-4)


def test_backward_is_one_program_and_one_kernel():
    from tileprim._program.backward import derive_backward
    softmax = tp.program(programs.softmax, scope=tp.cta(256))
    x = np.random.default_rng(13).standard_normal((8, 512)).astype(np.float32)
    prepared = softmax._prepare((x,), 1, None, "cpu", None)
    fn, wanted, sources = derive_backward(prepared.trace, prepared.output_ids, [True])
    assert wanted == [0] and sources == [("result", 0)] and fn.__name__ == "softmax_backward"
    program = tp.program(fn, scope=tp.cta(256))
    plan = tp.plan(program, x, x, batch_dims=1, backend="cpu")
    # the forward values the products read are recomputed in it; the ties' mask is tp.eq
    assert {"max", "exp", "sum", "eq", "fdiv"} <= {s.op for s in plan.steps}
    kernel = tp.lower(program, x, x, batch_dims=1, target="sm_90a")
    assert kernel.source.count("__global__") == 1


def _shifted(stop):
    """softmax and logsumexp by a row's max, read through tp.stop_gradient where ``stop``."""
    def shift(x):
        m = tp.max(x, axes=-1, keepdims=True)
        return tp.stop_gradient(m) if stop else m

    def softmax(x):
        e = tp.exp(x - shift(x))
        return e / tp.sum(e, axes=-1, keepdims=True)

    def logsumexp(x):
        m = shift(x)
        return tp.log(tp.sum(tp.exp(x - m), axes=-1, keepdims=True)) + m
    return tp.program(softmax, scope=tp.warp), tp.program(logsumexp, scope=tp.warp)


def test_stop_gradient_leaves_the_forward_and_drops_the_max_from_the_backward():
    """A row max read through tp.stop_gradient: the forward records no step (the same plan and
    bits); the derived backward has no tie mask (no eq, one reduction fewer) and still gives
    torch's gradients (a softmax does not depend on the shift), ties included."""
    from tileprim._program.backward import derive_backward
    x = leaf((6, 37), seed=20)
    with torch.no_grad():
        x[0, 3] = x[0, 5] = 2.5  # a tied max
    g = leaf((6, 37), seed=21).detach()
    for (plain, stopped), reference in zip(zip(_shifted(False), _shifted(True)),
                                           (lambda t: torch.softmax(t, -1), lambda t: torch.logsumexp(t, -1, True))):
        rows = x.detach().numpy()
        assert str(tp.plan(plain, rows, batch_dims=1)) == str(tp.plan(stopped, rows, batch_dims=1)).replace(
            stopped.__name__, plain.__name__)
        y = stopped(x, batch_dims=1, backend="cpu")
        assert torch.equal(y, plain(x, batch_dims=1, backend="cpu"))
        grad = g[:, :y.shape[-1]]
        (got,) = torch.autograd.grad(y, x, grad)
        (want,) = torch.autograd.grad(reference(x), x, grad)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        gradcheck(lambda t: stopped(t, batch_dims=1, backend="cpu"), leaf((3, 11), seed=22))
        steps = {}
        for name, program in (("plain", plain), ("stopped", stopped)):
            prepared = program._prepare((rows,), 1, None, "cpu", None)
            fn, _, _ = derive_backward(prepared.trace, prepared.output_ids, [True])
            backward = tp.plan(tp.program(fn, scope=tp.warp), rows, rows[:, :y.shape[-1]], batch_dims=1)
            steps[name] = [s.op for s in backward.steps]
        assert "eq" in steps["plain"] and "eq" not in steps["stopped"]
        reductions = {k: sum(op in ("sum", "max") for op in v) for k, v in steps.items()}
        assert reductions["stopped"] < reductions["plain"] and len(steps["stopped"]) < len(steps["plain"])


def test_stop_gradient_on_every_path_gives_no_gradient_and_outside_a_program_detaches():
    @tp.program(scope=tp.warp)
    def scaled(x, w):
        return x * tp.stop_gradient(w), tp.stop_gradient(x * w)

    x, w = leaf((4, 8), seed=23), leaf((8,), seed=24)
    y, z = scaled(x, w, batch_dims=1, backend="cpu")
    gx, gw = torch.autograd.grad(y.sum() + z.sum(), (x, w), allow_unused=True)
    assert torch.equal(gx, w.detach().expand(4, 8)) and gw is None  # z passes nothing, y nothing to w
    assert tp.stop_gradient(x).requires_grad is False and tp.stop_gradient(x).data_ptr() == x.data_ptr()
    rows = np.ones(3, np.float32)
    assert tp.stop_gradient(rows) is rows

    held = []  # a tile of an earlier tracing, kept past it

    @tp.program
    def keeps(t):
        held.append(t)
        return t

    @tp.program
    def uses_another(t):
        return tp.stop_gradient(held[0])

    keeps(rows)
    with pytest.raises(ValueError, match="stop_gradient: .* tile of another program"):
        uses_another(rows)


def test_stop_gradient_of_a_jax_array_is_jaxs():
    jax = pytest.importorskip("jax")
    v = jax.numpy.arange(3.0)
    assert (jax.grad(lambda t: (tp.stop_gradient(t) * t).sum())(v) == v).all()  # 2v without the stop


def test_gradient_flows_only_where_needed_and_out_is_recorded():
    rmsnorm = tp.program(programs.rmsnorm, scope=tp.warp)
    x = leaf((4, 32), seed=14)
    w = leaf((32,), seed=15).detach()  # needs no gradient
    y = rmsnorm(x, w, 1e-6, batch_dims=1, backend="cpu")
    assert y.grad_fn is not None and y.requires_grad
    (gx,) = torch.autograd.grad(y.sum(), x)
    assert gx.shape == x.shape and torch.isfinite(gx).all()
    out = torch.full((4, 32), float("nan"), dtype=torch.float64)
    rmsnorm(x, w, 1e-6, batch_dims=1, backend="cpu", out=out)
    assert torch.equal(out.detach(), y.detach()) and out.grad_fn is not None
    with torch.no_grad():
        plain = rmsnorm(x, w, 1e-6, batch_dims=1, backend="cpu")
    assert plain.grad_fn is None and torch.equal(plain, y.detach())


def test_a_reduction_that_cannot_broadcast_its_gradient_back_names_the_line():
    @tp.program
    def row_sums_times(x):
        return tp.sum(x, axes=-1) * 2.0  # (k,) from a (k, n) tile: no keepdims

    x = leaf((2, 3, 4), seed=16)
    y = row_sums_times(x, batch_dims=1, backend="cpu")
    with pytest.raises(ValueError, match=r"test_program_autograd.py:\d+: sum: .*keepdims=True"):
        y.sum().backward()


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_bits_equal_on_cpu_and_gpu(dtype):
    """Every gradient the backward program computes has the same bits on both backends; the
    weight's (summed over the batch by torch) agrees to rounding."""
    softmax, rmsnorm = (tp.program(f, scope=tp.cta(256)) for f in (programs.softmax, programs.rmsnorm))
    x = leaf((64, 1000), seed=17, dtype=dtype)
    w = leaf((1000,), 0.5, 1.5, seed=18, dtype=dtype)
    g = leaf((64, 1000), seed=19, dtype=dtype).detach()
    stopped_softmax, stopped_logsumexp = _shifted(True)  # their max read through tp.stop_gradient
    grads = {}
    for device, backend in (("cpu", "cpu"), ("cuda", None)):
        xd, wd = x.detach().to(device).requires_grad_(), w.detach().to(device).requires_grad_()
        (sx,) = torch.autograd.grad(softmax(xd, batch_dims=1, backend=backend), xd, g.to(device))
        rx, rw = torch.autograd.grad(rmsnorm(xd, wd, 1e-6, batch_dims=1, backend=backend), (xd, wd), g.to(device))
        (tx,) = torch.autograd.grad(stopped_softmax(xd, batch_dims=1, backend=backend), xd, g.to(device))
        (lx,) = torch.autograd.grad(stopped_logsumexp(xd, batch_dims=1, backend=backend), xd, g[:, :1].to(device))
        grads[device] = (sx.cpu(), rx.cpu(), tx.cpu(), lx.cpu(), rw.cpu())
    for a, b in zip(grads["cpu"][:4], grads["cuda"][:4]):
        assert torch.equal(a, b)
    torch.testing.assert_close(grads["cuda"][4], grads["cpu"][4])


def test_eager_calls_give_the_custom_ops_bits_and_torch_func_grad_works():
    """Outside torch.compile a call under autograd runs the op's forward and backward through a
    torch.autograd.Function rather than torch.library's dispatch: the same results and gradients,
    bit for bit, and torch.func.grad through it (the custom op path refused that transform)."""
    from tileprim._torch.program_op import call_program_op
    rmsnorm = tp.program(programs.rmsnorm, scope=tp.warp)
    x, w = leaf((5, 37), seed=30, dtype=torch.float32), leaf((37,), 0.5, 1.5, seed=31, dtype=torch.float32)
    g = torch.randn(5, 37, generator=torch.Generator().manual_seed(32))
    results = {}
    for eager in (True, False):
        y = call_program_op(rmsnorm, (x, w, 1e-6), 1, None, "cpu", None, None, eager=eager)
        results[eager] = (y, *torch.autograd.grad(y, (x, w), g))
    assert all(torch.equal(a, b) for a, b in zip(results[True], results[False]))
    loss = lambda t: (rmsnorm(t, w.detach(), 1e-6, batch_dims=1, backend="cpu") * g).sum()
    assert torch.equal(torch.func.grad(loss)(x.detach()), torch.autograd.grad(loss(x), x)[0])


def test_opcheck_passes_on_a_programs_custom_op():
    from tileprim._torch.program_op import op_name
    add_rmsnorm = tp.program(programs.add_rmsnorm, scope=tp.warp)
    x, r, w = leaf((3, 40), seed=20), leaf((3, 40), seed=21), leaf((40,), 0.5, 1.5, seed=22)
    described = tuple(("float64", tuple(t.shape), "cpu") for t in (x, r, w)) + (1e-6,)
    name, _ = op_name(add_rmsnorm._key, described, 1, None, "cpu", None)
    assert name.startswith("program_add_rmsnorm_")
    torch.library.opcheck(getattr(torch.ops.tileprim, name).default, (x, r, w))


@pytest.mark.parametrize("compiler", ["graph", "aot_eager"])
def test_torch_compile_fullgraph_holds_the_programs_custom_op_and_its_backward(compiler):
    """One graph, no break, no recompilation for new values, gradients equal to eager bit for bit
    (aot_eager traces the backward too: the derived program's own custom op, on fake tensors)."""
    from torch._dynamo.utils import counters
    softmax = tp.program(programs.softmax, scope=tp.warp)
    rmsnorm = tp.program(programs.rmsnorm, scope=tp.warp)
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def loss(x, w):
        return (softmax(x, batch_dims=1, backend="cpu") * rmsnorm(x, w, 1e-6, batch_dims=1, backend="cpu")).sum()

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(loss, fullgraph=True, backend=keep if compiler == "graph" else compiler)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for seed in (23, 24):
            x, w = leaf((6, 50), seed=seed), leaf((50,), 0.5, 1.5, seed=seed + 10)
            got = torch.autograd.grad(compiled(x, w), (x, w))
            want = torch.autograd.grad(loss(x, w), (x, w))
            assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert not counters["graph_break"]
    if compiler == "graph":
        targets = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
        assert [t.rsplit("_", 1)[0] for t in targets if t.startswith("tileprim.")] == [
            "tileprim.program_softmax", "tileprim.program_rmsnorm"], targets


def test_a_scalars_sign_and_type_are_part_of_the_custom_ops_signature():
    """-0.0 is not 0.0 and True not 1 (equal as keys): each its own op, the sign of zero as torch's."""
    program = tp.program(lambda x, s: x * s)
    x = leaf((2, 8), seed=40)
    for s in (0.0, -0.0, 0.0):
        torch.testing.assert_close(torch.signbit(program(x, s, batch_dims=1)), torch.signbit(x.detach() * s))
    torch.testing.assert_close(program(x, True, batch_dims=1), program(x, 1, batch_dims=1))
    for s in (math.nan, -math.nan, math.nan):  # a NaN's sign too, as the plain call's (the CPU keeps it)
        plain = program(x.detach(), s, batch_dims=1)
        assert torch.equal(torch.signbit(program(x, s, batch_dims=1)), torch.signbit(plain))
        assert torch.signbit(program(x, s, batch_dims=1)).all() == (math.copysign(1.0, s) < 0)


def test_out_under_autograd_is_checked_before_any_is_written():
    pair = tp.program(lambda x: (x * 2, x + 1))
    x = leaf((3, 8), seed=41)
    first = torch.zeros(3, 8, dtype=x.dtype)
    bad = [(dict(out=(first, torch.zeros(2, 8, dtype=x.dtype))), ValueError, r"out\[1\]: shape \(2, 8\) differs"),
           (dict(out=(first, torch.zeros(3, 8, dtype=torch.float32))), TypeError, r"out\[1\]: expected a torch tensor"),
           (dict(out=(first,)), TypeError, r"out: expected a tuple of 2 torch tensors, one per result, not a "
                                           r"tuple of 1")]
    for kwargs, error, message in bad:
        with pytest.raises(error, match=message):
            pair(x, batch_dims=1, **kwargs)
        assert not first.any()
    single = tp.program(lambda x: x * 2)
    with pytest.raises(ValueError, match=r"out: shape \(3, 4, 8\) differs from the result's \(3, 8\)"):
        single(x, batch_dims=1, out=torch.zeros(3, 4, 8, dtype=x.dtype))


def test_second_derivatives_of_a_keepdims_max():
    """The backward of a keepdims max's backward holds maximum(count, 1.0) and eq(1.0, ...): a map
    whose first operand is a scalar after a reduction (it failed to plan with no scope named)."""
    x = leaf((3, 5), seed=42)
    program = tp.program(lambda t: tp.max(t, axes=-1, keepdims=True) * t)
    assert torch.autograd.gradgradcheck(lambda t: program(t, batch_dims=1), (x,))


def test_a_new_float_argument_plans_nothing_again_and_gives_the_constants_gradients(monkeypatch):
    """A float the body only hands to ops is a run-time scalar of the forward and of its derived
    backward: a new value plans neither again (nor registers a torch op), and the results and
    gradients are the bits of the same program with the floats read as constants; gradcheck holds."""
    import tileprim._program.program as program_module
    from tileprim._torch import program_op
    made = []
    plan_program = program_module._C.plan_program
    monkeypatch.setattr(program_module._C, "plan_program", lambda *a: made.append(a[0]) or plan_program(*a))

    def body(x, t, u):
        y = x * t - u
        e = tp.exp(y - tp.max(y, axes=-1, keepdims=True))
        return e / tp.sum(e, axes=-1, keepdims=True) * u

    run_time = tp.program(body)
    constants = tp.program(lambda x, t, u: body(x, t + 0.0, u + 0.0))  # read by Python: constants
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 37, generator=g, requires_grad=True)
    up = torch.randn(5, 37, generator=g)
    for k, (t, u) in enumerate([(0.5, 2.0), (-1.5, 0.25), (3.0, -1.0)]):
        planned = len(made)
        y = run_time(x, t, u, batch_dims=1)
        (gx,) = torch.autograd.grad(y, x, up)
        if k:  # the forward and the backward planned on the first values only
            assert len(made) == planned
        want = constants(x, t, u, batch_dims=1)
        assert torch.equal(y, want) and torch.equal(gx, torch.autograd.grad(want, x, up)[0])
        x64 = x.detach().double().requires_grad_()
        assert torch.autograd.gradcheck(lambda x: run_time(x, t, u, batch_dims=1), (x64,))
    assert not any(op.defined for op in program_op._NAMED.values() if op.program is run_time)
