"""tileprim.nn.CrossEntropyLoss forward and backward on the CPU backend: against float64 torch at
vocabularies 1000, 32000 and 128256 (a few rows), int32 and int64 targets, ignored rows, targets
outside the row (past it or below 0), every reduction; gradcheck in float64; the backward one program
(layers.cross_entropy_backward), the bits of its steps one by one on the forward's row max and sum,
closer to float64 at each row's max than the derived backward, planned in one pass over the row,
never `spilled`."""
import numpy as np
import pytest

import tileprim as tp
from conftest import NP

torch = pytest.importorskip("torch")
tpnn = pytest.importorskip("tileprim.nn")
F = torch.nn.functional

ARCH = "sm_90a"


def targets(g, rows, vocab, index):
    t = torch.randint(0, vocab, (rows,), generator=g)
    t[::5] = -100  # ignored
    return t.to(index)


def float64_loss_and_grad(logits, target, reduction, up):
    wide = logits.detach().double().requires_grad_()
    loss = F.cross_entropy(wide, target.long(), reduction=reduction)
    return loss, torch.autograd.grad(loss, wide, up.double())[0]


def loss_and_grad(logits, target, reduction, up, **options):
    leaf = logits.detach().requires_grad_()
    loss = tpnn.CrossEntropyLoss(reduction=reduction, **options)(leaf, target)
    return loss, torch.autograd.grad(loss, leaf, up.to(loss.dtype))[0]


@pytest.mark.parametrize("vocab,rows", [(1000, 23), (32000, 12), (128256, 3)])
@pytest.mark.parametrize("index", [torch.int32, torch.int64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_and_gradient_match_float64(vocab, rows, index, dtype, reduction):
    g = torch.Generator().manual_seed(vocab + rows)
    logits = (torch.randn(rows, vocab, generator=g) * 4 - 1).to(dtype)
    target = targets(g, rows, vocab, index)
    up = torch.randn(rows if reduction == "none" else (), generator=g)
    loss, grad = loss_and_grad(logits, target, reduction, up)
    want_loss, want_grad = float64_loss_and_grad(logits, target, reduction, up)
    assert loss.dtype == torch.float32 and grad.dtype == dtype and grad.shape == logits.shape
    torch.testing.assert_close(loss.double(), want_loss, rtol=2e-6, atol=2e-6)
    # float32 inside: a few roundings of each element; one more to bfloat16 (half its ulp)
    rounding = 2.0 ** -8 if dtype == torch.bfloat16 else 0.0
    excess = (grad.double() - want_grad).abs() - (2e-6 + rounding) * want_grad.abs() - 1e-12
    assert (excess <= 0).all(), f"worst excess {excess.max().item():.3g}"
    ignored = target == -100
    assert torch.equal(grad[ignored], torch.zeros_like(grad[ignored]))  # no gradient, +0


def test_a_target_outside_the_row_gives_a_nan_loss_and_no_onehot_in_its_gradient():
    """Outside [0, C), not ignored (torch raises): past the row's end or below 0 alike."""
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(4, 50, generator=g)
    target = torch.tensor([3, 50, -51, -1])
    loss, grad = loss_and_grad(logits, target, "none", torch.ones(4))
    assert torch.isnan(loss[1:]).all() and torch.isfinite(loss[0])
    softmax = torch.softmax(logits.double(), 1)
    torch.testing.assert_close(grad[1:].double(), softmax[1:], rtol=1e-6, atol=1e-9)  # nothing subtracted


def test_gradcheck_in_float64():
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(7, 29, generator=g, dtype=torch.float64).requires_grad_()
    for index in (torch.int32, torch.int64):
        target = targets(g, 7, 29, index)
        for reduction in ("mean", "sum", "none"):
            loss = tpnn.CrossEntropyLoss(reduction=reduction)
            assert torch.autograd.gradcheck(lambda v: loss(v, target), (logits,))


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_the_gradient_is_the_bits_of_its_steps_one_by_one(dtype, rng):
    """-g scattered into zeros at the label, plus exp(x - m) * (g / s), each step as its standalone
    op, on the forward's m and s; then one rounding to the logits' dtype."""
    x = (rng.standard_normal((17, 901)) * 3).astype(NP[dtype])
    label = rng.integers(-901, 901, (17, 1))
    label[::4] = -100
    up = rng.standard_normal((17, 1)).astype(np.float32)
    run = dict(batch_dims=1, backend="cpu")
    _, m, s = tp.layers.cross_entropy_for_backward(x, label, -100, **run)
    got = tp.layers.cross_entropy_backward(x, label, -100, m, s, up, **run)
    g = np.where(label != -100, up, np.float32(0))
    xf = x.astype(np.float32)
    softmax_g = tp.mul(tp.exp(tp.sub(xf, m, **run), **run), tp.fdiv(g, s, **run), **run)
    onehot = np.arange(901) == np.where(label < 0, label + 901, label)
    scattered = np.float32(0) + np.where(onehot, -g, np.float32(0))  # +0 + -0: +0, as a sum into zeros
    want = tp.cast(tp.add(scattered, softmax_g, **run), dtype, **run)
    assert got.dtype == x.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))


