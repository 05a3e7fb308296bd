"""A program's CPU run gives the GPU's bits: its one fused CUDA kernel (NumPy through the staging
buffer, torch and CuPy arrays in place), and the chain of standalone calls of its steps on the
GPU (the same variants, storage and layouts; copies move values unchanged), each equal the
program run on the CPU backend bit for bit. Skips without a GPU."""
import numpy as np
import pytest

import tileprim as tp
from conftest import bits_equal, cuda_usable, random_tile
from program_chain import run_chain
import programs

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]
SCOPES = [tp.warp, tp.warpgroup, tp.cta(256), tp.cta(96)]


@tp.program
def rms_scale(x):  # exactly rounded ops only: sum, max, mul, fdiv, sqrt, sub
    ss = tp.sum(x * x, axes=-1, keepdims=True)
    return (x - tp.max(x, axes=-1, keepdims=True)) / tp.sqrt(ss / x.shape[-1])


softmax = tp.program(programs.softmax)


@pytest.mark.parametrize("prog", [rms_scale, softmax], ids=["rms_scale", "softmax"])
@pytest.mark.parametrize("scope", SCOPES, ids=str)
def test_cpu_program_equals_the_gpu_chain(prog, scope, rng):
    for shape in [(7, 333), (3, 4096), (5, 1)]:
        x = random_tile(rng, shape, "float32")
        got = prog(x, batch_dims=1, scope=scope, backend="cpu")
        (gpu,), _ = run_chain(prog, (x,), 1, scope, backend="cuda")
        assert bits_equal(got, gpu)


logsumexp = tp.program(programs.logsumexp)


rmsnorm = tp.program(programs.rmsnorm)


add_rmsnorm = tp.program(programs.add_rmsnorm)


@tp.program
def warp_rows(x):  # a register reduction (reduction -> local) and a layout the user names
    xr = tp.copy(x, layout=tp.S[(32, 8):(1 @ tp.laneid, 1)])
    return tp.sqrt(xr) + tp.sum(xr, axes=-1, keepdims=True)


SHAPES = [(7, 333), (3, 4096), (5, 1), (64, 1024), (2, 96)]


def _args(prog, shape, dtype, rng):
    x = random_tile(rng, shape, dtype)
    if prog is rmsnorm:
        return (x, random_tile(rng, shape[-1:], dtype, special=False), 1e-6)
    if prog is add_rmsnorm:
        return (x, random_tile(rng, shape, dtype), random_tile(rng, shape[-1:], dtype, special=False), 1e-5)
    return (x,)


def _poisoned_like(results):
    return tuple(np.full(r.shape, np.nan, r.dtype) for r in results)


PROGRAMS = {"softmax": softmax, "logsumexp": logsumexp, "rms_scale": rms_scale, "rmsnorm": rmsnorm,
            "add_rmsnorm": add_rmsnorm}


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("scope", SCOPES, ids=str)
def test_the_fused_kernel_gives_the_cpu_bits(name, dtype, scope, rng):
    prog = PROGRAMS[name]
    for shape in SHAPES:
        args = _args(prog, shape, dtype, rng)
        want = prog(*args, batch_dims=1, scope=scope, backend="cpu")
        got = prog(*args, batch_dims=1, scope=scope, backend="cuda")
        wants = want if isinstance(want, tuple) else (want,)
        gots = got if isinstance(got, tuple) else (got,)
        for w, g in zip(wants, gots):
            assert g.shape == w.shape and g.dtype == w.dtype
            assert bits_equal(g, w), (name, dtype, scope, shape)
        # into out=, poisoned first: every element written
        out = _poisoned_like(wants)
        prog(*args, batch_dims=1, scope=scope, backend="cuda", out=out if isinstance(want, tuple) else out[0])
        for w, o in zip(wants, out):
            assert bits_equal(o, w)


def test_one_kernel_per_program_and_its_launch(rng):
    x = random_tile(rng, (4, 4096), "float32")
    k = tp.lower(softmax, x, batch_dims=1, scope=tp.cta(256))
    assert k.source.count("__global__") == 1
    torch = pytest.importorskip("torch")  # device arrays lower where they lie, to the same kernel
    assert tp.lower(softmax, torch.from_numpy(x).cuda(), batch_dims=1, scope=tp.cta(256)).source == k.source
    assert k.block_threads == 256 and "cross_warp" in tp.plan(softmax, x, batch_dims=1, scope=tp.cta(256)).variants


