"""Tile programs on the CPU backend beside NumPy doing the same computation in the same dtype.

    python benchmarks/programs_cpu.py [--rows 4096] [--cols 1024] [--repeat 15]

Times softmax, RMSNorm (float32 here: the NumPy side computes in float32 too) and logsumexp as
tile programs (scope cta(256), one row per CTA, CPU backend) and as NumPy expressions; prints the
median of --repeat runs after a warm-up and the ratio tileprim / NumPy.
"""
import argparse
import os
import sys
import time

import numpy as np


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "programs"))
from logsumexp import logsumexp  # noqa: E402
from rmsnorm import rmsnorm  # noqa: E402
from softmax import softmax  # noqa: E402


def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_rmsnorm(x, w, eps):
    return x * (1 / np.sqrt((x * x).sum(axis=-1, keepdims=True) / np.float32(x.shape[-1]) + np.float32(eps))) * w


def np_logsumexp(x):
    m = x.max(axis=-1, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=-1, keepdims=True)) + m


def median_seconds(fn, repeat):
    """Median wall time and median CPU time (all threads of the process) of one call."""
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(wall)), float(np.median(cpu))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((a.rows, a.cols)) * 3).astype(np.float32)
    w = rng.uniform(0.5, 1.5, a.cols).astype(np.float32)
    cases = [
        ("softmax", lambda: softmax(X, batch_dims=1, backend="cpu"), lambda: np_softmax(X)),
        ("rmsnorm", lambda: rmsnorm(X, w, 1e-6, batch_dims=1, backend="cpu"), lambda: np_rmsnorm(X, w, 1e-6)),
        ("logsumexp", lambda: logsumexp(X, batch_dims=1, backend="cpu"), lambda: np_logsumexp(X)),
    ]
    print(f"{a.rows}x{a.cols} float32, CPU backend, {os.cpu_count()} cores, median of {a.repeat}; wall time, and "
          f"CPU time summed over threads (the fair figure on a shared machine: more threads get more of it)")
    print(f"{'program':<10} {'tileprim ms':>12} {'numpy ms':>9} {'ratio':>6} {'tp cpu ms':>10} {'np cpu ms':>10} "
          f"{'ratio':>6}")
    for name, ours, theirs in cases:
        np.testing.assert_allclose(ours(), theirs(), rtol=1e-4, atol=1e-6)
        (w_ours, c_ours), (w_np, c_np) = median_seconds(ours, a.repeat), median_seconds(theirs, a.repeat)
        print(f"{name:<10} {w_ours * 1e3:12.2f} {w_np * 1e3:9.2f} {w_ours / w_np:6.2f} {c_ours * 1e3:10.2f} "
              f"{c_np * 1e3:10.2f} {c_ours / c_np:6.2f}")


if __name__ == "__main__":
    main()
