"""On a GPU: CPU and GPU give the same bits for every op on every variant (the
CPU backend runs the device algorithm step for step), sm100_packed's emulation build on an older
GPU equals the CPU backend, and device arrays go in and out without copies."""
import numpy as np
import pytest

import tileprim as tp
from tileprim import S, laneid
from conftest import DTYPES, bits_equal, cuda_usable, random_tile
from test_elementwise import SCOPES
from test_reduction import CASES

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]


def both(fn, *args, **kwargs):
    return fn(*args, backend="cpu", **kwargs), fn(*args, backend="cuda", **kwargs)


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_cpu_equals_gpu_bit_for_bit(case, op, dtype, rng):
    if case.variant == "sm100_packed" and dtype != "float32":
        pytest.skip("the packed gate takes float32 only")
    x = random_tile(rng, (5,) + case.shape, dtype)  # five tiles: five scope instances
    fn = getattr(case.scope, op)
    kwargs = {k: v for k, v in case.kwargs(None).items() if k != "backend"}
    cpu, gpu = both(fn, x, batch_dims=1, **kwargs)
    assert bits_equal(cpu, gpu)
    old = random_tile(rng, cpu.shape, dtype, special=False)
    cpu_acc = fn(x, batch_dims=1, accum=True, out=old.copy(), backend="cpu", **kwargs)
    gpu_acc = fn(x, batch_dims=1, accum=True, out=old.copy(), backend="cuda", **kwargs)
    assert bits_equal(cpu_acc, gpu_acc)


MAPS_OVER_MANY_SLOTS = [
    ("silu-bf16-1024", tp.silu, [("bfloat16", (5, 1024))], {}),
    ("sqrt-f16-1024", tp.sqrt, [("float16", (5, 1024))], {}),
    ("fma-f32-1000-scalar", tp.fma, [("float32", (3, 1000)), 2.5, ("float32", (3, 1000))], {}),
    ("add-f16-257", tp.add, [("float16", (4, 257)), ("float16", (4, 257))], {}),
    ("add-warp-64", tp.warp.add, [("float32", (3, 32, 64)), ("float32", (3, 32, 64))],
     dict(layout=S[(32, 64):(1 @ laneid, 1)])),
    ("cast-column-major", tp.cast, [("float32", (3, 16, 40)), "bfloat16"],
     dict(layout=S[(16, 40):(1, 16)])),
]


@pytest.mark.parametrize("case", MAPS_OVER_MANY_SLOTS, ids=[c[0] for c in MAPS_OVER_MANY_SLOTS])
def test_maps_over_many_slots_per_thread_take_chunks_and_equal_the_cpu(case, rng):
    # a thread holding more than 32 slots maps them a chunk at a time (NVRTC unrolled 1024
    # bfloat16 silus for minutes); tables indexed by chunk, a scalar and a permuted layout
    # included. Every op gives the same bits on both backends (test_numerics_gpu.py)
    _, fn, operands, kwargs = case
    args = [random_tile(rng, o[1], o[0]) if isinstance(o, tuple) else o for o in operands]
    kwargs = dict(scope=tp.thread, **kwargs) if "layout" not in kwargs else kwargs  # one thread, many slots
    kernel = tp.lower(fn, *args, batch_dims=1, **kwargs)
    assert "tp::for_each_chunk<" in kernel.source and "at a time" in kernel.instances_why
    cpu, gpu = both(fn, *args, batch_dims=1, **kwargs)
    assert bits_equal(cpu, gpu)


# rows that are not taken as tiles of 8 (their length no multiple of 8, or an operand broadcast)
ROWS_WHERE_THEY_LIE = [
    ("exp-f32-8188", tp.exp, [("float32", (7, 8188))]),
    ("fdiv-bf16-8188-scalar", tp.fdiv, [("bfloat16", (5, 8188)), 3.0]),
    ("add-f16-8192-broadcast", tp.add, [("float16", (5, 8192)), ("float16", (8192,))]),
    ("silu-bf16-4100", tp.silu, [("bfloat16", (6, 4100))]),
    ("fma-f32-2004-scalar", tp.fma, [("float32", (3, 2004)), 2.5, ("float32", (3, 2004))]),
]


