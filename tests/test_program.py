"""Tile programs on the CPU backend (and on a GPU, the same cases as one CUDA kernel): softmax,
RMSNorm and logsumexp at every scope against float64 NumPy, random shapes (rows not a multiple of
the thread count, 1-wide and 1-long tiles), and bit-for-bit equality with the chain of standalone
calls the plan names."""
import numpy as np
import pytest

import tileprim as tp
from tileprim._calls import prepared as _prepared
from conftest import bits_equal, random_tile
from program_chain import run_chain
import programs

SCOPES = [pytest.param(tp.thread, id="thread"), pytest.param(tp.warp, id="warp"),
          pytest.param(tp.warpgroup, id="warpgroup"), pytest.param(tp.cta(256), id="cta256"),
          pytest.param(tp.cta(96), id="cta96")]


softmax = tp.program(programs.softmax, scope=tp.cta(256))
rmsnorm = tp.program(programs.rmsnorm, scope=tp.cta(256))
logsumexp = tp.program(programs.logsumexp)


def shapes(rng, threads):
    """Row counts and widths: odd, not a multiple of the thread count, 1-wide and 1-long, and a batch
    that the CPU backend runs in several chunks of 2**14 elements (its orchestration checked too)."""
    width = int(rng.integers(2, 700))
    if width % max(threads, 2) == 0:
        width += 1
    return [(int(rng.integers(2, 9)), width), (1, width), (5, 1), (3, threads * 2 + 3),
            (2 * (2**14 // width) + 3, width)]


def rel_err(got, want):
    return np.linalg.norm(got.astype(np.float64) - want) / max(np.linalg.norm(want), 1e-300)


@pytest.mark.parametrize("scope", SCOPES)
def test_softmax_matches_numpy_and_the_chain(scope, backend, rng):
    for m, n in shapes(rng, scope.threads):
        x = random_tile(rng, (m, n), "float32", special=False)
        got = softmax(x, batch_dims=1, scope=scope, backend=backend)
        assert got.shape == (m, n) and got.dtype == np.float32
        assert rel_err(got, programs.softmax64(x)) < 1e-5
        (chain,), _ = run_chain(softmax, (x,), 1, scope)
        assert bits_equal(got, chain)


@pytest.mark.parametrize("scope", SCOPES)
def test_rmsnorm_bf16_with_w_broadcast(scope, backend, rng):
    for m, n in shapes(rng, scope.threads):
        x = random_tile(rng, (m, n), "bfloat16", special=False)
        w = random_tile(rng, (n,), "bfloat16", special=False)
        got = rmsnorm(x, w, 1e-6, batch_dims=1, scope=scope, backend=backend)
        assert got.shape == (m, n) and got.dtype == x.dtype
        want = programs.rmsnorm64(x, w, 1e-6)
        # bfloat16 output: within two bf16 roundings of the float64 result
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2 ** -7, atol=1e-30)
        (chain,), plan = run_chain(rmsnorm, (x, w, 1e-6), 1, scope)
        assert bits_equal(got, chain)
        assert any(t["batch_broadcast"] for t in plan.tiles if t["name"] == "w")


@pytest.mark.parametrize("scope", SCOPES)
def test_logsumexp(scope, backend, rng):
    for m, n in shapes(rng, scope.threads):
        x = random_tile(rng, (m, n), "float32", special=False)
        got = logsumexp(x, batch_dims=1, scope=scope, backend=backend)
        assert got.shape == (m,)
        np.testing.assert_allclose(got, programs.logsumexp64(x), rtol=1e-5, atol=1e-6)
        (chain,), _ = run_chain(logsumexp, (x,), 1, scope)
        assert bits_equal(got, chain)


def test_special_values_follow_the_steps(backend, rng):
    x = random_tile(rng, (6, 37), "float32")  # NaN, inf, subnormals, -0
    got = softmax(x, batch_dims=1, backend=backend)
    (chain,), _ = run_chain(softmax, (x,), 1, tp.cta(256))
    assert bits_equal(got, chain)


@pytest.mark.parametrize("scope", SCOPES)
def test_every_elementwise_operator_and_scalars(scope, backend, rng):
    @tp.program
    def arith(a, b, c):
        return (a + b) * c - b / 3.0 + 2 * a - (-b) + 1.5 / (c + 10.0)

    n = int(rng.integers(1, 300))
    a, b = random_tile(rng, (4, n), "float64"), random_tile(rng, (4, n), "float64")
    c = random_tile(rng, (4, n), "float64", special=False, low=0.5, high=2.0)
    got = arith(a, b, c, batch_dims=1, scope=scope, backend=backend)
    with np.errstate(all="ignore"):
        want = (a + b) * c - b / 3.0 + 2 * a - (-b) + 1.5 / (c + 10.0)
    assert bits_equal(got, want)  # float64, each step rounded once, as NumPy does


def test_comparison_operators_are_the_comparison_steps(backend, rng):
    """== != < <= > >= on tiles (and a scalar on either side) record tp.eq ... tp.ge, as NumPy's
    arrays compare; NaN compares unequal, -0 equal to 0."""
    @tp.program(scope=tp.warp)
    def compared(a, b):
        return (tp.where(a == b, a, -1.0), tp.where(a != b, a, -1.0), a * (a < b), tp.where(a <= 0.5, b, a),
                tp.where(0.5 < a, a, b), tp.where(a >= b, 1.0, 0.0))

    a = random_tile(rng, (5, 33), "float32")
    b = np.where(rng.random((5, 33)) < 0.4, a, random_tile(rng, (5, 33), "float32"))
    b[0, :3], a[0, :3] = (-0.0, np.nan, 1.0), (0.0, np.nan, 1.0)
    with np.errstate(all="ignore"):
        want = (np.where(a == b, a, -1), np.where(a != b, a, -1), a * (a < b), np.where(a <= 0.5, b, a),
                np.where(0.5 < a, a, b), np.where(a >= b, 1, 0))
    for got, expected in zip(compared(a, b, batch_dims=1, backend=backend), want):
        assert bits_equal(got, expected.astype(np.float32))


def test_a_scalar_before_a_reduced_tile_with_no_scope_named(backend, rng):
    """1.0 / tp.sum(...), 1.0 - tp.max(...): a map whose first operand is a scalar, after a
    reduction, planned with no scope (the kernel's passes read a map's first operand as a tile:
    an IndexError before)."""
    @tp.program
    def normalised(x):
        return x * (1.0 / tp.sum(x, axes=-1, keepdims=True)), 1.0 - tp.max(x, axes=-1)

    x = random_tile(rng, (5, 300), "float64", special=False, low=0.5, high=2.0)
    scaled, below = normalised(x, batch_dims=1, backend=backend)
    np.testing.assert_allclose(scaled, x / x.sum(-1, keepdims=True), rtol=1e-13)  # the sum's order is the tree's
    assert bits_equal(below, 1.0 - x.max(-1))


def test_a_program_called_in_a_programs_body_is_inlined(backend, rng):
    """Its steps join the caller's (one kernel, at the caller's scope): the same bits as the caller
    written out, the inner program's keyword arguments and defaults bound as a call binds them."""
    @tp.program(scope=tp.warp)  # the inner decorator's scope is the caller's to choose
    def centred(x, *, by_max=True):
        return x - (tp.max(x, axes=-1, keepdims=True) if by_max else tp.min(x, axes=-1, keepdims=True))

    @tp.program
    def nested(x):
        return tp.exp(centred(x)) + centred(x, by_max=False)

    @tp.program
    def written_out(x):
        return tp.exp(x - tp.max(x, axes=-1, keepdims=True)) + (x - tp.min(x, axes=-1, keepdims=True))

    x = random_tile(rng, (6, 333), "float32")
    plan = tp.plan(nested, x, batch_dims=1, backend=backend)
    assert plan.variants == tp.plan(written_out, x, batch_dims=1, backend=backend).variants
    assert bits_equal(nested(x, batch_dims=1, backend=backend), written_out(x, batch_dims=1, backend=backend))


def test_arguments_by_keyword_defaults_and_keyword_only_parameters(backend, rng):
    @tp.program(scope=tp.warp)
    def norm(x, w, eps=1e-6, *, scale=1.0):
        return x * tp.rsqrt(tp.sum(x * x, axes=-1, keepdims=True) / x.shape[-1] + eps) * w * scale

    x, w = random_tile(rng, (3, 40), "float64", special=False), random_tile(rng, (40,), "float64", special=False)
    base = norm(x, w, 1e-6, scale=1.0, batch_dims=1, backend=backend)
    assert bits_equal(norm(x, w, batch_dims=1, backend=backend), base)
    assert bits_equal(norm(w=w, x=x, batch_dims=1, backend=backend), base)
    assert bits_equal(norm(x, w, eps=1e-3, scale=2.0, batch_dims=1, backend=backend),
                      norm(x, w, 1e-3, batch_dims=1, backend=backend) * 2.0)
    assert tp.plan(norm, x, w, scale=3.0, batch_dims=1).scope == "warp"
    with pytest.raises(TypeError, match=r"norm\(\): too many positional arguments \(the program's parameters: "
                                        r"\(x, w, eps=1e-06, \*, scale=1.0\)\)"):
        norm(x, w, 1e-6, 2.0, batch_dims=1, backend=backend)
    with pytest.raises(TypeError, match=r"norm\(\): got an unexpected keyword argument 'epsilon'"):
        norm(x, w, epsilon=1.0, batch_dims=1, backend=backend)
    with pytest.raises(TypeError, match=r"a program's arguments are named, .*no \*args or \*\*kwargs"):
        tp.program(lambda *xs: xs[0])


def test_scalar_arguments_are_constants_of_the_trace(backend, rng, monkeypatch):
    """Every scalar value traces anew; an int is a constant of its trace, as is a float the body
    makes something of in Python. A float handed straight to an op is a run-time scalar: the traces
    of such values share one plan (and kernel), with the bits of the constant."""
    import tileprim._program.program as program_module
    made = []
    plan_program = program_module._C.plan_program
    monkeypatch.setattr(program_module._C, "plan_program", lambda *a: made.append(a[0]) or plan_program(*a))

    @tp.program(scope=tp.warp)
    def scale(x, k):
        return x * k

    @tp.program(scope=tp.warp)
    def scale_made(x, k):
        return x * (k + 0.0)  # a float made from k: a constant

    x = random_tile(rng, (3, 40), "float32")
    for k in (2.0, -0.5, np.float64(0.1), np.float32(7.5), 3, 5):
        want = (x * np.float32(k)).astype(np.float32)
        assert bits_equal(scale(x, k, batch_dims=1, backend=backend), want)
        assert bits_equal(scale_made(x, k, batch_dims=1, backend=backend), want)
    assert len(signatures(scale)) == len(signatures(scale_made)) == 6  # every value traced
    assert made.count("scale") == 3 and made.count("scale_made") == 6  # the floats' one plan, then 3 and 5
    assert tp.plan(scale, x, -0.5, batch_dims=1).steps[0].scalars == [None, -0.5]  # the call's value shown
    # floats no op reads beside one that is (the kernel takes those up to the last read)
    for body, want in ((lambda x, t, u: x * t, lambda t, u: x * np.float32(t)),
                       (lambda x, t, u: x * u, lambda t, u: x * np.float32(u)),
                       (lambda x, t, u: x + 1.0, lambda t, u: x + np.float32(1.0))):
        unused = tp.program(body)
        for t, u in ((2.0, 3.0), (-5.0, 0.25)):
            assert bits_equal(unused(x, t, u, batch_dims=1, backend=backend), want(t, u))


def test_a_float_argument_read_any_way_gives_each_calls_value(backend, rng):
    """Every value traces anew: however the body reads a float argument (an attribute lookup that
    falls back to it, a NumPy long double beside it, a value kept from an earlier trace, a library
    that wants a real float), each call computes with its own values."""
    import decimal
    import json
    kept = []

    @tp.program
    def unwrapped(x, t):
        return x * getattr(t, "value", t)

    @tp.program
    def beside(x, a, b):
        return x * a + b

    @tp.program
    def remembered(x, a, b):
        if not kept:
            kept.append(b)  # the first call's b, as Python keeps it
        return x * a + kept[0]

    @tp.program
    def through_libraries(x, t):
        return x * float(decimal.Decimal(t)) + json.loads(json.dumps(t))

    x = random_tile(rng, (2, 30), "float32")
    for a, b in ((0.5, 2.0), (3.0, 5.0), (-7.0, 0.25)):
        f32 = np.float32
        assert bits_equal(unwrapped(x, a, batch_dims=1, backend=backend), x * f32(a))
        assert bits_equal(beside(x, np.longdouble(a), b, batch_dims=1, backend=backend), x * f32(a) + f32(b))
        assert bits_equal(remembered(x, a, b, batch_dims=1, backend=backend), x * f32(a) + f32(2.0))
        assert bits_equal(through_libraries(x, a, batch_dims=1, backend=backend), x * f32(a) + f32(a))


def signatures(program):
    """The program's call signatures in the one memo of prepared calls (standalone calls' too)."""
    return [prepared for key, prepared in _prepared.MEMO.items() if key[0] is program]


def test_repeated_call_is_a_lookup(rng):
    traced = []

    @tp.program(scope=tp.cta(64))
    def double(x):
        traced.append(x.shape)
        return x + x

    x = random_tile(rng, (5, 70), "float32")
    first = double(x, batch_dims=1)
    (bound,) = signatures(double)
    y = random_tile(rng, (5, 70), "float32")
    second = double(y, batch_dims=1)
    assert signatures(double) == [bound] and traced == [(70,)]
    assert bits_equal(first, x + x) and bits_equal(second, y + y)
    double(random_tile(rng, (5, 71), "float32"), batch_dims=1)  # a new signature traces anew
    double(x, batch_dims=1, scope=tp.warp)
    assert traced == [(70,), (71,), (70,)]


def test_a_new_batch_of_the_same_tiles_plans_nothing_again(monkeypatch, rng):
    """The batch is no part of a program's plan: a call with more rows of the same tiles traces
    again (a new signature) but reuses the plan, which an auto-scoped plan makes dear (every
    candidate scope planned); new tiles, or a scope named, plan anew; forget() drops the plans."""
    import tileprim._program.program as program_module
    made = []
    plan_program = program_module._C.plan_program
    monkeypatch.setattr(program_module._C, "plan_program", lambda *a: made.append(a[2]) or plan_program(*a))

    @tp.program
    def centred(x):
        return x - tp.sum(x, axes=-1, keepdims=True) / x.shape[-1]

    for rows in (3, 8, 5):
        x = random_tile(rng, (rows, 300), "float32", special=False)
        got = centred(x, batch_dims=1, backend="cpu")
        want = x.astype(np.float64) - x.astype(np.float64).mean(axis=-1, keepdims=True)
        assert got.shape == (rows, 300) and np.allclose(got, want, rtol=1e-5, atol=1e-4)
    assert len(made) == 1
    centred(random_tile(rng, (3, 301), "float32"), batch_dims=1, backend="cpu")
    centred(random_tile(rng, (3, 300), "float32"), batch_dims=1, backend="cpu", scope=tp.warp)
    assert len(made) == 3
    _prepared.forget()
    centred(random_tile(rng, (4, 300), "float32"), batch_dims=1, backend="cpu")
    assert len(made) == 4


def test_keepdims_broadcast_inside_2d_tiles(backend, rng):
    @tp.program(scope=tp.thread)  # the standalone sum below names thread scope too: same order
    def center(x):
        return x - tp.sum(x, axes=0, keepdims=True) / x.shape[0]

    x = random_tile(rng, (3, 7, 5), "float64", special=False)
    got = center(x, batch_dims=1, backend=backend)
    sums = tp.sum(x, axes=0, keepdims=True, batch_dims=1, backend="cpu", scope=tp.thread)  # tile axis 0
    assert sums.shape == (3, 1, 5)
    assert bits_equal(got, x - sums / 7.0)


def test_tuple_results_and_out(backend, rng):
    @tp.program(scope=tp.warp)
    def both(x):
        return tp.max(x, axes=-1), tp.min(x, axes=-1)

    x = random_tile(rng, (9, 33), "float32")
    hi, lo = both(x, batch_dims=1, backend=backend)
    assert bits_equal(hi, np.fmax.reduce(x, axis=-1)) and bits_equal(lo, np.fmin.reduce(x, axis=-1))
    out = (np.full(9, np.nan, np.float32), np.full(9, np.nan, np.float32))
    assert both(x, batch_dims=1, backend=backend, out=out) is out
    assert bits_equal(out[0], hi) and bits_equal(out[1], lo)


def test_input_returned_and_partly_broadcast_batch(backend, rng):
    @tp.program(scope=tp.cta(32))
    def add(x, b):
        return x + b, x

    x = random_tile(rng, (4, 3, 10), "float32")
    b = random_tile(rng, (3, 10), "float32")  # broadcast over the first batch dim only
    y, same = add(x, b, batch_dims=2, backend=backend)
    assert bits_equal(y, x + b) and bits_equal(same, x)
    b2 = random_tile(rng, (4, 1, 10), "float32")
    assert bits_equal(add(x, b2, batch_dims=2, backend=backend)[0], x + b2)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("scope", [tp.warp, tp.cta(256), tp.cta(96)], ids=str)
def test_max_min_of_long_rows_with_special_values(op, scope, rng):
    """Whole long rows at lane scopes: NaN loses, -0 < +0, a row of only NaNs gives NaN."""
    width = int(rng.integers(256, 3000))
    x = random_tile(rng, (9, width), "float32")
    x[1] = np.nan
    x[2] = 0.0
    x[2, rng.integers(width)] = -0.0
    x[3] = -0.0
    x[3, rng.integers(width)] = 0.0
    got = getattr(tp, op)(x, axes=-1, batch_dims=1, scope=scope, storage="shared")
    fold = np.fmax if op == "max" else np.fmin
    want = fold.reduce(x, axis=-1)
    for r in range(x.shape[0]):
        if want[r] == 0:  # the sign of a zero: -0 < +0
            zeros = x[r][x[r] == 0]
            pos = np.any(~np.signbit(zeros))
            neg = np.any(np.signbit(zeros))
            want[r] = np.float32(0.0) if (op == "max" and pos) or (op == "min" and not neg) else np.float32(-0.0)
    assert bits_equal(got, want)
    prog = tp.program(lambda t: getattr(tp, op)(t, axes=-1), scope=scope)
    assert bits_equal(prog(x, batch_dims=1), got)


def test_torch_cpu_tensors_in_and_out(rng):
    torch = pytest.importorskip("torch")
    for dtype in ("float32", "bfloat16"):
        x = random_tile(rng, (5, 96), dtype)
        w = random_tile(rng, (96,), dtype, special=False)
        want = rmsnorm(x, w, 1e-6, batch_dims=1, scope=tp.warp, backend="cpu")
        xt, wt = (tp._torch.host.to_torch(a) for a in (x, w))
        got = rmsnorm(xt, wt, 1e-6, batch_dims=1, scope=tp.warp, backend="cpu")
        assert isinstance(got, torch.Tensor) and got.dtype == xt.dtype and tuple(got.shape) == x.shape
        host = got.view(torch.int16).numpy().view(want.dtype) if dtype == "bfloat16" else got.numpy()
        assert bits_equal(host, want)
        out = torch.full_like(xt, float("nan"))
        assert rmsnorm(xt, wt, 1e-6, batch_dims=1, scope=tp.warp, backend="cpu", out=out) is out
        host = out.view(torch.int16).numpy().view(want.dtype) if dtype == "bfloat16" else out.numpy()
        assert bits_equal(host, want)


def test_a_tiles_dtype_is_its_name_and_equals_the_dtypes_it_names():
    """DESIGN §2: a Tile has .dtype; in a body it compares as an array's does (np.float32, the NumPy
    dtype, ml_dtypes' bfloat16, torch's), stays the name for tileprim's own arguments and hashes as it."""
    torch = pytest.importorskip("torch")
    import ml_dtypes
    seen = {}

    @tp.program
    def probe(x):
        seen[str(x.dtype)] = (x.dtype == "float32", x.dtype == np.float32, x.dtype == np.dtype("float32"),
                              x.dtype != np.float64, x.dtype == torch.float32, x.dtype == ml_dtypes.bfloat16,
                              {x.dtype: 1}.get("float32"), x.dtype == 3)
        return tp.cast(x, x.dtype) * 2

    assert np.array_equal(probe(np.ones((2, 4), np.float32), batch_dims=1), np.full((2, 4), 2, np.float32))
    assert seen["float32"] == (True, True, True, True, True, False, 1, False)

    @tp.program
    def half(x):
        seen["bf16"] = x.dtype == ml_dtypes.bfloat16 and x.dtype != np.float32 and x.dtype == torch.bfloat16
        return x

    half(np.ones((2, 4), ml_dtypes.bfloat16), batch_dims=1)
    assert seen["bf16"]
