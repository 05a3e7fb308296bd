"""The registry: choice order, every predicate's reason, forcing with dispatch=, the trace."""
import numpy as np
import pytest

import tileprim as tp
from tileprim import R, S, Swizzle, TileLayout, laneid, tx


def f32(*shape):
    return np.random.default_rng().standard_normal(shape).astype(np.float32)


def entry(plan, name):
    (e,) = [e for e in plan.trace if e.variant == name]
    return e


def test_variants_in_choice_order():
    assert [v[0] for v in tp.variants("sum")] == ["sm100_packed", "local", "shared", "cross_warp"]
    assert [v[1] for v in tp.variants(tp.max)] == [20, 10, 10, 5]
    assert tp.variants(tp.warp.sqrt) == [("reg", 10, ["operand_scope", "anchor_layout", "scope_anchor",
                                                     "operand_layouts"])]
    assert tp.variants("min")[0][2] == ["op", "exec_scope", "local_scope", "dst_len", "src_ndim", "dtype",
                                        "sm_version", "reduction_len"]
    with pytest.raises(ValueError, match="op: 'prod' is not a tileprim op"):
        tp.variants("prod")


def test_issue_example_short_vector_stays_on_local():
    plan = tp.plan(tp.sum, np.ones(4, "f4"), scope=tp.thread, storage="local", target="sm_100a")
    assert plan.variant == "local" and plan.priority == 10
    packed = entry(plan, "sm100_packed")
    assert packed.status == "declined"
    assert packed.reasons == ["reduction_len: reduction_len 4 < 8"]
    assert entry(plan, "local").status == "chosen"
    assert entry(plan, "shared").status == "not tried"


def test_packed_reports_every_failing_predicate():
    plan = tp.plan(tp.sum, f32(4, 3).astype(np.float16), scope=tp.cta(32), storage="shared", backend="cpu")
    assert entry(plan, "sm100_packed").reasons == [
        "exec_scope: unsupported exec_scope cta",
        "local_scope: src/dst must be local scope with matching dtype on CUDA",
        "dst_len: dst_len 4 != 1",
        "src_ndim: src ndim 2 != 1",
        "dtype: dtype float16 != float32",
        "sm_version: sm_version 0 < 100",
        "reduction_len: reduction_len 3 < 8",
    ]
    assert plan.variant == "shared"
    assert entry(plan, "local").reasons == [
        "storage_scope: storage scope mismatch: dst shared, src shared; expected ['local']"]


@pytest.mark.parametrize("target,want", [("sm_100a", "sm100_packed"), ("sm_120", "sm100_packed"),
                                         ("sm_90a", "local"), (None, "local")])
def test_packed_gate_follows_the_target(target, want):
    plan = tp.plan(tp.sum, f32(32), target=target, backend="cpu")
    assert plan.variant == want
    if want == "local":
        v = 90 if target else 0
        assert entry(plan, "sm100_packed").reasons == [f"sm_version: sm_version {v} < 100"]


def test_dispatch_forces_one_variant_and_reports_why_it_cannot_run():
    plan = tp.plan(tp.sum, f32(32), target="sm_100a", dispatch="local")
    assert plan.variant == "local"
    assert entry(plan, "sm100_packed").status == "not tried"
    with pytest.raises(tp.DispatchError) as err:
        tp.plan(tp.sum, f32(32), dispatch="shared")
    msg = str(err.value)
    assert "no variant accepts tp.sum(src=float32[32] local" in msg
    assert "shared        10        declined" in msg
    assert "storage_scope: storage scope mismatch: dst local, src local; expected ['shared*']" in msg
    assert isinstance(err.value, ValueError)


def test_unknown_variant_name_raises_value_error_naming_it():
    with pytest.raises(ValueError, match="dispatch: no variant named 'packed_add_sum' is registered for sum"):
        tp.plan(tp.sum, f32(32), dispatch="packed_add_sum")


def test_no_candidate_raises_dispatch_error_with_the_whole_table():
    with pytest.raises(tp.DispatchError) as err:
        tp.sum(f32(4, 8), storage="global")
    msg = str(err.value)
    for name in ("sm100_packed", "local", "shared"):
        assert name in msg
    assert "expected ['local']" in msg and "expected ['shared*']" in msg


def test_local_folds_at_cta_scope_where_each_thread_holds_its_reduced_dims(rng):
    """Each thread of the CTA folds its own registers (a sum down the columns of rows), in order."""
    x = rng.standard_normal((32, 8)).astype(np.float32) * np.exp2(rng.integers(-10, 10, (32, 8)))
    layout = S[(32, 8):(1 @ tx, 1)]
    assert tp.plan(tp.cta(32).sum, x, layout=layout, storage="local", backend="cpu").variant == "local"
    got = tp.cta(32).sum(x, layout=layout, storage="local", backend="cpu")
    want = np.zeros(32, np.float32)
    for j in range(8):
        want = want + x[:, j]
    assert np.array_equal(got, want)


