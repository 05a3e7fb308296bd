"""Backward passes of tileprim's ops: gradcheck (float64) for every op on the CPU backend, ties of
max/min/maximum split evenly as torch.amax / torch.maximum do, and second derivatives through
the same custom ops."""
from __future__ import annotations

import pytest

import tileprim as tp
from conftest import cuda_usable

torch = pytest.importorskip("torch")

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu,
                                           pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]),
]


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


def leaf(shape, device, low=-3.0, high=3.0, seed=None):
    """Fresh float64 values in [low, high) with negatives, apart enough that no two tie."""
    g = torch.Generator().manual_seed(seed if seed is not None else torch.seed())
    x = torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low
    return x.to(device).requires_grad_()


def cases(device):
    b = dict(backend=device)
    idx = torch.tensor([[6, -7], [3, 3], [0, 2]], device=device)  # a repeat, a negative index
    pos = dict(low=0.25, high=4.0)
    unary = {"sqrt": pos, "rsqrt": pos, "log": pos, "log2": pos, "reciprocal": pos,
             "exp": {}, "exp2": {}, "silu": {}, "tanh": {}, "erf": {}, "sigmoid": {}, "zero": {}}
    if device == "cpu":  # copy has no CUDA executor until programs run fused on the GPU (issue 31)
        unary["copy"] = {}
    out = [(op, lambda x, op=op: getattr(tp, op)(x, batch_dims=1, **b), [(3, 7, kw)]) for op, kw in unary.items()]
    out += [(op, lambda x, y, op=op: getattr(tp, op)(x, y, batch_dims=1, **b), [(3, 7, {}), (3, 7, {})])
            for op in ("add", "sub", "mul", "maximum", "eq", "ne", "lt", "le", "gt", "ge")]
    out += [("fdiv", lambda x, y: tp.fdiv(x, y, **b), [(3, 7, {}), (3, 7, pos)]),
            ("add broadcast", lambda x, r: tp.add(x, r, batch_dims=1, **b), [(3, 7, {}), (7, {})]),
            ("mul scalar", lambda x: tp.mul(-1.75, x, **b), [(3, 7, {})]),
            ("fma", lambda x, y, z: tp.fma(x, y, z, **b), [(3, 7, {})] * 3),
            ("where", lambda c, x, y: tp.where(tp.gt(c, 0.0, **b), x, y, **b), [(3, 7, {})] * 3),
            ("where scalar", lambda c, x: tp.where(c, x, 0.0, batch_dims=1, **b), [(3, 7, {})] * 2),
            ("take_along_axis", lambda x: tp.take_along_axis(x, idx, batch_dims=1, **b), [(3, 7, {})]),
            ("scatter_add_along_axis", lambda x, s: tp.scatter_add_along_axis(x, idx, s, batch_dims=1, **b),
             [(3, 7, {}), (3, 2, {})]),
            ("fma scalar broadcast", lambda x, r: tp.fma(x, 0.5, r, batch_dims=1, **b), [(3, 7, {}), (7, {})]),
            ("fill", lambda x: tp.fill(x, 2.5, **b), [(3, 7, {})]),
            ("cast", lambda x: tp.cast(x, "float64", **b), [(3, 7, {})]),
            ("cast through float32", lambda x: tp.cast(tp.cast(x, "float32", **b), "float64", **b), [(3, 7, {})])]
    for op in ("sum", "max", "min"):
        out += [(f"{op} rows", lambda x, op=op: getattr(tp, op)(x, batch_dims=1, **b), [(3, 7, {})]),
                (f"{op} all", lambda x, op=op: getattr(tp, op)(x, axes=(0, 1), **b), [(3, 7, {})]),
                (f"{op} columns", lambda x, op=op: getattr(tp, op)(x, axes=0, batch_dims=1, **b), [(2, 3, 5, {})]),
                (f"{op} keepdims", lambda x, op=op: getattr(tp, op)(x, batch_dims=1, keepdims=True, **b), [(3, 7, {})])]
    return out


