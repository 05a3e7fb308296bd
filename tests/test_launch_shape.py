"""The kernel frame's launch shape: a host-side value (scope instances per block, tiles each
takes in turn, shared memory), made from a plan without a GPU or a compiler. Standalone calls
and tile programs share the frame: a program of one step launches as its standalone call."""
import re

import ml_dtypes
import numpy as np
import pytest

import tileprim as tp
from tileprim import _C
import programs

ARCH = "sm_90a"


def program_of(plan):
    """A program's plan, or a standalone call's program of one step."""
    bound = getattr(plan, "_bound", None)
    return bound.plan if bound is not None else plan._core


def launch(plan, arch=ARCH):
    """The launch shape of a program's kernel, or of a standalone call's (its program of one step)."""
    return _C.cuda.launch(program_of(plan), arch)


def shape_of(d):
    return {k: d[k] for k in ("block_threads", "instances", "rounds", "tiles_per_block", "shared_bytes")}


LANE_RUNS = tp.S[(32, 8):(1 @ tp.laneid, 1)]


@pytest.mark.parametrize("op,dtype,shape,scope,options", [
    ("exp", "float32", (8,), tp.thread, {}),        # a run of 32 bytes per thread: staged by the block
    ("exp", "float16", (8,), tp.thread, {}),        # one 16-byte vector per thread: straight
    ("sqrt", "float32", (1,), tp.thread, {}),       # 4 bytes per thread: straight, in rounds
    ("silu", "bfloat16", (32, 8), tp.warp, {"layout": LANE_RUNS}),
    ("add", "float32", (8, 32), tp.warp, {"layout": tp.S[(8, 32):(1, 1 @ tp.laneid)]}),  # where it lies
    ("fma", "float32", (1024,), tp.thread, {}),     # 1024 slots a thread: mapped a chunk at a time
    ("sum", "float32", (1000,), tp.thread, {"axes": -1}),  # a long run: through the warps' windows
    ("sum", "float32", (4096,), tp.cta(256), {"axes": -1, "layout": tp.S[(4, 256, 4):(4, 1 @ tp.tx, 1)],
                                          "dispatch": "cross_warp"}),
    ("max", "float16", (32, 8), tp.warp, {"axes": (0, 1), "layout": LANE_RUNS}),
])
def test_a_program_of_one_step_launches_and_reads_as_its_standalone_call(op, dtype, shape, scope, options):
    x = np.linspace(-3, 3, 300 * int(np.prod(shape))).reshape((300,) + shape)
    x = x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    fn = getattr(tp, op)
    arity = {"add": 2, "fma": 3}.get(op, 1)
    one_step = tp.program(scope=scope)(
        [lambda a: fn(a, **options), lambda a, b: fn(a, b, **options), lambda a, b, c: fn(a, b, c, **options)][arity - 1])
    args = [x] * arity
    program = tp.plan(one_step, *args, batch_dims=1, target=ARCH)
    standalone = tp.plan(fn, *args, batch_dims=1, scope=scope, target=ARCH, **options)
    assert len(program.steps) == 1 and program.steps[0].call == standalone.call
    assert shape_of(launch(program)) == shape_of(launch(standalone))
    call = tp.lower(fn, *args, batch_dims=1, scope=scope, target=ARCH, **options)
    fused = tp.lower(one_step, *args, batch_dims=1, target=ARCH)
    assert fused.staging == call.staging and fused.registers == call.registers
    assert instructions(fused.ptx) == instructions(call.ptx)  # the same code, its constants' names aside


def instructions(ptx):
    """The PTX's instructions in order, each named constant's name left out."""
    lines = [line.strip() for line in ptx.splitlines()]
    return [re.sub(r"_ZN\w+", "<name>", line) for line in lines if line.endswith(";") and not line.startswith(".")]


def test_the_launch_shape_is_what_lowering_reports():
    x = np.ones((64, 1024), np.float32)
    for call in (lambda: tp.plan(tp.cta(128).sum, x, axes=-1, batch_dims=1, target=ARCH),
                 lambda: tp.plan(tp.exp, x.astype(np.float16), batch_dims=1, target=ARCH)):
        shape = launch(call())
        assert shape["tiles_per_block"] == shape["instances"] * shape["rounds"]
        assert shape["block_threads"] % shape["instances"] == 0 and shape["instances_why"]
        assert 0 <= shape["shared_bytes"] <= 227 * 1024


def test_small_register_tiles_take_rounds_and_shared_tiles_are_staged_by_the_block():
    shape = launch(tp.plan(tp.exp, np.ones((4096, 1), np.float32), batch_dims=1, target=ARCH))
    assert shape["rounds"] > 1 and shape["shared_bytes"] == 0  # 4 bytes a thread, loaded straight
    shape = launch(tp.plan(tp.cta(32).sum, np.ones((64, 16, 256), np.float32), axes=-1, batch_dims=1,
                           storage="shared", target=ARCH))
    assert shape["shared_bytes"] >= shape["tiles_per_block"] * 16 * 256 * 4  # every tile of the block's run


