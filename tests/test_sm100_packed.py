"""reduction -> sm100_packed: the result is bit for bit a NumPy emulation of the seed's order
(8 slots, add.rn.ftz.f32x2 on chunks of 8, scalar remainder into slot 0, 8->4->2->1 fold;
max/min with 4 slots and 3-input folds)."""
import numpy as np
import pytest

import tileprim as tp
from conftest import bits_equal

F32 = np.float32
TINY = np.finfo(F32).tiny


def ftz(x):
    x = np.asarray(x, F32)
    return np.where(np.abs(x) < TINY, np.copysign(F32(0), x), x).astype(F32)


def packed_add(a, b):
    """add.rn.ftz.f32x2 on each lane pair: inputs and result flushed."""
    return ftz(ftz(a) + ftz(b))


def emulate_sum(a, old=None):
    n = a.size
    full = n // 8
    acc = a[:8].astype(F32).copy()
    if old is not None:
        acc[0] = F32(a[0]) + F32(old)
    for c in range(1, full):
        acc = packed_add(acc, a[8 * c:8 * c + 8])
    for i in range(8 * full, n):
        acc[0] = F32(acc[0] + a[i])
    acc[0:2] = packed_add(acc[0:2], acc[2:4])
    acc[4:6] = packed_add(acc[4:6], acc[6:8])
    acc[0:2] = packed_add(acc[0:2], acc[4:6])
    return F32(acc[0] + acc[1])


def emulate_maxmin(a, op, old=None):
    f = np.fmax if op == "max" else np.fmin
    n = a.size
    full = n // 8
    t = [f(a[2 * i], a[2 * i + 1]) for i in range(4)]
    if old is not None:
        t[0] = f(f(a[0], a[1]), F32(old))
    for c in range(1, full):
        for i in range(4):
            t[i] = f(f(t[i], a[8 * c + 2 * i]), a[8 * c + 2 * i + 1])
    for i in range(8 * full, n):
        t[0] = f(t[0], a[i])
    return F32(f(f(f(t[0], t[1]), t[2]), t[3]))


def packed_input(rng, n, subnormals):
    a = (rng.standard_normal(n) * rng.choice([1e-3, 1, 1e3], n)).astype(F32)
    if subnormals:
        idx = rng.choice(n, size=max(1, n // 4), replace=False)
        a[idx] = (rng.standard_normal(idx.size) * TINY / 8).astype(F32)  # flushed by the packed adds
    return a


LENGTHS = [8, 9, 15, 16, 17, 24, 31, 63, 64, 65, 100, 256, 1000]


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("accum", [False, True])
@pytest.mark.parametrize("subnormals", [False, True])
def test_packed_sum_is_the_seed_order_bit_for_bit(n, accum, subnormals, backend, rng):
    a = packed_input(rng, n, subnormals)
    old = F32(rng.standard_normal()) if accum else None
    out = np.array(old if accum else np.nan, F32)
    got = tp.sum(a, out=out, accum=accum, target="sm_100a", backend=backend)
    assert tp.plan(tp.sum, a, target="sm_100a").variant == "sm100_packed"
    assert bits_equal(np.asarray(got, F32), np.asarray(emulate_sum(a, old), F32))


def test_ftz_is_visible_where_the_seed_says():
    """Slot k holds the subnormal s of element k; each packed add flushes it, the scalar remainder
    add keeps it."""
    s = F32(TINY / 4)
    a = np.zeros(16, F32)
    a[3] = s       # reaches the packed 8->4->2->1 tree: flushed
    a[9] = s       # packed chunk add: flushed
    assert tp.sum(a, target="sm_100a") == 0.0
    b = np.zeros(9, F32)
    b[8] = s       # the scalar remainder add keeps subnormals ... but the tree flushes slot 0 later
    assert tp.sum(b, target="sm_100a") == 0.0
    c = np.ones(9, F32)
    c[8] = F32(2.0 ** -30)
    assert tp.sum(c, target="sm_100a") == emulate_sum(c)
    assert tp.sum(a, target="sm_90a") == F32(2 * s)  # local keeps them


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("accum", [False, True])
def test_packed_maxmin_is_the_seed_order(op, n, accum, backend, rng):
    a = rng.permutation(np.arange(1, n + 1, dtype=F32) * rng.choice([-1, 1], n).astype(F32))
    if n > 10:
        a[rng.integers(n)] = np.nan
    old = F32(rng.standard_normal() * n) if accum else None
    out = np.array(old if accum else np.nan, F32)
    got = getattr(tp, op)(a, out=out, accum=accum, target="sm_100a", backend=backend)
    assert bits_equal(np.asarray(got, F32), np.asarray(emulate_maxmin(a, op, old), F32))
    plan = tp.plan(getattr(tp, op), a, target="sm_100a")
    assert plan.variant == "sm100_packed" and plan.params["algorithm"] == "3input_maxmin"
