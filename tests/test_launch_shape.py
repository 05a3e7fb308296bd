"""The kernel frame's launch shape: a host-side value (scope instances per block, tiles each
takes in turn, shared memory), made from a plan without a GPU or a compiler. Standalone calls
and tile programs share the frame: a program of one step launches as its standalone call."""
import re

import ml_dtypes
import numpy as np
import pytest

import tileprim as tp
from tileprim import _C

ARCH = "sm_90a"


def launch(plan):
    """The launch shape of a program's kernel, or of a standalone call's (its program of one step)."""
    bound = getattr(plan, "_bound", None)
    return _C.cuda.launch(bound.plan if bound is not None else plan._core, ARCH)


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

    k = tp.lower(normalized, np.ones((5, 1024), np.float32), batch_dims=1, target=ARCH)
    assert k.instances_per_block > 1 and "tp::CtaLanes" in k.source
    assert "const bool live = first + slot < tiles;" in k.source and "if (tile < tiles)" not in k.source
    assert "if (live) tp::store_tile<Place_out>" in k.source
    # a body without barriers keeps its instances past the end out entirely
    k = tp.lower(tp.exp, np.ones((5, 8), np.float32), batch_dims=1, target=ARCH)
    assert "if (tile < tiles)" in k.source and "live" not in k.source


def test_the_launch_says_how_each_operand_is_staged():
    @tp.program(scope=tp.cta(256))
    def rmsnorm(x, w, eps):
        xf = tp.cast(x, "float32")
        ms = tp.sum(xf * xf, axes=-1, keepdims=True) / x.shape[-1]
        return tp.cast(xf * tp.rsqrt(ms + eps) * tp.cast(w, "float32"), x.dtype)

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
