"""``python -m tileprim demo``: the seeds' demonstration programs, run on the default backend.

For each: the call, the variant chosen with its parameters, every declined variant with its
reasons, and the result checked against NumPy (float64)."""
from __future__ import annotations

import sys
from typing import Callable, List, Tuple

import numpy as np

import tileprim as tp
from tileprim import S, TileLayout, laneid


def _report(title: str, seed: str, call: Callable, plan: "tp.Plan", expected: np.ndarray, scale: np.ndarray,
            tolerance: float, out=sys.stdout) -> bool:
    result = np.asarray(call(), dtype=np.float64)
    err = relative_error(result, expected, scale)
    ok = bool(np.all(np.isfinite(result))) and err <= tolerance
    print(f"== {title}  ({seed})", file=out)
    print(f"   call:    {plan.call}", file=out)
    print(f"   target:  {plan.target or 'none (sm_version 0)'}", file=out)
    print(f"   chosen:  {plan.variant} (priority {plan.priority})", file=out)
    for k, v in plan.params.items():
        print(f"            {k} = {v}", file=out)
    for e in plan.trace:
        if e.status == "declined":
            print(f"   declined {e.variant} (priority {e.priority}):", file=out)
            for r in e.reasons:
                print(f"            - {r}", file=out)
        elif e.status == "not tried":
            print(f"   not tried {e.variant} (priority {e.priority})", file=out)
    print(f"   check:   error vs NumPy float64, relative to the magnitude = {err:.2e} (limit {tolerance:.0e}) -> "
          f"{'PASS' if ok else 'FAIL'}", file=out)
    print(file=out)
    return ok


def relative_error(result, expected, scale) -> float:
    """||result - expected|| / ||scale||, where scale is sum |x| for a sum (its condition: a sum
    that nearly cancels is still judged by the size of its terms) and |expected| for a map."""
    return float(np.linalg.norm(np.asarray(result, np.float64) - expected) / max(np.linalg.norm(scale), 1e-300))


def programs(rng: np.random.Generator) -> List[Tuple]:
    """(title, seed file, op function, args, kwargs, NumPy expectation, magnitude, tolerance)."""
    a4 = rng.standard_normal(4).astype(np.float32)
    a48 = rng.standard_normal((4, 8)).astype(np.float32)
    a32 = rng.standard_normal(32).astype(np.float32)
    r32x8 = rng.uniform(0.1, 4.0, (32, 8)).astype(np.float32)
    warp_layout = TileLayout(S[(32, 8):(1 @ laneid, 1)])
    return [
        ("reduction -> local: one thread sums a 4-element register vector", "seeds/000",
         tp.sum, (a4,), dict(scope=tp.thread, storage="local"), a4.astype(np.float64).sum(),
         np.abs(a4.astype(np.float64)).sum(), 1e-6),
        ("reduction -> shared: a 32-thread CTA sums each row of a 4x8 shared tile", "seeds/001",
         tp.cta(32).sum, (a48,), dict(axes=-1, storage="shared"), a48.astype(np.float64).sum(-1),
         np.abs(a48.astype(np.float64)).sum(-1), 1e-6),
        ("reduction -> sm100_packed: one thread sums 32 floats on sm_100a", "seeds/002",
         tp.sum, (a32,), dict(scope=tp.thread, storage="local", target="sm_100a"),
         a32.astype(np.float64).sum(), np.abs(a32.astype(np.float64)).sum(), 1e-6),
        ("elementwise -> reg: a warp takes sqrt of a 32x8 register tile, lane i owning row i", "seeds/003",
         tp.warp.sqrt, (r32x8,), dict(layout=warp_layout), np.sqrt(r32x8.astype(np.float64)),
         np.sqrt(r32x8.astype(np.float64)), 1e-6),
    ]


def main(out=sys.stdout) -> int:
    rng = np.random.default_rng()
    info = tp.info()
    print(f"tileprim {info['version']} demo on the {info['default_backend']} backend "
          f"(cuda: {info['backends']['cuda']})\n", file=out)
    ok = True
    for title, seed, fn, args, kwargs, expected, scale, tol in programs(rng):
        plan = tp.plan(fn, *args, **kwargs)
        ok &= _report(title, seed, lambda: fn(*args, **kwargs), plan, expected, scale, tol, out)
    print("all programs match NumPy" if ok else "SOME PROGRAMS DO NOT MATCH NumPy", file=out)
    return 0 if ok else 1
