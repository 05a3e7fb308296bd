"""A standalone call is the program of one step (DESIGN §4): the program planner plans it (its step
exactly as called), the one memo of prepared calls remembers it beside the programs, and the
programs' runners run it; its Plan is its step's."""
import numpy as np
import pytest

import tileprim as tp
from tileprim._calls import prepared as _prepared
from tileprim import S, R, laneid, tx
from conftest import bits_equal, random_tile

ROWS = S[(4, 256, 4):(4, 1 @ tx, 1)]  # 4096 wide over the 256 threads of a CTA, in runs of 4


def test_the_plan_of_a_standalone_call_is_the_step_of_its_program_of_one_step(rng):
    x = random_tile(rng, (6, 40), "float32")
    plan = tp.plan(tp.sum, x, axes=-1, batch_dims=1, scope=tp.thread, backend="cpu")  # named: no scope trace
    program = plan._bound.plan
    (step,) = program.step_plans
    assert str(step) == str(plan) and plan.variant == "local"
    assert [v["name"] for v in program.values] == ["src", "out"] and program.outputs == [1]
    assert program.staging == "registers"
    assert "no tile lives between steps" in program.staging_trace[0]["reasons"][0]


def test_one_memo_holds_standalone_calls_and_programs(rng):
    _prepared.forget()
    x = random_tile(rng, (3, 64), "float32")

    @tp.program(scope=tp.warp)
    def double(t):
        return t + t

    assert tp.plan(tp.exp, x, batch_dims=1) is tp.plan(tp.exp, x, batch_dims=1)
    double(x, batch_dims=1)
    double(random_tile(rng, (3, 64), "float32"), batch_dims=1)
    kinds = [key[0] for key in _prepared.MEMO]
    assert kinds.count("exp") == 1 and kinds.count(double) == 1


def test_a_scalar_operand_is_a_run_time_argument_of_one_kernel(backend, rng):
    x = random_tile(rng, (5, 24), "float32")
    for k in (2.0, -0.75, 3, np.float32(1e30)):
        assert bits_equal(tp.add(x, k, batch_dims=1, backend=backend), (x + np.float32(k)).astype(np.float32))
        assert bits_equal(tp.mul(k, x, batch_dims=1, backend=backend), (np.float32(k) * x).astype(np.float32))
    # one signature, so one plan and one kernel, for every value of a scalar of one type
    assert tp.plan(tp.add, x, 2.0, batch_dims=1, backend=backend) is tp.plan(tp.add, x, -0.75, batch_dims=1,
                                                                             backend=backend)
    (a,) = [v for v in tp.plan(tp.add, x, 2.0, batch_dims=1)._bound.plan.values if v["input"] >= 0]
    assert a["name"] == "a"  # the array is the program's one input; the scalar is a kernel parameter


def test_a_standalone_copy_restages_on_either_backend(backend, rng):
    x = random_tile(rng, (5, 32), "float32")  # NaN, infinities, subnormals and -0 move unchanged
    lanes, everywhere = S[32:1 @ laneid], S[32:1] + R[32:1 @ laneid]
    y = tp.copy(x, batch_dims=1, scope=tp.warp, layout=lanes, out_layout=everywhere, backend=backend)
    assert bits_equal(y, x)
    out = np.full_like(x, np.nan)
    assert tp.copy(x, batch_dims=1, out=out, backend=backend) is out and bits_equal(out, x)


def test_a_standalone_cta_reduction_in_registers_takes_cross_warp(backend, rng):
    x = random_tile(rng, (3, 4096), "float32", special=False)
    kwargs = dict(axes=-1, batch_dims=1, scope=tp.cta(256), storage="local", layout=ROWS)
    plan = tp.plan(tp.sum, x, **kwargs)
    assert plan.variant == "cross_warp" and plan.declined()["local"]
    got = tp.sum(x, backend=backend, **kwargs)
    assert bits_equal(got, tp.sum(x, backend=backend, dispatch="cross_warp", **kwargs))
    np.testing.assert_allclose(got, x.astype(np.float64).sum(-1), rtol=1e-5, atol=1e-3)


def test_accum_folds_into_out_and_needs_it(backend, rng):
    x = random_tile(rng, (4, 16), "float32", special=False)
    old = random_tile(rng, (4,), "float32", special=False)
    out = old.copy()
    tp.sum(x, axes=-1, batch_dims=1, accum=True, out=out, backend=backend)
    np.testing.assert_allclose(out, old.astype(np.float64) + x.astype(np.float64).sum(-1), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="accum: accum=True folds the result into out="):
        tp.sum(x, axes=-1, batch_dims=1, accum=True, backend=backend)  # the same signature, out= left out


@pytest.mark.gpu
def test_device_arrays_take_the_same_path(rng):
    """On a GPU, torch tensors in place: a scalar a kernel parameter, a copy, accum into out=, each
    the CPU backend's bits."""
    torch = pytest.importorskip("torch")
    x = random_tile(rng, (7, 40), "float32")
    t = torch.from_numpy(x).cuda()
    for k in (2.5, -1.0):
        got = tp.mul(t, k, batch_dims=1)
        assert isinstance(got, torch.Tensor) and bits_equal(got.cpu().numpy(), tp.mul(x, k, batch_dims=1, backend="cpu"))
    assert bits_equal(tp.copy(t, batch_dims=1).cpu().numpy(), x)
    old = random_tile(rng, (7,), "float32", special=False)
    out = torch.from_numpy(old.copy()).cuda()
    assert tp.sum(t, axes=-1, batch_dims=1, accum=True, out=out) is out
    want = tp.sum(x, axes=-1, batch_dims=1, accum=True, out=old.copy(), backend="cpu")
    assert bits_equal(out.cpu().numpy(), want)


@pytest.mark.parametrize("n", [8, 100, 1024, 4097])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_a_batched_call_with_no_scope_is_the_program_of_one_step(op, n, rng):
    """DESIGN §2: auto-scoped alike, its tile placed by the planner (spread over the scope's threads,
    not the whole row on every lane): the plan and the bits of the traced one-step program."""
    x = random_tile(rng, (64, n), "float32")
    fn = getattr(tp, op)
    one_step = tp.program(lambda t: fn(t, axes=-1))
    call, program = tp.plan(fn, x, axes=-1, batch_dims=1), tp.plan(one_step, x, batch_dims=1)
    assert call.scope == program.scope and call.params.get("path") == program.steps[0].params.get("path")
    assert bits_equal(fn(x, axes=-1, batch_dims=1), one_step(x, batch_dims=1))
