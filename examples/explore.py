"""A tour of tileprim, as you would take it in Jupyter (each block is a cell; in a notebook the
Plan and Kernel objects render as HTML tables).

    python examples/explore.py
"""
import numpy as np

import tileprim as tp
from tileprim import R, S, TileLayout, laneid

rng = np.random.default_rng(0)

# 1. A layout: lane i of a warp holds row i of a 32 x 8 tile in 8 registers.
L = TileLayout(S[(32, 8):(1 @ laneid, 1)])
print(L, "| element (5, 3) lives at", L.apply((5, 3)), "| one lane's view:", L.storage())
print("replicated:", TileLayout(S[8:1] + R[32:1 @ laneid]).apply(3) == {tp.Position({"m": 3, "laneid": i})
                                                                     for i in range(32)})

# 2. Which variant runs, and why the others do not.
A = rng.standard_normal((32, 8)).astype(np.float32)
plan = tp.plan(tp.warp.sum, A, axes=0, layout=L)
print(plan)

# 3. The same reduction modelled on Blackwell picks the packed fast path for 1-D vectors.
v = rng.standard_normal(37).astype(np.float32)
print(tp.plan(tp.sum, v, target="sm_100a").variant, "vs", tp.plan(tp.sum, v, target="sm_90a").variant)

# 4. Run it: the default backend is the GPU when one is usable, else the CPU.
print("column sums:", tp.warp.sum(A, axes=0, layout=L)[:4], "numpy:", A.sum(0)[:4])
print("batched row sums of 1000 tiles:", tp.sum(rng.standard_normal((1000, 32)).astype(np.float32),
                                               batch_dims=1).shape)

# 5. The CUDA it generates, for any architecture, with NVRTC alone.
if tp.info()["nvrtc"]["ok"]:
    k = tp.lower(tp.sum, v, target="sm_100a")
    print(k)
    print("\n".join([line for line in k.ptx.splitlines() if "f32x2" in line][:3]))
else:
    print("NVRTC not found:", tp.info()["nvrtc"]["error"])
