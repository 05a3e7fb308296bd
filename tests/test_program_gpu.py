"""A program's CPU run gives the GPU's bits: the chain of standalone calls of its steps on the
GPU (the same variants, storage and layouts; copies move values unchanged) equals the program
run on the CPU backend bit for bit. Skips without a GPU."""
import pytest

import tileprim as tp
from conftest import bits_equal, cuda_usable, random_tile
from program_chain import run_chain

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]
SCOPES = [tp.warp, tp.warpgroup, tp.cta(256), tp.cta(96)]


@tp.program
def rms_scale(x):  # exactly rounded ops only: sum, max, mul, fdiv, sqrt, sub
    ss = tp.sum(x * x, axes=-1, keepdims=True)
    return (x - tp.max(x, axes=-1, keepdims=True)) / tp.sqrt(ss / x.shape[-1])


@tp.program
def softmax(x):  # exp: the same bits once tileprim's own exp lands (issue 34)
    m = tp.max(x, axes=-1, keepdims=True)
    e = tp.exp(x - m)
    return e / tp.sum(e, axes=-1, keepdims=True)


@pytest.mark.parametrize("prog", [rms_scale, softmax], ids=["rms_scale", "softmax"])
@pytest.mark.parametrize("scope", SCOPES, ids=str)
def test_cpu_program_equals_the_gpu_chain(prog, scope, rng):
    for shape in [(7, 333), (3, 4096), (5, 1)]:
        x = random_tile(rng, shape, "float32")
        got = prog(x, batch_dims=1, scope=scope, backend="cpu")
        (gpu,), _ = run_chain(prog, (x,), 1, scope, backend="cuda")
        assert bits_equal(got, gpu)


def test_programs_on_device_arrays_are_not_yet_fused():
    cupy = pytest.importorskip("cupy")
    with pytest.raises(NotImplementedError, match="issue 31"):
        softmax(cupy.ones((2, 64), cupy.float32), batch_dims=1)
