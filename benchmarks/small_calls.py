"""Host time of repeated small calls on NumPy arrays (the CPU backend unless --backend cuda): what a
call signature seen before costs (a lookup and a run), per call, best of several repeats of process
time, so that other processes' load on a shared machine moves it little. Run it for two trees side
by side (PYTHONPATH=<tree>/python) to compare them.

    python benchmarks/small_calls.py                  # every case
    python benchmarks/small_calls.py sum plan         # some
"""
from __future__ import annotations

import argparse
import time
import timeit

import numpy as np

import tileprim as tp


def per_call_us(fn, number: int, repeat: int) -> float:
    fn()
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat, timer=time.process_time)) / number * 1e6


def cases(backend: str) -> dict:
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)

    @tp.program(scope=tp.warp)
    def scaled(t):
        return t * 2.0

    return {
        "sum": lambda: tp.sum(x, axes=-1, backend=backend),                      # 4x8 reduced whole
        "sum_rows": lambda: tp.sum(x, axes=-1, batch_dims=1, backend=backend),   # 4 rows of 8
        "plan": lambda: tp.plan(tp.sum, x, axes=-1, backend=backend),            # nothing runs
        "exp": lambda: tp.exp(x, backend=backend),                               # a map
        "add_scalar": lambda: tp.add(x, 2.0, backend=backend),                   # a map with a run-time scalar
        "program": lambda: scaled(x, batch_dims=1, backend=backend),             # a program of one step
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="which cases (default: all)")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    table = cases(args.backend)
    for name in args.cases or list(table):
        print(f"{name:12s} {per_call_us(table[name], args.number, args.repeat):8.2f} us")


if __name__ == "__main__":
    main()
