"""On a GPU: an exact program's float chain rounded to 16 bits (SwiGLU's cast(silu(a) * b)) runs its
transcendental ops' fast forms, checks each estimate against the 16-bit rounding and recomputes the
slots it cannot vouch for (include/tileprim/elementwise/estimated.cuh). The bits must stay the CPU
backend's at every input, and the fast forms within the bounds the header assumes of them."""
import ml_dtypes
import numpy as np
import pytest

import tileprim as tp
from conftest import bits_equal, cuda_usable, random_tile

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]

U = 2.0 ** -24
# estimated.cuh's bounds of |fast - exact| / |exact| in units of U, at x: fixed + 1.25 |x| (exp2: fixed)
BOUNDS = {"exp": (10.0, 1.25), "exp2": (10.0, 0.0), "sigmoid": (15.0, 1.25), "silu": (16.0, 1.25)}


def every_16bit_value(dtype: str) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint16).view(np.float16 if dtype == "float16" else ml_dtypes.bfloat16)


def float_samples(rng, n: int) -> np.ndarray:
    """float32 values of every scale the bounds cover, both signs."""
    x = rng.standard_normal(n) * np.exp2(rng.uniform(-8, 7, n))
    return np.concatenate([x.astype(np.float32), np.linspace(-88, 88, 1 << 16, dtype=np.float32)])


@pytest.mark.parametrize("op", sorted(BOUNDS))
def test_the_fast_forms_lie_within_the_assumed_bounds(op, rng):
    """Where the chain keeps an estimate (its value a normal float of at least 2^-100, silu's input at
    least 2^-60), the fast form's distance from the exact form stays within the header's bound."""
    x = np.concatenate([every_16bit_value("bfloat16").astype(np.float32), float_samples(rng, 1 << 22)])
    x = x.reshape(-1, 8)
    fast = np.asarray(getattr(tp, op)(x, batch_dims=1, backend="cuda", fastmath=True)).astype(np.float64)
    exact = np.asarray(getattr(tp, op)(x, batch_dims=1, backend="cuda")).astype(np.float64)
    fixed, growth = BOUNDS[op]
    with np.errstate(all="ignore"):
        kept = np.isfinite(exact) & (np.abs(fast) >= 2.0 ** -100) & np.isfinite(fast)
        if op == "silu":
            kept &= np.abs(x) >= 2.0 ** -60
        error = np.abs(fast - exact) / np.abs(exact)
    bound = (fixed + growth * np.abs(x.astype(np.float64))) * U
    assert kept.sum() > x.size * 0.9
    worst = np.max(error[kept] / bound[kept])
    assert worst <= 1.0, f"{op}: {worst:.3f} of the bound"


def _gate(op):
    @tp.program
    def gated(a, b):
        return tp.cast(getattr(tp, op)(tp.cast(a, "float32")) * tp.cast(b, "float32"), a.dtype)
    return gated


@tp.program
def _gated_twice(a, b, c):
    af = tp.cast(a, "float32")
    return tp.cast(tp.sigmoid(af) * tp.cast(b, "float32") / (tp.exp(af) * tp.cast(c, "float32")), a.dtype)


@tp.program
def _scaled_gate(a, b, s):  # products by a scalar and a quotient by a constant inside the chain
    return tp.cast(tp.silu(tp.cast(a, "float32")) * s * tp.cast(b, "float32") / 3.0, a.dtype)


def gates(rng, dtype: str, rows: int):
    """Every 16-bit value as the activation's input, beside random gates (specials included)."""
    a = np.tile(every_16bit_value(dtype), rows).reshape(-1, 8)
    b = random_tile(rng, a.shape, dtype)
    b.reshape(-1)[::97] = 0
    return a, b


