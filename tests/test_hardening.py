"""No input crashes tileprim and no answer is silently wrong: each malformed or unusual call of
the hardening issue gives a clear ValueError/TypeError naming the argument and the rule, or
NumPy's answer; out= is untouched on failure; long CPU work stops on Ctrl-C; threads may call
at once."""
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import tileprim as tp
from tileprim import R, S, Swizzle, TileLayout, laneid
from conftest import bits_equal

A = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
W = np.random.default_rng(2).standard_normal((32, 8)).astype(np.float32)

BAD = [  # (what the message holds, the error, the call)
    ("spans more than 2**63", ValueError, lambda: tp.plan(tp.sum, np.ones(8, "f4"), layout=S[(8,):(2 ** 61,)])),
    ("registers per thread", ValueError, lambda: tp.warp.sqrt(W, layout=S[(32, 8):(1 @ laneid, 2 ** 56)])),
    ("spans more than 2**63", ValueError, lambda: TileLayout(S[(8,):(2 ** 61,)]).span),
    ("places more than 2**63", ValueError, lambda: TileLayout(S[(2 ** 40, 2 ** 40)]).size),
    ("masked arrays are not supported", TypeError, lambda: tp.sum(np.ma.masked_array(A, A > 0))),
    ("more than 2**16 places", ValueError, lambda: TileLayout(S[8:1] + R[2 ** 30:1]).apply(3)),
    ("must fit in 227 KiB", ValueError, lambda: tp.cta(32).sum(A, layout=S[(4, 8):(2 ** 30, 1)])),
    ("must fit in 227 KiB", ValueError, lambda: tp.cta(32).sum(np.ones((256, 256), "f4"))),
    ("thread_reduce: expected True or False", TypeError, lambda: tp.sum(A, thread_reduce="yes")),
    ("sqrt takes the variant options fastmath", TypeError, lambda: tp.sqrt(A, propagate_nan=True)),
    ("not a known architecture; the targets are sm_75", ValueError, lambda: tp.sum(A, target="sm_999")),
    ("dtype: expected a dtype", TypeError, lambda: tp.cast(A, None)),
    ("accum: expected True or False", TypeError, lambda: tp.sum(A, out=np.zeros(4, "f4"), accum="yes")),
    ("index: 8 is outside", ValueError, lambda: TileLayout(S[8:1]).apply(8)),
    ("dims must be at least 1", ValueError, lambda: TileLayout(S[-1])),
    ("swizzle: Swizzle(62, 3, 3) needs", ValueError, lambda: Swizzle(62, 3, 3)),
    ("src: a 0-d array", ValueError, lambda: tp.sum(np.array(3.0, "f4"))),
    ("axes=", TypeError, lambda: tp.sum(A, axis=1)),
    ("dtype object is not supported", TypeError, lambda: tp.sum(np.array([1, "a"], dtype=object))),
    ("dtype complex128 is not supported", TypeError, lambda: tp.sqrt(np.ones(4, complex))),
    ("dtype int64 is not supported", TypeError, lambda: tp.sum(np.ones(4, np.int64))),
    ("dtype bool is not supported", TypeError, lambda: tp.add(np.ones(4, bool), 1.0)),
    ("puts elements", ValueError, lambda: tp.cta(32).sum(A, layout=S[(4, 8):(0, 1)])),
    ("stride 9223372036854775808 does not fit", ValueError, lambda: TileLayout(S[8:2 ** 63])),
]


@pytest.mark.parametrize("words,error,call", BAD, ids=[b[0] for b in BAD])
def test_bad_calls_raise_clear_errors(words, error, call):
    with pytest.raises(error) as e:
        call()
    assert words in str(e.value)


def test_failures_leave_out_untouched():
    out = np.full(4, 7.0, np.float32)
    for call in (lambda: tp.sum(A, out=out, target="sm_999"), lambda: tp.sum(A, out=out, thread_reduce=1),
                 lambda: tp.sum(A.astype(np.float16), out=out)):
        with pytest.raises((ValueError, TypeError)):
            call()
        assert np.all(out == 7.0)


