"""tileprim.layers (GELU both forms, SwiGLU's and GeGLU's products, LayerNorm, RMSNorm, the
cross-entropy over a vocabulary) on the CPU backend against float64, with no scope named where a
thread holds the row; their derived backward against torch's (gradcheck in float64); the
cross-entropy at vocabularies of 1000, 32000 and 50257 with int32 and int64 labels and ignored
rows; and tileprim.nn's modules as drop-in replacements of torch's."""
import inspect
import math

import numpy as np
import pytest

import tileprim as tp
from conftest import NP, bits_equal, finfo

torch = pytest.importorskip("torch")
F = torch.nn.functional
tpnn = pytest.importorskip("tileprim.nn")

WIDE = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "float64": "float64"}


def gelu64(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def assert_close(got, want64, dtype, cancels=None, rows=1.0):
    """Within one rounding to dtype and the computing dtype's few ulps (times `rows` for sums over
    a row) relative; where the formula cancels, also an ulp of the computing dtype times `cancels`."""
    got = np.asarray(got)
    assert got.dtype == NP[dtype]
    wide = float(finfo(WIDE[dtype]).eps)
    bound = (float(finfo(dtype).eps) / 2 + 4 * wide * rows) * np.abs(want64)
    if cancels is not None:
        bound = bound + 2 * wide * np.abs(cancels)
    assert np.all(np.abs(got.astype(np.float64) - want64) <= bound + float(finfo(dtype).smallest_subnormal))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_elementwise_layers_against_float64(dtype, rng):
    a = (rng.standard_normal((64, 24)) * 3).astype(NP[dtype])
    b = rng.standard_normal((64, 24)).astype(NP[dtype])
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    tiles = dict(batch_dims=1, backend="cpu")
    assert_close(tp.layers.gelu_erf(a, **tiles), gelu64(a64, "none"), dtype, cancels=a64)
    assert_close(tp.layers.gelu_tanh(a, **tiles), gelu64(a64, "tanh"), dtype, cancels=a64)
    assert_close(tp.layers.silu_mul(a, b, **tiles), a64 / (1 + np.exp(-a64)) * b64, dtype)
    assert_close(tp.layers.gelu_tanh_mul(a, b, **tiles), gelu64(a64, "tanh") * b64, dtype, cancels=a64 * b64)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_norms_against_float64(dtype, rng):
    n = 301  # odd, a thread's row: no scope named
    x = (rng.standard_normal((40, n)) * 2 + 0.75).astype(NP[dtype])
    w = rng.uniform(0.5, 1.5, n).astype(NP[dtype])
    b = rng.standard_normal(n).astype(NP[dtype])
    x64, w64, b64 = (t.astype(np.float64) for t in (x, w, b))
    centred = x64 - x64.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt((centred ** 2).mean(-1, keepdims=True) + 1e-5)
    got = tp.layers.layer_norm(x, w, b, 1e-5, batch_dims=1, backend="cpu")
    # the mean's rounding reaches every element of its row; b + the normalized row can cancel
    mean = np.abs(x64).mean(-1, keepdims=True)
    assert_close(got, centred * rstd * w64 + b64, dtype, cancels=n * (np.abs(x64) + mean) * rstd * w64 + np.abs(b64),
                 rows=n)
    ms = (x64 ** 2).mean(-1, keepdims=True)
    assert_close(tp.layers.rms_norm(x, w, 1e-6, batch_dims=1, backend="cpu"), x64 / np.sqrt(ms + 1e-6) * w64, dtype,
                 rows=n)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("n", [16, 1000, 4097])
def test_layer_norm_of_constant_rows_is_its_bias(dtype, n, rng):
    """A constant row centres to exactly 0 whatever its magnitude, as torch's (the float64 answer):
    the rounded mean alone left one ulp of 1e10, and rsqrt of its square made it +-1."""
    values = np.array([1e10, -3e19, 7.25e5, -1.0, 0.1], np.float64)[:, None] * np.ones((1, n))
    x = values.astype(NP[dtype])
    b = rng.standard_normal(n).astype(NP[dtype])
    got = tp.layers.layer_norm(x, rng.uniform(0.5, 1.5, n).astype(NP[dtype]), b, 1e-5, batch_dims=1, backend="cpu")
    np.testing.assert_array_equal(got, np.broadcast_to(b, got.shape))


def cross_entropy64(x, label, ignore_index):
    x64 = x.astype(np.float64)
    m = x64.max(-1, keepdims=True)
    lse = np.log(np.exp(x64 - m).sum(-1)) + m[:, 0]
    picked = np.take_along_axis(x64, np.clip(label, 0, x.shape[1] - 1)[:, None].astype(np.int64), 1)[:, 0]
    return np.where(label == ignore_index, 0.0, lse - picked)


VOCABULARIES = [  # no scope named: the planner's (rows of 50257 padded over a CTA), and one named
    pytest.param(1000, None, id="1000"),
    pytest.param(32000, None, id="32000"),
    pytest.param(32000, tp.cta(256), id="32000-cta256"),
    pytest.param(50257, None, id="50257"),
]


@pytest.mark.parametrize("vocab,scope", VOCABULARIES)
@pytest.mark.parametrize("index", ["int32", "int64"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_cross_entropy_over_a_vocabulary(vocab, scope, index, dtype, rng):
    rows = 24
    x = (rng.standard_normal((rows, vocab)) * 4).astype(NP[dtype])
    label = rng.integers(-vocab, vocab, rows).astype(index)  # negative labels count from the end, as NumPy's
    label[::5] = -100  # ignored
    label[3] = vocab  # outside the row: NaN, never a read past it
    label[4] = -vocab - 1
    got = tp.layers.cross_entropy(x, label[:, None], -100, batch_dims=1, scope=scope, backend="cpu")
    assert got.shape == (rows, 1) and got.dtype == np.float32
    got = got[:, 0]
    assert np.isnan(got[[3, 4]]).all() and np.all(got[::5] == 0)
    kept = np.ones(rows, bool)
    kept[[3, 4]] = False
    want = cross_entropy64(x, np.where(label < 0, np.where(label == -100, label, label + vocab), label), -100)
    assert np.max(np.abs(got[kept] - want[kept])) <= 2e-6 * np.max(np.abs(want))


def test_cross_entropy_of_a_row_a_batch_shares_and_of_one_label():
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    labels = np.array([[0], [2], [-100], [-1]])
    got = tp.layers.cross_entropy(x[0], labels, -100, batch_dims=1, backend="cpu")[:, 0]
    lse = np.log(np.exp([1.0, 2.0, 3.0]).sum())
    np.testing.assert_allclose(got, [lse - 1, lse - 3, 0, lse - 3], rtol=1e-6)


LAYER_CASES = {
    "gelu_erf": (lambda x: tp.layers.gelu_erf(x, batch_dims=1, backend="cpu"), lambda x: F.gelu(x), 1),
    "gelu_tanh": (lambda x: tp.layers.gelu_tanh(x, batch_dims=1, backend="cpu"),
                  lambda x: F.gelu(x, approximate="tanh"), 1),
    "silu_mul": (lambda a, b: tp.layers.silu_mul(a, b, batch_dims=1, backend="cpu"), lambda a, b: F.silu(a) * b, 2),
    "gelu_tanh_mul": (lambda a, b: tp.layers.gelu_tanh_mul(a, b, batch_dims=1, backend="cpu"),
                      lambda a, b: F.gelu(a, approximate="tanh") * b, 2),
}


@pytest.mark.parametrize("name", list(LAYER_CASES))
def test_elementwise_layers_gradients_are_torchs(name):
    ours, theirs, arity = LAYER_CASES[name]
    g = torch.Generator().manual_seed(5)
    args = [(torch.rand((6, 16), generator=g, dtype=torch.float64) * 6 - 3).requires_grad_() for _ in range(arity)]
    assert torch.autograd.gradcheck(ours, args)
    up = torch.randn((6, 16), generator=g, dtype=torch.float64)
    got = torch.autograd.grad(ours(*args), args, up)
    want = torch.autograd.grad(theirs(*args), args, up)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)


def test_norm_and_cross_entropy_gradients_are_torchs():
    g = torch.Generator().manual_seed(6)
    x = (torch.randn((5, 33), generator=g, dtype=torch.float64) * 2 + 0.5).requires_grad_()
    w = (torch.rand(33, generator=g, dtype=torch.float64) + 0.5).requires_grad_()
    b = torch.randn(33, generator=g, dtype=torch.float64).requires_grad_()
    layer_norm = lambda x, w, b: tp.layers.layer_norm(x, w, b, 1e-5, batch_dims=1, backend="cpu")  # noqa: E731
    rms_norm = lambda x, w: tp.layers.rms_norm(x, w, 1e-6, batch_dims=1, backend="cpu")  # noqa: E731
    assert torch.autograd.gradcheck(layer_norm, (x, w, b))
    assert torch.autograd.gradcheck(rms_norm, (x, w))
    up = torch.randn((5, 33), generator=g, dtype=torch.float64)
    got = torch.autograd.grad(layer_norm(x, w, b), (x, w, b), up)
    want = torch.autograd.grad(F.layer_norm(x, (33,), w, b, 1e-5), (x, w, b), up)
    for a, c in zip(got, want):
        torch.testing.assert_close(a, c, rtol=1e-12, atol=1e-12)
    logits = torch.randn((9, 41), generator=g, dtype=torch.float64).requires_grad_()
    for index in (torch.int32, torch.int64):
        target = torch.randint(0, 41, (9,), generator=g).to(index)
        target[[2, 5]] = -100
        loss = tpnn.CrossEntropyLoss()
        assert torch.autograd.gradcheck(lambda v: loss(v, target), (logits,))
        got, = torch.autograd.grad(loss(logits, target), logits)
        want, = torch.autograd.grad(F.cross_entropy(logits, target.long()), logits)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)
        assert torch.equal(got[[2, 5]], torch.zeros(2, 41, dtype=torch.float64))  # ignored rows: no gradient


def test_modules_replace_torchs_and_llamas(rng):
    torch.manual_seed(7)
    x = torch.randn(3, 5, 64)
    gelu = tpnn.GELU("tanh")
    torch.testing.assert_close(gelu(x), F.gelu(x, approximate="tanh"), rtol=2e-6, atol=1e-6)
    torch.testing.assert_close(tpnn.GELU()(x[..., :7]), F.gelu(x[..., :7]), rtol=2e-6, atol=1e-6)  # 105 elements
    norm = tpnn.LayerNorm(64)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_()
    torch.testing.assert_close(norm(x), F.layer_norm(x, (64,), norm.weight, norm.bias), rtol=1e-5, atol=1e-5)
    plain = tpnn.LayerNorm(64, elementwise_affine=False)
    assert plain.weight is None and not list(plain.parameters())
    torch.testing.assert_close(plain(x), F.layer_norm(x, (64,)), rtol=1e-5, atol=1e-5)
    rms = tpnn.RMSNorm(64, eps=1e-6)
    assert list(rms.state_dict()) == ["weight"] and rms.variance_epsilon == 1e-6
    torch.testing.assert_close(rms(x), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), rtol=1e-5,
                               atol=1e-6)
    default_eps = tpnn.RMSNorm(64, eps=None)  # torch.nn.RMSNorm's None: the dtype's machine epsilon
    torch.testing.assert_close(default_eps(x), torch.nn.RMSNorm(64, eps=None)(x), rtol=1e-5, atol=1e-6)
    for module in (tpnn.RMSNorm, tpnn.LayerNorm):
        with pytest.raises(TypeError, match="eps: expected a float"):
            module(64, eps="1e-5")
    assert "bias=False" in repr(tpnn.LayerNorm(64, bias=False))
    mlp = tpnn.SwiGLUMLP(64, 172)
    assert sorted(mlp.state_dict()) == ["down_proj.weight", "gate_proj.weight", "up_proj.weight"]  # LlamaMLP's
    eager = mlp.down_proj(F.silu(mlp.gate_proj(x)) * mlp.up_proj(x))
    torch.testing.assert_close(mlp(x), eager, rtol=1e-5, atol=1e-5)
    logits, target = torch.randn(10, 30), torch.randint(0, 30, (10,))
    target[0] = -100
    for reduction in ("mean", "sum", "none"):
        torch.testing.assert_close(tpnn.CrossEntropyLoss(reduction=reduction)(logits, target),
                                   F.cross_entropy(logits, target, reduction=reduction), rtol=1e-5, atol=1e-6)
    # the mean and the sum are tileprim's (one order on every backend), not torch's sum of the rows
    from tileprim._torch.sum_to import sum_to
    rows = tpnn.CrossEntropyLoss(reduction="none")(logits, target)
    assert torch.equal(tpnn.CrossEntropyLoss(reduction="sum")(logits, target), sum_to(rows, ()))
    assert torch.equal(tpnn.CrossEntropyLoss()(logits, target), sum_to(rows, ()) / 9)
    half = logits.bfloat16().requires_grad_()  # the loss in float32, as Hugging Face's (not the logits' dtype)
    for reduction in ("mean", "none"):
        loss = tpnn.CrossEntropyLoss(reduction=reduction)(half, target)
        assert loss.dtype == torch.float32
        torch.testing.assert_close(loss, F.cross_entropy(half.float(), target, reduction=reduction), rtol=1e-5,
                                   atol=1e-6)
        grad, = torch.autograd.grad(loss.sum(), half)
        assert grad.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="reduction: 'max' is not"):
        tpnn.CrossEntropyLoss(reduction="max")
    with pytest.raises(ValueError, match=r"input, target: expected logits \(N, C\)"):
        tpnn.CrossEntropyLoss()(logits, target[:5])
    with pytest.raises(ValueError, match="approximate: 'fast' is not"):
        tpnn.GELU("fast")


