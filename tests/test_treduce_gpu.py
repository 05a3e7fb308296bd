"""tp.comm.treduce across GPUs in one process (torch tensors, rank r on cuda:r, dst on the root's GPU):
the CPU tests' key cases give the CPU backend's bits exactly; bad device placements raise before
anything is written. Skipped where fewer GPUs are usable (the multi_gpu marker, conftest)."""
import numpy as np
import pytest

import tileprim as tp
from conftest import bits_equal
from test_treduce import (CHUNK_CASES, DST_LAYOUTS, DTYPES, OPS, SOURCE_LAYOUTS, laid_out, meeting_specials,
                          np_dtype, poisoned, random_source, random_sources, treduce)
from treduce_oracle import treduce_reference

pytestmark = pytest.mark.gpu

# (GPUs, root, algorithm): scatter_gather needs 3+ ranks; the chain a GPU per rank
RUNS = [pytest.param(n, root, dispatch, marks=pytest.mark.multi_gpu(n), id=f"{n}gpus-root{root}-{dispatch}")
        for n, root, dispatch in [(2, 0, "root_pull"), (2, 1, "root_pull"), (4, 2, "root_pull"),
                                  (4, 0, "scatter_gather"), (4, 3, "scatter_gather"),
                                  (2, 1, "chain"), (3, 1, "chain"), (4, 0, "chain"), (4, 3, "chain")]]