def test_user_layouts_and_register_reductions(rng):
    x = random_tile(rng, (9, 32, 8), "float32", special=False)
    x = np.abs(x)
    want = warp_rows(x, batch_dims=1, scope=tp.warp, backend="cpu")
    assert bits_equal(warp_rows(x, batch_dims=1, scope=tp.warp, backend="cuda"), want)
    assert "local" in tp.plan(warp_rows, x, batch_dims=1, scope=tp.warp).variants


@pytest.mark.parametrize("library", ["torch", "cupy", "jax"])
def test_device_arrays_in_place(library, rng):
    lib = pytest.importorskip(library)
    x = random_tile(rng, (37, 1000), "float32")
    w = random_tile(rng, (1000,), "float32", special=False)
    want = rmsnorm(x, w, 1e-6, batch_dims=1, scope=tp.cta(128), backend="cpu")
    if library == "torch":
        xd, wd = lib.from_numpy(x).cuda(), lib.from_numpy(w).cuda()
        got = rmsnorm(xd, wd, 1e-6, batch_dims=1, scope=tp.cta(128))
        assert isinstance(got, lib.Tensor) and got.is_cuda
        host = got.cpu().numpy()
        again = rmsnorm(xd[::2], wd, 1e-6, batch_dims=1, scope=tp.cta(128))  # a strided view: made dense
        assert bits_equal(again.cpu().numpy(), want[::2])
        out = lib.full_like(xd, float("nan"))
        assert rmsnorm(xd, wd, 1e-6, batch_dims=1, scope=tp.cta(128), out=out) is out
        assert bits_equal(out.cpu().numpy(), want)
    elif library == "cupy":
        xd, wd = lib.asarray(x), lib.asarray(w)
        got = rmsnorm(xd, wd, 1e-6, batch_dims=1, scope=tp.cta(128))
        assert isinstance(got, lib.ndarray)
        host = lib.asnumpy(got)
    else:
        if not any(d.platform == "gpu" for d in lib.devices()):
            pytest.skip("JAX sees no GPU")
        import jax.numpy as jnp
        xd, wd = jnp.asarray(x), jnp.asarray(w)
        got = rmsnorm(xd, wd, 1e-6, batch_dims=1, scope=tp.cta(128))
        assert isinstance(got, lib.Array) and got.shape == x.shape
        host = np.asarray(got)
    assert bits_equal(host, want)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("scope", [None, tp.warp, tp.cta(256)], ids=str)
def test_rows_at_an_unaligned_address_give_the_cpu_bits(dtype, scope, rng):
    # a row one element past a 16-byte boundary loads its runs element by element (load_tile's
    # out-of-line words); the same rows at an aligned address take the vector loads
    torch = pytest.importorskip("torch")
    x = random_tile(rng, (33, 4096), dtype)
    want = softmax(x, batch_dims=1, scope=scope, backend="cpu")
    as_int = {2: (np.int16, torch.int16), 4: (np.int32, torch.int32)}[x.itemsize]  # moved as bits
    flat = torch.empty(x.size + 1, dtype=as_int[1], device="cuda")
    flat[1:] = torch.from_numpy(x.view(as_int[0]).ravel()).cuda()
    unaligned = flat[1:].view(getattr(torch, dtype)).view(x.shape)
    assert unaligned.data_ptr() % 16
    for rows in (unaligned, unaligned.clone()):
        got = softmax(rows, batch_dims=1, scope=scope)
        assert bits_equal(got.view(as_int[1]).cpu().numpy().view(x.dtype), want)


def test_device_arrays_mixed_with_host_arrays_are_refused(rng):
    torch = pytest.importorskip("torch")
    x = torch.ones((2, 64), device="cuda")
    with pytest.raises(TypeError, match="a host array beside torch device arrays"):
        rmsnorm(x, np.ones(64, np.float32), 1e-6, batch_dims=1)
    with pytest.raises(ValueError, match="backend: 'cpu' runs on host arrays"):
        softmax(x, batch_dims=1, backend="cpu")


