"""How long getting a kernel takes: a cold NVRTC compile, a load from the disk cache (a fresh
process), and an in-process cache hit; plus a whole small call, Python included.

    python benchmarks/compile_cache.py
Needs NVRTC; the last line needs a GPU."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, time, numpy as np, tileprim as tp
from tileprim import S, laneid
x = np.ones((32, 8), np.float32)
t = time.perf_counter(); k = tp.lower(tp.warp.sum, x, axes=0, layout=S[(32, 8):(1 @ laneid, 1)], target="sm_90a")
first = (time.perf_counter() - t) * 1e3
print(json.dumps({"origin": k.origin, "build_ms": k.compile_ms, "lower_ms": first}))
"""


def child(cache_dir: str) -> dict:
    env = {**os.environ, "TILEPRIM_CACHE_DIR": cache_dir}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    import tileprim as tp
    with tempfile.TemporaryDirectory() as d:
        cold = child(d)
        disk = child(d)
    print(f"cold compile: {cold['build_ms']:.1f} ms in NVRTC ({cold['origin']}); whole tp.lower {cold['lower_ms']:.1f} ms")
    print(f"disk load:    {disk['build_ms']:.3f} ms ({disk['origin']}); whole tp.lower {disk['lower_ms']:.1f} ms")

    c = tp._C.cuda
    from tileprim._backends import cuda_details
    cuda_details()
    args = (tp.__version__, c.header_digest(), "sm_90a", ["-std=c++17"], "extern \"C\" __global__ void k() {}")
    c.cache_get_or_compile(*args)
    samples = []
    for _ in range(2000):
        t = time.perf_counter_ns()
        c.cache_get_or_compile(*args)
        samples.append(time.perf_counter_ns() - t)
    print(f"memory hit:   {statistics.median(samples) / 1e3:.2f} us (median of 2000 lookups, from Python)")

    if tp.info()["backends"]["cuda"] == "available":
        import numpy as np
        import torch
        x = torch.ones(4096, 8, device="cuda")
        tp.sum(x, batch_dims=1)
        torch.cuda.synchronize()
        samples = []
        for _ in range(300):
            t = time.perf_counter_ns()
            tp.sum(x, batch_dims=1)
            samples.append(time.perf_counter_ns() - t)
        torch.cuda.synchronize()
        print(f"whole call:   {np.median(samples) / 1e3:.1f} us host time per tp.sum on a torch tensor "
              "(argument checks, plan, launch), median of 300")
    return 0


if __name__ == "__main__":
    sys.exit(main())