def test_modules_take_torchs_arguments_in_torchs_order_and_refuse_what_they_do_not_do():
    """A drop-in takes torch's signature: CrossEntropyLoss(weight, size_average, ignore_index, reduce,
    reduction, label_smoothing), refusing class weights, the deprecated pair and smoothing by name
    (not taking a weight tensor for ignore_index); torch's narrow targets (uint8) are class indices;
    LayerNorm keeps elementwise_affine; a 0-d input is refused naming it."""
    torch_names = list(inspect.signature(torch.nn.CrossEntropyLoss).parameters)
    assert list(inspect.signature(tpnn.CrossEntropyLoss).parameters)[:len(torch_names)] == torch_names
    assert tpnn.CrossEntropyLoss(None, None, 3, None, "sum").ignore_index == 3
    for kwargs, rule in [(dict(weight=torch.ones(10)), "weight: class weights are not supported"),
                         (dict(size_average=True), "size_average, reduce: torch's deprecated pair"),
                         (dict(reduce=False), "size_average, reduce: torch's deprecated pair"),
                         (dict(label_smoothing=0.1), "label_smoothing: 0.1; label smoothing is not supported")]:
        with pytest.raises(ValueError, match="^" + rule):
            tpnn.CrossEntropyLoss(**kwargs)
    with pytest.raises(ValueError, match="^weight: class weights"):
        tpnn.CrossEntropyLoss(torch.ones(10))
    for bad in (-100.5, "a", True):
        with pytest.raises(TypeError, match="^ignore_index: expected an int class index"):
            tpnn.CrossEntropyLoss(ignore_index=bad)
    logits, target = torch.randn(6, 11), torch.tensor([0, 3, 10, 7, 7, 1])
    want = F.cross_entropy(logits, target)
    torch.testing.assert_close(tpnn.CrossEntropyLoss()(logits, target.to(torch.uint8)), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="^input: expected float logits, not torch.int64"):
        tpnn.CrossEntropyLoss()(torch.arange(66).reshape(6, 11), target)
    assert tpnn.LayerNorm(8).elementwise_affine and not tpnn.LayerNorm(8, elementwise_affine=False).elementwise_affine
    assert "elementwise_affine=True" in repr(tpnn.LayerNorm(8))
    with pytest.raises(ValueError, match="^input: a 0-d tensor has no last dim"):
        tpnn.LayerNorm(1)(torch.tensor(1.0))
    empty = torch.randn(3, 0, requires_grad=True)  # rows of no elements: torch's empty result
    assert tpnn.LayerNorm(0)(empty).shape == (3, 0) and tpnn.RMSNorm(0)(empty).shape == (3, 0)