def test_a_program_input_the_batch_shares_is_read_from_its_one_tile():
    @tp.program(scope=tp.cta(256))
    def scale(x, w):
        return x * w

    x, w = np.ones((8, 4096), np.float32), np.ones(4096, np.float32)
    k = tp.lower(scale, x, w, batch_dims=1, target=ARCH)
    assert "tp::load_tile<Place_in1>(in1, g_in1, lane);" in k.source  # no tile offset
    assert "g_in0 + tile * 4096" in k.source
    assert shape_of(launch(tp.plan(scale, x, w, batch_dims=1, target=ARCH)))["shared_bytes"] == 0


def test_program_shared_memory_counts_the_tiles_between_steps_and_the_frame_stages_the_rest():
    @tp.program(scope=tp.cta(128))
    def shared_sum(x):
        xs = tp.copy(x, storage="shared")
        return tp.sum(xs, axes=-1, storage="shared")

    x = np.ones((4, 16, 256), np.float32)
    p = tp.plan(shared_sum, x, batch_dims=1, target=ARCH)
    tiles = {t["name"]: t for t in p.tiles}
    assert tiles["xs"]["shared_offset"] == 0 and p.shared_bytes == 16 * 256 * 4  # xs only: between steps
    assert tiles["x"]["shared_offset"] == -1  # an input: the frame stages it
    shape = launch(p)
    assert shape["shared_bytes"] >= shape["instances"] * (p.shared_bytes + 16 * 256 * 4)


def test_one_instance_past_the_arch_limit_is_refused_with_the_fix():
    x = np.ones((2, 30000), np.float32)

    @tp.program(scope=tp.cta(128))
    def staged(x):
        return tp.copy(tp.copy(x, storage="shared"), storage="shared")

    with pytest.raises(ValueError, match="227 KiB|allows"):
        _C.cuda.launch(tp.plan(staged, x, batch_dims=1, target=ARCH)._core, ARCH)


def test_instances_that_sync_pass_the_same_barriers_past_the_batch_end():
    """A body with the instance's barriers (here cross_warp's) runs in every instance of a block,
    one past the batch's end on the last tile again with its stores skipped: instances on named
    barriers then pass the same ones (compute-sanitizer racecheck flagged a partial last block
    otherwise)."""
    @tp.program(scope=tp.cta(64))
    def normalized(x):
        return x / tp.sum(x, axes=-1, keepdims=True)

    plan = tp.plan(normalized, np.ones((5, 1024), np.float32), batch_dims=1, target=ARCH)
    built = _C.cuda.build_program(plan._core, ARCH)
    assert built["instances"] > 1 and "tp::CtaLanes" in built["source"]
    assert built["clamped"] and ", true>([&](const int round, const int slot" in built["source"]
    assert "if (live) tp::store_tile<Place_out>" in built["source"]
    assert launch(plan)["clamped"]  # the launch shape reported is the one the kernel is built with
    # a body without barriers keeps its instances past the end out entirely
    exp = tp.plan(tp.exp, np.ones((5, 8), np.float32), batch_dims=1, target=ARCH)
    built = _C.cuda.build_program(program_of(exp), ARCH)
    assert not built["clamped"] and "if (live)" not in built["source"] and not launch(exp)["clamped"]
    # a standalone call whose variant syncs its instances (cross_warp) is clamped alike
    crossed = tp.plan(tp.cta(64).sum, np.ones((5, 1024), np.float32), axes=-1, batch_dims=1, target=ARCH,
                      layout=tp.S[(4, 64, 4):(4, 1 @ tp.tx, 1)])
    assert crossed.variant == "cross_warp" and launch(crossed)["instances"] > 1 and launch(crossed)["clamped"]


def test_the_launch_says_how_each_operand_is_staged():
    rmsnorm = tp.program(programs.rmsnorm, scope=tp.cta(256))
    x, w = np.ones((4, 4096), ml_dtypes.bfloat16), np.ones(4096, ml_dtypes.bfloat16)
    staging = launch(tp.plan(rmsnorm, x, w, 1e-6, batch_dims=1, target=ARCH))["staging"]
    assert list(staging) == ["in0", "in1", "out"]
    assert "where the tile lies" in staging["in0"] and "where the tile lies" in staging["out"]
    assert "the batch's one tile" in staging["in1"]
    k = tp.lower(tp.exp, np.ones((64, 8), np.float16), batch_dims=1, target=ARCH)
    assert k.staging == {"in0": k.staging["in0"], "out": k.staging["out"]} and "16 bytes" in k.staging["in0"]
    shared = launch(tp.plan(tp.cta(32).sum, np.ones((64, 16, 256), np.float32), axes=-1, batch_dims=1,
                            storage="shared", target=ARCH))["staging"]
    assert "cp.async" in shared["in0"] and "copied as it is" in shared["out"]


