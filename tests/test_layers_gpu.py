"""On a GPU: the ops and programs of the layers LLMs are made of give the CPU backend's bits. The
index tiles (cast, comparisons and where on int32/int64), take_along_axis and scatter_add_along_axis
standalone at every scope, and tileprim.layers' programs forward and backward (through
tileprim.nn on CUDA tensors beside the same calls on CPU tensors). The float elementwise ops
(tanh, erf, sigmoid, the comparisons, where) are test_numerics_gpu.py's, over every dtype."""
import numpy as np
import pytest

import tileprim as tp
from conftest import DTYPES, bits_equal, cuda_usable, random_tile

torch = pytest.importorskip("torch")
tpnn = pytest.importorskip("tileprim.nn")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]

INDEX = ("int32", "int64")
SCOPES = [pytest.param(tp.thread, id="thread"), pytest.param(tp.warp, id="warp"),
          pytest.param(tp.cta(96), id="cta96"), pytest.param(tp.cta(256), id="cta256")]


def both(fn, *args, **kwargs):
    return np.asarray(fn(*args, backend="cpu", **kwargs)), np.asarray(fn(*args, backend="cuda", **kwargs))


def index_values(rng, dtype, shape):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    x.reshape(-1)[::3] = rng.integers(-300, 300, x.size // 3 + (x.size % 3 > 0))  # ties and small values
    return x


@pytest.mark.parametrize("index", INDEX)
def test_index_tiles_give_the_cpu_bits(index, rng):
    a, b = index_values(rng, index, (4096, 8)), index_values(rng, index, (4096, 8))
    b[::2] = a[::2]
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        for args in ((a, b), (a, -100)):
            cpu, gpu = both(getattr(tp, op), *args, batch_dims=1)
            assert np.array_equal(cpu, gpu), op
    cpu, gpu = both(tp.where, a % 3, a, b, batch_dims=1)
    assert np.array_equal(cpu, gpu)
    for dst in DTYPES:
        cpu, gpu = both(tp.cast, a, dst, batch_dims=1)
        assert bits_equal(cpu, gpu), dst


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("index", INDEX)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_ops_give_the_cpu_bits(dtype, index, scope, rng):
    n = 200 if scope is tp.thread else 1000
    x = random_tile(rng, (512, n), dtype)
    idx = rng.integers(-n - 3, n + 3, (512, 5)).astype(index)  # some outside the row
    cpu, gpu = both(tp.take_along_axis, x, idx, batch_dims=1, scope=scope)
    assert bits_equal(cpu, gpu) and np.isnan(cpu.astype(np.float64)).any()
    src = random_tile(rng, (512, 5), dtype, special=False)
    cpu, gpu = both(tp.scatter_add_along_axis, x, idx, src, batch_dims=1, scope=scope)
    assert bits_equal(cpu, gpu)
    one = (idx[:, :1], src[:, :1])  # one value per row: idx and src held by every thread (scatter_held)
    cpu, gpu = both(tp.scatter_add_along_axis, x, *one, batch_dims=1, scope=scope)
    assert bits_equal(cpu, gpu)
    if scope is not tp.thread:
        assert tp.plan(tp.scatter_add_along_axis, x, *one, batch_dims=1, scope=scope).steps[0].variant == "scatter_held"


def test_gather_ops_on_torch_device_tensors(rng):
    x = torch.randn(300, 1000, device="cuda")
    idx = torch.randint(-1000, 1000, (300, 1), device="cuda")
    got = tp.take_along_axis(x, idx, batch_dims=1, scope=tp.cta(250))
    assert got.is_cuda and torch.equal(got, torch.gather(x, 1, idx % 1000))


def pair(rng, shape, dtype):
    return [torch.from_numpy((rng.standard_normal(shape) * s).astype(np.float32)).to(getattr(torch, dtype))
            for s in (3.0, 1.0)]


def forward_backward(fn, inputs, device):
    leaves = [t.to(device).detach().requires_grad_(t.is_floating_point()) for t in inputs]
    y = fn(*leaves)
    grads = torch.autograd.grad(y, [t for t in leaves if t.requires_grad], torch.ones_like(y) if y.dim() else None)
    return [t.detach().cpu() for t in (y, *grads)]


def assert_cpu_bits(fn, inputs):
    """The result and every gradient the CPU's bits, those of a broadcast operand (a norm's weight
    and bias, summed over the batch by tileprim's sum_to) too."""
    results = zip(forward_backward(fn, inputs, "cpu"), forward_backward(fn, inputs, "cuda"))
    for i, (a, b) in enumerate(results):
        assert torch.equal(a, b), f"result {i} (0: the output, then the gradients)"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_elementwise_layers_forward_and_backward_give_the_cpu_bits(dtype, rng):
    a, b = pair(rng, (512, 1376), dtype)
    for approximate in ("none", "tanh"):
        assert_cpu_bits(tpnn.GELU(approximate), [a])
    assert_cpu_bits(tpnn.SiLUMul(), [a, b])
    assert_cpu_bits(tpnn.GELUMul(), [a, b])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_norms_forward_and_backward_give_the_cpu_bits(dtype, rng):
    x = pair(rng, (256, 4096), dtype)[0]
    norm = tpnn.LayerNorm(4096)  # no scope named: the planner's, the same on both backends
    assert_cpu_bits(lambda x, w, b: tp.layers.layer_norm(
        x, w, b, 1e-5, batch_dims=1, backend="cpu" if x.device.type == "cpu" else None),
        [x, norm.weight.detach().to(x.dtype) * 1.5, norm.bias.detach().to(x.dtype) + 0.25])
    rms = tpnn.RMSNorm(4096)
    assert_cpu_bits(lambda x, w: tp.layers.rms_norm(x, w, 1e-6, batch_dims=1,
                                                     backend="cpu" if x.device.type == "cpu" else None),
                    [x, rms.weight.detach().to(x.dtype) * 0.75])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("rows,n", [(32768, 4096), (8191, 8192), (4096, 16384), (999, 2048), (77, 301), (40, 1000),
                                    (300, 64)])
def test_broadcast_gradients_are_summed_to_the_cpu_bits(rows, n, dtype, rng):
    """sum_to (a norm's weight gradient over the batch; chunks of rows at cta scope, a thread's
    chunks of short rows, the planner's scope for other rows; a partial last chunk; rows of 16384
    four at a time, 64 values a thread) on the GPU."""
    from tileprim._torch.sum_to import sum_to
    x = random_tile(rng, (rows, n), "float32", special=False)
    x[rows // 2, 1], x[rows // 3, 2], x[:, 3], x[:, 4] = np.nan, np.inf, -0.0, 2.0 ** -140  # a few columns special
    g = torch.from_numpy(x).to(getattr(torch, dtype))
    for shape in ((n,), (rows, 1)):
        got, want = sum_to(g.cuda(), shape).cpu(), sum_to(g, shape)
        ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[want.element_size()]
        same = (got.view(ints) == want.view(ints)) | (got.isnan() & want.isnan())
        assert got.dtype == want.dtype and bool(same.all()), shape


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_modules_and_standalone_ops_broadcast_gradients_give_the_cpu_bits(dtype, rng):
    x = pair(rng, (3, 333, 2048), dtype)[0]  # 999 rows: a partial last chunk
    norm, rms = tpnn.LayerNorm(2048).to(x.dtype), tpnn.RMSNorm(2048).to(x.dtype)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_()
        rms.weight.uniform_(0.5, 1.5)
    for module in (norm, rms):
        grads = []
        for device in ("cpu", "cuda"):
            module.to(device).zero_grad()
            module(x.to(device)).backward(torch.ones_like(x, device=device))
            # copies: the module's move to the GPU moves its CPU gradients' storage with it
            grads.append([p.grad.to("cpu", copy=True) for p in module.parameters()])
        assert all(torch.equal(a, b) for a, b in zip(*grads)), type(module).__name__
    r = pair(rng, (2048,), dtype)[1]
    assert_cpu_bits(lambda x, r: tp.add(x, r, batch_dims=1, backend="cpu" if x.device.type == "cpu" else None),
                    [x.reshape(999, 2048), r])


@pytest.mark.parametrize("vocab,scope", [(1000, tp.cta(250)), (32000, None), (50257, None), (128256, None)])
@pytest.mark.parametrize("index", INDEX)
def test_cross_entropy_forward_and_backward_give_the_cpu_bits(vocab, scope, index, rng):
    logits = torch.from_numpy((rng.standard_normal((96, vocab)) * 4).astype(np.float32)).to(torch.bfloat16)
    target = torch.from_numpy(rng.integers(0, vocab, 96).astype(index))
    target[::7] = -100
    loss = tpnn.CrossEntropyLoss(scope=scope, reduction="none")
    assert_cpu_bits(loss, [logits, target])
    assert_cpu_bits(tpnn.CrossEntropyLoss(scope=scope), [logits, target])  # the mean and its one-program backward
    mean = tpnn.CrossEntropyLoss(scope=scope)(logits.cuda(), target.cuda())
    assert torch.equal(mean.cpu(), tpnn.CrossEntropyLoss(scope=scope)(logits, target))  # tileprim's mean: the CPU's bits
    torch.testing.assert_close(mean, torch.nn.functional.cross_entropy(logits.cuda().float(), target.cuda().long()),
                               rtol=1e-5, atol=1e-5)


# ---- fastmath=True: the GPU's approximations, within the bounds tp.op_table() states ------------------
TABLE = tp.op_table()
EPS32 = 2.0 ** -23


def fast_rel(op):
    """The relative error of op's float32 approximation the op table states (measured on a GPU)."""
    ulps = TABLE[op]["fastmath"]["max_ulp"]["float32"]
    assert isinstance(ulps, float), f"{op}: the op table's fastmath error is {ulps!r}"
    return ulps * EPS32


def within(got, want64, bound, dtype):
    """got (a CUDA tensor of dtype) within bound of float64, plus one rounding to a 16-bit dtype."""
    got = got.detach().double().cpu()
    rounding = 2.0 ** -8 if dtype == "bfloat16" else 0.0  # half a bfloat16 ulp, relative
    excess = (got - want64).abs() - (bound + rounding * want64.abs() + 1e-30)
    assert torch.isfinite(got).all() and (excess <= 0).all(), f"worst excess {excess.max().item():.3g}"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fastmath_modules_stay_within_the_stated_bounds_of_float64(dtype, rng):
    a, b = (t.cuda() for t in pair(rng, (512, 1376), dtype))
    a64, b64 = a.double().cpu(), b.double().cpu()
    tanh_rel, few = fast_rel("tanh"), 8 * EPS32  # few: float32's own roundings of the exact formula
    u = np.sqrt(2 / np.pi) * (a64 + 0.044715 * a64 ** 3)
    gelu = 0.5 * a64 * (1 + torch.tanh(u))
    tanh_err = 0.5 * a64.abs() * tanh_rel * torch.tanh(u).abs()  # x/2 times tanh's error
    within(tpnn.GELU("tanh", fastmath=True)(a), gelu, few * (gelu.abs() + a64.abs()) + tanh_err, dtype)
    within(tpnn.GELUMul(fastmath=True)(a, b), gelu * b64, (few * (gelu.abs() + a64.abs()) + tanh_err) * b64.abs(),
           dtype)
    silu = a64 * torch.sigmoid(a64) * b64
    within(tpnn.SiLUMul(fastmath=True)(a, b), silu, (fast_rel("silu") + few) * silu.abs(), dtype)
    # GELU's erf form has nothing to approximate: the exact bits, the CPU's
    assert torch.equal(tpnn.GELU(fastmath=True)(a).cpu(), tpnn.GELU()(a.cpu()))
    if dtype == "float32":  # the approximations ran
        assert not torch.equal(tpnn.GELU("tanh", fastmath=True)(a), tpnn.GELU("tanh")(a))
        assert not torch.equal(tpnn.SiLUMul(fastmath=True)(a, b), tpnn.SiLUMul()(a, b))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fastmath_norms_and_cross_entropy_stay_within_the_stated_bounds_of_float64(dtype, rng):
    n = 4096
    x = pair(rng, (256, n), dtype)[0].cuda() * 0.5 + 0.25
    x64 = x.double().cpu()
    rows = 4 * n * EPS32  # a sum over the row, rounded in float32
    divide, root = fast_rel("fdiv"), fast_rel("rsqrt")  # the mean (a row over one value n); rsqrt
    rms = tpnn.RMSNorm(n, fastmath=True).cuda()
    with torch.no_grad():
        rms.weight.uniform_(0.5, 1.5)
    w64 = rms.weight.to(x.dtype).double().cpu()
    want = x64 * torch.rsqrt((x64 ** 2).mean(-1, keepdim=True) + 1e-6) * w64
    within(rms(x), want, (rows + divide + root + 8 * EPS32) * want.abs(), dtype)
    norm = tpnn.LayerNorm(n, fastmath=True).cuda().to(x.dtype)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_()
    w64, b64 = norm.weight.double().cpu(), norm.bias.double().cpu()
    mean = x64.mean(-1, keepdim=True)
    rstd = torch.rsqrt(((x64 - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
    scaled = (x64 - mean) * rstd * w64
    # the mean's error (a sum's, then the division's) reaches every element of its row times rstd w;
    # the variance's and rsqrt's relatively the normalized row; b + that row can cancel
    cancels = (rows + divide) * (x64.abs().mean(-1, keepdim=True) + mean.abs()) * rstd * w64.abs() * 2
    within(norm(x), scaled + b64, cancels + (rows + 2 * divide + root + 8 * EPS32) * scaled.abs() +
           4 * EPS32 * (scaled + b64).abs(), dtype)
    vocab = 32000
    logits = torch.from_numpy((rng.standard_normal((64, vocab)) * 4).astype(np.float32)).to(getattr(torch, dtype))
    target = torch.from_numpy(rng.integers(0, vocab, 64))
    target[::7] = -100
    got = tpnn.CrossEntropyLoss(reduction="none", fastmath=True)(logits.cuda(), target.cuda())
    l64 = logits.double()
    lse = torch.logsumexp(l64, -1)
    want = torch.where(target == -100, 0.0, lse - l64.gather(1, target.clamp(min=0)[:, None])[:, 0])
    # exp's relative error moves the sum (so log's argument) relatively; log's is absolute
    log_abs = TABLE["log"]["fastmath"]["max_abs"]["float32"]
    kept = target != -100
    within(got, want, kept * (fast_rel("exp") + log_abs + vocab * 4 * EPS32 + 8 * EPS32 * lse.abs()), "float32")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fastmath_backward_runs_the_approximations_close_to_the_exact_gradients(dtype, rng):
    """The derived backward runs under the module's fastmath too: its gradients are the GPU's own,
    close (rtol 1e-3, a loose check, not a stated bound) to the exact ones."""
    a, b = pair(rng, (512, 1376), dtype)
    for make, inputs in [(lambda **k: tpnn.GELU("tanh", **k), [a]), (lambda **k: tpnn.SiLUMul(**k), [a, b]),
                         (lambda **k: tpnn.RMSNorm(1376, **k), [a])]:
        exact = forward_backward(make().cuda(), inputs, "cuda")
        fast = forward_backward(make(fastmath=True).cuda(), inputs, "cuda")
        for e, f in zip(exact, fast):
            torch.testing.assert_close(f, e, rtol=1e-3 if dtype == "float32" else 2e-2, atol=1e-4)
