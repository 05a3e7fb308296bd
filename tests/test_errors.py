"""Bad input raises ValueError / TypeError naming the argument and the rule, and out= is never
written on failure."""
import numpy as np
import pytest

import tileprim as tp
from tileprim import S, TileLayout, laneid, warpid

A = np.random.default_rng().standard_normal((4, 8)).astype(np.float32)
LANES = S[(32, 8):(1 @ laneid, 1)]


def sentinel(shape, dtype=np.float32):
    return np.full(shape, 1234.5, dtype)


BAD_CALLS = [
    ("axes: axis 2 is out of range for a tile of rank 2", ValueError, lambda out: tp.sum(A, axes=2, out=out), (4,)),
    ("axes: axis -1 is repeated", ValueError, lambda out: tp.sum(A, axes=(1, -1), out=out), (4,)),
    ("axes: axis 2147483648 is out of range", ValueError, lambda out: tp.sum(A, axes=2 ** 31, out=out), (4,)),
    ("axes: axis -100000000000000000000 is out of range", ValueError,
     lambda out: tp.max(A, axes=(0, -10 ** 20), out=out), (4,)),
    ("axis: axis 2147483648 is out of range", ValueError,
     lambda out: tp.take_along_axis(A, np.zeros((4, 1), np.int64), axis=2 ** 31, out=out), (4, 1)),
    ("axes: axis 4294967296 is out of range", ValueError,
     lambda out: tp.program(lambda x: tp.sum(x, axes=2 ** 32))(A, batch_dims=1, out=out), (4,)),
    ("axes: expected an int", TypeError, lambda out: tp.sum(A, axes=1.0, out=out), (4,)),
    ("b: dtype float16 differs from a's float32", TypeError,
     lambda out: tp.add(A, A.astype(np.float16), out=out), (4, 8)),
    ("src: dtype int32 is not supported", TypeError, lambda out: tp.sum(A.astype(np.int32), out=out), (4,)),
    ("src: dtype complex64 is not supported", TypeError, lambda out: tp.exp(A.astype(np.complex64), out=out), (4, 8)),
    ("layout: S[(4, 6) : (6, 1)] places 24 elements but the tile shape (4, 8) has 32", ValueError,
     lambda out: tp.sum(A, layout=S[(4, 6):(6, 1)], out=out), (4,)),
    ("uses thread axis laneid, which thread scope does not have", ValueError,
     lambda out: tp.sum(np.ones((32, 8), np.float32), layout=LANES, out=out), (32,)),
    ("uses thread axis warpid, which warp scope does not have", ValueError,
     lambda out: tp.warp.sqrt(np.ones((2, 8), np.float32), layout=S[(2, 8):(1 @ warpid, 1)], out=out), (2, 8)),
    ("puts element 32 on thread 32 but warp scope has 32 threads", ValueError,
     lambda out: tp.warp.sqrt(np.ones((64,), np.float32), layout=S[64:1 @ laneid], out=out), (64,)),
    ("puts elements 0 and 1 in register 0 of thread 0", ValueError,
     lambda out: tp.warp.sqrt(np.ones((2,), np.float32), layout=S[2:0], out=out), (2,)),
    ("shared tile is addressed by m only", ValueError,
     lambda out: tp.cta(32).sum(np.ones((32, 8), np.float32), layout=LANES, storage="shared", out=out), (32,)),
    ("storage: unknown storage scope 'smem'", ValueError, lambda out: tp.sum(A, storage="smem", out=out), (4,)),
    ("threads: cta(threads=2000) needs 1 <= threads <= 1024", ValueError, lambda out: tp.cta(2000), None),
    ("target: 'hopper' is not a known architecture", ValueError, lambda out: tp.sum(A, target="hopper", out=out), (4,)),
    ("dispatch: no variant named 'fast'", ValueError, lambda out: tp.sum(A, dispatch="fast", out=out), (4,)),
    ("unexpected keyword argument 'thread_reduc'", TypeError,
     lambda out: tp.sum(A, thread_reduc=True, out=out), (4,)),
    ("batch_dims: 2 must leave at least one tile dim", ValueError, lambda out: tp.sum(A, batch_dims=2, out=out), (4,)),
    ("out: shape (5,) differs from the result's (4,)", ValueError, lambda out: tp.sum(A, out=out), (5,)),
    # a trailing 1 only where a whole-tile reduction dropped its tile (1,): a map's out= is NumPy's shape
    ("out: shape (4, 8, 1) differs from the result's (4, 8)", ValueError, lambda out: tp.exp(A, out=out), (4, 8, 1)),
    ("out: shape (4, 8, 1) differs from the result's (4, 8)", ValueError,
     lambda out: tp.program(lambda x: tp.exp(x))(A, batch_dims=1, out=out), (4, 8, 1)),
    ("out: dtype float64 differs from the result's float32", TypeError,
     lambda out: tp.sum(A, out=out.astype(np.float64)), (4,)),
    ("accum: accum=True folds the result into out=", ValueError, lambda out: tp.sum(A, accum=True), None),
    ("unexpected keyword argument 'accum'", TypeError, lambda out: tp.sqrt(A, out=out, accum=True), (4, 8)),
    ("b: dtype float32 differs from a's float16", TypeError,  # a float32 cond: not the one named
     lambda out: tp.where(A, A.astype(np.float16), A, out=out), (4, 8)),
    ("operand shapes do not broadcast", ValueError, lambda out: tp.add(A, np.ones(3, np.float32), out=out), (4, 8)),
    ("add: at least one operand must be an array", ValueError, lambda out: tp.add(1.0, 2.0, out=out), (4, 8)),
    ("value: fill takes a Python scalar value", TypeError, lambda out: tp.fill(A, A, out=out), (4, 8)),
    ("scope: expected tp.thread", TypeError, lambda out: tp.sum(A, scope="warp", out=out), (4,)),
    ("backend: 'tpu' is not 'cpu' or 'cuda'", ValueError, lambda out: tp.sum(A, backend="tpu", out=out), (4,)),
    ("op: 'prod' is not a tileprim op", ValueError, lambda out: tp.plan("prod", A), None),
    ("layout: expected a TileLayout or S[...] syntax", TypeError, lambda out: tp.sum(A, layout=(4, 8), out=out), (4,)),
    ("no variant accepts", tp.DispatchError, lambda out: tp.sum(A, storage="global", out=out), (4,)),
]


