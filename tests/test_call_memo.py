"""The call memo (``_calls``): a repeated call signature reuses its bound plan, and nothing a
signature leaves out (a scalar's value, an operand's strides where operands are read through a
contiguous copy, which array an out= is) can make a repeated call wrong."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import tileprim as tp
from conftest import bits_equal, random_tile


def test_a_repeated_signature_is_one_plan_and_new_strides_are_another(rng):
    a, b = random_tile(rng, (6, 10), "float32"), random_tile(rng, (6, 10), "float32")
    assert tp.plan(tp.sum, a, axes=-1) is tp.plan(tp.sum, b, axes=-1)
    strided = random_tile(rng, (6, 20), "float32")[:, ::2]
    assert tp.plan(tp.sum, strided, axes=-1) is not tp.plan(tp.sum, a, axes=-1)


def test_dense_then_strided_then_dense_operands_of_one_shape(rng, backend):
    base = random_tile(rng, (7, 26), "float32")
    dense, strided = np.ascontiguousarray(base[:, :13]), base[:, 13:]
    for x in (dense, strided, dense, strided):
        got = tp.sum(x, axes=-1, backend=backend)
        assert bits_equal(got, tp.sum(np.ascontiguousarray(x), axes=-1, backend=backend))
        np.testing.assert_allclose(got, x.astype(np.float64).sum(-1), rtol=1e-5, atol=1e-5)


def test_a_scalar_operand_is_read_on_every_call(rng):
    x = random_tile(rng, (5, 9), "float32", special=False)
    for value in (2.0, -3.5, 0.25, np.float32(7.0), 7):
        got = tp.mul(x, value)
        assert bits_equal(got, (x * np.float32(value)).astype(np.float32))


def test_each_out_is_checked_and_a_failed_call_writes_nothing(rng):
    x = random_tile(rng, (4, 8), "float32")
    out = np.full(4, np.nan, np.float32)
    assert tp.sum(x, axes=-1, out=out) is out
    read_only = np.full(4, np.nan, np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="out: the array is read-only"):
        tp.sum(x, axes=-1, out=read_only)
    assert np.isnan(read_only).all()
    wrong = np.full(4, np.nan, np.float64)
    with pytest.raises(TypeError, match="out: dtype float64 differs"):
        tp.sum(x, axes=-1, out=wrong)
    assert np.isnan(wrong).all()


def test_scopes_are_one_object_per_kind_and_size():
    assert tp.cta(32) is tp.cta(32) and tp.ExecScope("warp", 32) is tp.warp
    assert tp.cta(128) != tp.warpgroup and tp.cta(32) != tp.warp
    assert pickle.loads(pickle.dumps(tp.cta(64))) is tp.cta(64)
    assert copy.deepcopy(tp.warp) is tp.warp and copy.copy(tp.thread) is tp.thread
    assert len({tp.cta(32), tp.cta(32), tp.warp}) == 2


def test_repeated_collectives_read_only_types_with_a_dlpack_exchange_table():
    """NumPy publishes no DLPack C exchange table: its repeated treduce calls stay on the memo path."""
    with pytest.raises(ValueError, match="numpy.ndarray publishes no DLPack C exchange table"):
        tp._C.RepeatedCollective(np.ndarray)
    with pytest.raises(TypeError, match="array_type: expected a type"):
        tp._C.RepeatedCollective(np.zeros(3))


def test_an_inline_layout_is_keyed_by_its_value(rng):
    """S[...] written in the call builds new objects each time; equal layouts hit one plan."""
    from tileprim import S, TileLayout, laneid
    a = random_tile(rng, (32, 8), "float32")
    first = tp.plan(tp.warp.sum, a, axes=-1, layout=S[(32, 8):(1 @ laneid, 1)])
    assert tp.plan(tp.warp.sum, a, axes=-1, layout=S[(32, 8):(1 @ laneid, 1)]) is first
    assert tp.plan(tp.warp.sum, a, axes=-1, layout=TileLayout(S[(32, 8):(1 @ laneid, 1)])) is first
    assert tp.plan(tp.warp.sum, a, axes=-1, layout=S[(32, 8):(1 @ laneid, 2)]) is not first
    # a float extent equals an int one but is no extent: it reaches the check, cached or not
    with pytest.raises(TypeError, match="layout: extent 32.0 must be an integer"):
        tp.plan(tp.warp.sum, a, axes=-1, layout=S[(32.0, 8):(1 @ laneid, 1)])


def test_a_program_constant_of_minus_zero_is_not_the_one_traced_for_zero():
    @tp.program
    def scaled(x, s):
        return x * s

    x = np.array([[1.0, -2.0, 0.0, 3.0]], np.float32)
    for s in (0.0, -0.0, 0.0, float("nan"), float("nan")):  # equal as keys (0.0 == -0.0): traced apart
        assert bits_equal(scaled(x, s, batch_dims=1, backend="cpu"), x * np.float32(s)), s


@pytest.mark.parametrize("call", [
    lambda a, v: tp.sum(a, axes=v, backend="cpu"),
    lambda a, v: tp.sum(a, axes=(0, v), backend="cpu"),
    lambda a, v: tp.sum(a, axes=-1, batch_dims=v, backend="cpu"),
    lambda a, v: tp.exp(a, batch_dims=1, backend="cpu", fastmath=v),
    lambda a, v: tp.program(lambda x: x * 2)(a, batch_dims=v, backend="cpu"),
])
@pytest.mark.parametrize("good,bad", [(1, 1.0), (1, True), (True, 1)])
def test_an_argument_of_the_wrong_type_is_refused_after_the_right_one_ran(call, good, bad):
    a = np.ones((2, 4), np.float32)
    try:
        call(a, good)
    except TypeError:  # a type this option does not take at all (True where an int is due)
        return
    with pytest.raises(TypeError):
        call(a, bad)
