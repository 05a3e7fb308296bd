"""A reduction op is its op-table entry plus its functor: a throwaway op ("prod_test", the
product, registered by the C++ test hook _C._testing) runs through dispatch and the CPU backend
with nothing else told about it; sm100_packed turns it away by its op predicate, with the reason."""
import numpy as np
import pytest

import tileprim as tp
from tileprim import _C, S, laneid

OP = "prod_test"


@pytest.fixture
def prod_test():
    assert _C._testing.register_test_reduction() == OP
    yield OP
    _C._testing.unregister_test_reduction()


def factors(rng, shape, dtype):
    """Magnitudes in [0.5, 1.5) with random signs: a product of a few dozen stays normal."""
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    return x.astype(dtype)


def prepared(shape, dtype, axes, scope="thread", threads=1, storage="local", layout=None, target=""):
    src = _C.TileRef("src", dtype, list(shape), storage, None if layout is None else tp.TileLayout(layout)._core)
    out = _C.TileRef("out", dtype, [], storage, None)
    call = _C.OpCall(OP, [src], out, scope, threads, list(axes), False, {}, "")
    return _C.prepare(call, target, "cpu")


def run(bound, x, tiles, out_shape):
    result = np.full((tiles,) + out_shape, np.nan, x.dtype)  # poisoned: every element must be written
    bound.run_host([np.ascontiguousarray(x)], [0.0], result, tiles)
    return result


def test_listed_with_the_generic_variants(prod_test):
    assert [v[0] for v in tp.variants(prod_test)] == ["sm100_packed", "local", "shared", "cross_warp"]


@pytest.mark.parametrize("dtype,rtol", [("float32", 1e-5), ("float64", 1e-13)])
def test_thread_rows(prod_test, dtype, rtol, rng):
    tiles, n = 5, 37
    x = factors(rng, (tiles, n), dtype)
    x[2, 11] = np.nan
    bound = prepared((n,), dtype, [0], target="sm_100a")
    plan = bound.plan
    assert plan.variant == "local"
    (packed,) = [e for e in plan.trace if e.variant == "sm100_packed"]
    assert packed.reasons[0] == "op: sm100_packed serves sum, max, min; not prod_test"
    assert packed.reasons[1:] == ([] if dtype == "float32" else [f"dtype: dtype {dtype} != float32"])
    assert plan.numerics["identity"] == "1.0" and plan.numerics["nan"] == "IEEE: NaN propagates"
    got = run(bound, x, tiles, (1,))[:, 0]
    want = np.prod(x.astype(np.float64), axis=1)
    assert np.isnan(got[2]) and np.isnan(want[2])
    np.testing.assert_allclose(got, want, rtol=rtol)


def test_warp_butterfly(prod_test, rng):
    tiles = 3
    x = factors(rng, (tiles, 32, 8), "float32")
    bound = prepared((32, 8), "float32", [0], scope="warp", threads=32, layout=S[(32, 8):(1 @ laneid, 1)])
    assert bound.plan.variant == "local" and bound.plan.params["path"] == "warp_shuffle"
    got = run(bound, x, tiles, (8,))
    np.testing.assert_allclose(got, np.prod(x.astype(np.float64), axis=1), rtol=1e-5)


def test_cta_shared(prod_test, rng):
    tiles = 2
    x = factors(rng, (tiles, 4, 33), "float32")
    bound = prepared((4, 33), "float32", [-1], scope="cta", threads=32, storage="shared")
    assert bound.plan.variant == "shared"
    got = run(bound, x, tiles, (4,))
    np.testing.assert_allclose(got, np.prod(x.astype(np.float64), axis=2), rtol=1e-5)


def test_a_name_taken_once(prod_test):
    with pytest.raises(ValueError, match="op: 'prod_test' is already an op"):
        _C._testing.register_test_reduction()


def test_treduce_takes_it(prod_test, rng):
    """treduce's C++ reads the op table too: the CPU chunk pipeline folds with its functor."""
    shape, root = (3, 5), 1
    ranks = [factors(rng, shape, "float32") for _ in range(3)]
    dst = np.full(shape, np.nan, np.float32)
    refs = [_C.TileRef(f"tensors[{r}]", "float32", list(shape), "global", None, -1, [5, 1]) for r in range(3)]

    def options(op):
        return _C.TreduceOptions(op=op, root=root, tile_rows=2, tile_cols=4, pingpong=True, valid="dynamic",
                                 accumulate="", transport="")
    out = _C.TileRef("dst", "float32", list(shape), "global", None, -1, [5, 1])
    bound = _C.prepare(_C.treduce_call(refs, out, options(OP), ""), "", "cpu", [])
    bound.run_collective([x.ctypes.data for x in ranks], [-1] * 3, dst.ctypes.data, -1, [])
    want = ranks[root].astype(np.float64) * ranks[0] * ranks[2]  # the root first, then ascending
    np.testing.assert_allclose(dst, want, rtol=1e-6)
    with pytest.raises(ValueError, match="op: 'prod' is not a treduce op; use 'sum', 'max', 'min' or 'prod_test'"):
        _C.prepare(_C.treduce_call(refs, out, options("prod"), ""), "", "cpu", [])
