"""torch.func's transforms over tileprim: grad, vjp and jacrev through the ops' own backward (the
custom op's autograd, which torch.func refuses, replaced by a setup_context-style Function), vmap
as one more batch dim, per-sample gradients (vmap of grad), for standalone ops, tile programs and
tp.nn.CrossEntropyLoss. Each result against the plain call's bits or torch's float64 math."""
from __future__ import annotations

import pytest

import tileprim as tp
from conftest import BACKENDS

torch = pytest.importorskip("torch")
func = torch.func


@pytest.fixture(params=BACKENDS)  # a backend's name is its torch device's
def device(request) -> str:
    return request.param


def values(shape, device, dtype=torch.float64, seed=None):
    """Fresh normal values with negatives, a NaN-free random draw (seeded per test)."""
    g = torch.Generator().manual_seed(seed if seed is not None else torch.seed())
    return torch.randn(shape, generator=g, dtype=dtype).to(device)


@pytest.mark.parametrize("op", ["exp", "silu", "sigmoid", "tanh", "sqrt"])
def test_grad_of_a_map_is_its_backward(op, device):
    x = values((5, 7), device).abs() + 0.25 if op == "sqrt" else values((5, 7), device)
    fn = getattr(tp, op)
    got = func.grad(lambda t: fn(t, batch_dims=1).sum())(x)
    leaf = x.clone().requires_grad_()
    fn(leaf, batch_dims=1).sum().backward()
    assert torch.equal(got, leaf.grad)  # the same backward program, the same bits
    want = func.grad(lambda t: getattr(torch, op)(t).sum() if op != "silu" else torch.nn.functional.silu(t).sum())(x)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)


def test_vjp_and_jacrev_of_ops(device):
    x = values((6,), device)
    jac = func.jacrev(lambda t: tp.silu(t))(x)
    s = torch.sigmoid(x)
    torch.testing.assert_close(torch.diagonal(jac), s * (1 + x * (1 - s)), rtol=1e-12, atol=1e-14)
    assert torch.count_nonzero(jac - torch.diag(torch.diagonal(jac))) == 0
    y, pull = func.vjp(lambda t: tp.max(t, axes=-1), values((3, 6), device))
    (g,) = pull(torch.ones_like(y))
    assert torch.equal(g.sum(-1), torch.ones(3, dtype=g.dtype, device=device))  # one arg max a row


@pytest.mark.parametrize("in_dim", [0, 1])
def test_vmap_of_ops_is_one_more_batch_dim(in_dim, device):
    x = values((4, 3, 9), device)
    w = values((9,), device)
    moved = x.movedim(0, in_dim).contiguous()
    assert torch.equal(func.vmap(lambda r: tp.sum(r, axes=-1, batch_dims=1), in_dims=in_dim)(moved),
                       tp.sum(x, axes=-1, batch_dims=2))
    assert torch.equal(func.vmap(lambda r: tp.max(r, axes=(0, 1)), in_dims=in_dim)(moved),
                       tp.max(x, axes=(0, 1), batch_dims=1))  # each sample's whole tile
    assert torch.equal(func.vmap(lambda r: tp.exp(r), in_dims=in_dim)(moved), tp.exp(x))
    assert torch.equal(func.vmap(lambda r: tp.mul(r, w), in_dims=in_dim)(moved), tp.mul(x, w))  # w not vmapped
    assert torch.equal(func.vmap(lambda r: tp.add(w, r))(x), tp.add(w, x))  # the vmapped operand second
    assert torch.equal(func.vmap(lambda v: tp.mul(x[0], v))(w[:, None]), x[0] * w[:, None, None])


def test_vmap_of_a_reduction_into_an_accumulator(device):
    x = values((4, 3, 9), device)
    accs = values((4, 3), device)
    got = func.vmap(lambda r, a: tp.sum(r, axes=-1, batch_dims=1, out=a.clone(), accum=True))(x, accs)
    want = torch.stack([tp.sum(r, axes=-1, batch_dims=1, out=a.clone(), accum=True) for r, a in zip(x, accs)])
    assert torch.equal(got, want)
    with pytest.raises(RuntimeError, match="inplace"):  # one out= for every sample: vmap's own refusal
        func.vmap(lambda r: tp.sum(r, axes=-1, batch_dims=1, out=accs[0].clone(), accum=True))(x)


@tp.program
def scaled_softmax(x, w, t):
    z = x * w * t
    e = tp.exp(z - tp.max(z, axes=-1, keepdims=True))
    return e / tp.sum(e, axes=-1, keepdims=True)