@pytest.mark.parametrize("case", ROWS_WHERE_THEY_LIE, ids=[c[0] for c in ROWS_WHERE_THEY_LIE])
def test_planned_maps_over_long_rows_take_chunks_where_they_lie_and_equal_the_cpu(case, rng):
    """A map over rows with no scope named, not taken as tiles of 8 (the planner's: a warp a row),
    loads and stores each thread's slots where they lie a chunk at a time (a warp's rows of 8192
    float32 held whole took 255 registers a thread and spilled): ragged rows (4100: chunks of whole
    runs), a row broadcast over the batch and a scalar; the CPU's bits, into a poisoned out= and in
    place on torch tensors."""
    _, fn, operands = case
    args = [random_tile(rng, o[1], o[0]) if isinstance(o, tuple) else o for o in operands]
    kernel = tp.lower(fn, *args, batch_dims=1)
    assert "tp::for_each_chunk<" in kernel.source and "at a time" in kernel.instances_why
    assert kernel.local_bytes == 0
    cpu, gpu = both(fn, *args, batch_dims=1)
    assert bits_equal(cpu, gpu)
    torch = pytest.importorskip("torch")
    on_gpu = [a if not isinstance(a, np.ndarray) else torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)
              if a.dtype.name == "bfloat16" else torch.from_numpy(a).cuda() for a in args]
    back = lambda t: (t.view(torch.int16).cpu().numpy().view(cpu.dtype) if t.dtype == torch.bfloat16
                      else t.cpu().numpy())
    poisoned = torch.full_like(on_gpu[0], float("nan"))
    fn(*on_gpu, batch_dims=1, out=poisoned)
    assert bits_equal(cpu, back(poisoned))
    fn(*on_gpu, batch_dims=1, out=on_gpu[0])  # in place: each chunk stores the slots it loaded
    assert bits_equal(cpu, back(on_gpu[0]))


@pytest.mark.parametrize("n", [8, 9, 17, 63, 64, 100, 1000])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_packed_emulation_on_this_gpu_equals_the_cpu(n, op, rng):
    """target='sm_100a' picks sm100_packed; built for this GPU the packed instructions become
    their sm_90 spellings, which must give the CPU backend's bits (subnormals included)."""
    x = random_tile(rng, (64, n), "float32")
    x[::3, ::5] = np.float32(np.finfo(np.float32).tiny / 8)
    fn = getattr(tp, op)
    assert tp.plan(fn, x, batch_dims=1, scope=tp.thread, target="sm_100a").variant == "sm100_packed"
    cpu, gpu = both(fn, x, batch_dims=1, scope=tp.thread, target="sm_100a")
    assert bits_equal(cpu, gpu)