def test_a_16_bit_layer_gives_the_bits_of_its_steps_one_by_one(rng):
    """A program's steps round as their standalone ops: GELU (tanh) of bfloat16 is the chain of calls."""
    x = (rng.standard_normal((32, 8)) * 3).astype(NP["bfloat16"])
    got = tp.layers.gelu_tanh(x, batch_dims=1, backend="cpu")
    xf = tp.cast(x, "float32")
    inner = tp.mul(tp.fma(tp.mul(xf, 0.044715), tp.mul(xf, xf), xf), 2 * math.sqrt(2 / math.pi))
    chain = tp.cast(tp.mul(xf, tp.sigmoid(inner)), "bfloat16")
    assert bits_equal(got, chain)


MODULES = {  # each module's maker and its inputs (float leaves get gradients)
    "GELU-none": (lambda **k: tpnn.GELU(**k), 1),
    "GELU-tanh": (lambda **k: tpnn.GELU("tanh", **k), 1),
    "SiLUMul": (lambda **k: tpnn.SiLUMul(**k), 2),
    "GELUMul": (lambda **k: tpnn.GELUMul(**k), 2),
    "SwiGLUMLP": (lambda **k: tpnn.SwiGLUMLP(48, 40, **k), 1),
    "GEGLUMLP": (lambda **k: tpnn.GEGLUMLP(48, 40, bias=True, **k), 1),
    "LayerNorm": (lambda **k: tpnn.LayerNorm(48, **k), 1),
    "RMSNorm": (lambda **k: tpnn.RMSNorm(48, **k), 1),
    "CrossEntropyLoss": (lambda **k: tpnn.CrossEntropyLoss(**k), None),
}