def test_at_each_rows_max_the_gradient_is_closer_to_float64_than_the_derived_ones():
    """The derived backward of layers.cross_entropy adds the gradient of the row's max, g minus the
    sum of softmax * g (0 exactly, a residue of roundings), to the max's element; the one-program
    backward has no such term: on flat rows the residue dwarfs the max's own gradient."""
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(40, 3000, generator=g) * 0.5
    target = targets(g, 40, 3000, torch.int64)
    up = torch.randn(40, generator=g)
    _, got = loss_and_grad(logits, target, "none", up)
    leaf = logits.clone().requires_grad_()
    rows = tp.layers.cross_entropy(leaf, target[:, None], -100, batch_dims=1, backend="cpu")[:, 0]
    derived, = torch.autograd.grad(rows, leaf, up)
    _, want = float64_loss_and_grad(logits, target, "none", up)
    kept = target != -100
    at_max = torch.arange(40)[kept], logits.argmax(1)[kept]
    new, old = ((x[at_max].double() - want[at_max]).abs() / want[at_max].abs() for x in (got, derived))
    assert new.max() < 1e-6 < old.max(), (new.max(), old.max())


def spied(monkeypatch):
    seen = []
    for name in ("cross_entropy", "cross_entropy_for_backward", "cross_entropy_backward"):
        program = getattr(tp.layers, name)

        def call(*args, _program=program, **kwargs):
            seen.append(_program.__name__)
            return _program(*args, **kwargs)
        monkeypatch.setattr(tp.layers, name, call)
    return seen


def test_the_backward_is_one_program_on_the_forwards_row_max_and_sum(monkeypatch):
    seen = spied(monkeypatch)
    logits = torch.randn(6, 100).requires_grad_()
    tpnn.CrossEntropyLoss()(logits, torch.arange(6) * 7).backward()
    assert seen == ["cross_entropy_for_backward", "cross_entropy_backward"]
    assert logits.grad.shape == (6, 100)


@pytest.mark.parametrize("vocab", [777, 32000])
def test_the_forward_is_cross_entropys_bits(vocab):
    """The same steps, planned alike (the two extra results change no scope or staging)."""
    g = torch.Generator().manual_seed(6)
    logits = (torch.randn(30, vocab, generator=g) * 3).to(torch.bfloat16)
    target = targets(g, 30, vocab, torch.int32)
    label = target[:, None]
    rows, m, s = tp.layers.cross_entropy_for_backward(logits, label, -100, batch_dims=1, backend="cpu")
    assert torch.equal(rows, tp.layers.cross_entropy(logits, label, -100, batch_dims=1, backend="cpu"))
    assert m.shape == s.shape == (30, 1)
    plans = [tp.plan(p, logits, label, -100, batch_dims=1) for p in (tp.layers.cross_entropy,
                                                                     tp.layers.cross_entropy_for_backward)]
    assert plans[0].scope == plans[1].scope and plans[0].staging == plans[1].staging
    assert torch.equal(m[:, 0], logits.float().max(1).values)
    torch.testing.assert_close(s[:, 0].double(), torch.exp(logits.double() - m.double()).sum(1), rtol=1e-6, atol=0)


@pytest.mark.parametrize("vocab", [32000, 128256])
def test_the_backward_plans_one_pass_over_the_row_never_spilled(vocab):
    x = np.zeros((8, vocab), NP["bfloat16"])
    label = np.zeros((8, 1), np.int64)
    one = np.zeros((8, 1), np.float32)
    plan = tp.plan(tp.layers.cross_entropy_backward, x, label, -100, one, one, one[0], batch_dims=1, target=ARCH)
    assert plan.staging == "streamed" and plan.rows["chunks"] > 1, str(plan)
    assert not {s.op for s in plan.steps} & {"sum", "max"}, str(plan)  # one pass: no reduction
    scatter = [s for s in plan.steps if s.op == "scatter_add_along_axis"]
    assert [s.variant for s in scatter] == ["scatter_held"], str(plan)  # the label's one-hot, a chunk at a time
    forward = tp.plan(tp.layers.cross_entropy_for_backward, x, label, -100, batch_dims=1, target=ARCH)
    assert forward.staging in ("streamed", "shared"), str(forward)
