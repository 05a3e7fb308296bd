"""``python -m tileprim demo``: four small programs (the specification's demonstration programs),
one per tile variant, run on the default backend.

For each: the call, the variant chosen (and whether it is the one the program demonstrates) with
its parameters, every declined variant with its reasons, and the result checked against NumPy
(float64)."""
from __future__ import annotations

import sys
from typing import Callable, List, Tuple

import numpy as np

import tileprim as tp
from tileprim import S, TileLayout, laneid


def _report(number: int, title: str, variant: str, call: Callable, plan: "tp.Plan", expected: np.ndarray,
            scale: np.ndarray, tolerance: float, out=sys.stdout) -> bool:
    result = np.asarray(call(), dtype=np.float64)
    err = relative_error(result, expected, scale)
    ok = bool(np.all(np.isfinite(result))) and err <= tolerance and plan.variant == variant
    print(f"== {number}. {title}", file=out)
    print(f"   call:    {plan.call}", file=out)
    print(f"   target:  {plan.target or 'none (sm_version 0)'}", file=out)
    demonstrated = ("the variant this program demonstrates" if plan.variant == variant
                    else f"NOT {variant}, the variant this program demonstrates")
    print(f"   chosen:  {plan.variant} (priority {plan.priority}), {demonstrated}", file=out)
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
    """(title, the variant it demonstrates, op function, args, kwargs, NumPy expectation, magnitude,
    tolerance)."""
    a4 = rng.standard_normal(4).astype(np.float32)
    a48 = rng.standard_normal((4, 8)).astype(np.float32)
    a32 = rng.standard_normal(32).astype(np.float32)
    r32x8 = rng.uniform(0.1, 4.0, (32, 8)).astype(np.float32)
    warp_layout = TileLayout(S[(32, 8):(1 @ laneid, 1)])
    return [
        ("reduction -> local: one thread sums a 4-element register vector (it folds its own registers)",
         "local",
         tp.sum, (a4,), dict(scope=tp.thread, storage="local"), a4.astype(np.float64).sum(),
         np.abs(a4.astype(np.float64)).sum(), 1e-6),
        ("reduction -> shared: a 32-thread CTA sums each row of a 4x8 shared tile (groups of 8 lanes, "
         "an XOR shuffle tree per group)", "shared",
         tp.cta(32).sum, (a48,), dict(axes=-1, storage="shared"), a48.astype(np.float64).sum(-1),
         np.abs(a48.astype(np.float64)).sum(-1), 1e-6),
        ("reduction -> sm100_packed: one thread sums 32 floats, modelled on sm_100a (8 slots, packed "
         "f32x2 adds)", "sm100_packed",
         tp.sum, (a32,), dict(scope=tp.thread, storage="local", target="sm_100a"),
         a32.astype(np.float64).sum(), np.abs(a32.astype(np.float64)).sum(), 1e-6),
        ("elementwise -> reg: a warp takes sqrt of a 32x8 register tile, lane i owning row i (each lane "
         "maps its 8 registers)", "reg",
         tp.warp.sqrt, (r32x8,), dict(layout=warp_layout), np.sqrt(r32x8.astype(np.float64)),
         np.sqrt(r32x8.astype(np.float64)), 1e-6),
    ]


def _introduction(info: dict, out) -> None:
    print(f"tileprim {info['version']}: four small programs, one for each algorithm (variant) of the tile "
          "primitives; for each, dispatch's choice and why the others declined, then the result checked "
          "against NumPy (float64).", file=out)
    cuda = info["backends"]["cuda"]
    if cuda == "available":
        print("They run on the CUDA backend, on this machine's GPU.", file=out)
    else:
        reason = cuda.split(": ", 1)[-1]
        print(f"No usable CUDA GPU here ({reason}); everything runs on the CPU backend, which executes the "
              "same algorithm step for step.", file=out)
    print(file=out)


def main(out=sys.stdout) -> int:
    rng = np.random.default_rng()
    _introduction(tp.info(), out)
    ok = True
    for number, (title, variant, fn, args, kwargs, expected, scale, tol) in enumerate(programs(rng), 1):
        plan = tp.plan(fn, *args, **kwargs)
        ok &= _report(number, title, variant, lambda: fn(*args, **kwargs), plan, expected, scale, tol, out)
    print("all programs match NumPy" if ok else "SOME PROGRAMS DO NOT MATCH NumPy", file=out)
    print('A picture of a layout: python -m tileprim show "S[(32, 8) : (1@laneid, 1)]"', file=out)
    return 0 if ok else 1
