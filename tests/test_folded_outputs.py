"""A program's outputs folded over runs of consecutive instances (``Program._run``'s ``folded``, the
CUDA kernel's ProgramPlan::folded): each run's sum, in order from -0.0 in the wide float, bit for bit
the sum of the rows the unfolded call returns on the CPU backend (which refuses a folded plan); and a
norm's weight and bias gradients folded so in the backward's kernel (``_torch.folded_gradients``) give
the bits of the rows written and summed after (``sum_to``), as the CPU backend computes them."""
import numpy as np
import pytest

import tileprim as tp
from conftest import NP, bits_equal, cuda_usable, random_tile

torch = pytest.importorskip("torch")
F = pytest.importorskip("tileprim._torch.folded_gradients")
P = pytest.importorskip("tileprim._torch.program_op")

gpu = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]


@tp.program
def products_and_sums(x, w):
    p = x * w
    return p, tp.sum(tp.cast(p, "float64" if x.dtype == "float64" else "float32"), axes=-1)


def call(x, w, folded, backend):
    return products_and_sums._run([x, w], 1, None, backend, None, False, None, folded)


def ordered_runs(rows: np.ndarray, run: int) -> np.ndarray:
    """Each run of rows summed in order from -0.0, in float32 (float64 for float64): the r-th rows of
    every run added at once (rows r, r + run, ...; a short last run has fewer)."""
    wide = np.float64 if rows.dtype == np.float64 else np.float32
    sums = np.full((-(-rows.shape[0] // run),) + rows.shape[1:], -0.0, wide)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: NaN, as on the GPU
        for r in range(run):
            part = rows[r::run].astype(wide)
            sums[:len(part)] = sums[:len(part)] + part
    return sums


def arguments(rng, rows, n, dtype):
    x = random_tile(rng, (rows, n), dtype)  # NaN, infinities, signed zeros and subnormals among them
    w = random_tile(rng, (n,), dtype, special=False)
    return x, w


def test_the_cpu_backend_refuses_a_folded_plan(rng):
    x, w = arguments(rng, 16, 64, "float32")
    with pytest.raises(ValueError, match="folded outputs are the CUDA kernel's"):
        call(x, w, (4, (0,)), "cpu")


def test_the_plan_says_which_outputs_are_folded(rng):
    x, w = arguments(rng, 16, 64, "float32")
    plan = products_and_sums._prepared([x, w], 1, None, "cpu", None, False, (4, (0,))).plan
    assert "folded: p, each summed over runs of 4 consecutive instances" in str(plan)
    with pytest.raises(ValueError, match="folded: output 5"):
        products_and_sums._prepared([x, w], 1, None, "cpu", None, False, (4, (5,)))


def norm_gradients(layer, args, device, fold, monkeypatch):
    """(dx, dw[, db]) of the norm on device, with the weight's gradients folded in the kernel or not;
    and how many backward calls folded them."""
    x, w, b, g = (a.to(device) for a in args)
    leaves = [t.detach().requires_grad_() for t in (x, w, b)]
    folds = []
    with monkeypatch.context() as m:
        m.setattr(F, "ENABLED", True)
        made = F.FoldedBackward.gradients
        m.setattr(F.FoldedBackward, "gradients", lambda self, *a: folds.append(self) or made(self, *a))
        if not fold:
            m.setattr(F, "folded_run", lambda rows, n: None)
        for op in P._NAMED.values():  # each op decides again whether it folds
            op.folds.clear()
        if layer == "layer_norm":
            y = tp.layers.layer_norm(*leaves, 1e-5, batch_dims=1)
        else:
            y = tp.layers.rms_norm(leaves[0], leaves[1], 1e-6, batch_dims=1)
            leaves = leaves[:2]
        grads = torch.autograd.grad(y, leaves, g)
    return [t.cpu() for t in grads], len(folds)


def norm_arguments(rng, rows, n, dtype):
    t = getattr(torch, dtype)
    x = torch.from_numpy(random_tile(rng, (rows, n), "float32", special=False) * 3).to(t)
    w = torch.from_numpy(random_tile(rng, (n,), "float32", special=False)).to(t)
    b = torch.from_numpy(random_tile(rng, (n,), "float32", special=False)).to(t)
    g = torch.from_numpy(random_tile(rng, (rows, n), "float32")).to(t)  # NaN and infinities reach the sums
    return x, w, b, g


def same_bits(a, b) -> bool:
    """The same bits, or NaN both (a NaN's payload is the hardware's)."""
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return a.dtype == b.dtype and bool(((a.view(ints) == b.view(ints)) | (a.isnan() & b.isnan())).all())


@pytest.mark.parametrize("rows,n,dtype", [(64, 4096, "bfloat16"), (48, 768, "float16"), (40, 256, "float64"),
                                          (60, 100, "float32"), (1024, 4096, "bfloat16")])
def test_sums_from_a_kernels_folds_give_the_bits_of_sum_to(rows, n, dtype, rng):
    """The kernel's fold (runs of folded_run's rows, in order from -0.0) continued by sums_from_folds
    is sum_to of the rows, bit for bit (the chunks' sums folded once more past 4M of them: the GPU
    test's 16384 rows of 4096)."""
    from tileprim._torch.sum_to import folded_run, sums_from_folds, sums_to
    g = torch.from_numpy(random_tile(rng, (rows, n), "float32")).to(getattr(torch, dtype))
    run = folded_run(rows, n)
    assert run is not None
    wide = np.float64 if dtype == "float64" else np.float32
    chunks = torch.from_numpy(ordered_runs(g.to(torch.float64 if dtype == "float64" else torch.float32).numpy(), run))
    assert chunks.dtype == torch.from_numpy(np.zeros(1, wide)).dtype
    assert same_bits(sums_from_folds([chunks], (n,), dtype)[0], sums_to([g], (n,))[0])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("rows,n,run", [(37, 300, 8), (1000, 4096, 8), (4099, 512, 12)])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=gpu)])
