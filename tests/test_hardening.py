"""No input crashes tileprim and no answer is silently wrong: each malformed or unusual call of
the hardening issue gives a clear ValueError/TypeError naming the argument and the rule, or
NumPy's answer; out= is untouched on failure; long CPU work stops on Ctrl-C; threads may call
at once."""
import os
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
    ("sqrt takes no variant options", TypeError, lambda: tp.sqrt(A, propagate_nan=True)),
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
