"""treduce's chain on the CPU backend (its steps, position after position, as every rank's kernel
runs them): the contract's fold bit for bit for 2 to 8 ranks and every root, whatever the layout
of its steps; and the cost model's choice of algorithm, as dispatch makes it for GPUs described
(_C.treduce_plan_on: no GPU needed), with its reasons."""
import itertools

import numpy as np
import pytest

import tileprim as tp
from conftest import bits_equal
from test_treduce import (DST_LAYOUTS, ORDER_VALUES, SOURCE_LAYOUTS, expected_buffer, laid_out, np_dtype, poisoned,
                          random_source, random_sources, same_fold, treduce)
from treduce_oracle import contract_order, fold_in_order, treduce_reference

from tileprim import _C

EVERY_ROOT = [pytest.param(n, root, id=f"{n}ranks-root{root}") for n in range(2, 9) for root in range(n)]


@pytest.mark.parametrize("nranks,root", EVERY_ROOT)
@pytest.mark.parametrize("dtype,accumulate", [("float32", None), ("float16", None), ("bfloat16", None),
                                              ("bfloat16", "float32")])
def test_the_chain_folds_in_the_contract_order_for_every_root(nranks, root, dtype, accumulate, rng):
    """Values where another order or precision gives other bits: the chain's equal the contract's
    fold and root_pull's, and (checked, so that this can fail) other orders' differ."""
    big, small = ORDER_VALUES[(dtype, accumulate)]
    values = np.array([big, -big, small, -small, small / 2])
    xs = [rng.choice(values, size=(7, 45)).astype(np_dtype(dtype)) for _ in range(nranks)]
    dst = poisoned((7, 45), dtype)
    assert treduce(xs, root, dst, dispatch="chain", accumulate=accumulate) is dst
    assert bits_equal(dst, treduce_reference(xs, root, "sum", accumulate))
    assert bits_equal(dst, treduce(xs, root, dispatch="root_pull", accumulate=accumulate))
    stated = contract_order(nranks, root)
    if nranks > 2:
        for order in (sorted(stated), stated[::-1], stated[1:] + stated[:1]):
            if not same_fold(order, stated):
                assert not bits_equal(fold_in_order(xs, order, "sum", accumulate), dst), f"order {order} agrees"


# (name, shape): how the chain cuts the tensor into steps of row segments
STEP_LAYOUTS = [
    ("rows-longer-than-a-step", (3, 20_011)),   # a row in several segments, the last partial
    ("rows-of-three", (301, 3)),                 # many segments packed into a step, each short of a vector
    ("one-long-row", (100_003,)),
    ("one-element", (1,)),
    ("steps-of-whole-rows", (40, 1024)),
    ("five-dims", (2, 1, 3, 6, 17)),
]


@pytest.mark.parametrize("name,shape", STEP_LAYOUTS, ids=[n for n, _ in STEP_LAYOUTS])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_every_layout_of_steps_gives_the_contract_bits(name, shape, op, dtype, rng):
    xs = random_sources(rng, 3, shape, dtype)
    dst = poisoned(shape, dtype)
    treduce(xs, 1, dst, op=op, dispatch="chain")
    assert bits_equal(dst, treduce_reference(xs, 1, op))


@pytest.mark.parametrize("src_layout,dst_layout", list(itertools.product(SOURCE_LAYOUTS, DST_LAYOUTS)))
def test_strided_sources_and_dst_take_their_elements_one_by_one(src_layout, dst_layout, rng):
    shape = (5, 9, 37)
    xs = [laid_out(SOURCE_LAYOUTS[src_layout], shape, lambda s: random_source(rng, s, "float32"))[1]
          for _ in range(5)]
    buffer, dst = laid_out(DST_LAYOUTS[dst_layout], shape, lambda s: poisoned(s, "float32"))
    assert treduce(xs, 3, dst, dispatch="chain") is dst
    assert bits_equal(buffer, expected_buffer(dst_layout, shape, "float32", treduce_reference(xs, 3, "sum")))


