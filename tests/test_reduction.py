"""Every reduction variant over backend x dtype x shape x scope x layout x accum x batch, against
the float64 NumPy oracle, with NaN, +-inf, subnormals and negative values in the inputs."""
from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np
import pytest

import tileprim as tp
from tileprim import R, S, Swizzle, TileLayout, laneid, tid_in_wg, tx, wid_in_wg
from conftest import DTYPES, NP, assert_reduced, random_tile


@dataclass
class Case:
    variant: str
    scope: object
    shape: Tuple[int, ...]
    axes: object
    storage: Optional[str] = None
    layout: object = None
    out_layout: object = None
    target: Optional[str] = None
    config: dict = field(default_factory=dict)
    path: Optional[str] = None

    def kwargs(self, backend):
        kw = dict(axes=self.axes, scope=self.scope, backend=backend, **self.config)
        for k in ("storage", "layout", "out_layout", "target"):
            if getattr(self, k) is not None:
                kw[k] = getattr(self, k)
        return kw

    def normalised_axes(self):
        axes = self.axes if isinstance(self.axes, tuple) else (self.axes,)
        return tuple(sorted(a % len(self.shape) for a in axes))

    def __str__(self):
        return f"{self.variant}-{self.scope}-{self.shape}-ax{self.axes}" + (f"-{self.path}" if self.path else "")