@tp.program
def two_results(x):
    return tp.sum(x, axes=-1, keepdims=True), x * x


def test_vmap_of_a_program_and_per_sample_gradients(device):
    x = values((5, 4, 16), device)
    w = values((16,), device)
    got = func.vmap(lambda r: scaled_softmax(r, w, 0.7, batch_dims=1))(x)
    assert torch.equal(got, scaled_softmax(x, w, 0.7, batch_dims=2))
    s, sq = func.vmap(lambda r: two_results(r, batch_dims=1), in_dims=1)(x.movedim(0, 1).contiguous())
    s2, sq2 = two_results(x, batch_dims=2)
    assert torch.equal(s, s2) and torch.equal(sq, sq2)

    def loss(r):
        return tp.sum(scaled_softmax(r, w, 0.7, batch_dims=1) ** 2, axes=(0, 1))

    per_sample = func.vmap(func.grad(loss))(x)
    for k in range(x.shape[0]):
        leaf = x[k].clone().requires_grad_()
        loss(leaf).backward()
        assert torch.equal(per_sample[k], leaf.grad)
    xs = x.clone().requires_grad_()  # against torch's own math, float64
    want = torch.softmax(xs * w * 0.7, -1)
    (want ** 2).sum().backward()
    torch.testing.assert_close(per_sample, xs.grad, rtol=1e-10, atol=1e-13)


def test_grad_of_the_cross_entropy_loss(device):
    logits = values((6, 11), device)
    target = torch.tensor([3, -100, 0, 10, 5, 5], device=device)
    for reduction in ("mean", "sum"):
        loss = tp.nn.CrossEntropyLoss(reduction=reduction)
        got = func.grad(lambda t: loss(t, target))(logits)
        want = func.grad(lambda t: torch.nn.functional.cross_entropy(t, target, reduction=reduction))(logits)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)
        leaf = logits.clone().requires_grad_()
        loss(leaf, target).backward()
        assert torch.equal(got, leaf.grad)


def test_calls_under_no_grad_and_a_vmapped_out_alone(device):
    """A transform's tensor takes the op's Function with grad mode off too (a row max under no_grad
    inside grad; a Parameter beside a vmapped tensor), and where out= alone is vmapped."""
    x = values((3, 9), device)

    def f(t):
        with torch.no_grad():
            m = tp.max(t, axes=-1, keepdims=True)
        return tp.sum(tp.exp(tp.sub(t, m)), axes=(0, 1))

    leaf = x.clone().requires_grad_()
    f(leaf).backward()
    assert torch.equal(func.grad(f)(x), leaf.grad)
    w = torch.nn.Parameter(values((9,), device))
    with torch.no_grad():
        assert torch.equal(func.vmap(lambda r: tp.mul(r, w))(x), tp.mul(x, w.detach()))
    out = torch.full((4, 9), float("nan"), dtype=x.dtype, device=device)
    func.vmap(lambda o: tp.exp(x[0], out=o))(out)
    assert torch.equal(out, tp.exp(x[0]).expand(4, 9))
    got = func.vmap(lambda a: tp.sum(x, axes=-1, out=a.clone(), accum=True))(values((2, 3), device, seed=7))
    want = torch.stack([tp.sum(x, axes=-1, out=a.clone(), accum=True) for a in values((2, 3), device, seed=7)])
    assert torch.equal(got, want)


def test_vmap_over_zero_dim_samples_says_so(device):
    with pytest.raises(ValueError, match=r"exp: under vmap each sample is 0-d \(one value\), not a tile"):
        func.vmap(tp.exp)(values((5,), device))


@tp.program
def with_a_lower_rank_tile(x, w):  # x a (4, 9) tile, w a (9,) one
    return x * tp.sum(w, axes=0), w * 2.0