def test_cuda_graph_capture(rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(random_tile(rng, (64, 512), "float32")).cuda()
    want = softmax(x, batch_dims=1, scope=tp.cta(128))  # compiled and planned before capture
    out = torch.full_like(x, float("nan"))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        softmax(x, batch_dims=1, scope=tp.cta(128), out=out)
    g.replay()
    torch.cuda.synchronize()
    assert bits_equal(out.cpu().numpy(), want.cpu().numpy())


# Rows in passes (staging "streamed" and "shared", named so that short rows take them too): shapes
# whose rows are several chunks per thread, blocks of several instances (cta(128)), ragged batches
ROWS_IN_PASSES = [(tp.warp, 2048), (tp.cta(256), 16384), (tp.cta(128), 4096)]


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("staging", ["streamed", "shared"])
@pytest.mark.parametrize("scope,n", ROWS_IN_PASSES, ids=lambda v: str(v))
def test_rows_in_passes_give_the_cpu_bits(name, dtype, staging, scope, n, rng):
    whole = PROGRAMS[name]
    passes = tp.program(whole._fn, staging=staging)
    for rows in (5, 1):
        args = _args(whole, (rows, n), dtype, rng)
        plan = tp.plan(passes, *args, batch_dims=1, scope=scope)
        assert plan.staging == staging and plan.rows["chunks"] >= 2
        want = whole(*args, batch_dims=1, scope=scope, backend="cpu")
        wants = want if isinstance(want, tuple) else (want,)
        out = _poisoned_like(wants)
        passes(*args, batch_dims=1, scope=scope, backend="cuda", out=out if isinstance(want, tuple) else out[0])
        for w, o in zip(wants, out):
            assert bits_equal(o, w), (name, dtype, staging, scope, rows)


@tp.program
def tile_norm(x):  # a 2-D tile folded whole: the "row" of the passes is the tile
    return x / tp.sum(x * x, axes=(-2, -1), keepdims=True)


@tp.program
def maps_only(x, y):  # no reduction: one pass
    return x * tp.exp(x) + y


@tp.program
def minus_m(x, m):  # one value per row from the caller, in shared memory (the CTA's default)
    return tp.exp(x - m) * 0.5


@pytest.mark.parametrize("prog,shapes,dtype,scope,staging", [
    (tile_norm, [(5, 4, 2048)], "float32", tp.cta(128), "streamed"),
    (tile_norm, [(5, 4, 2048)], "float32", tp.cta(128), "shared"),
    (tile_norm, [(3, 4, 2048)], "float64", tp.warpgroup, "streamed"),
    (tile_norm, [(3, 4, 2048)], "float64", tp.warpgroup, "shared"),
    (tile_norm, [(3, 4, 2048)], "float16", tp.cta(256), "streamed"),
    (tile_norm, [(3, 4, 2048)], "float16", tp.cta(256), "shared"),
    (maps_only, [(7, 8192)] * 2, "float32", tp.warp, "streamed"),  # one pass: shared declines
    (minus_m, [(5, 4096), (5, 1)], "float32", tp.cta(128), "streamed")],  # one pass too
    ids=["tile_norm-f32-streamed", "tile_norm-f32-shared", "tile_norm-f64-streamed", "tile_norm-f64-shared",
         "tile_norm-f16-streamed", "tile_norm-f16-shared", "maps_only-streamed", "minus_m-streamed"])
def test_tiles_and_map_programs_in_passes_give_the_cpu_bits(prog, shapes, dtype, scope, staging, rng):
    passes = tp.program(prog._fn, staging=staging)
    args = tuple(random_tile(rng, shape, dtype) for shape in shapes)
    assert tp.plan(passes, *args, batch_dims=1, scope=scope).rows["chunks"] >= 2
    want = prog(*args, batch_dims=1, scope=scope, backend="cpu")
    out = np.full(want.shape, np.nan, want.dtype)
    passes(*args, batch_dims=1, scope=scope, backend="cuda", out=out)
    assert bits_equal(out, want)


@pytest.mark.parametrize("shape,dtype", [((37, 3), "float32"), ((9, 4097), "bfloat16"), ((5, 2047), "float32")])
def test_a_program_returning_an_input_as_it_is_gives_its_bits(shape, dtype, rng):
    @tp.program
    def keeps(t, u):
        return t, u * 2.0

    x, u = random_tile(rng, shape, dtype), random_tile(rng, shape, dtype)
    got, doubled = keeps(x, u, batch_dims=1, backend="cuda")
    cpu = keeps(x, u, batch_dims=1, backend="cpu")
    assert bits_equal(np.asarray(got), x) and bits_equal(np.asarray(doubled), np.asarray(cpu[1]))