@pytest.mark.parametrize("order", [">", "<"])
def test_other_byte_orders_are_read_as_numpy_does(order):
    a = A.astype(order + "f4")
    assert bits_equal(tp.sum(a, axes=-1), tp.sum(A, axes=-1))
    assert bits_equal(tp.sqrt(np.abs(a)), tp.sqrt(np.abs(A)))
    assert bits_equal(tp.add(a, A), tp.add(A, A))


def test_numpy_integers_are_accepted_everywhere():
    n = np.int64
    assert tp.sum(A, axes=n(-1), batch_dims=n(1)).shape == (4,)
    assert tp.cta(np.int32(32)).sum(A).shape == (4,)
    assert tp.sum(A, layout=S[(n(4), n(8)):(n(8), n(1))]).shape == (4,)


def test_empty_batches_give_empty_results_as_numpy():
    assert tp.sum(np.ones((0, 8), "f4"), batch_dims=1).shape == np.ones((0, 8)).sum(-1).shape
    assert tp.sqrt(np.ones((0, 3, 8), "f4"), batch_dims=1).shape == (0, 3, 8)
    assert tp.add(np.ones((2, 0, 5), "f4"), 1.0, batch_dims=2).shape == (2, 0, 5)


# ---- the NaN rule: NaN is fmax's identity, one call gives one answer on every variant --------------
NAN_CASES = [  # (variant, scope, kwargs, tile shape, axes)
    ("local", tp.thread, {}, (5, 16), -1),
    ("local", tp.warp, dict(layout=S[(32, 8):(1 @ laneid, 1)]), (32, 8), 0),
    ("shared", tp.cta(32), dict(storage="shared"), (5, 16), -1),
    ("shared", tp.cta(20), dict(storage="shared"), (3, 7), -1),   # padding lanes in a group of 8
    ("sm100_packed", tp.thread, dict(target="sm_100a", batch_dims=1), (5, 16), -1),
]


@pytest.mark.parametrize("variant,scope,kwargs,shape,axes", NAN_CASES, ids=[c[0] + "-" + str(c[1]) for c in NAN_CASES])
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("propagate_nan", [False, True])
def test_nan_rule_on_every_variant(variant, scope, kwargs, shape, axes, op, propagate_nan):
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[:: 3] = np.nan                          # NaN mixed in
    x[0] = np.nan if shape[0] > 1 else x[0]       # a slice of only NaNs (rows, or columns at axes=0)
    x[..., 0] = np.nan
    flat[1] = np.inf
    flat[2] = -np.inf
    flat[4], flat[5] = 0.0, -0.0
    if propagate_nan:
        kwargs = dict(kwargs, propagate_nan=True)
    fn = getattr(scope, op)
    plan = tp.plan(fn, x, axes=axes, **kwargs) if "batch_dims" not in kwargs else tp.plan(fn, x, **kwargs)
    assert plan.variant == variant
    got = fn(x, axes=axes, **kwargs) if "batch_dims" not in kwargs else fn(x, **kwargs)
    numpy = {("max", False): np.fmax, ("min", False): np.fmin,
             ("max", True): np.maximum, ("min", True): np.minimum}[(op, propagate_nan)]
    expected = numpy.reduce(x.astype(np.float64), axis=axes if "batch_dims" not in kwargs else -1)
    assert np.array_equal(np.asarray(got, np.float64), expected, equal_nan=True), (got, expected)
    if not propagate_nan:
        all_nan = np.all(np.isnan(x), axis=axes if "batch_dims" not in kwargs else -1)
        assert np.all(np.isnan(np.asarray(got)[all_nan]))  # NaN, not +-inf


def test_signed_zeros_order_as_minus_below_plus():
    z = np.array([0.0, -0.0, -0.0, 0.0] * 4, np.float32)
    for fn in (tp.max, tp.min):
        for kwargs in ({}, dict(target="sm_100a")):
            got = fn(z, **kwargs)
            assert np.signbit(got) == (fn is tp.min)


