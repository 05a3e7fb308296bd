"""The specification's two demonstration programs as tile programs (seeds; reference/tvm_tirx.md):

1. a CTA copies its tile into shared memory, sums each row there, and copies the sums back
   into registers;
2. a warp loads a (32, 8) tile into registers, lane i holding row i, takes sqrt register by
   register, and stores the result through shared memory.

    python examples/programs/seed_programs.py
"""
import numpy as np

import tileprim as tp
from tileprim import S, laneid


@tp.program(scope=tp.cta(128))
def copy_sum_copy(x):
    xs = tp.copy(x, storage="shared")
    s = tp.sum(xs, axes=-1, storage="shared")
    return tp.copy(s, storage="local")


@tp.program(scope=tp.warp)
def copy_sqrt_copy(x):
    xr = tp.copy(x, storage="local", layout=S[(32, 8):(1 @ laneid, 1)])
    return tp.copy(tp.sqrt(xr), storage="shared")


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    A = rng.standard_normal((64, 16, 256)).astype(np.float32)
    sums = copy_sum_copy(A, batch_dims=1, backend="cpu")
    np.testing.assert_allclose(sums, A.astype(np.float64).sum(-1), rtol=1e-5, atol=1e-5)
    print(tp.plan(copy_sum_copy, A, batch_dims=1, backend="cpu"))
    B = rng.uniform(0, 100, (64, 32, 8)).astype(np.float32)
    roots = copy_sqrt_copy(B, batch_dims=1, backend="cpu")
    assert np.array_equal(roots, np.sqrt(B))  # sqrt rounds exactly: NumPy's bits
    print(tp.plan(copy_sqrt_copy, B, batch_dims=1, backend="cpu"))
    print("copy -> sum -> copy and copy -> sqrt -> copy: ok")