def test_a_folded_output_gives_the_cpu_bits_on_the_gpu(rows, n, run, dtype, device, rng):
    x, w = arguments(rng, rows, n, dtype)
    t = getattr(torch, dtype) if dtype != "bfloat16" else torch.bfloat16
    xd = torch.from_numpy(x.view(np.int16)).view(t).cuda() if dtype == "bfloat16" else torch.from_numpy(x).cuda()
    wd = torch.from_numpy(w.view(np.int16)).view(t).cuda() if dtype == "bfloat16" else torch.from_numpy(w).cuda()
    p, sums = call(x, w, None, "cpu")
    want = ordered_runs(p, run), sums
    got = call(xd, wd, (run, (0,)), "cuda")
    for a, b in zip(want, got):
        b = b.cpu()
        assert bits_equal(np.asarray(a), b.view(torch.int16).numpy().view(NP[dtype]) if b.dtype == torch.bfloat16
                          else b.numpy())


@pytest.mark.parametrize("layer", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("rows,n,dtype", [(16384, 4096, "bfloat16"), (1024, 2048, "float32"), (96, 768, "float16"),
                                          (40, 256, "float64")])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=gpu)])
def test_a_norms_folded_weight_gradient_gives_the_cpu_bits_on_the_gpu(layer, rows, n, dtype, device, rng,
                                                                      monkeypatch):
    args = norm_arguments(rng, rows, n, dtype)
    on_gpu, folds = norm_gradients(layer, args, device, True, monkeypatch)
    unfolded, none = norm_gradients(layer, args, device, False, monkeypatch)
    on_cpu, _ = norm_gradients(layer, args, "cpu", True, monkeypatch)
    assert folds == 1 and none == 0
    for a, b, c in zip(on_gpu, unfolded, on_cpu):
        assert same_bits(a, b) and same_bits(a, c)


@pytest.mark.skipif(not tp.info()["nvrtc"]["ok"], reason="NVRTC is not available")
def test_a_folded_kernel_takes_its_runs_one_tile_at_a_time(rng):
    """The kernel of a folded plan (NVRTC, no GPU): one instance a block, one tile a round, the run's
    tiles in turn, the folded output's sums in shared memory begun at -0.0 and written once a block."""
    import tileprim._C as _C
    x, w = arguments(rng, 96, 1024, "bfloat16")
    plan = products_and_sums._prepared([x, w], 1, None, "cpu", "sm_90a", False, (12, (0,))).plan
    k = _C.cuda.build_program(plan._core, _C.cuda.compile_arch("sm_90a"))
    source = k["source"]
    assert k["instances"] == 1 and k["rounds"] == 1 and "12 tiles in turn" in k["instances_why"]
    assert "constexpr long long kFolded = 12;" in source and "tp::begin_fold(sum_out, 1024);" in source
    assert "float* __restrict__ g_out," in source  # the folded output's sums: float32 for bfloat16 rows
    assert "tp::end_fold(g_out + static_cast<long long>(blockIdx.x) * 1024, sum_out, 1024);" in source
    assert "fold_" in source and k["shared_bytes"] >= 1024 * 4