LANE_ROWS = S[(32, 8):(1 @ laneid, 1)]
NAMED = dict(dispatch="cross_warp")  # named, though local declining is enough: test_one_path.py
CASES = [
    # reduction -> local, thread-wise (seed 000 and the reference's thread-wise cases)
    Case("local", tp.thread, (1,), 0, path="thread_wise"),
    Case("local", tp.thread, (4,), 0, path="thread_wise"),
    Case("local", tp.thread, (7,), -1, path="thread_wise"),
    Case("local", tp.thread, (100,), 0, path="thread_wise"),
    Case("local", tp.thread, (4, 8), 0, path="thread_wise"),
    Case("local", tp.thread, (4, 8), 1, path="thread_wise"),
    Case("local", tp.thread, (3, 4, 5), (0, 2), path="thread_wise"),
    Case("local", tp.thread, (2, 3, 4), -1, path="thread_wise"),
    Case("local", tp.thread, (2, 3, 4), (0, 1, 2), path="thread_wise"),
    Case("local", tp.thread, (6, 5), 1, layout=S[(6, 5):(1, 6)], out_layout=S[6:2], path="thread_wise"),
    # reduction -> local at warp scope: the laneid-replica destination (XOR butterfly over lanes)
    Case("local", tp.warp, (32, 8), 0, layout=LANE_ROWS, path="warp_shuffle"),
    Case("local", tp.warp, (32, 8), 0, layout=LANE_ROWS, out_layout=S[8:1] + R[32:1 @ laneid], path="warp_shuffle"),
    Case("local", tp.warp, (32, 7), 0, layout=S[(32, 7):(1 @ laneid, 1)], path="warp_shuffle"),
    Case("local", tp.warp, (32, 8), (0, 1), layout=LANE_ROWS, path="warp_shuffle"),
    Case("local", tp.warp, (32,), 0, layout=S[32:1 @ laneid], out_layout=S[1:1] + R[32:1 @ laneid],
         path="warp_shuffle"),
    Case("local", tp.warp, (8, 4, 3), (1, 2), layout=S[(8, 4, 3):(4 @ laneid, 1 @ laneid, 1)], path="warp_shuffle"),
    Case("local", tp.warp, (16, 2, 3), 1, layout=S[(16, 2, 3):(1 @ laneid, 16 @ laneid, 1)], path="warp_shuffle"),
    Case("local", tp.warp, (4, 8, 5), (0, 2), layout=S[(4, 8, 5):(8 @ laneid, 1 @ laneid, 1)], path="warp_shuffle"),
    # ... and without lanes in the reduced dims: each lane folds its own registers
    Case("local", tp.warp, (32, 8), -1, layout=LANE_ROWS, path="view"),
    Case("local", tp.warp, (5, 7), 1, path="view"),
    Case("local", tp.warpgroup, (128, 16), 1, layout=S[(128, 16):(1 @ tid_in_wg, 1)], path="view"),
    Case("local", tp.warpgroup, (4, 32, 3), (1, 2), layout=S[(4, 32, 3):(1 @ wid_in_wg, 1 @ laneid, 1)],
         path="warp_shuffle"),
    # reduction -> shared (seed 001 and the reference's shapes), group-size rule at many thread counts
    Case("shared", tp.cta(32), (4, 8), -1, storage="shared"),
    Case("shared", tp.cta(32), (32, 32), 0, storage="shared"),
    Case("shared", tp.cta(32), (32, 32), -1, storage="shared"),
    Case("shared", tp.cta(128), (8, 16, 2, 22), (-2, -1), storage="shared"),
    Case("shared", tp.cta(32), (4, 8, 6), 1, storage="shared"),
    Case("shared", tp.cta(32), (32, 7), -1, storage="shared"),
    Case("shared", tp.cta(48), (3, 100), -1, storage="shared"),
    Case("shared", tp.cta(20), (100,), 0, storage="shared"),
    Case("shared", tp.cta(5), (7, 3), 0, storage="shared"),
    Case("shared", tp.cta(1), (9,), 0, storage="shared"),
    Case("shared", tp.cta(1000), (3, 5), 1, storage="shared.dyn"),
    Case("shared", tp.cta(96), (33, 65), (0, 1), storage="shared"),
    Case("shared", tp.warp, (4, 8), -1, storage="shared"),
    Case("shared", tp.warpgroup, (6, 33), -1, storage="shared"),
    Case("shared", tp.thread, (4, 8), 0, storage="shared", path="thread_wise"),
    Case("shared", tp.cta(64), (8, 64), 1, storage="shared",
         layout=TileLayout(S[(8, 64):(64, 1)], swizzle=Swizzle(2, 3, 3)), out_layout=S[8:3]),
    # reduction -> cross_warp: local's butterfly across the warps of a warpgroup or CTA
    Case("cross_warp", tp.cta(64), (64,), 0, layout=S[64:1 @ tx], config=NAMED, path="warp_shuffle"),
    Case("cross_warp", tp.cta(256), (4096,), 0, layout=S[(4, 256, 4):(4, 1 @ tx, 1)], config=NAMED,
         path="warp_shuffle"),
    Case("cross_warp", tp.cta(128), (8, 128), 1, layout=S[(8, 128):(1, 1 @ tx)], config=NAMED, path="warp_shuffle"),
    Case("cross_warp", tp.cta(1024), (1024, 3), 0, layout=S[(1024, 3):(1 @ tx, 1)], config=NAMED, path="warp_shuffle"),
    Case("cross_warp", tp.warpgroup, (128, 5), 0, layout=S[(128, 5):(1 @ tid_in_wg, 1)], config=NAMED,
         path="warp_shuffle"),
    Case("cross_warp", tp.cta(96), (3, 32), 1, layout=S[(3, 32):(32 @ tx, 1 @ tx)], config=NAMED, path="warp_shuffle"),
    # reduction -> sm100_packed (seed 002), modelled sm_100a
    *[Case("sm100_packed", tp.thread, (n,), 0, target="sm_100a") for n in (8, 9, 16, 17, 32, 63, 64, 65, 100, 256)],
]


def run(case, x, backend, out=None, accum=False, batch_dims=0, **extra):
    fn = getattr(case.scope, OP)
    return fn(x, out=out, accum=accum, batch_dims=batch_dims, **case.kwargs(backend), **extra)