@pytest.mark.parametrize("op", ["silu", "sigmoid", "exp", "exp2"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_an_estimated_chain_gives_the_cpu_bits(op, dtype, rng):
    a, b = gates(rng, dtype, 16)
    program = tp.layers.silu_mul if op == "silu" else _gate(op)
    cpu = np.asarray(program(a, b, batch_dims=1, backend="cpu"))
    gpu = np.asarray(program(a, b, batch_dims=1, backend="cuda"))
    assert bits_equal(cpu, gpu)
    assert np.isnan(cpu.astype(np.float32)).any() and (cpu.astype(np.float32) != 0).mean() > 0.5


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_gelu_layers_give_the_cpu_bits(dtype, rng):
    """GELU's tanh form as x sigmoid(2 z): the chain x * sigmoid(...) (* b) is estimated."""
    a, b = gates(rng, dtype, 16)
    for program, args in [(tp.layers.gelu_tanh, (a,)), (tp.layers.gelu_tanh_mul, (a, b))]:
        cpu = np.asarray(program(*args, batch_dims=1, backend="cpu"))
        gpu = np.asarray(program(*args, batch_dims=1, backend="cuda"))
        assert bits_equal(cpu, gpu), program


@tp.program
def _shifted_gate(x, b):  # a leaf made from a row's value (x - max): the rare path makes it again
    xf = tp.cast(x, "float32")
    return tp.cast(tp.exp(xf - tp.max(xf, axes=-1, keepdims=True)) * tp.cast(b, "float32"), x.dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n,threads", [(8, None), (256, 32)])
def test_a_leaf_made_from_a_row_value_gives_the_cpu_bits(dtype, n, threads, rng):
    a, b = gates(rng, dtype, 16)
    a, b = a.reshape(-1, n), b.reshape(-1, n)
    scope = tp.cta(threads) if threads else None
    cpu = np.asarray(_shifted_gate(a, b, batch_dims=1, scope=scope, backend="cpu"))
    gpu = np.asarray(_shifted_gate(a, b, batch_dims=1, scope=scope, backend="cuda"))
    assert bits_equal(cpu, gpu)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_chain_of_several_estimates_and_products_gives_the_cpu_bits(dtype, rng):
    a, b = gates(rng, dtype, 8)
    c = random_tile(rng, a.shape, dtype)
    cpu = np.asarray(_gated_twice(a, b, c, batch_dims=1, backend="cpu"))
    gpu = np.asarray(_gated_twice(a, b, c, batch_dims=1, backend="cuda"))
    assert bits_equal(cpu, gpu)
    for scale in (1.5, 2.0 ** -120, 3e38):  # the products inside the chain normal, subnormal, past overflow
        cpu = np.asarray(_scaled_gate(a, b, scale, batch_dims=1, backend="cpu"))
        gpu = np.asarray(_scaled_gate(a, b, scale, batch_dims=1, backend="cuda"))
        assert bits_equal(cpu, gpu), scale


def midpoint_gates(dtype: str):
    """Every 16-bit a, beside the gate b in [1, 2) that puts the exact float32 silu(a) * b nearest a
    16-bit rounding midpoint (where only the exact path knows the side, the estimate must refuse)."""
    np16 = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    a = every_16bit_value(dtype)
    s = np.asarray(tp.silu(a.astype(np.float32).reshape(-1, 8), batch_dims=1, backend="cpu")).reshape(-1)
    one_two = every_16bit_value(dtype)
    one_two = one_two[(one_two.astype(np.float32) >= 1) & (one_two.astype(np.float32) < 2)]
    low, mid = (0x1FFF, 0x1000) if dtype == "float16" else (0xFFFF, 0x8000)
    b = np.empty(a.shape, np16)
    near = 0
    for i in range(0, a.size, 4096):
        with np.errstate(all="ignore"):
            y = s[i:i + 4096, None] * one_two.astype(np.float32)[None, :]  # float32 products, rounded once
        dist = np.abs((y.view(np.uint32) & low).astype(np.int64) - mid)
        pick = np.argmin(dist, axis=1)
        b[i:i + 4096] = one_two[pick]
        near += int((dist[np.arange(pick.size), pick] <= 2).sum())
    assert near > 1000  # many exact products within 2 float ulps of a midpoint
    return a, b


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_products_at_a_rounding_midpoint_give_the_cpu_bits(dtype):
    a, b = midpoint_gates(dtype)
    cpu = np.asarray(tp.layers.silu_mul(a.reshape(-1, 8), b.reshape(-1, 8), batch_dims=1, backend="cpu"))
    gpu = np.asarray(tp.layers.silu_mul(a.reshape(-1, 8), b.reshape(-1, 8), batch_dims=1, backend="cuda"))
    assert bits_equal(cpu, gpu)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n,threads", [(1000, 128), (256, 32), (7, None)])
def test_missed_slots_read_their_inputs_again_where_the_placement_puts_them(dtype, n, threads):
    """A missed slot's rare path reads its inputs again from global memory at the slot's element:
    rows spread over a CTA in runs of 4, ragged ones (1000 over 128 threads) padded past their end,
    an odd number of slots a thread (checked two at a time, the last with itself), and a gate
    broadcast to every row; with the midpoint gates, many slots miss."""
    a, b = midpoint_gates(dtype)
    rows = a.size // n
    a, b = a[:rows * n].reshape(rows, n), b[:rows * n].reshape(rows, n)
    for gate in (b, b[rows // 2]):
        scope = tp.cta(threads) if threads else None
        tiles = [np.asarray(tp.layers.silu_mul(a, gate, batch_dims=1, scope=scope, backend=backend))
                 for backend in ("cpu", "cuda")]
        assert bits_equal(*tiles), gate.shape
