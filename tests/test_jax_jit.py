"""tileprim ops inside jax.jit / jax.vmap: a host callback (jax.pure_callback) with the eager
call's options, so the same bits as the eager NumPy call; clear errors where jit cannot follow."""
from __future__ import annotations

import numpy as np
import pytest

import tileprim as tp
from conftest import random_tile

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def test_jit_gives_the_eager_bits(rng):
    x = random_tile(rng, (5, 12), "float32")
    y = random_tile(rng, (12,), "float32")

    def f(x, y):
        m = tp.max(x, batch_dims=1, backend="cpu")
        e = tp.exp(tp.sub(x, m[:, None], backend="cpu"), backend="cpu")
        return tp.fma(e, y, 0.5, batch_dims=1, backend="cpu"), tp.cta(32).sum(e, batch_dims=1, backend="cpu"), \
            tp.cast(tp.mul(-2.0, x, backend="cpu"), "bfloat16", backend="cpu")
    got = jax.jit(f)(jnp.asarray(x), jnp.asarray(y))
    expected = f(x, y)
    for g, e in zip(got, expected):
        assert isinstance(g, jax.Array) and g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(np.asarray(g).view(np.uint8), e.view(np.uint8))  # bits: NaNs included


def test_vmap_maps_the_call_over_the_rows(rng):
    x = random_tile(rng, (7, 9), "float32")
    sums = jax.vmap(lambda row: tp.sum(row, backend="cpu"))(jnp.asarray(x))  # a tile each: tp.thread's
    np.testing.assert_array_equal(np.asarray(sums), tp.sum(x, batch_dims=1, backend="cpu", scope=tp.thread))
    rows = jax.vmap(lambda row: tp.silu(row, backend="cpu"))(jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(rows), tp.silu(x, backend="cpu"))


def test_what_jit_cannot_follow_is_a_clear_error(rng):
    x = jnp.asarray(random_tile(rng, (4, 8), "float32"))
    with pytest.raises(TypeError, match="JAX arrays are immutable"):
        jax.jit(lambda x: tp.sum(x, batch_dims=1, out=x[:, 0], backend="cpu"))(x)
    with pytest.raises(TypeError, match="outside jax.jit"):
        jax.jit(lambda x: tp.plan(tp.exp, x, backend="cpu").variant and x)(x)
    with pytest.raises(ValueError, match="do not support JVP"):  # no derivative: JAX says so, nothing dropped
        jax.grad(lambda x: tp.sum(x, axes=(0, 1), backend="cpu"))(x)


def test_jax_cpu_arrays_in_give_jax_arrays_out(rng):
    x = random_tile(rng, (5, 33), "float32")
    xj = jax.device_put(x, jax.devices("cpu")[0])  # on the CPU where JAX also has a GPU
    for _ in range(2):  # the second call through the memo
        got = tp.sum(xj, axes=-1, batch_dims=1)
        assert isinstance(got, jax.Array) and np.array_equal(np.asarray(got), tp.sum(x, axes=-1, batch_dims=1),
                                                             equal_nan=True)
    half = tp.exp(xj.astype(jnp.bfloat16), batch_dims=1)
    assert isinstance(half, jax.Array) and half.dtype == jnp.bfloat16
    two = tp.program(lambda a: (tp.exp(a), tp.max(a, axes=-1)))(xj, batch_dims=1)
    assert isinstance(two, tuple) and all(isinstance(t, jax.Array) for t in two)
    with pytest.raises(TypeError, match="out: JAX arrays are immutable"):
        tp.sum(xj, axes=-1, batch_dims=1, out=jax.device_put(np.zeros(5, np.float32), jax.devices("cpu")[0]))
    out = np.zeros(5, np.float32)
    assert tp.sum(xj, axes=-1, batch_dims=1, out=out) is out


def test_a_tile_program_under_jit_gives_the_eager_bits(rng):
    x = random_tile(rng, (6, 40), "float32")
    label = rng.integers(0, 40, (6, 1)).astype(np.int32)
    two = tp.program(lambda a: (tp.exp(a - tp.max(a, axes=-1, keepdims=True)), tp.sum(a, axes=-1)))
    got = jax.jit(lambda a: two(a, batch_dims=1))(jnp.asarray(x))
    want = two(x, batch_dims=1)
    assert isinstance(got, tuple) and all(np.array_equal(np.asarray(g), w, equal_nan=True) for g, w in zip(got, want))
    norm = jax.jit(lambda a, w: tp.layers.rms_norm(a, w, 1e-6, batch_dims=1))(jnp.asarray(x), jnp.ones(40))
    assert np.array_equal(np.asarray(norm), tp.layers.rms_norm(x, np.ones(40, np.float32), 1e-6, batch_dims=1),
                          equal_nan=True)
    taken = jax.jit(lambda a, i: tp.take_along_axis(a, i, batch_dims=1))(jnp.asarray(x), jnp.asarray(label))
    assert np.array_equal(np.asarray(taken), np.take_along_axis(x, label, axis=-1), equal_nan=True)
    rows = jax.vmap(lambda a: two(a)[1])(jnp.asarray(x))  # the program of one tile, mapped over rows
    assert np.array_equal(np.asarray(rows), want[1], equal_nan=True)
    with pytest.raises(TypeError, match="inside jax.jit JAX arrays are immutable"):
        jax.jit(lambda a: two(a, batch_dims=1, out=(a, a)))(jnp.asarray(x))


def test_numpy_scalars_under_jit_are_scalars(rng):
    """np.float32 and np.int32 arguments pass as scalars, as Python's do (np.float32 was taken for a
    0-d array and refused)."""
    x = random_tile(rng, (3, 20), "float32")
    scale = tp.program(lambda a, t: a * t)
    for t in (np.float32(0.5), np.float64(-2.0), np.int32(3), 1.5):
        got = jax.jit(lambda a: scale(a, t, batch_dims=1))(jnp.asarray(x))
        assert np.array_equal(np.asarray(got), scale(x, t, batch_dims=1), equal_nan=True)


def test_a_program_with_defaults_and_keyword_only_parameters_under_jit_and_vmap():
    @tp.program
    def norm(x, w, eps=1e-6, *, scale=1.0):
        return x * tp.rsqrt(tp.sum(x * x, axes=-1, keepdims=True) / x.shape[-1] + eps) * w * scale

    rng = np.random.default_rng(7)
    x = jnp.asarray(rng.standard_normal((4, 16)).astype(np.float32))
    w = jnp.asarray(rng.uniform(0.5, 1.5, 16).astype(np.float32))
    eager = np.asarray(norm(x, w, scale=2.0, batch_dims=1))
    assert np.array_equal(np.asarray(jax.jit(lambda x, w: norm(x, w, scale=2.0, batch_dims=1))(x, w)), eager)
    rows = jax.vmap(lambda r: norm(r, w, scale=2.0))(x)
    assert np.array_equal(np.asarray(rows), eager)


def test_planning_a_program_on_tracers_is_a_clear_error():
    program = tp.program(lambda a: tp.exp(a))

    def planned(x):
        tp.plan(program, x, batch_dims=1)
        return x
    with pytest.raises(TypeError, match=r"<lambda>: tp.plan needs concrete arrays, not JAX tracers"):
        jax.jit(planned)(jnp.ones((2, 8), jnp.float32))
