"""The sweep that the planner's choice of scope is checked against (its cost model,
csrc/program/scope_cost.cc; tests/test_auto_scope.py reads benchmarks/results/*-program-scopes.json):
each workload's program for rows of N at a warp, a warpgroup, CTAs of 64 to 1024 threads and
clusters of 2 and 4 CTAs of 256 or 512 (one instance per row), held in registers, staged in shared memory or streamed where that staging takes
the rows, tileprim alone, one JSON line per run, the fastest per case last, then the planner's own
choice with no scope named:

    python benchmarks/program_scopes.py 16384 bfloat16 softmax logsumexp

Timing as benchmarks/program_ab.py (the median of 15 batches of 5 calls); rows: 32768 (2^27
elements per operand, far beyond L2). Needs a GPU and torch."""
import json
import sys

import torch

import tileprim as tp
from program_ab import median_ms
from tileprim_bench.program_workloads import WORKLOADS

# every candidate of the planner's but thread (one thread per row of thousands: refused or spilled)
# and its clusters of 2 and 4 CTAs (of 8 and 16 left out, to keep the sweep short)
SCOPES = (tp.warp, tp.cta(64), tp.warpgroup, tp.cta(128), tp.cta(256), tp.cta(512), tp.cta(1024),
          tp.cluster(2, 256), tp.cluster(2, 512), tp.cluster(4, 256), tp.cluster(4, 512))
STAGINGS = ("registers", "shared", "streamed")
ROWS = 32768


_STAGED: dict = {}


def staged(workload, staging: str) -> tp.Program:
    """The workload's program with ``staging`` named (one Program per staging, so its plans are kept)."""
    key = (workload.name, staging)
    if key not in _STAGED:
        _STAGED[key] = tp.program(workload.program._fn, staging=staging)
    return _STAGED[key]


def sweep(n: int, dtype: str, name: str) -> None:
    workload = next(w for w in WORKLOADS if w.name == name)
    generator = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(ROWS, n, device="cuda", generator=generator).to(getattr(torch, dtype))
    args = workload.arguments(x, torch.randn_like(x), torch.randn(n, device="cuda").to(x.dtype))
    best = None
    for staging in STAGINGS:
        program = staged(workload, staging)
        for scope in SCOPES:
            try:
                kernel = tp.lower(program, *args, batch_dims=1, scope=scope)
            except tp.DispatchError:
                continue  # this staging does not take rows of n at this scope
            ms = median_ms(lambda: program(*args, batch_dims=1, scope=scope))
            row = {"case": f"{name} {ROWS}x{n} {dtype}", "scope": kernel.plan.scope,  # as plans name it: cta(256), cluster(2x512)
                   "threads": scope.threads, "staging": staging, "ms": ms,
                   "tbps": workload.bytes(ROWS, n, x.element_size()) / ms / 1e9, "registers": kernel.registers,
                   "blocks_per_sm": kernel.blocks_per_sm}
            print(json.dumps(row), flush=True)
            best = row if best is None or row["ms"] < best["ms"] else best
    print(json.dumps({"best": best}), flush=True)
    plan = tp.plan(workload.program, *args, batch_dims=1)  # no scope: the planner's choice
    ms = median_ms(lambda: workload.program(*args, batch_dims=1))
    print(json.dumps({"chosen": {"case": f"{name} {ROWS}x{n} {dtype}", "scope": plan.scope, "staging": plan.staging,
                                 "ms": ms, "tbps": workload.bytes(ROWS, n, x.element_size()) / ms / 1e9}}),
          flush=True)


if __name__ == "__main__":
    n, dtype, names = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    for name in names:
        sweep(n, dtype, name)
