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
