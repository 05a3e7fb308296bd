"""Runs a few of the benchmark's cases a handful of times each, for a profiler to capture:

    ncu --clock-control none --kernel-name tp_kernel --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        python3 benchmarks/profile_cases.py "sum K=128 thread"

Each case is named as `python -m tileprim bench --list` names it ("program softmax 32768x4096
bfloat16" too: the tile program with no scope named, as the benchmark calls it, on random rows);
its first calls compile. A name ending in " fastmath" runs the case with fastmath=True."""
from __future__ import annotations

import sys

import torch

import tileprim as tp
from tileprim_bench import program_workloads as workloads
from tileprim_bench.cases import GPU_SCOPES, MAPS, MAP_TILE, scope_name

ELEMENTS = 1 << 28


def run(case: str, calls: int = 4) -> None:
    words = case.split()
    fastmath = words[-1] == "fastmath"  # "program softmax 32768x4096 bfloat16 fastmath", "exp float16 fastmath"
    words = words[:-1] if fastmath else words
    op = words[0]
    if op == "program":  # program WORKLOAD ROWSxN dtype
        rows, n = map(int, words[2].split("x"))
        x = torch.randn(rows, n, device="cuda", dtype=getattr(torch, words[3]))
        workload = next(w for w in workloads.WORKLOADS if w.name == words[1])
        args = workload.arguments(x, torch.randn_like(x), torch.randn(n, device="cuda", dtype=x.dtype))
        def call():  # no scope named: the planner's, as the benchmark calls it
            return workload.program(*args, batch_dims=1, fastmath=fastmath)
    elif op in MAPS:
        dtype = getattr(torch, words[1])
        arrays = [torch.rand(ELEMENTS // MAP_TILE, MAP_TILE, device="cuda", dtype=dtype) + 0.5
                  for _ in range(MAPS[op])]
        def call():
            return getattr(tp, op)(*arrays, batch_dims=1, fastmath=fastmath)
    else:
        k = int(words[1].split("=")[1])
        scope = next(s for s in GPU_SCOPES if scope_name(s) == words[2])
        x = torch.randn(ELEMENTS // k, k, device="cuda")
        def call():
            return getattr(scope, op)(x, axes=-1, batch_dims=1)
    for _ in range(calls):
        call()
    torch.cuda.synchronize()


if __name__ == "__main__":
    for name in sys.argv[1:]:
        run(name)