def module_inputs(name, arity, dtype, g):
    if arity is None:  # logits and labels, some ignored
        target = torch.randint(0, 48, (24,), generator=g)
        target[::5] = -100
        return [(torch.randn(24, 48, generator=g) * 4).to(dtype), target]
    return [(torch.randn(4, 6, 48, generator=g) * 3 - 0.5).to(dtype) for _ in range(arity)]


def forward_backward(module, inputs):
    leaves = [t.detach().requires_grad_(t.is_floating_point()) for t in inputs]
    y = module(*leaves)
    params = list(module.parameters())
    wanted = [t for t in leaves if t.requires_grad] + params
    grads = torch.autograd.grad(y, wanted, torch.randn(y.shape, generator=torch.Generator().manual_seed(9)).to(y.dtype))
    return [y, *grads]


@pytest.mark.parametrize("name", list(MODULES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_modules_take_fastmath_and_the_cpu_backend_gives_the_exact_bits(name, dtype):
    """DESIGN §3: the CPU backend runs the exact functions under fastmath, forward and backward."""
    make, arity = MODULES[name]
    g = torch.Generator().manual_seed(10)
    exact = make().to(dtype)
    with torch.no_grad():
        for p in exact.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5 + 1)
    fast = make(fastmath=True).to(dtype)
    fast.load_state_dict(exact.state_dict())
    assert "fastmath=False" in repr(exact) and "fastmath=True" in repr(fast)
    inputs = module_inputs(name, arity, dtype, g)
    for a, b in zip(forward_backward(exact, inputs), forward_backward(fast, inputs)):
        assert a.dtype == b.dtype and torch.equal(a.view(torch.int16 if a.dtype == torch.bfloat16 else torch.int32),
                                                  b.view(torch.int16 if b.dtype == torch.bfloat16 else torch.int32))


@pytest.mark.parametrize("name", list(MODULES))
def test_a_modules_fastmath_is_keyword_only_true_or_false(name):
    make, _ = MODULES[name]
    cls = type(make())
    param = inspect.signature(cls).parameters["fastmath"]
    assert param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is False
    for bad in ("yes", 1, None, 0.0):
        with pytest.raises(TypeError, match=r"fastmath: expected True or False, not"):
            make(fastmath=bad)


def test_modules_pass_fastmath_to_their_programs(monkeypatch):
    """The bits above cannot tell whether fastmath reached the programs (the CPU's are exact either
    way): each program call is seen here with the module's fastmath."""
    seen = []

    def spy(program):
        def call(*args, **kwargs):
            seen.append((program.__name__, kwargs["fastmath"]))
            return program(*args, **kwargs)
        return call
    for name in ("gelu_erf", "gelu_tanh", "layer_norm", "rms_norm", "cross_entropy_for_backward",
                 "cross_entropy_backward"):
        monkeypatch.setattr(tp.layers, name, spy(getattr(tp.layers, name)))
    for cls in (tpnn.SiLUMul, tpnn.GELUMul):
        monkeypatch.setattr(cls, "program", staticmethod(spy(cls.program)))
    g = torch.Generator().manual_seed(11)
    for fastmath in (True, False):
        seen.clear()
        for name, (make, arity) in MODULES.items():
            inputs = module_inputs(name, arity, torch.float32, g)
            if arity is None:  # the loss's backward is a program of its own
                inputs[0].requires_grad_()
            y = make(fastmath=fastmath)(*inputs)
            if arity is None:
                y.backward()
        assert sorted(n for n, _ in seen) == sorted(["gelu_erf", "gelu_tanh", "silu_mul", "gelu_tanh_mul", "silu_mul",
                                                     "gelu_tanh_mul", "layer_norm", "rms_norm",
                                                     "cross_entropy_for_backward", "cross_entropy_backward"])
        assert all(f is fastmath for _, f in seen), seen


def test_a_training_step_of_the_modules_compiles_with_dynamic_shapes(rng):
    """torch.compile(fullgraph=True) over the modules, Dynamo's dynamic shapes from the second batch
    on (a sequence length that varies, as in training): no graph break, the loss and the gradients
    eager's bits."""
    from torch._dynamo.utils import counters
    torch.manual_seed(5)
    hidden, vocab = 48, 100
    mods = torch.nn.ModuleDict(dict(norm=tpnn.RMSNorm(hidden), ln=tpnn.LayerNorm(hidden),
                                    gelu=tpnn.GELU(approximate="tanh"), silu_mul=tpnn.SiLUMul(),
                                    mlp=tpnn.SwiGLUMLP(hidden, 64), geglu=tpnn.GEGLUMLP(hidden, 64),
                                    head=torch.nn.Linear(hidden, vocab))).double()
    loss = tpnn.CrossEntropyLoss()

    def step(x, y):
        h = mods["mlp"](mods["norm"](x)) + mods["ln"](x) + mods["gelu"](x) + mods["silu_mul"](x, x) + mods["geglu"](x)
        return loss(mods["head"](h).reshape(-1, vocab), y.reshape(-1))
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    for batch, seq in ((2, 8), (2, 12), (3, 5)):
        x = torch.from_numpy(rng.standard_normal((batch, seq, hidden))).requires_grad_()
        y = torch.from_numpy(rng.integers(0, vocab, (batch, seq)))
        y[0, 1] = -100
        results = []
        for fn in (compiled, step):
            value = fn(x, y)
            results.append((value, *torch.autograd.grad(value, [x, *mods.parameters()])))
        assert all(torch.equal(a, b) for a, b in zip(*results))
    assert not counters["graph_break"]


def test_the_loss_refuses_a_class_below_0_as_torch_does_and_takes_an_empty_batch():
    """nn.CrossEntropyLoss: a target below 0 that is not ignore_index is outside the row (NaN; torch
    raises), not take_along_axis's count from the end; an empty batch gives torch's NaN mean, 0 sum."""
    logits = torch.from_numpy(np.random.default_rng(3).standard_normal((4, 10))).requires_grad_()
    for ignore_index, target in ((-100, [0, -1, 2, -100]), (-1, [3, -100, 2, -1])):
        loss = tpnn.CrossEntropyLoss(ignore_index=ignore_index, reduction="none")(logits, torch.tensor(target))
        bad = [i for i, t in enumerate(target) if t < 0 and t != ignore_index]
        assert torch.isnan(loss[bad]).all() and not torch.isnan(loss[[i for i in range(4) if i not in bad]]).any()
    for reduction in ("mean", "sum", "none"):
        empty = torch.zeros(0, 10, requires_grad=True)
        got = tpnn.CrossEntropyLoss(reduction=reduction)(empty, torch.zeros(0, dtype=torch.long))
        want = F.cross_entropy(empty, torch.zeros(0, dtype=torch.long), reduction=reduction)
        torch.testing.assert_close(got, want, equal_nan=True)
        got.sum().backward()
        assert empty.grad.shape == (0, 10)


def test_gated_products_broadcast_as_torch_and_refuse_shapes_that_do_not():
    a = torch.from_numpy(np.random.default_rng(4).standard_normal((4, 8)))
    b = torch.from_numpy(np.random.default_rng(5).standard_normal((4, 1)))
    assert torch.equal(tpnn.SiLUMul()(a, b), tpnn.SiLUMul()(a, b.expand(4, 8).contiguous()))
    with pytest.raises(ValueError, match=r"a, b: shapes \(4, 8\) and \(8, 4\)"):
        tpnn.GELUMul()(a, a.T)
