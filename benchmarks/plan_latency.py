"""What a program's plan costs on the host: a first call's planning, with no scope named (the planner
plans every candidate scope and staging) and at one named scope, for the tile-program benchmark's
workloads. No GPU: the plans are made for a target (sm_90a by default) as the CPU backend makes them.

    python benchmarks/plan_latency.py [--rows 4096,4097,32000,50257,262144] [--repeat 5] [--target sm_90a]

Each figure is the median of --repeat plans of `prog(x[, w, eps], batch_dims=1)` on 4 rows, the
process's plan caches emptied before each (what a new tile shape costs; a later call of the same
tiles plans nothing) and every other case planned in between, in ms; the last column is the
named scope, cta(256), for contrast.
"""
import argparse
import os
import sys
import time

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__)))
import tileprim as tp  # noqa: E402
from tileprim._calls.prepared import forget  # noqa: E402
from tileprim_bench import program_workloads as W  # noqa: E402

DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}
WORKLOADS = ("softmax", "rmsnorm", "add_rmsnorm", "logsumexp")


def arguments(name, n, dtype, rng):
    x = rng.standard_normal((4, n)).astype(dtype)
    w = rng.standard_normal(n).astype(dtype)
    return {"rmsnorm": (x, w, W.EPS), "add_rmsnorm": (x, x, w, W.EPS)}.get(name, (x,))


def timed_plan(plan):
    """One plan's seconds, the process's plan caches emptied first."""
    forget()
    start = time.perf_counter()
    plan()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="4096,4097,32000,50257,262144", help="row lengths, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--target", default="sm_90a")
    args = parser.parse_args()
    rows = [int(n) for n in args.rows.split(",")]
    rng = np.random.default_rng(0)
    plans = {}  # (workload, dtype, column) -> a plan of it
    for name in WORKLOADS:
        program = getattr(W, name)
        for dtype_name, dtype in DTYPES.items():
            for n in rows:
                a = arguments(name, n, dtype, rng)
                plans[name, dtype_name, n] = lambda p=program, a=a: tp.plan(p, *a, batch_dims=1, target=args.target)
            a = arguments(name, rows[-1], dtype, rng)
            plans[name, dtype_name, "cta(256)"] = lambda p=program, a=a: tp.plan(
                p, *a, batch_dims=1, target=args.target, scope=tp.cta(256))
    # every plan once per round, so that no plan finds the last one's register placements kept
    times = {key: [] for key in plans}
    for _ in range(args.repeat):
        for key, plan in plans.items():
            times[key].append(timed_plan(plan))
    print(f"ms per plan ({args.target}, median of {args.repeat}): no scope at N = "
          + ", ".join(map(str, rows)) + f"; cta(256) at {rows[-1]}")
    for name in WORKLOADS:
        for dtype_name in DTYPES:
            ms = [float(np.median(times[name, dtype_name, column])) * 1e3 for column in (*rows, "cta(256)")]
            print(f"{name:12s} {dtype_name:9s} " + " ".join(f"{v:8.1f}" for v in ms[:-1]) + f" | {ms[-1]:8.1f}")


if __name__ == "__main__":
    main()