@pytest.mark.parametrize("scope,layout,shape", SCOPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_maps_cpu_equals_gpu_bit_for_bit_in_every_scope(scope, layout, shape, dtype, rng):
    a, b, c = (random_tile(rng, (3,) + shape, dtype) for _ in range(3))
    kw = dict(layout=layout, batch_dims=1)
    for fn, args in [(scope.add, (a, b)), (scope.mul, (a, b)), (scope.fma, (a, b, c)), (scope.sub, (a, 0.75)),
                     (scope.maximum, (a, b)), (scope.sqrt, (a,)), (scope.fdiv, (a, b)), (scope.exp, (a,)),
                     (scope.silu, (a,)), (scope.log2, (a,))]:
        cpu, gpu = both(fn, *args, **kw)
        assert bits_equal(cpu, gpu), fn.__name__


def test_signed_zeros_and_nans_in_max_match_the_gpu():
    x = np.array([[-0.0, 0.0], [0.0, -0.0], [np.nan, -0.0], [np.nan, np.nan]], np.float32)
    for fn in (tp.max, tp.min):
        cpu, gpu = both(fn, x, batch_dims=1)
        assert bits_equal(cpu, gpu)
        cpu, gpu = both(fn, x, batch_dims=1, propagate_nan=True)
        assert bits_equal(cpu, gpu)


# ---- device arrays ------------------------------------------------------------------------------
def test_torch_in_torch_out_zero_copy_on_the_current_stream():
    torch = pytest.importorskip("torch")
    x = torch.randn(256, 32, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        y = x * 3.0                              # produced on `stream`
        r = tp.sum(y, batch_dims=1)              # must run after it, on `stream`
        out = torch.full((256,), float("nan"), device="cuda")
        ret = tp.cta(64).sum(y, batch_dims=1, storage="shared", out=out)
    torch.cuda.synchronize()
    assert isinstance(r, torch.Tensor) and r.device == x.device and r.dtype == torch.float32 and r.shape == (256,)
    expected = (x.double() * 3.0).sum(-1)
    assert torch.allclose(r.double(), expected, rtol=1e-5, atol=1e-4)
    assert ret is out and torch.allclose(out.double(), expected, rtol=1e-5, atol=1e-4)
    xb = x.to(torch.bfloat16)
    rb = tp.warp.sqrt(xb.abs()[:32, :8], layout=S[(32, 8):(1 @ laneid, 1)])
    assert rb.dtype == torch.bfloat16 and rb.device == x.device
    noncontig = x.t()  # copied to a contiguous tensor first, then the same result
    assert torch.allclose(tp.max(noncontig, batch_dims=1), x.t().contiguous().max(-1).values)


def test_one_torch_signature_takes_strided_views_and_checks_every_out():
    """A device operand's signature leaves its strides out (it is read through a contiguous
    copy); out='s keeps them (the kernel writes into it)."""
    torch = pytest.importorskip("torch")
    x = torch.randn(32, 64, device="cuda")
    x[0, :3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    dense, view = x[:, :32].contiguous(), x[:, 32:]  # one dtype, shape and device; the view strided
    for v in (dense, view, dense, view):
        got = tp.sum(v, batch_dims=1)
        assert bits_equal(got.cpu().numpy(), tp.sum(v.cpu().numpy(), batch_dims=1, backend="cpu"))
    out = torch.full((32,), float("nan"), device="cuda")
    assert tp.sum(view, batch_dims=1, out=out) is out
    strided_out = torch.full((64,), 7.0, device="cuda")[::2]
    with pytest.raises(ValueError, match="out: must be C-contiguous"):
        tp.sum(view, batch_dims=1, out=strided_out)
    assert (strided_out == 7.0).all()


def test_a_torch_tensor_whose_negative_bit_is_set_is_refused_even_where_its_signature_was_seen():
    """z.conj().imag is a lazy view: its memory holds the negated values. Read in place (a
    contiguous operand, out=) it would give them; it is refused, also on a repeated signature."""
    torch = pytest.importorskip("torch")
    x = torch.randn(16, 32, device="cuda")
    tp.sum(x, batch_dims=1)
    lazy = torch.randn(16, 32, dtype=torch.complex64, device="cuda").conj().imag
    contiguous_lazy = torch._neg_view(x)
    assert lazy.is_neg() and contiguous_lazy.is_neg() and contiguous_lazy.is_contiguous()
    for operand in (contiguous_lazy, lazy):
        with pytest.raises(TypeError, match=r"src: its negative bit is set .* pass src.resolve_neg\(\)"):
            tp.sum(operand, batch_dims=1)
    assert bits_equal(tp.sum(contiguous_lazy.resolve_neg(), batch_dims=1).cpu().numpy(),
                      tp.sum(-x.cpu().numpy(), batch_dims=1, backend="cpu"))
    out = torch.full((16,), float("nan"), device="cuda")
    tp.sum(x, batch_dims=1, out=out)
    with pytest.raises(TypeError, match="out: its negative bit is set"):
        tp.sum(x, batch_dims=1, out=torch._neg_view(out))
    assert bits_equal(out.cpu().numpy(), tp.sum(x.cpu().numpy(), batch_dims=1, backend="cpu"))


@pytest.mark.parametrize("shape, batch_dims", [((8,), 0), ((1, 8), 1), ((4, 1, 8), 2), ((3, 4, 8), 2),
                                               ((2, 3, 4, 5, 8), 4), ((0, 8), 1)])
def test_torch_results_are_new_c_contiguous_tensors_of_the_result_shape(shape, batch_dims, rng):
    # results are made by torch.empty_like of one element broadcast to the shape: each call's is
    # its own C-contiguous tensor (4-D included, where torch might have chosen channels-last)
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(random_tile(rng, shape, "float32")).cuda()
    first, second = tp.sum(x, batch_dims=batch_dims), tp.sum(x, batch_dims=batch_dims)
    for r in (first, second):
        assert r.shape == shape[:-1] and r.dtype == torch.float32 and r.device == x.device
        assert r.is_contiguous() and r.stride() == torch.empty(shape[:-1]).stride()
    assert first.numel() == 0 or first.data_ptr() != second.data_ptr()
    assert bits_equal(first.cpu().numpy(), tp.sum(x.cpu().numpy(), batch_dims=batch_dims, backend="cpu"))
    assert bits_equal(second.cpu().numpy(), first.cpu().numpy())


def test_cupy_in_cupy_out():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal((100, 48), dtype=cupy.float32)
    r = tp.cta(48).max(x, batch_dims=1, storage="shared")
    assert isinstance(r, cupy.ndarray) and r.shape == (100,)
    assert cupy.array_equal(r, x.max(-1))
    out = cupy.zeros(100, cupy.float32)
    assert tp.sum(x, batch_dims=1, out=out, accum=True) is out
    assert cupy.allclose(out, x.sum(-1), rtol=1e-5, atol=1e-5)


def test_jax_in_jax_out():
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    import jax.numpy as jnp
    x = jnp.asarray(np.random.default_rng().standard_normal((64, 32)).astype(np.float32))
    r = tp.sum(x, batch_dims=1)
    assert isinstance(r, jax.Array) and r.shape == (64,)
    np.testing.assert_allclose(np.asarray(r), np.asarray(x).astype(np.float64).sum(-1), rtol=1e-5, atol=1e-5)


def test_device_arrays_cannot_run_on_the_cpu_backend():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="backend: 'cpu' cannot read device arrays"):
        tp.sum(torch.ones(4, device="cuda"), backend="cpu")
    with pytest.raises(TypeError, match="mix NumPy and device arrays"):
        tp.add(torch.ones(4, device="cuda"), np.ones(4, np.float32))


@pytest.mark.parametrize("call", ["sum", "fma-scalar", "shared"])
def test_a_warmed_up_call_replays_inside_a_cuda_graph(call):
    """After one warm-up call (plan, compile, load), the same call is a launch on the current
    stream and an allocation by torch: both can be captured, and the replay reads new inputs."""
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 32, device="cuda")
    run = {"sum": lambda: tp.sum(x, batch_dims=1),
           "fma-scalar": lambda: tp.fma(x, 2.0, x, batch_dims=1),
           "shared": lambda: tp.cta(32).max(x, batch_dims=1, storage="shared")}[call]
    run()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = run()
    for _ in range(3):
        x.copy_(torch.randn(64, 32, device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        expected = {"sum": lambda v: tp.sum(v, batch_dims=1, backend="cpu"),
                    "fma-scalar": lambda v: tp.fma(v, 2.0, v, batch_dims=1, backend="cpu"),
                    "shared": lambda v: tp.cta(32).max(v, batch_dims=1, storage="shared", backend="cpu")}[call](
            x.cpu().numpy())
        assert bits_equal(captured.cpu().numpy(), expected)


@pytest.mark.multi_gpu(2)
def test_operands_on_another_gpu_run_there_on_its_current_stream():
    torch = pytest.importorskip("torch")
    x = torch.randn(256, 32, device="cuda:1")
    with torch.cuda.device(1):
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            y = x * 2.0
            r = tp.sum(y, batch_dims=1)
    torch.cuda.synchronize(1)
    assert r.device == x.device
    assert bits_equal(r.cpu().numpy(), tp.sum(y.cpu().numpy(), batch_dims=1, backend="cpu"))


@pytest.mark.parametrize("scope", [tp.thread, tp.warp, tp.cta(32), tp.cta(64), tp.warpgroup, tp.cta(256)], ids=str)
@pytest.mark.parametrize("k", [2, 4, 32, 129])
@pytest.mark.parametrize("tiles", [1, 1000, 4099])
def test_many_tiles_per_block_cpu_equals_gpu(scope, k, tiles, rng):
    # blocks hold several instances, each taking several tiles in turn: full blocks, a
    # partial last block and a lone tile must all match the CPU, with accum too
    x = random_tile(rng, (tiles, k), "float32")
    cpu, gpu = both(scope.sum, x, axes=-1, batch_dims=1)
    assert bits_equal(cpu, gpu)
    old = random_tile(rng, cpu.shape, "float32", special=False)
    cpu_acc = scope.max(x, axes=-1, batch_dims=1, accum=True, out=old.copy(), backend="cpu")
    gpu_acc = scope.max(x, axes=-1, batch_dims=1, accum=True, out=old.copy(), backend="cuda")
    assert bits_equal(cpu_acc, gpu_acc)


@pytest.mark.parametrize("k", [4, 8])
def test_unaligned_device_tiles_load_element_by_element(k, rng):
    # a thread's 16-byte tile loads as one vector only at a 16-byte address; a view one
    # element in must still give the CPU's bits
    torch = pytest.importorskip("torch")
    x = random_tile(rng, (1001 * k + 1,), "float16" if k == 8 else "float32")
    on_gpu = torch.from_numpy(x).cuda()[1:].view(1001, k)
    assert on_gpu.data_ptr() % 16
    cpu = tp.sum(x[1:].reshape(1001, k), axes=-1, batch_dims=1, backend="cpu")
    assert bits_equal(cpu, tp.sum(on_gpu, axes=-1, batch_dims=1).cpu().numpy())
    aligned = on_gpu.clone()  # a fresh allocation: the vector path
    assert aligned.data_ptr() % 16 == 0
    assert bits_equal(tp.exp(on_gpu, batch_dims=1).cpu().numpy(), tp.exp(aligned, batch_dims=1).cpu().numpy())


def _view_one_in(x):
    """x on the GPU at an address one element past a 16-byte boundary: no vector access fits."""
    torch = pytest.importorskip("torch")
    flat = torch.empty(x.size + 1, dtype=getattr(torch, str(x.dtype)), device="cuda")
    flat[1:] = torch.from_numpy(x.ravel()).cuda()
    view = flat[1:].view(x.shape)
    assert view.data_ptr() % 16
    return view


@pytest.mark.parametrize("k", [257, 1000, 1024])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_long_thread_rows_read_in_place_equal_the_cpu(k, op, rng):
    # a thread's row of hundreds of elements is folded as it is read: whole warps of 16-byte
    # aligned rows through their shared window, the last block's partial warp (301 = 2 * 128
    # + 32 + 13 rows) and unaligned rows from global memory, by 16-byte vectors where the row
    # is aligned and element by element where it is not
    x = random_tile(rng, (301, k), "float32")
    fn = getattr(tp.thread, op)
    kernel = tp.lower(fn, x, axes=-1, batch_dims=1)
    assert kernel.staging["in0"].startswith("registers: each thread's run") and "ld.local" not in kernel.ptx
    assert ("shared window" in kernel.staging["in0"]) == (k % 4 == 0)
    cpu, gpu = both(fn, x, axes=-1, batch_dims=1)
    assert bits_equal(cpu, gpu)
    assert bits_equal(cpu, fn(_view_one_in(x), axes=-1, batch_dims=1).cpu().numpy())
    old = random_tile(rng, cpu.shape, "float32", special=False)
    cpu_acc = fn(x, axes=-1, batch_dims=1, accum=True, out=old.copy(), backend="cpu")
    gpu_acc = fn(x, axes=-1, batch_dims=1, accum=True, out=old.copy(), backend="cuda")
    assert bits_equal(cpu_acc, gpu_acc)


@pytest.mark.parametrize("per_lane", [1, 2, 8, 256])
@pytest.mark.parametrize("tiles", [1, 130, 1001])
def test_warp_rows_across_the_lanes_equal_the_cpu(per_lane, tiles, rng):
    # lane i holds elements i*per_lane ... of its row: loaded straight into registers (every
    # round's at once) when short, read in place when long; full, partial and lone blocks
    x = random_tile(rng, (tiles, 32, per_lane), "float32")
    layout = S[(32, per_lane):(1 @ laneid, 1)]
    for op, axes in (("sum", (-2, -1)), ("max", (-2, -1)), ("min", (-1,))):
        fn = getattr(tp.warp, op)
        cpu, gpu = both(fn, x, axes=axes, batch_dims=1, layout=layout)
        assert bits_equal(cpu, gpu), op
        unaligned = fn(_view_one_in(x), axes=axes, batch_dims=1, layout=layout).cpu().numpy()
        assert bits_equal(cpu, unaligned), op
        old = random_tile(rng, cpu.shape, "float32", special=False)
        cpu_acc = fn(x, axes=axes, batch_dims=1, layout=layout, accum=True, out=old.copy(), backend="cpu")
        gpu_acc = fn(x, axes=axes, batch_dims=1, layout=layout, accum=True, out=old.copy(), backend="cuda")
        assert bits_equal(cpu_acc, gpu_acc), op


@pytest.mark.parametrize("scope,k", [(tp.cta(128), 128), (tp.cta(32), 32), (tp.cta(32), 8192), (tp.warp, 100),
                                     (tp.cta(256), 1000)], ids=str)
@pytest.mark.parametrize("tiles", [1, 7, 77, 1000])
def test_shared_tiles_staged_in_pipelined_parts_equal_the_cpu(scope, k, tiles, rng):
    # shared tiles arrive asynchronously in parts (the last block's parts partly or wholly
    # empty); an unaligned run takes the element-by-element path
    x = random_tile(rng, (tiles, k), "float16")
    for op in ("sum", "max"):
        fn = getattr(scope, op)
        cpu, gpu = both(fn, x, axes=-1, batch_dims=1, storage="shared")
        assert bits_equal(cpu, gpu), op
        unaligned = fn(_view_one_in(x), axes=-1, batch_dims=1, storage="shared").cpu().numpy()
        assert bits_equal(cpu, unaligned), op


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_long_rows_of_other_widths_stream_through_windows_to_the_cpu_bits(dtype, op, rng):
    # 37 rows: one whole warp through its window, 5 rows of a partial warp read in place
    x = random_tile(rng, (37, 1024), dtype)
    fn = getattr(tp.thread, op)
    assert "shared window" in tp.lower(fn, x, axes=-1, batch_dims=1).staging["in0"]
    cpu, gpu = both(fn, x, axes=-1, batch_dims=1)
    assert bits_equal(cpu, gpu)
    old = random_tile(rng, cpu.shape, dtype, special=False)
    cpu_acc = fn(x, axes=-1, batch_dims=1, accum=True, out=old.copy(), backend="cpu")
    gpu_acc = fn(x, axes=-1, batch_dims=1, accum=True, out=old.copy(), backend="cuda")
    assert bits_equal(cpu_acc, gpu_acc)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_long_rows_of_other_widths_and_out_of_slot_order_read_in_place_to_the_cpu_bits(dtype, rng):
    # 2- and 8-byte elements, and a fold across dim 0 of a thread's (256, 3) tile, which reads
    # the run out of order
    x = random_tile(rng, (37, 256, 3), dtype)
    cpu, gpu = both(tp.thread.sum, x, axes=1, batch_dims=1)
    assert bits_equal(cpu, gpu)
    x = random_tile(rng, (37, 999), dtype)
    cpu, gpu = both(tp.thread.max, x, axes=-1, batch_dims=1)
    assert bits_equal(cpu, gpu)
    assert bits_equal(cpu, tp.thread.max(_view_one_in(x), axes=-1, batch_dims=1).cpu().numpy())