def test_a_reduction_in_place_into_the_roots_tensor(rng):
    """The last rank writes a step of dst only after the root's value of that step went out."""
    xs = random_sources(rng, 4, (33, 200), "float32")
    expected = treduce_reference(xs, 2, "sum")
    assert treduce(xs, 2, xs[2], dispatch="chain") is xs[2]
    assert bits_equal(xs[2], expected)


def test_the_plan_names_the_chain_its_steps_and_ctas(rng):
    xs = random_sources(rng, 4, (256, 4096), "float32")  # 4 MiB per rank
    plan = tp.plan(tp.comm.treduce, tp.comm.ParallelGroup(xs, root=1), dispatch="chain")
    p = plan.params
    assert plan.variant == "chain" and p["order"] == [1, 0, 2, 3] and p["workers"] == [0, 1, 2, 3]
    assert p["steps"] * p["step_elements"] >= 256 * 4096 and p["step_elements"] % 4 == 0, p
    assert "staging" in p["buffers"] and "host memory" == p["transport"], p


# ---- the cost model: dispatch's choice on GPUs described ------------------------------------------------
def modelled_plan(nranks: int, nbytes: int, transport: str = "", root: int = 0, devices=None, accumulate="",
                  dispatch="", peer_access=True, dtype="float32"):
    """The plan dispatch makes of a treduce of `nbytes` per rank on H200s (rank r on GPU
    devices[r], default r)."""
    n = nbytes // np.dtype(np_dtype(dtype)).itemsize
    shape, strides = ([n // 1024, 1024], [1024, 1]) if n % 1024 == 0 else ([n], [1])
    devices = devices or list(range(nranks))
    refs = [_C.TileRef(f"tensors[{r}]", dtype, shape, "global", None, devices[r], strides) for r in range(nranks)]
    dst = _C.TileRef("dst", dtype, shape, "global", None, devices[root], strides)
    options = _C.TreduceOptions(op="sum", root=root, tile_rows=64, tile_cols=256, pingpong=False, valid="dynamic",
                                accumulate=accumulate, transport=transport)
    return _C.treduce_plan_on(_C.treduce_call(refs, dst, options, dispatch), "sm_90a", 132, peer_access)


def estimates(plan) -> dict:
    """The plan's estimates: {'chain': 58.1, ...} (microseconds)."""
    return {name: float(us.split()[0]) for name, us in (e.strip().split(" ", 1) for e in
                                                        plan.params["estimates"].split(","))}


KiB, MiB = 1 << 10, 1 << 20


@pytest.mark.parametrize("transport", ["", "cuda_ipc", "nccl"])
@pytest.mark.parametrize("nranks", [2, 4, 8])
@pytest.mark.parametrize("nbytes", [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB])
def test_dispatch_takes_the_algorithm_the_model_expects_fastest(transport, nranks, nbytes):
    """The fastest estimate, or a simpler algorithm (later in variant order) within 3 % of it."""
    plan = modelled_plan(nranks, nbytes, transport)
    times = estimates(plan)
    order = list(times)  # variant order: chain, scatter_gather, root_pull
    assert plan.variant in times and times[plan.variant] <= 1.03 * min(times.values()), (plan.variant, times)
    assert all(times[a] > 1.03 * min(times.values()) for a in order[order.index(plan.variant) + 1:]), times
    for entry in plan.trace:
        if entry.variant != plan.variant and entry.status == "declined":
            assert any("cost model expects " + plan.variant in r for r in entry.reasons), entry.reasons


@pytest.mark.parametrize("transport", ["", "cuda_ipc", "nccl"])
def test_two_ranks_and_small_messages_take_root_pull_large_ones_on_four_or_eight_the_chain(transport):
    """root_pull's one hop for 2 ranks at any size and for small messages; the chain, whose every
    link carries one tensor, for large ones on 4 and 8 GPUs (not under nccl at 16 MiB, where every
    chunk costs each host a group and a fold)."""
    for nbytes in (4 * KiB, 64 * KiB, 256 * MiB):
        assert modelled_plan(2, nbytes, transport).variant == "root_pull"
    for nranks in (4, 8):
        assert modelled_plan(nranks, 64 * KiB, transport).variant == "root_pull"
        assert modelled_plan(nranks, 256 * MiB, transport).variant == "chain"
        if transport != "nccl":
            assert modelled_plan(nranks, 16 * MiB, transport).variant == "chain"


def test_the_chain_declines_ranks_that_share_a_gpu_in_one_process_and_the_next_best_runs():
    plan = modelled_plan(4, 64 * MiB, devices=[0, 1, 0, 2])
    (entry,) = [e for e in plan.trace if e.variant == "chain"]
    assert entry.status == "declined" and any("ranks 0 and 2 share GPU 0" in r for r in entry.reasons), entry.reasons
    assert plan.variant == "scatter_gather" and "chain" not in estimates(plan)
    with pytest.raises(tp.DispatchError, match="share GPU 0"):
        modelled_plan(4, 64 * MiB, devices=[0, 1, 0, 2], dispatch="chain")
    # across processes every rank has a process (and, but in tests, a GPU) of its own
    assert modelled_plan(4, 64 * MiB, "cuda_ipc", devices=[0, 0, 0, 0]).variant == "chain"


def test_without_peer_access_only_root_pull_runs_in_one_process():
    plan = modelled_plan(4, 64 * MiB, peer_access=False)
    assert plan.variant == "root_pull", [(e.variant, e.reasons) for e in plan.trace]
    for name in ("chain", "scatter_gather"):
        (entry,) = [e for e in plan.trace if e.variant == name]
        assert any("no peer access" in r for r in entry.reasons), entry.reasons


def test_over_nccl_the_chain_declines_a_float32_accumulator():
    plan = modelled_plan(4, 256 * MiB, "nccl", accumulate="float32", dtype="bfloat16")
    (entry,) = [e for e in plan.trace if e.variant == "chain"]
    assert any("accumulate='float32'" in r for r in entry.reasons) and plan.variant != "chain", entry.reasons


# ---- the chain's kernel, compiled for sm_90a without a GPU ----------------------------------------------
@pytest.mark.parametrize("dtype,accumulate", [("float32", None), ("float16", None), ("bfloat16", "float32"),
                                              ("int32", None)])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_the_chains_kernel_loads_whole_vectors_ahead_in_registers_only(dtype, accumulate, op):
    """512 threads, one CTA per SM (every rank's CTAs resident at once), no local memory; its
    source read once through the read-only path and its staging at L2 (the predecessor's GPU
    writes it), 16 bytes at a time, four of each in flight before the first fold."""
    xs = [np.ones((64, 4096), np_dtype(dtype))] * 4
    k = tp.lower(tp.comm.treduce, tp.comm.ParallelGroup(xs, root=1), op=op, accumulate=accumulate, dispatch="chain",
                 target="sm_90a")
    assert k.block_threads == 512 and k.local_bytes == 0 and k.registers <= 128 and k.blocks_per_sm >= 1, k
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx
    assert "ld.global.nc.L1::no_allocate.v4.u32" in k.ptx and "ld.global.cg.v4.u32" in k.ptx
    assert "st.global.v4.u32" in k.ptx and "red.release.sys.global.max.u64" in k.ptx
    # the fast path's loads: four of the source, then (past the root) four of the staging per word
    body = k.ptx[k.ptx.index("ld.global.nc.L1::no_allocate.v4.u32"):]
    first_store = body.index("st.global.v4.u32")
    assert body[:first_store].count("ld.global.nc.L1::no_allocate.v4.u32") == 4, body[:first_store]