@tp.program(scope=tp.cta(64))
def through_shared(x, w):  # x staged by the block, w the batch's one shared tile, barriers between steps
    s = tp.sum(tp.copy(x, storage="shared"), axes=-1, storage="shared", keepdims=True)
    return x - s + tp.sum(w, axes=-1, storage="shared", keepdims=True)


def call_plan(op, shape, dtype="float32", scope=tp.thread, arity=1, **options):
    x = np.linspace(-3, 3, int(np.prod(shape))).reshape(shape).astype(dtype)
    return tp.plan(getattr(scope, op), *[x] * arity, batch_dims=1, target=ARCH, **options)


@pytest.mark.parametrize("make, paths, shape", [
    # a thread's 32 bytes through the block's skewed area; 16 bytes straight, in one round; 4 in 16
    (lambda: call_plan("exp", (64, 8)), {"in0": "skewed", "out": "skewed"}, {"rounds": 2}),
    (lambda: call_plan("exp", (64, 8), "float16"), {"in0": "direct", "out": "direct"}, {"rounds": 1}),
    (lambda: call_plan("sqrt", (64, 1)), {"in0": "direct", "out": "direct"}, {"rounds": 16}),
    # a scalar is a parameter the body reads
    (lambda: tp.plan(tp.mul, np.ones((64, 8), np.float16), 2.0, batch_dims=1, target=ARCH),
     {"in0": "direct", "a0": "parameter", "out": "direct"}, {}),
    (lambda: call_plan("add", (64, 8, 32), scope=tp.warp, arity=2, layout=tp.S[(8, 32):(1, 1 @ tp.laneid)]),
     {"in0": "placed", "in1": "placed", "out": "placed"}, {"rounds": 1}),
    # a map over 1024 slots a thread takes them 32 at a time
    (lambda: call_plan("fma", (64, 1024), arity=3), {"in0": "skewed", "out": "skewed"}, {"chunk_slots": 32}),
    # long runs folded in place: through the warps' windows where they are whole 16-byte vectors
    (lambda: call_plan("sum", (64, 1000), axes=-1), {"in0": "run", "out": "direct"}, {"window_stages": 4}),
    (lambda: call_plan("sum", (64, 1001), axes=-1), {"in0": "run", "out": "direct"}, {"window_stages": 0}),
    # shared tiles: row-major ones staged by the block in pipelined parts, others by each instance
    (lambda: call_plan("sum", (64, 4, 32), scope=tp.cta(32), axes=-1, storage="shared"),
     {"in0": "block_tile", "out": "block_tile"}, {"rounds": 4, "stages": 4}),
    (lambda: call_plan("sum", (64, 64, 64), scope=tp.cta(64), axes=-1, layout=tp.S[(64, 64):(1, 64)]),
     {"in0": "instance_tile", "out": "instance_tile"}, {"stages": 1, "rounds": 1}),
    (lambda: tp.plan(through_shared, np.ones((8, 256), np.float32), np.ones(256, np.float32), batch_dims=1,
                     target=ARCH),
     {"in0": "block_tile", "in1": "once_tile", "out": "direct"}, {}),
])
def test_the_launch_shape_names_each_operands_path(make, paths, shape):
    d = launch(make())
    assert {k: d["paths"][k] for k in paths} == paths
    assert {k: d[k] for k in shape} == shape
    assert set(d["staging"]) == {k for k, v in d["paths"].items() if v != "parameter"}


def test_rows_in_passes_are_moved_by_the_body_and_staged_rows_by_the_block():
    x = np.ones((8, 4096), np.float32)
    softmax_in = lambda staging: tp.program(scope=tp.cta(256), staging=staging)(  # noqa: E731
        lambda x: tp.exp(x - tp.max(x, axes=-1, keepdims=True)))
    assert launch(tp.plan(softmax_in("streamed"), x, batch_dims=1, target=ARCH))["paths"] == {
        "in0": "body_moved", "out": "body_moved"}
    assert launch(tp.plan(softmax_in("shared"), x, batch_dims=1, target=ARCH))["paths"] == {
        "in0": "block_tile", "out": "body_moved"}


def test_before_sm_80_the_block_copies_its_shared_tiles_at_once_and_reads_runs_in_place():
    old = "sm_75"
    d = launch(call_plan("sum", (64, 4, 32), scope=tp.cta(32), axes=-1, storage="shared"), old)
    assert d["paths"]["in0"] == "block_tile" and d["stages"] == 1 and "cp.async" not in d["staging"]["in0"]
    d = launch(call_plan("sum", (64, 1000), axes=-1), old)
    assert d["paths"]["in0"] == "run" and d["window_stages"] == 0 and d["shared_bytes"] == 0
