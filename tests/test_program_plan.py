"""tp.plan on a program (steps, variants, inserted copies and their reasons, the planner's
layouts, shared memory by live range, syncs, str and HTML), tp.copy standalone, keepdims."""
import ml_dtypes
import numpy as np
import pytest

import tileprim as tp
from tileprim import S, tx
from conftest import bits_equal, random_tile
import programs


softmax = tp.program(programs.softmax, scope=tp.cta(256))


def test_softmax_plan_as_in_the_design():
    X = np.ones((8, 4096), np.float32)
    p = tp.plan(softmax, X, batch_dims=1)
    assert isinstance(p, tp.ProgramPlan)
    assert all(isinstance(s, tp.Plan) for s in p.steps)
    assert p.variants == [s.variant for s in p.steps]
    ops = [s.op for s in p.steps]
    assert ops.count("max") == 1 and ops.count("exp") == 1 and ops.count("sum") == 1
    # the row stays in registers: the reductions fold across the CTA's warps there
    assert p.variants.count("cross_warp") == 2 and "stage" in p.variants and "reg" in p.variants
    # the planner spreads 4096 elements over 256 threads, 16 each in runs of 4, and says so
    first = next(s for s in p.steps if s.op == "max")
    assert "S[(4, 256, 4) : (4, 1@tx, 1)]" in " ".join(first.reasons) and "16 per thread" in " ".join(first.reasons)
    # the next map reads it where it lies
    exp = next(s for s in p.steps if s.op == "exp")
    assert "so that it needs no copy" in " ".join(exp.reasons)
    # an inserted copy says why: fdiv needs e and the sum spread alike; the sum is one value held by every thread
    copies = [s for s in p.steps if s.inserted]
    assert copies and all(s.op == "copy" for s in copies)
    why = " ".join(r for s in copies for r in s.reasons)
    assert "fdiv needs e and" in why and "in registers as S[1 : 1] + R[256 : 1@tx]" in why
    assert "broadcast from (1,) to (4096,)" in why
    # every step's trace is the registry's
    for s in p.steps:
        assert [e.status for e in s.trace].count("chosen") == 1
    assert any(s.sync_before == "cta_sync" for s in p.steps)
    assert "rounding" in p.numerics and len(p.numerics["steps"]) == len(p.steps)
    text = str(p)
    assert "program softmax at scope cta(256)" in text and "cta_sync" in text and "programs.py:" in text
    html = p._repr_html_()
    assert "inserted" in html and "cta_sync" in html and "staging <b>registers</b>" in html


def test_shared_memory_reused_by_live_range():
    @tp.program(scope=tp.cta(32))
    def chain(x):
        a = tp.copy(x, storage="shared")
        s1 = tp.sum(a, axes=-1, storage="shared")
        b = tp.copy(tp.exp(x), storage="shared")
        s2 = tp.sum(b, axes=-1, storage="shared")
        return s1 + s2

    x = np.ones((2, 1024), np.float32)
    p = tp.plan(chain, x, batch_dims=1)
    tiles = {t["name"]: t for t in p.tiles}
    shared = [t for t in p.tiles if t["storage"] == "shared" and t["shared_offset"] >= 0]  # between steps
    # a dies when s1 is made; b is written later and reuses bytes of a tile no longer live
    assert tiles["b"]["written"] > tiles["a"]["last_read"]
    assert p.shared_bytes < sum(t["shared_bytes"] for t in shared)
    for t in shared:
        for o in shared:
            live_together = t is not o and t["written"] <= o["last_read"] and o["written"] <= t["last_read"]
            apart = (t["shared_offset"] + t["shared_bytes"] <= o["shared_offset"]
                     or o["shared_offset"] + o["shared_bytes"] <= t["shared_offset"])
            assert not live_together or apart
    got = chain(x, batch_dims=1)
    np.testing.assert_allclose(got, 1024 * (1 + np.e), rtol=1e-5)