def test_vmap_of_a_program_over_a_tile_of_lower_rank(device):
    """A vmapped argument whose sample has fewer dims than the program's tile is a tile of its own
    rank, which one more batch dim would not keep: sample by sample, each the plain call's bits."""
    x, ws = values((4, 9), device), values((3, 9), device)
    got = func.vmap(lambda w: with_a_lower_rank_tile(x, w))(ws)
    want = [torch.stack(r) for r in zip(*(with_a_lower_rank_tile(x, w) for w in ws))]
    assert all(torch.equal(g, w) for g, w in zip(got, want)) and got[1].shape == (3, 9)
    xs = values((3, 4, 9), device)
    got = func.vmap(with_a_lower_rank_tile)(xs, ws)
    want = [torch.stack(r) for r in zip(*(with_a_lower_rank_tile(a, w) for a, w in zip(xs, ws)))]
    assert all(torch.equal(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_second_derivatives_of_the_cross_entropy_loss(reduction, device):
    """Its backward differentiated in turn (torch.func, create_graph): the rows' max and sum made
    again from the logits, so the Hessian is torch's."""
    logits = values((4, 5), device)
    target = torch.tensor([3, -100, 0, 4], device=device)
    loss = tp.nn.CrossEntropyLoss(reduction=reduction)

    def ours(t):
        return loss(t, target).sum()

    def theirs(t):
        return torch.nn.functional.cross_entropy(t, target, reduction=reduction).sum()

    torch.testing.assert_close(func.jacrev(func.jacrev(ours))(logits), func.jacrev(func.jacrev(theirs))(logits),
                               rtol=1e-10, atol=1e-13)
    torch.testing.assert_close(func.grad(lambda t: (func.grad(ours)(t) ** 2).sum())(logits),
                               func.grad(lambda t: (func.grad(theirs)(t) ** 2).sum())(logits), rtol=1e-10, atol=1e-13)
    assert torch.autograd.gradgradcheck(ours, (logits.clone().requires_grad_(),))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_vmap_of_the_cross_entropy_loss_and_per_sample_gradients(reduction, device):
    """Each sample's rows as rows of one call, then each sample's reduction: the per-sample loop's
    bits, and through vmap of grad its gradients (an ignored row included)."""
    logits = values((6, 3, 7), device)
    target = torch.randint(0, 7, (6, 3), generator=torch.Generator().manual_seed(3)).to(device)
    target[1, 2] = -100
    loss = tp.nn.CrossEntropyLoss(reduction=reduction)
    got = func.vmap(loss)(logits, target)
    assert torch.equal(got, torch.stack([loss(x, y) for x, y in zip(logits, target)]))
    if reduction != "none":
        per_sample = func.vmap(func.grad(loss))(logits, target)
        for x, y, g in zip(logits, target, per_sample):
            leaf = x.clone().requires_grad_()
            loss(leaf, y).backward()
            assert torch.equal(g, leaf.grad)
            torch.testing.assert_close(g, func.grad(lambda t: torch.nn.functional.cross_entropy(
                t, y, reduction=reduction))(x), rtol=1e-12, atol=1e-14)


def test_forward_mode_over_ops_is_the_transposed_backward(device):
    """jvp / jacfwd of a standalone op: each backward rule applied to a tangent, max's ties averaged
    (the even split transposed): jacfwd equals jacrev; hessian equals jacrev of jacrev."""
    x = values((3, 5), device)
    x[1, 0] = x[1, 3] = x[1].max() + 1.0  # a tie for a row's max
    w = values((5,), device)
    acc = values((3,), device)
    cases = [lambda t: tp.silu(t), lambda t: tp.mul(t, w), lambda t: tp.add(w, t), lambda t: tp.fma(t, t, w),
             lambda t: tp.sum(t, axes=-1, batch_dims=1), lambda t: tp.max(t, axes=-1, batch_dims=1),
             lambda t: tp.min(t, axes=(0, 1)), lambda t: tp.where(tp.gt(t, 0.0), t, tp.exp(t)),
             lambda t: tp.max(t, axes=-1, batch_dims=1, out=acc.clone(), accum=True)]
    for f in cases:
        torch.testing.assert_close(func.jacfwd(f)(x), func.jacrev(f)(x), rtol=1e-12, atol=1e-14)
    _, tangent = func.jvp(lambda t: tp.max(t, axes=-1, batch_dims=1), (x,), (torch.ones_like(x),))
    assert torch.equal(tangent, torch.ones(3, dtype=x.dtype, device=device))
    y, tangent = func.jvp(lambda t: tp.cast(t, "float32"), (x,), (x,))
    assert tangent.dtype == y.dtype == torch.float32 and torch.equal(tangent, y)

    def energy(t):
        return tp.sum(tp.mul(tp.exp(t), t), axes=(0, 1))

    torch.testing.assert_close(func.hessian(energy)(x), func.jacrev(func.jacrev(energy))(x), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(func.hessian(energy)(x), func.hessian(lambda t: (torch.exp(t) * t).sum())(x),
                               rtol=1e-12, atol=1e-13)


def test_forward_mode_over_a_program_says_it_is_not_supported(device):
    with pytest.raises(NotImplementedError, match="jvp"):
        func.jacfwd(lambda t: scaled_softmax(t, t[0], 0.5, batch_dims=1))(values((2, 4), device))