OP = "sum"


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduction_matches_numpy(case, op, dtype, backend, rng):
    if case.variant == "sm100_packed" and dtype != "float32":
        dtype_case = Case("local", case.scope, case.shape, case.axes, target=case.target)
        case = dtype_case  # the packed gate declines non-float32; local serves
    x = random_tile(rng, case.shape, dtype)
    fn = getattr(case.scope, op)
    plan = tp.plan(fn, x, **case.kwargs(backend))
    assert plan.variant == case.variant
    if case.path:
        assert plan.params["path"] == case.path
    result = fn(x, **case.kwargs(backend))
    assert result.dtype == NP[dtype]
    assert_reduced(result, x, op, case.normalised_axes(), dtype)


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_accum_folds_the_old_output_in_once(case, op, backend, rng):
    dtype = "float32"
    x = random_tile(rng, case.shape, dtype)
    fn = getattr(case.scope, op)
    expected_shape = tp.plan(fn, x, **case.kwargs(backend)).out_shape
    old = random_tile(rng, expected_shape, dtype, special=False)
    out = old.copy()
    result = fn(x, out=out, accum=True, **case.kwargs(backend))
    assert result is out
    assert_reduced(out, x, op, case.normalised_axes(), dtype, old=old)


@pytest.mark.parametrize("case", CASES[::3], ids=str)
def test_batch_dims_give_each_tile_its_own_scope_instance(case, backend, rng):
    dtype = "float32"
    x = random_tile(rng, (3, 2) + case.shape, dtype)
    out = np.full(tp.plan(case.scope.sum, x, batch_dims=2, **case.kwargs(backend)).out_shape, np.nan, np.float32)
    result = case.scope.sum(x, out=out, batch_dims=2, **case.kwargs(backend))
    axes = tuple(a + 2 for a in case.normalised_axes())
    assert result is out
    assert_reduced(out, x, "sum", axes, dtype)


@pytest.mark.parametrize("op", ["max", "min"])
def test_propagate_nan_uses_the_nan_forms(op, backend, rng):
    x = random_tile(rng, (6, 40), "float32", special=False)
    x[2, 5] = np.nan
    for kwargs in (dict(scope=tp.thread), dict(scope=tp.cta(32), storage="shared"),
                   dict(scope=tp.thread, target="sm_100a", batch_dims=1)):
        plain = getattr(tp, op)(x, backend=backend, **kwargs)
        nan = getattr(tp, op)(x, backend=backend, propagate_nan=True, **kwargs)
        assert_reduced(plain, x, op, (1,), "float32")
        assert_reduced(nan, x, op, (1,), "float32", propagate_nan=True)
        assert np.isnan(nan[2]) and not np.isnan(plain[2])


def test_thread_reduce_keeps_the_lane_dim_with_every_lane_holding_the_sum(backend, rng):
    x = random_tile(rng, (32, 8), "float32", special=False)
    kept = tp.warp.sum(x, axes=0, layout=LANE_ROWS, out_layout=LANE_ROWS, thread_reduce=True, backend=backend)
    assert kept.shape == (32, 8)
    for lane in range(32):
        assert_reduced(kept[lane], x, "sum", (0,), "float32")
    assert np.all(kept == kept[0])  # the butterfly gives every lane the same bits
    partial = tp.warp.sum(x, axes=0, layout=LANE_ROWS, out_layout=LANE_ROWS, backend=backend)
    assert np.array_equal(partial, x)  # without thread_reduce each lane folds only its own element
    plan = tp.plan(tp.warp.sum, x, axes=0, layout=LANE_ROWS, out_layout=LANE_ROWS, thread_reduce=True)
    assert plan.params["path"] == "view" and plan.params["shuffle_masks"] == [1, 2, 4, 8, 16]


def test_replica_shuffle_masks_follow_the_reduced_lane_iters():
    x = np.ones((8, 4, 3), np.float32)
    plan = tp.plan(tp.warp.sum, x, axes=(1, 2), layout=S[(8, 4, 3):(4 @ laneid, 1 @ laneid, 1)])
    assert plan.params["shuffle_masks"] == [1, 2]
    assert plan.params["sources_per_output"] == 3
    plan = tp.plan(tp.warp.sum, np.ones((32, 8), np.float32), axes=0, layout=LANE_ROWS)
    assert plan.params["shuffle_masks"] == [1, 2, 4, 8, 16] and plan.out_shape == (8,)


def test_full_reduction_returns_numpy_shapes(rng):
    x = random_tile(rng, (4, 8), "float32", special=False)
    assert tp.sum(x, axes=(0, 1)).shape == ()
    assert tp.sum(x[0]).shape == ()
    assert tp.sum(x, batch_dims=1).shape == (4,)
    assert tp.max(x, axes=0).shape == (8,)