def test_seed_programs_copy_sum_copy_and_copy_sqrt_copy(rng):
    @tp.program(scope=tp.cta(128))
    def shared_sum(x):
        xs = tp.copy(x, storage="shared")
        s = tp.sum(xs, axes=-1, storage="shared")
        return tp.copy(s, storage="local")

    @tp.program(scope=tp.warp)
    def copy_sqrt(x):
        xr = tp.copy(x, storage="local", layout=S[(32, 8):(1 @ tp.laneid, 1)])
        return tp.copy(tp.sqrt(xr), storage="shared")

    x = random_tile(rng, (3, 16, 50), "float32", special=False)
    got = shared_sum(x, batch_dims=1)
    assert got.shape == (3, 16)
    want = tp.sum(x, axes=-1, batch_dims=1, scope=tp.cta(128), storage="shared", backend="cpu")
    assert bits_equal(got, want)
    y = np.abs(random_tile(rng, (5, 256), "float32"))
    assert bits_equal(copy_sqrt(y, batch_dims=1), np.sqrt(y))
    p = tp.plan(copy_sqrt, y, batch_dims=1)
    assert p.variants == ["stage", "reg", "stage"]


def test_copy_standalone(rng):
    x = random_tile(rng, (4, 64), "float16")
    cpu = dict(backend="cpu")  # copy has no CUDA executor yet
    assert bits_equal(tp.copy(x, **cpu), x)
    assert bits_equal(tp.copy(x, batch_dims=1, scope=tp.cta(64), storage="shared", **cpu), x)
    got = tp.copy(x, batch_dims=1, scope=tp.cta(64), storage="local", layout=S[(64,):(1 @ tx,)], **cpu)
    assert bits_equal(got, x)
    p = tp.plan(tp.copy, x, batch_dims=1, scope=tp.warp, storage="local", layout=S[(32, 2):(1 @ tp.laneid, 1)],
                **cpu)
    assert p.variant == "stage" and p.numerics["rounding"].startswith("none")
    assert [v[0] for v in tp.variants("copy")] == ["stage"]
    with pytest.raises(ValueError, match="no variant named 'reg' is registered for copy"):
        tp.copy(x, dispatch="reg", backend="cpu")


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_keepdims_standalone(op, rng):
    x = random_tile(rng, (3, 5, 7), "float32", special=False)
    fn = getattr(tp, op)
    ref = {"sum": np.sum, "max": np.max, "min": np.min}[op]
    for axes in (-1, 0, (0, 2), (0, 1, 2)):
        got = fn(x, axes=axes, keepdims=True)
        assert got.shape == ref(x, axis=axes, keepdims=True).shape
        assert bits_equal(got.reshape(-1), fn(x, axes=axes).reshape(-1))
    got = fn(x, axes=-1, keepdims=True, batch_dims=1, scope=tp.warp)
    assert got.shape == (3, 5, 1)
    assert tp.plan(fn, x, axes=-1, keepdims=True).out_shape == (3, 5, 1)
    out = np.full((3, 5, 1), np.nan, np.float32)
    assert fn(x, axes=-1, keepdims=True, out=out) is out and bits_equal(out[..., 0], fn(x, axes=-1))


def test_tile_attributes_at_trace_time():
    seen = {}

    @tp.program(scope=tp.cta(32))
    def look(x, w):
        seen["x"] = (x.shape, x.dtype, x.storage, x.layout)
        seen["w"] = w.shape
        t = tp.copy(x, storage="shared")
        seen["t"] = t.storage
        seen["r"] = repr(x * 2.0)
        return t

    look(np.ones((4, 6), np.float64), np.ones(6, np.float64), batch_dims=1)
    assert seen["x"] == ((6,), "float64", None, None) and seen["w"] == (6,) and seen["t"] == "shared"
    assert "float64[6]" in seen["r"]