def test_gradcheck_every_op(device):
    """float64 central differences against each backward; cast also by float64 -> float32 -> float64
    (gradcheck needs float64 ends), with steps float32's rounding does not swamp."""
    names = set()
    for name, fn, shapes in cases(device):
        names.add(name.split()[0])
        inputs = tuple(leaf(s[:-1], device, **s[-1]) for s in shapes)
        tol = dict(eps=1e-2, atol=1e-4, rtol=1e-4) if name == "cast through float32" else {}
        assert torch.autograd.gradcheck(fn, inputs, **tol), name
    assert names == set(tp._OPS) - ({"copy"} if device != "cpu" else set())


def test_ties_split_the_gradient_evenly_as_amax_and_maximum_do(device):
    x = torch.tensor([[1.0, 3.0, 3.0, -2.0, 3.0], [-1.0, -1.0, -4.0, 0.5, 0.25]], dtype=torch.float64,
                     device=device, requires_grad=True)
    w = torch.tensor([2.0, -5.0], dtype=torch.float64, device=device)
    for op, reference in (("max", torch.amax), ("min", torch.amin)):
        got, = torch.autograd.grad((getattr(tp, op)(x, batch_dims=1, backend=device) * w).sum(), x)
        expected, = torch.autograd.grad((reference(x, dim=-1) * w).sum(), x)
        assert torch.equal(got, expected), op
    a = x.detach().clone().requires_grad_()
    b = torch.tensor([[1.0, 0.0, 3.0, -2.0, 7.0]] * 2, dtype=torch.float64, device=device, requires_grad=True)
    got = torch.autograd.grad(tp.maximum(a, b, backend=device).sum(), (a, b))
    expected = torch.autograd.grad(torch.maximum(a, b).sum(), (a, b))
    assert all(torch.equal(g, e) for g, e in zip(got, expected))


def test_a_maximum_whose_operands_both_need_a_gradient_makes_its_tie_masks_once(monkeypatch):
    """Both operands' shares read the same masks and count: one backward runs each map once."""
    from tileprim._opspec import table as _op_table
    calls = []
    eq = _op_table.OPS["eq"]
    monkeypatch.setitem(_op_table.OPS, "eq", lambda *args, **kw: calls.append(1) or eq(*args, **kw))
    a, b = leaf((4, 6), "cpu", seed=3), leaf((4, 6), "cpu", seed=4)
    with torch.no_grad():
        b[0, :3] = a[0, :3]  # ties too
    ga, gb = torch.autograd.grad(tp.maximum(a, b, backend="cpu").sum(), (a, b))
    assert len(calls) == 2  # a == y and b == y, not again for b's share
    want = torch.autograd.grad(torch.maximum(a, b).sum(), (a, b))
    assert torch.equal(ga, want[0]) and torch.equal(gb, want[1])


def test_nan_loses_max_and_passes_no_gradient(device):
    x = torch.tensor([[float("nan"), 2.0, -1.0], [float("nan")] * 3], dtype=torch.float64, device=device,
                     requires_grad=True)
    r = tp.max(x, batch_dims=1, backend=device)
    g, = torch.autograd.grad(r.nansum(), x)
    assert torch.equal(g.cpu(), torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64))


def test_second_derivatives_run_through_the_custom_ops(device):
    x = leaf((4, 6), device, low=0.5, high=2.0)
    assert torch.autograd.gradgradcheck(lambda t: tp.mul(tp.exp(t, backend=device), t, backend=device), (x,))
    assert torch.autograd.gradgradcheck(lambda t: tp.sqrt(t, batch_dims=1, backend=device), (x,))


def test_grad_off_or_detached_takes_the_direct_path_and_asks_no_gradient(device):
    x = leaf((4, 6), device)
    with torch.no_grad():
        r = tp.exp(x, backend=device)
    assert not r.requires_grad and r.grad_fn is None
    assert tp.sum(x.detach(), batch_dims=1, backend=device).grad_fn is None


@pytest.mark.parametrize("scope", [tp.warp, tp.cta(32)], ids=["warp", "cta32"])
def test_backward_of_a_call_at_a_wider_scope(device, scope):
    """The tie count reduces as the forward did; the maps run a row per thread."""
    x = leaf((6, 64), device)
    x.data[2, 5:9] = x.data[2].max()  # ties
    for op, reference in (("sum", torch.sum), ("max", torch.amax)):
        got, = torch.autograd.grad(getattr(scope, op)(x, batch_dims=1, backend=device).sum(), x)
        expected, = torch.autograd.grad(reference(x, -1).sum(), x)
        assert torch.equal(got, expected), op