# ---- interrupts and threads ----------------------------------------------------------------------
def test_ctrl_c_stops_a_long_cpu_call_within_half_a_second_and_leaves_out_alone():
    script = textwrap.dedent("""
        import signal, sys, threading, time
        import numpy as np
        import tileprim as tp
        x = np.ones((1 << 19, 32, 8), np.float32)
        out = np.full((1 << 19, 8), 7.0, np.float32)
        L = tp.S[(32, 8):(1 @ tp.laneid, 1)]
        tp.warp.sum(x[:2], axes=0, layout=L, batch_dims=1, backend="cpu")   # plan and warm up
        print("ready", flush=True)
        start = time.monotonic()
        try:
            tp.warp.sum(x, axes=0, layout=L, batch_dims=1, out=out, backend="cpu")
            print("finished", time.monotonic() - start)
        except KeyboardInterrupt:
            print("interrupted", time.monotonic() - start, bool(np.all(out == 7.0)), flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    line = proc.stdout.readline().split()
    latency = time.monotonic() - sent
    proc.wait(timeout=30)
    assert line[0] == "interrupted", line
    assert line[2] == "True", "out was written"
    assert latency < 0.5, latency


def test_threads_may_call_at_once_and_get_their_own_answers():
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal((256, 4, 16)).astype(np.float32) for _ in range(8)]
    expected = [tp.sum(x, batch_dims=1, backend="cpu") for x in inputs]
    results = [None] * len(inputs)

    def work(i):
        for _ in range(20):
            results[i] = tp.sum(inputs[i], batch_dims=1, backend="cpu")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(bits_equal(r, e) for r, e in zip(results, expected))


# ---- ndarray subclasses: plain memory is read as its data, meaning is refused (one rule) -----------
class Tagged(np.ndarray):
    """A subclass that adds nothing but a type: plain memory."""


def as_memmap(x, path):
    m = np.memmap(path, dtype=x.dtype, mode="w+", shape=x.shape)
    m[...] = x
    return m


def subclasses_of(x, path) -> list:
    return [as_memmap(x, path), x.view(Tagged)]


def test_plain_memory_subclasses_are_read_as_their_data_by_ops_and_treduce(tmp_path, rng):
    x = rng.standard_normal((5, 37)).astype(np.float32)
    x[0, 3], x[1, 4] = np.nan, -np.inf
    for i, s in enumerate(subclasses_of(x, tmp_path / "ops.bin")):
        assert bits_equal(tp.sum(s, axes=-1), tp.sum(x, axes=-1))
        assert bits_equal(tp.add(s, 1.5), tp.add(x, 1.5))
        out = np.memmap(tmp_path / f"out{i}.bin", dtype=np.float32, mode="w+", shape=(5,))
        out[...] = np.nan
        assert tp.sum(s, axes=-1, out=out) is out and bits_equal(np.asarray(out), tp.sum(x, axes=-1))
    xs = [rng.standard_normal((3, 17)).astype(np.float32) for _ in range(3)]
    expected = tp.comm.treduce(tp.comm.ParallelGroup(xs, root=1))
    ranks = [xs[0], as_memmap(xs[1], tmp_path / "r1.bin"), xs[2].view(Tagged)]
    dst = np.memmap(tmp_path / "dst.bin", dtype=np.float32, mode="w+", shape=(3, 17))
    dst[...] = np.nan
    assert tp.comm.treduce(tp.comm.ParallelGroup(ranks, root=1), dst) is dst
    assert bits_equal(np.asarray(dst), expected)
    comm = tp.comm.init(backend="cpu")  # a world of one: the distributed path
    try:
        dst = np.full((3, 17), np.nan, np.float32).view(Tagged)
        assert tp.comm.treduce(tp.comm.ParallelGroup.distributed(ranks[1], root=0, comm=comm), dst) is dst
        assert bits_equal(np.asarray(dst), xs[1])
    finally:
        comm.close()


MEANINGFUL = [(lambda x: np.ma.masked_array(x, x > 0), "masked arrays are not supported"),
              (np.asmatrix, "np.matrix is not supported")]


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("make,words", MEANINGFUL, ids=["masked", "matrix"])
def test_subclasses_whose_values_carry_meaning_are_refused_naming_the_argument(make, words):
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    calls = [("src", lambda: tp.sum(make(x))), ("b", lambda: tp.add(x, make(x))),
             ("out", lambda: tp.sum(x, axes=-1, out=make(np.zeros((4, 1), np.float32)))),
             ("tensors[1]", lambda: tp.comm.treduce(tp.comm.ParallelGroup([x, make(x)], root=0))),
             ("dst", lambda: tp.comm.treduce(tp.comm.ParallelGroup([x, x], root=0), make(np.zeros_like(x))))]
    for arg, call in calls:
        with pytest.raises(TypeError, match=f"{re.escape(arg)}: {words}"):
            call()
    comm = tp.comm.init(backend="cpu")  # a world of one: the distributed path's own check
    try:
        with pytest.raises(TypeError, match=f"rank 0: x: {words}"):
            tp.comm.treduce(tp.comm.ParallelGroup.distributed(make(x), root=0, comm=comm))
    finally:
        comm.close()


# ---- numbers beyond range, ragged lists, immutable groups, scopes, layouts of another shape --------
def test_a_scalar_beyond_float64_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"b: the scalar 135829852904\.\.\.165376 \(332 characters\) is beyond"):
        tp.add(A, 2 ** 1100)
    with pytest.raises(ValueError, match="a: the scalar -13582985290"):
        tp.add(-(2 ** 1100), A)


def test_a_ragged_list_is_refused_naming_the_argument():
    with pytest.raises(ValueError, match="src: a nested sequence whose rows differ in length is not an array"):
        tp.sum([[1.0, 2.0], [3.0]])


def test_a_parallel_group_is_immutable():
    g = tp.comm.ParallelGroup([A, A], root=0)
    for name, value in (("root", 5), ("tensors", [A])):
        with pytest.raises(AttributeError, match=f"ParallelGroup is immutable: {name} cannot be set"):
            setattr(g, name, value)
    assert g.root == 0 and g.size == 2
    assert bits_equal(tp.comm.treduce(g), tp.add(A, A))


@pytest.mark.parametrize("kind,threads,words", [
    ("warp", 7, "a warp is 32 threads, not 7"), ("warpgroup", 64, "a warpgroup is 128 threads, not 64"),
    ("thread", 2, "a thread is 1 thread, not 2"), ("cta", 2048, "needs 1 <= threads <= 1024"),
    ("cluster", 32, r"cluster\(ctas=1\) needs 2, 4, 8 or 16 CTAs"), ("grid", 32, "kind: 'grid' is not a scope")])
def test_a_scope_of_the_wrong_size_is_refused_with_the_rule(kind, threads, words):
    with pytest.raises(ValueError, match=words):
        tp.ExecScope(kind, threads)
    assert tp.ExecScope("warp", 32) is tp.warp


def test_a_layout_of_another_shape_and_the_same_size_is_grouped_into_the_tiles_dims():
    """The layout maps the tile's row-major element index (TIRx's layout.group(shape)): S[(8, 4):(4, 1)]
    over a 4 x 8 tile is its dims split as (4, 8), rows of 8 consecutive elements; the values are
    the tile's either way. A layout whose iters cannot be split at the tile's dims is refused."""
    grouped = TileLayout(S[(8, 4):(4, 1)]).dims((4, 8))
    assert [[(i.extent, i.stride) for i in d.iters] for d in grouped] == [[(4, 8)], [(2, 4), (4, 1)]]
    assert bits_equal(tp.sum(A, axes=-1, layout=S[(8, 4):(4, 1)]), tp.sum(A, axes=-1))
    assert bits_equal(tp.cta(32).max(A, axes=0, layout=S[(8, 4):(1, 8)]), tp.cta(32).max(A, axes=0))
    with pytest.raises(ValueError, match=r"layout: .* cannot be split into the dims of \(4, 6\)"):
        tp.sum(np.ones((4, 6), np.float32), layout=S[(6, 4):(4, 1)])


def test_an_operand_of_more_dims_than_numpy_broadcasts_is_refused_naming_it():
    """NumPy broadcasts at most 32 dims; past them its RuntimeError named no argument."""
    x = np.ones((1,) * 33 + (4,), np.float32)
    with pytest.raises(ValueError, match=r"^src: 34 dims; an operand has at most 32"):
        tp.exp(x, batch_dims=33)
    with pytest.raises(ValueError, match=r"^x: 34 dims; an argument has at most 32"):
        tp.program(lambda x: tp.exp(x))(x, batch_dims=33)