def test_step_options_dispatch_config_layouts_and_scope_methods(rng):
    rows = S[(32, 8):(1 @ tp.laneid, 1)]

    @tp.program(scope=tp.warp)
    def prog(x):
        m = tp.max(x, axes=-1, propagate_nan=True, dispatch="shared")
        y = tp.warp.exp(x, layout=rows)
        return m, y

    x = random_tile(rng, (3, 32, 8), "float32")  # NaNs included
    m, y = prog(x, batch_dims=1)
    assert bits_equal(m, tp.max(x, axes=-1, propagate_nan=True, batch_dims=1, scope=tp.warp, storage="shared",
                                backend="cpu"))
    assert bits_equal(y, tp.exp(x, batch_dims=1, scope=tp.warp, layout=rows, backend="cpu"))
    p = tp.plan(prog, x, batch_dims=1)
    assert p.steps[0].op == "max" and p.steps[0].variant == "shared" and "propagate_nan=True" in p.steps[0].call
    exp = next(s for s in p.steps if s.op == "exp")
    assert exp.reasons[0] == "storage local"
    assert str(exp._core.call.inputs[0].layout) == str(tp.TileLayout(rows)._core)

    @tp.program(scope=tp.warp)
    def bad(x):
        return tp.exp(x, thread_reduce=True)

    with pytest.raises(TypeError, match="test_program_plan.py:.*exp: unexpected keyword argument 'thread_reduce'"):
        bad(x, batch_dims=1)


def test_rows_past_a_threads_registers_run_in_passes_and_the_plan_says_why():
    """Rows of 65536 at cta(1024) keep 64 float32 per thread in each of two live tiles (the row's
    max copied out to the row is read as a scalar and takes none): 128 registers, past the 64 a
    thread of a 1024-thread block holds, so the registers staging
    declines and the rows run in passes over chunks: float32 rows (256 KiB) do not fit in shared
    memory and stream from global memory; bfloat16 ones (128 KiB) are staged in shared memory.
    Rows of 4096 at cta(256) fit in registers. A float64 element takes two registers."""
    softmax_rows = tp.program(programs.softmax)
    long = tp.plan(softmax_rows, np.ones((3, 65536), np.float32), batch_dims=1, scope=tp.cta(1024))
    assert long.register_budget == 64 and long.registers == 128
    assert long.staging == "streamed"
    trace = {v["name"]: v for v in long.staging_trace}
    assert [v["name"] for v in long.staging_trace] == ["registers", "shared", "streamed", "spilled"]
    assert not trace["registers"]["accepted"]
    assert ("the tiles live at once take 128 registers per thread; a thread of scope cta(1024) holds at most 64"
            in trace["registers"]["reasons"][0])
    assert not trace["shared"]["accepted"] and "262144 bytes of shared memory" in trace["shared"]["reasons"][-1]
    assert trace["streamed"]["accepted"] and "3 passes" in trace["streamed"]["reasons"][0]
    assert long.rows == {"shape": (65536,), "slots": 64, "chunks": 4, "chunk_slots": 16, "chunk_elements": 16384}
    assert "staging: streamed" in str(long) and "streamed (runs)" in str(long)

    half = tp.plan(softmax_rows, np.ones((3, 65536), ml_dtypes.bfloat16), batch_dims=1, scope=tp.cta(1024))
    assert half.staging == "shared" and "131072 bytes of shared memory per instance" in str(half)

    short = tp.plan(softmax_rows, np.ones((3, 4096), np.float32), batch_dims=1, scope=tp.cta(256))
    assert short.register_budget == 255 and short.registers <= 255 and short.staging == "registers"
    assert short.rows is None and "registers (runs)" in str(short)
    wide = tp.plan(softmax_rows, np.ones((3, 4096), np.float64), batch_dims=1, scope=tp.cta(256))
    assert wide.registers == 2 * short.registers


def test_tiles_past_a_threads_registers_that_cannot_run_in_passes_are_said_to_spill_with_the_fix():
    """A tile of four rows folds each row into its own element: no pass takes a whole row, so the
    program spills, and the plan says so with the fix."""
    softmax_rows = tp.program(programs.softmax)
    p = tp.plan(softmax_rows, np.ones((2, 4, 16384), np.float32), batch_dims=1, scope=tp.cta(1024))
    assert p.staging == "spilled" and p.rows is None
    trace = {v["name"]: v for v in p.staging_trace}
    assert not trace["streamed"]["accepted"]
    assert "is neither a row" in trace["streamed"]["reasons"][0]
    assert "so on a GPU the rest spill to local memory, slowly. Fix: fewer elements per thread" in str(p)