PULLS = [run for run in RUNS if run.values[2] != "chain"]  # the kernels that pull pieces (root_pull, scatter_gather)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def on_device(torch, buffer: np.ndarray, view: np.ndarray, device: str):
    """(`view`, its buffer) re-created on `device` with the same strides and offset; the values go
    through their bits, since torch cannot read ml_dtypes' bfloat16."""
    item = buffer.itemsize
    bits = torch.from_numpy(buffer.view(f"i{item}")).to(device)
    on_dev = bits.view(getattr(torch, buffer.dtype.name))
    offset = (view.__array_interface__["data"][0] - buffer.__array_interface__["data"][0]) // item
    return on_dev.as_strided(view.shape, [s // item for s in view.strides], offset), on_dev


def to_host(torch, t, dtype: str) -> np.ndarray:
    torch.cuda.synchronize(t.device)
    return t.view(getattr(torch, f"int{t.element_size() * 8}")).cpu().numpy().view(np_dtype(dtype))


def gpu_and_cpu(torch, sources, root, dst_layout="dst-contiguous", gpu_of=lambda rank: rank, **kwargs):
    """The same call on the GPUs (rank r's tensor and dst on GPU gpu_of(r)) and on the CPU backend.
    sources: (buffer, view) per rank. Returns the GPU's and the CPU's dst buffers, as NumPy."""
    shape, dtype = sources[0][1].shape, sources[0][1].dtype.name
    cpu_buffer, cpu_dst = laid_out(DST_LAYOUTS[dst_layout], shape, lambda s: poisoned(s, dtype))
    treduce([view for _, view in sources], root, cpu_dst, **kwargs)

    host_buffer, host_dst = laid_out(DST_LAYOUTS[dst_layout], shape, lambda s: poisoned(s, dtype))
    gpu_dst, gpu_buffer = on_device(torch, host_buffer, host_dst, f"cuda:{gpu_of(root)}")
    gpu_sources = [on_device(torch, buffer, view, f"cuda:{gpu_of(r)}")[0] for r, (buffer, view) in enumerate(sources)]
    out = tp.comm.treduce(tp.comm.ParallelGroup(gpu_sources, root=root), gpu_dst, **kwargs)
    assert out.data_ptr() == gpu_dst.data_ptr(), "treduce returns dst"
    return to_host(torch, gpu_buffer, dtype), cpu_buffer


def contiguous_sources(rng, nranks, shape, dtype):
    return [(x, x) for x in random_sources(rng, nranks, shape, dtype)]


@pytest.mark.parametrize("nranks,root,dispatch", RUNS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype,accumulate", DTYPES)
@pytest.mark.parametrize("shape,tile", [((2, 13, 37), (4, 16)), ((67, 300), (64, 256))], ids=["small", "mid"])
def test_gpu_equals_cpu_bit_for_bit(nranks, root, dispatch, op, dtype, accumulate, shape, tile, torch, rng):
    gpu, cpu = gpu_and_cpu(torch, contiguous_sources(rng, nranks, shape, dtype), root, op=op, tile=tile,
                           accumulate=accumulate, dispatch=dispatch)
    assert bits_equal(gpu, cpu)


@pytest.mark.parametrize("nranks,root,dispatch", RUNS)
@pytest.mark.parametrize("shape,tile,valid", CHUNK_CASES)
@pytest.mark.parametrize("pingpong", [False, True], ids=["acc-recv", "pingpong"])
def test_gpu_chunking(nranks, root, dispatch, shape, tile, valid, pingpong, torch, rng):
    sources = contiguous_sources(rng, nranks, shape, "float32")
    gpu, cpu = gpu_and_cpu(torch, sources, root, tile=tile, valid=valid, pingpong=pingpong, dispatch=dispatch)
    assert bits_equal(gpu, cpu)


@pytest.mark.parametrize("nranks,root,dispatch", RUNS)
@pytest.mark.parametrize("src_layout", SOURCE_LAYOUTS)
@pytest.mark.parametrize("dst_layout", DST_LAYOUTS)
def test_gpu_strided_sources_and_dst(nranks, root, dispatch, src_layout, dst_layout, torch, rng):
    sources = [laid_out(SOURCE_LAYOUTS[src_layout], (3, 6, 37), lambda s: random_source(rng, s, "float32"))
               for _ in range(nranks)]
    gpu, cpu = gpu_and_cpu(torch, sources, root, dst_layout, tile=(4, 16), dispatch=dispatch)
    assert bits_equal(gpu, cpu)


@pytest.mark.parametrize("nranks,root,dispatch", RUNS)
@pytest.mark.parametrize("op", OPS)
def test_gpu_nan_and_inf_meet_as_on_the_cpu(nranks, root, dispatch, op, torch):
    sources = [(x, x) for x in meeting_specials(nranks, "float32")]
    gpu, cpu = gpu_and_cpu(torch, sources, root, op=op, tile=(4, 16), dispatch=dispatch)
    assert bits_equal(gpu, cpu)


@pytest.mark.parametrize("nranks,root,dispatch", RUNS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype,accumulate", [("float16", None), ("float16", "float32"), ("bfloat16", None),
                                              ("bfloat16", "float32")])
def test_gpu_16_bit_nans_have_the_cpus_bits_exactly(nranks, root, dispatch, op, dtype, accumulate, torch):
    """Every bit, NaN payloads included (bits_equal would count any NaN alike)."""
    sources = [(x, x) for x in meeting_specials(nranks, dtype)]
    gpu, cpu = gpu_and_cpu(torch, sources, root, op=op, tile=(4, 16), accumulate=accumulate, dispatch=dispatch)
    assert np.array_equal(gpu.view(np.uint16), cpu.view(np.uint16))


@pytest.mark.parametrize("nranks,root,dispatch", RUNS)
@pytest.mark.parametrize("dtype,accumulate", [("float32", None), ("bfloat16", "float32")])
def test_gpu_many_partial_chunks_match_the_reference(nranks, root, dispatch, dtype, accumulate, torch, rng):
    """Large enough for many CTAs; the NumPy reference stands in for the (slower) CPU backend."""
    xs = random_sources(rng, nranks, (1000, 3000), dtype)  # 1000 % 64 and 3000 % 256: partial chunks
    gpu_xs = [on_device(torch, x, x, f"cuda:{r}")[0] for r, x in enumerate(xs)]
    out = tp.comm.treduce(tp.comm.ParallelGroup(gpu_xs, root=root), op="sum", tile=(64, 256), pingpong=True,
                          accumulate=accumulate, dispatch=dispatch)
    assert bits_equal(to_host(torch, out, dtype), treduce_reference(xs, root, "sum", accumulate))


@pytest.mark.parametrize("nranks,root,dispatch", PULLS)
@pytest.mark.parametrize("shape,tile", [((5_000_011,), (64, 256)), ((1001, 777), (2, 8)), ((1000, 1024), (1, 64))],
                         ids=["1d-odd", "2d-ragged-tiny-tiles", "2d-aligned-rows"])
def test_gpu_small_pieces_are_folded_several_per_cta_step_with_the_same_bits(nranks, root, dispatch, shape, tile,
                                                                             torch, rng):
    """Chunks of a few hundred elements or fewer (a 1-D tensor's are 1 x 256) are folded several
    at once by a CTA, ragged ends included: the bits are the reference's."""
    xs = random_sources(rng, nranks, shape, "float32")
    gpu_xs = [on_device(torch, x, x, f"cuda:{r}")[0] for r, x in enumerate(xs)]
    group = tp.comm.ParallelGroup(gpu_xs, root=root)
    assert int(tp.plan(tp.comm.treduce, group, tile=tile, dispatch=dispatch).launch()["pieces_per_cta_step"]) > 1
    out = tp.comm.treduce(group, tile=tile, pingpong=True, dispatch=dispatch)
    assert bits_equal(to_host(torch, out, "float32"), treduce_reference(xs, root, "sum", None))


@pytest.mark.parametrize("nranks,root,dispatch", [(1, 0, "root_pull"), (3, 1, "root_pull"), (4, 2, "scatter_gather")])
def test_every_rank_on_one_gpu_is_ordered_by_its_stream(nranks, root, dispatch, torch, rng):
    gpu, cpu = gpu_and_cpu(torch, contiguous_sources(rng, nranks, (13, 300), "float32"), root, gpu_of=lambda r: 0,
                           dispatch=dispatch, tile=(4, 64))
    assert bits_equal(gpu, cpu)


def lenders(nranks: int, root: int, dispatch: str) -> set:
    """The ranks that only lend their data (no share of the work): the root under scatter_gather,
    none in a chain (every rank runs its step)."""
    return {"scatter_gather": {root}, "chain": set()}.get(dispatch, set(range(nranks)) - {root})


@pytest.mark.parametrize("nranks,root,dispatch", RUNS)
@pytest.mark.parametrize("idle", ["no-rank", "the-lenders"])
def test_each_rank_may_write_its_source_on_its_stream_just_before_and_after_the_call(nranks, root, dispatch, idle,
                                                                                      torch, rng):
    """A call is one operation on every rank's current stream: the values a rank's stream wrote
    before it are the ones reduced ("source ready"), and what its stream writes after waits until
    every worker is done reading ("source released"). A busy stream's write lands late; an idle
    lender's stream (the host orders it by events) has its write done before the call while the
    workers start late, so a missing wait either way shows. 16 MiB per rank."""
    n, nan = 1 << 22, float("nan")
    idle_ranks = lenders(nranks, root, dispatch) if idle == "the-lenders" else set()
    fresh = [[rng.standard_normal(n).astype(np.float32) for _ in range(nranks)] for _ in range(3)]
    xs = [torch.full((n,), nan, device=f"cuda:{r}") for r in range(nranks)]
    group = tp.comm.ParallelGroup(xs, root=root)
    for values in fresh:
        incoming = [torch.from_numpy(v).to(f"cuda:{r}") for r, v in enumerate(values)]
        for r in range(nranks):
            torch.cuda.synchronize(r)
            with torch.cuda.device(r):
                if r not in idle_ranks:
                    torch.cuda._sleep(2_000_000)  # the copy lands late on this stream
                xs[r].copy_(incoming[r])
            if r in idle_ranks:
                torch.cuda.synchronize(r)
        out = tp.comm.treduce(group, dispatch=dispatch, tile=(64, 256))
        for r in range(nranks):
            with torch.cuda.device(r):
                xs[r].fill_(nan)
        assert bits_equal(to_host(torch, out, "float32"), treduce_reference(values, root, "sum", None))


@pytest.mark.multi_gpu(2)
@pytest.mark.parametrize("root", [0, 1, 2])
@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_ranks_sharing_a_gpu_with_others_elsewhere_are_ordered_by_their_stream(root, busy, torch, rng):
    """Ranks 0 and 1 on GPU 0 (one stream), rank 2 on GPU 1: whichever rank is the root, the
    rank sharing a stream with it or with another lender is ordered by that stream."""
    gpu_of = [0, 0, 1]
    values = [rng.standard_normal((13, 300)).astype(np.float32) for _ in range(3)]
    xs = [torch.from_numpy(v).to(f"cuda:{gpu_of[r]}") for r, v in enumerate(values)]
    for device in (0, 1):
        torch.cuda.synchronize(device)
        if busy:
            with torch.cuda.device(device):
                torch.cuda._sleep(2_000_000)
    out = tp.comm.treduce(tp.comm.ParallelGroup(xs, root=root), dispatch="root_pull", tile=(4, 64))
    assert bits_equal(to_host(torch, out, "float32"), treduce_reference(values, root, "sum", None))


@pytest.mark.parametrize("nranks,root,dispatch", RUNS)
def test_gpu_allocates_dst_on_the_root(nranks, root, dispatch, torch, rng):
    sources = contiguous_sources(rng, nranks, (13, 37), "float32")
    gpu_xs = [on_device(torch, x, x, f"cuda:{r}")[0] for r, (x, _) in enumerate(sources)]
    out = tp.comm.treduce(tp.comm.ParallelGroup(gpu_xs, root=root), op="sum", tile=(4, 16), dispatch=dispatch)
    assert isinstance(out, torch.Tensor) and out.device == torch.device(f"cuda:{root}")
    assert bits_equal(to_host(torch, out, "float32"), treduce([x for x, _ in sources], root))


@pytest.mark.multi_gpu(2)
def test_gpu_plan_shows_chunks_ctas_and_stages(torch):
    xs = [torch.randn((128, 512), device=f"cuda:{r}") for r in range(2)]
    plan = tp.plan(tp.comm.treduce, tp.comm.ParallelGroup(xs, root=0), op="sum", tile=(64, 256))
    assert plan.variant == "root_pull"
    keys = " ".join(plan.params).lower()
    assert all(word in keys for word in ("chunk", "cta", "stage")), plan.params


@pytest.mark.multi_gpu(2)
def test_gpu_empty_tensor_leaves_dst_untouched(torch):
    xs = [torch.ones((0, 16), device=f"cuda:{r}") for r in range(2)]
    buffer = torch.full((3, 16), float("nan"), device="cuda:0")
    assert tp.comm.treduce(tp.comm.ParallelGroup(xs, root=0), buffer[1:1], tile=(4, 16)).numel() == 0
    assert torch.isnan(buffer).all()


# (how dst or a source is misplaced, the error); 2 GPUs, root 0
BAD_PLACEMENTS = [
    pytest.param(lambda xs, dst: (xs, dst.to("cuda:1")), ValueError, id="dst-on-a-non-root-gpu"),
    pytest.param(lambda xs, dst: (xs, dst.cpu().numpy()), TypeError, id="numpy-dst-for-device-sources"),
    pytest.param(lambda xs, dst: ([xs[0], xs[1].cpu().numpy()], dst), TypeError,
                 id="host-and-device-sources"),
]


@pytest.mark.multi_gpu(2)
@pytest.mark.parametrize("misplace,error", BAD_PLACEMENTS)
def test_gpu_misplaced_dst_or_source_raises_before_writing(misplace, error, torch):
    xs = [torch.full((6, 20), float(r + 1), device=f"cuda:{r}") for r in range(2)]
    xs, dst = misplace(xs, torch.full((6, 20), float("nan"), device="cuda:0"))
    with pytest.raises(error, match="(?i)dst|tensors|device"):
        tp.comm.treduce(tp.comm.ParallelGroup(xs, root=0), dst, tile=(4, 16))
    untouched = torch.from_numpy(dst) if isinstance(dst, np.ndarray) else dst.cpu()
    assert torch.isnan(untouched).all()


@pytest.mark.multi_gpu(2)
def test_without_peer_access_the_data_is_staged_and_the_bits_are_the_same(torch, monkeypatch, rng):
    """TILEPRIM_NO_PEER_ACCESS=1 makes dispatch see GPUs that cannot reach each other: root_pull
    copies the other rank's tensor to the root first and orders the streams with events."""
    monkeypatch.setenv("TILEPRIM_NO_PEER_ACCESS", "1")
    xs = random_sources(rng, 2, (37, 300), "float32")
    gpu_xs = [torch.from_numpy(x).to(f"cuda:{r}") for r, x in enumerate(xs)]
    group = tp.comm.ParallelGroup(gpu_xs, root=1)
    plan = tp.plan(tp.comm.treduce, group, op="sum", tile=(8, 64))
    assert plan.variant == "root_pull" and "staged" in plan.params["transport"]
    out = tp.comm.treduce(group, op="sum", tile=(8, 64))
    torch.cuda.synchronize(1)
    assert bits_equal(out.cpu().numpy(), treduce_reference(xs, 1, "sum"))


@pytest.mark.multi_gpu(4)
@pytest.mark.parametrize("root", [0, 2])
@pytest.mark.parametrize("dtype,accumulate", [("float32", None), ("bfloat16", "float32"), ("float16", None),
                                              ("int32", None)])
def test_a_chain_of_many_steps_per_cta_wraps_its_slots_and_repeats_with_the_cpu_bits(root, dtype, accumulate,
                                                                                       torch, rng):
    """17 MB per rank: more steps per CTA than it has slots, so slots of the staging are reused
    within a call, and three calls back to back reuse them across calls (no host wait between)."""
    xs = [[random_source(rng, (1400, 3000), dtype) for _ in range(4)] for _ in range(3)]
    group_of = [tp.comm.ParallelGroup([on_device(torch, x, x, f"cuda:{r}")[0] for r, x in enumerate(call)], root=root)
                for call in xs]
    plan = tp.plan(tp.comm.treduce, group_of[0], dispatch="chain", accumulate=accumulate)
    assert plan.params["steps"] > 4 * plan.params["ctas"], plan.params  # 4 slots a CTA
    outs = [tp.comm.treduce(g, dispatch="chain", accumulate=accumulate) for g in group_of]
    for call, out in zip(xs, outs):
        cpu = treduce(call, root, dispatch="root_pull", accumulate=accumulate, tile=(64, 256))
        assert bits_equal(to_host(torch, out, dtype), cpu)


@pytest.mark.multi_gpu(2)
def test_a_chain_refuses_ranks_that_share_a_gpu_in_one_process_and_says_why(torch):
    """Its ranks' kernels wait on each other: on one GPU (one stream or two) they need not run at once."""
    xs = [torch.ones((64, 256), device="cuda:0"), torch.ones((64, 256), device="cuda:1"),
          torch.ones((64, 256), device="cuda:0")]
    with pytest.raises(tp.DispatchError, match="ranks 0 and 2 share GPU 0"):
        tp.comm.treduce(tp.comm.ParallelGroup(xs, root=1), dispatch="chain")
    assert tp.plan(tp.comm.treduce, tp.comm.ParallelGroup(xs, root=1), dispatch=None).variant != "chain"