def test_local_declines_with_reasons():
    L = TileLayout(S[(32, 8):(1 @ laneid, 1)])
    with pytest.raises(tp.DispatchError, match="unsupported exec_scope cta for local reduction"):
        tp.cta(32).sum(f32(32, 8), layout=S[32, 8], storage="local")  # every thread the whole tile
    with pytest.raises(tp.DispatchError, match="a reduced dim lies across the lanes of the cta: cross_warp folds"):
        tp.cta(32).sum(f32(32, 8), axes=0, layout=S[(32, 8):(1 @ tx, 1)], storage="local", dispatch="local")
    with pytest.raises(tp.DispatchError, match="swizzle layout unsupported for local reduction"):
        tp.warp.sum(f32(32, 8), layout=TileLayout(L, swizzle=Swizzle(0, 1, 3)))
    with pytest.raises(tp.DispatchError, match="does not hold the reduction"):
        tp.warp.sum(f32(32, 8), axes=0, layout=L, out_layout=S[8:1] + R[4:1 @ laneid])
    with pytest.raises(tp.DispatchError, match="has replicas"):
        tp.warp.sum(f32(8, 4), axes=0, layout=S[(8, 4):(1, 1 @ laneid)] + R[8:4 @ laneid])


def test_shared_declines_when_dst_size_is_wrong():
    with pytest.raises(tp.DispatchError, match="dst size 8 != expected spatial size 4"):
        tp.cta(32).sum(f32(4, 8), storage="shared", out_layout=S[8:1])


def test_reg_reasons():
    A = f32(32, 8)
    L = TileLayout(S[(32, 8):(1 @ laneid, 1)])
    with pytest.raises(tp.DispatchError, match="operand scope shared != local"):
        tp.cta(32).sqrt(A, storage="shared")
    with pytest.raises(tp.DispatchError, match="thread-local view with no thread axes"):
        tp.warp.sqrt(A)
    with pytest.raises(tp.DispatchError, match="anchor layout is swizzle"):
        tp.warp.sqrt(A, layout=TileLayout(L, swizzle=Swizzle(0, 1, 3)))
    with pytest.raises(tp.DispatchError, match="layout covers 16 of the 32 threads"):
        tp.warp.sqrt(f32(16, 8), layout=S[(16, 8):(1 @ laneid, 1)])
    with pytest.raises(tp.DispatchError, match="differs from the anchor"):
        tp.warp.sqrt(A, layout=L, out_layout=S[(32, 8):(1 @ laneid, 2)])


def test_plan_has_params_numerics_and_renders():
    plan = tp.plan(tp.cta(32).sum, f32(4, 8), axes=-1, storage="shared")
    assert plan.variant == "shared"
    assert plan.params["group_size"] == 8 and plan.params["n_shuffles"] == 3 and plan.params["groups"] == 4
    assert plan.numerics["identity"].startswith("-0.0")
    text = str(plan)
    assert "chosen: shared" in text and "group_size = 8" in text
    html = plan._repr_html_()
    assert "<table" in html and "chosen: shared" in html and "group_size" in html and "<svg" in html
    packed = tp.plan(tp.sum, f32(20), target="sm_100a")
    assert packed.params == {"algorithm": "packed_add_sum", "slots": 8, "reduction_len": 20,
                             "full_chunks": 2, "remainder": 4}
    assert "ftz" in packed.numerics and packed.numerics["ftz"].startswith("yes")


def test_plan_accepts_names_functions_and_scope_methods():
    A = f32(4, 8)
    a = tp.plan("sum", A, scope=tp.cta(32), storage="shared")
    b = tp.plan(tp.cta(32).sum, A, storage="shared")
    c = tp.plan(tp.sum, A, scope=tp.cta(32), storage="shared")
    assert a.variant == b.variant == c.variant == "shared"
    assert a.params == b.params == c.params


@pytest.mark.parametrize("threads,length,group", [(32, 8, 8), (32, 100, 32), (48, 100, 32), (20, 100, 16),
                                                  (5, 3, 4), (1, 7, 1), (1024, 1, 1), (128, 33, 32)])
def test_shared_group_size_rule(threads, length, group):
    plan = tp.plan(tp.cta(threads).sum, f32(3, length), storage="shared")
    assert plan.params["group_size"] == group
    assert plan.params["n_shuffles"] == int(np.log2(group))
    assert plan.params["groups"] == threads // group