def test_a_named_staging_runs_or_declines_with_its_reasons():
    x = np.random.default_rng(5).standard_normal((3, 4096)).astype(np.float32)
    streamed = tp.program(programs.softmax, staging="streamed")
    p = tp.plan(streamed, x, batch_dims=1, scope=tp.cta(256))
    assert p.staging == "streamed" and p.rows["chunks"] == 1
    # the steps and their bits do not depend on the staging
    assert p.variants == tp.plan(tp.program(programs.softmax), x, batch_dims=1, scope=tp.cta(256)).variants
    np.testing.assert_array_equal(streamed(x, batch_dims=1, scope=tp.cta(256), backend="cpu"),
                                  tp.program(programs.softmax)(x, batch_dims=1, scope=tp.cta(256), backend="cpu"))
    with pytest.raises(tp.DispatchError, match=r"staging='registers' declines:\n  the tiles live at once take 128"):
        tp.plan(tp.program(programs.softmax, staging="registers"), np.ones((3, 65536), np.float32), batch_dims=1,
                scope=tp.cta(1024))
    with pytest.raises(tp.DispatchError, match="at thread scope a row is one thread's"):
        tp.plan(streamed, x[:, :64], batch_dims=1, scope=tp.thread)
    with pytest.raises(ValueError, match="staging: 'rows' is not one of registers, shared, streamed, spilled"):
        tp.program(programs.softmax, staging="rows")
    # a program of maps alone reads each row once: staging it in shared memory first buys nothing
    maps = tp.program(lambda x: x * tp.exp(x) + x)
    assert tp.plan(maps, np.ones((3, 65536), np.float32), batch_dims=1, scope=tp.cta(1024)).staging == "streamed"
    with pytest.raises(tp.DispatchError, match="one pass reads each row once"):
        tp.plan(tp.program(maps._fn, staging="shared"), x, batch_dims=1, scope=tp.cta(256))


def test_one_value_per_row_from_the_caller_runs_in_passes():
    """m (one value per row, staged in shared memory at CTA scope) is read by every thread where it
    lies, so the rows still run in passes."""
    @tp.program
    def minus_m(x, m):
        return tp.exp(x - m) * 0.5

    x, m = np.ones((3, 65536), np.float32), np.ones((3, 1), np.float32)
    p = tp.plan(minus_m, x, m, batch_dims=1, scope=tp.cta(1024))
    assert p.staging == "streamed" and p.rows["chunks"] == 4
    assert next(t for t in p.tiles if t["name"] == "m")["storage"] == "shared"
    k = tp.lower(minus_m, x, m, batch_dims=1, scope=tp.cta(1024), target="sm_90a")
    assert "ld.local" not in k.ptx and k.staging["in1"].startswith("shared")


def test_a_thread_too_long_for_a_gpu_kernel_is_refused_with_the_fix():
    """A thread-scope softmax of 1000-element rows keeps 3000 registers live: built for a GPU its
    unrolled kernel would take NVRTC minutes and run from local memory, so no staging takes it and
    the plan says why and the fix; the CPU backend, which builds no kernel, runs it."""
    x = np.random.default_rng(3).standard_normal((3, 1000)).astype(np.float32)
    with pytest.raises(tp.DispatchError, match="no staging holds its tiles on a GPU") as info:
        tp.plan(softmax, x, batch_dims=1, scope=tp.thread, target="sm_90a")
    assert "a thread holds 1000 elements of one tile in registers: past 768 its kernel unrolls until NVRTC takes " \
           "minutes" in str(info.value)
    assert "Fix: fewer elements per thread" in str(info.value)
    p = tp.plan(softmax, x, batch_dims=1, scope=tp.thread)
    assert p.staging == "spilled"
    # rows of 699 at a CTA (odd: no thread count divides them) are padded over its threads, 3 slots
    # each, and stay in registers
    wide = tp.plan(softmax, x[:, :699].copy(), batch_dims=1, scope=tp.cta(256), target="sm_90a")
    assert wide.staging == "registers" and "padded(699)" in str(wide)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(softmax(x, batch_dims=1, scope=tp.thread), e / e.sum(-1, keepdims=True), rtol=1e-5)


