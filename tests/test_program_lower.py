"""Every example program lowers to ONE kernel for sm_90a and sm_100a with NVRTC alone (no GPU):
the source holds one __global__ function, the PTX its entry, and the launch shape fits the arch."""
import importlib.util
import pathlib

import ml_dtypes
import numpy as np
import pytest

import tileprim as tp

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples" / "programs"


def example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases():
    bf16 = ml_dtypes.bfloat16
    x = np.ones((4, 4096), np.float32)
    seeds = example("seed_programs")
    return {
        "softmax": (example("softmax").softmax, (x,)),
        "logsumexp": (example("logsumexp").logsumexp, (x,)),
        "rmsnorm": (example("rmsnorm").rmsnorm, (x.astype(bf16), np.ones(4096, bf16), 1e-6)),
        "copy_sum_copy": (seeds.copy_sum_copy, (np.ones((4, 16, 256), np.float32),)),
        "copy_sqrt_copy": (seeds.copy_sqrt_copy, (np.ones((4, 32, 8), np.float32),)),
    }


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("name", ["softmax", "logsumexp", "rmsnorm", "copy_sum_copy", "copy_sqrt_copy"])
def test_every_example_program_is_one_kernel(name, target):
    prog, args = cases()[name]
    k = tp.lower(prog, *args, batch_dims=1, target=target)
    assert k.source.count("__global__") == 1, k.source
    assert k.arch == target and ".entry tp_kernel" in k.ptx
    assert isinstance(k.plan, tp.ProgramPlan) and len(k.plan.steps) >= 1
    assert 0 <= k.shared_bytes <= 227 * 1024 and k.block_threads % k.instances_per_block == 0


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("name", ["softmax", "logsumexp", "rmsnorm"])
@pytest.mark.parametrize("dtype,staging", [("float32", "streamed"), ("bfloat16", "shared")])
def test_long_rows_lower_to_one_kernel_in_passes_without_spills(name, dtype, staging, target):
    """Rows of 65536 at cta(1024) pass a thread's registers: the kernel takes them in passes over
    chunks (float32 re-read from global memory, bfloat16 staged in shared memory), and no register
    spills to local memory."""
    prog, args = cases()[name]
    x = np.ones((4, 65536), dtype=ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32)
    args = (x,) if name != "rmsnorm" else (x, np.ones(65536, x.dtype), 1e-6)
    k = tp.lower(prog, *args, batch_dims=1, scope=tp.cta(1024), target=target)
    assert k.plan.staging == staging and k.plan.rows["chunks"] == 4
    assert k.source.count("__global__") == 1 and "kChunks = 4" in k.source
    assert "ld.local" not in k.ptx and "st.local" not in k.ptx
    moved = [name for name, how in k.staging.items() if "a chunk at a time" in how]
    assert ("in0" in moved) == (staging == "streamed") and k.staging["in0"].startswith("shared") == (staging == "shared")
    assert ("out" in moved) == (name != "logsumexp")  # logsumexp returns one value per row


def keeps(t):
    return t


def keeps_and_doubles(t):
    return t, t * 2.0


@pytest.mark.parametrize("body", [keeps, keeps_and_doubles])
@pytest.mark.parametrize("shape,dtype,scope", [((8, 3), "float32", None), ((4, 4096), "bfloat16", tp.cta(256)),
                                               ((2, 2047), "float32", None)])
def test_a_program_returning_an_input_as_it_is_compiles_and_loads_it(body, shape, dtype, scope):
    """An input no step reads but the program returns is loaded and copied out (it once compiled
    to a copy from a value never declared)."""
    x = np.ones(shape, ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32)
    k = tp.lower(tp.program(body), x, batch_dims=1, scope=scope, target="sm_90a")
    assert ".entry tp_kernel" in k.ptx and "ld.global" in k.ptx