@pytest.mark.parametrize("message,error,call,out_shape", BAD_CALLS, ids=[m[:40] for m, *_ in BAD_CALLS])
def test_bad_input_names_the_argument_and_leaves_out_untouched(message, error, call, out_shape):
    out = sentinel(out_shape) if out_shape is not None else None
    with pytest.raises(error) as err:
        call(out)
    assert message in str(err.value)
    if out is not None:
        assert np.all(out == 1234.5), "out was written by a failed call"


def test_dispatch_error_is_a_value_error():
    assert issubclass(tp.DispatchError, ValueError)


def test_read_only_out_is_refused():
    out = np.zeros(4, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out: the array is read-only"):
        tp.sum(A, out=out)


def test_bad_layout_syntax():
    with pytest.raises(TypeError, match="stride"):
        S[4:1.5]
    with pytest.raises(ValueError, match="no third part"):
        S[4:1:2]
    with pytest.raises(TypeError, match="swizzle"):
        TileLayout(S[4:1], swizzle="128B")


@pytest.mark.parametrize("call,message", [
    (lambda: tp.sum(np.ones((4, 64), np.float32), axes=5, batch_dims=1), "axes: axis 5 is out of range"),
    (lambda: tp.exp(np.ones((3, 0), np.float32), batch_dims=1), "src: tile dims must be at least 1"),
    (lambda: tp.max(np.ones((4, 64), np.float32), axes=(1, 1), batch_dims=1), "axes"),
    # rows some scopes refuse as too long: the others' refusal is the call's
    (lambda: tp.sum(np.ones((2, 262144), np.float32), axes=1, batch_dims=1), "axes: axis 1 is out of range"),
    # refused alike at every CTA, a cluster adding reasons of its own beside the call's
    (lambda: tp.sum(np.ones((4, 64), np.float32), dispatch="nope", batch_dims=1), "dispatch: no variant named 'nope'"),
    (lambda: tp.sum(np.ones((4, 64), np.float32), axes=(), batch_dims=1), "axes: reduce at least one axis"),
    (lambda: tp.max(np.ones((4, 0), np.float32), axes=-1, batch_dims=1), "src: tile dims must be at least 1"),
])
def test_with_no_scope_named_an_arguments_error_is_raised_as_it_is_not_per_scope(call, message):
    with pytest.raises(ValueError, match=message) as e:
        call()
    assert "no scope holds" not in str(e.value) and "cta(64)" not in str(e.value)


@pytest.mark.parametrize("call,message", [
    (lambda: tp.add(np.ones((4, 37), np.float32), np.ones((4, 37)), batch_dims=1), "b: dtype float64 differs"),
    (lambda: tp.exp(np.ones((4, 37), np.int32), batch_dims=1), "src: dtype int32"),
])
def test_a_batched_call_with_no_scope_words_its_errors_as_a_call_at_a_scope(call, message):
    """No program line or step before the argument's name (the one-step program has none)."""
    with pytest.raises(TypeError) as e:
        call()
    assert str(e.value).startswith(message)


def test_a_scope_method_given_another_scope_is_refused():
    a = np.ones((4, 8), np.float32)
    with pytest.raises(TypeError, match="scope: tp.warp's method was called with scope="):
        tp.warp.sum(a, axes=-1, scope=tp.cta(32))
    with pytest.raises(TypeError, match="scope: tp.warp's method"):
        tp.plan(tp.warp.sum, a, axes=-1, scope=tp.cta(32))
    assert tp.plan(tp.warp.sum, a, axes=-1, scope=tp.warp).scope == "warp"  # the same scope: one call


def test_a_row_no_scope_holds_gives_each_scopes_limit():
    """Past every scope, each candidate's reason is the planner's own placement's: the register
    slots it needed against the limit, at the clusters too (not a variants table's header)."""
    with pytest.raises(tp.DispatchError, match="no scope holds its tiles") as e:
        tp.sum(np.ones((1, 10 ** 7), np.float32), batch_dims=1)
    lines = str(e.value).splitlines()[1:]
    assert lines and all("register slots per thread; the limit is 1024" in line for line in lines)
    assert any(line.startswith("  cluster(16x512): ") for line in lines)
    assert not any("variant       priority" in line or "no placement is accepted" in line for line in lines)