def test_a_ragged_row_is_padded_over_every_thread(rng):
    """Rows of 1000 at cta(256): every thread holds 4 slots (threads 250 on hold only padding), in
    registers, no replicas and no spill; the plan says how many slots lie past the row's end."""
    x = random_tile(rng, (3, 1000), "float32", special=False)
    ragged = tp.plan(softmax, x, batch_dims=1, scope=tp.cta(256), target="sm_90a")
    assert ragged.staging == "registers"
    assert "1000 elements over the 256 threads of cta(256), padded: 4 slots per thread, the 24 past its end " \
           "holding nothing" in str(ragged)
    assert "replica" not in str(ragged)
    even = tp.plan(softmax, x, batch_dims=1, scope=tp.cta(250), target="sm_90a")
    assert even.staging == "registers" and "1000 elements over the 250 threads of cta(250) (4 per thread)" in str(even)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    np.testing.assert_allclose(softmax(x, batch_dims=1, scope=tp.cta(256)), e / e.sum(-1, keepdims=True), rtol=1e-5)
    for n in (4095, 50257):  # refused before (4095 slots per thread; 50257 spilled past the limit)
        plan = tp.plan(softmax, random_tile(rng, (2, n), "float32"), batch_dims=1, scope=tp.cta(256), target="sm_90a")
        assert plan.staging != "spilled" and f"padded({n})" in str(plan)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_of_a_widened_16_bit_tile_reduces_the_16_bit_tile(dtype, op, rng):
    # max(cast(x)) is planned as cast(max(x)), whose registers fold in pairs on the GPU: the same
    # element wins in both dtypes (+-0 ordered alike, NaN losing), so the same values
    @tp.program(scope=tp.warp)
    def extreme(x, nan):
        return getattr(tp, op)(tp.cast(x, "float32"), axes=-1, keepdims=True, propagate_nan=nan)

    x = random_tile(rng, (6, 1000), dtype)
    x[1] = np.nan
    x[2, ::2], x[2, 1::2] = 0.0, -0.0
    x[3, 17] = np.nan
    wide = x.astype(np.float32)
    for nan in (False, True):
        got = extreme(x, nan, batch_dims=1, backend="cpu")
        assert bits_equal(got, extreme(wide, nan, batch_dims=1, backend="cpu"))  # float32's own fold
        fold = {("max", False): np.fmax, ("min", False): np.fmin, ("max", True): np.maximum,
                ("min", True): np.minimum}[op, nan]
        rows = [0, 1, 3, 4, 5]  # NumPy orders no +-0 (row 2)
        assert bits_equal(got[rows], fold.reduce(wide[rows], axis=-1, keepdims=True))
        assert got[2, 0] == 0 and np.signbit(got[2, 0]) == (op == "min")
    plan = tp.plan(extreme, x, False, batch_dims=1)
    assert [s.op for s in plan.steps][:2] == [op, "cast"], str(plan)
    assert f"= {op}(x) -> local; {dtype}(1,)" in str(plan), str(plan)  # the 16-bit tile, reduced


def test_a_storage_no_tile_is_staged_into_is_refused_by_programs_and_steps():
    """A program's storage= is checked when it is made: 'global' (where arrays lie: no tile is staged
    into it; it was accepted and ignored) and unknown names are refused; '' names nothing, refused by
    a call and a step alike (a step took it for none)."""
    x = np.ones((4, 8), np.float32)
    for storage in ("global", "smem", ""):
        with pytest.raises(ValueError, match=r"^storage: '\w*' (is not one of 'local', 'shared', 'shared.dyn' "
                                             r"\(a program's tiles|names no storage)"):
            tp.program(storage=storage)
    rule = r"storage: '' names no storage; use 'local'"
    with pytest.raises(ValueError, match="^" + rule):
        tp.sum(x, axes=-1, batch_dims=1, storage="")
    with pytest.raises(ValueError, match=rule):
        tp.program(lambda t: tp.sum(t, axes=-1, storage=""))(x, batch_dims=1)
    with pytest.raises(tp.DispatchError, match="no variant accepts"):  # a call's or step's 'global': dispatch's table
        tp.program(lambda t: tp.sum(t, axes=-1, storage="global"))(x, batch_dims=1)
