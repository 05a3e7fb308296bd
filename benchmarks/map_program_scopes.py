"""Programs of maps alone (the layers' GELU and SwiGLU) over rows with batch_dims=1, on a GPU: the call
as a user makes it (no scope: since session 24 its rows taken as tiles of 8) beside each named
(scope, staging) a row and the same program on tiles of 8, ms (median of 15 CUDA-event timings after
3 warm-up calls), each kernel's registers and blocks per SM; torch's eager op for scale. bfloat16
rows of 4096 and 14336, 8192 of them (64 and 235 MB an argument).

    python benchmarks/map_program_scopes.py
"""
import torch
import torch.nn.functional as F

import tileprim as tp

SCOPES = (tp.warp, tp.cta(64), tp.cta(128), tp.cta(256), tp.cta(512), tp.cta(1024))
LAYERS = {"gelu_erf": (tp.layers.gelu_erf, 1, F.gelu),
          "silu_mul": (tp.layers.silu_mul, 2, lambda a, b: F.silu(a) * b)}


def timed(f, n=15):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        f()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[n // 2]


def main():
    for name, (program, arity, reference) in LAYERS.items():
        for n in (4096, 14336):
            args = [torch.randn(8192, n, device="cuda", dtype=torch.bfloat16) for _ in range(arity)]
            flat = [a.reshape(-1, 8) for a in args]
            lines = [f"{name} bf16 8192x{n}: torch {timed(lambda: reference(*args)):.3f}",
                     f"tiles of 8 {timed(lambda: program(*flat, batch_dims=1)):.3f}"]
            plan, kernel = tp.plan(program, *args, batch_dims=1), tp.lower(program, *args, batch_dims=1)
            ms = timed(lambda: program(*args, batch_dims=1))
            lines.append(f"planner {plan.scope}/{plan.staging} {ms:.3f} "
                         f"({kernel.registers}r {kernel.blocks_per_sm}b)")
            for scope in SCOPES:
                for staging in ("registers", "streamed"):
                    fixed = tp.program(program._fn, scope=scope, staging=staging)
                    try:
                        kernel = tp.lower(fixed, *args, batch_dims=1)
                    except (tp.DispatchError, ValueError):  # the staging declines at that scope
                        lines.append(f"{scope}/{staging} refused")
                        continue
                    lines.append(f"{scope}/{staging} {timed(lambda: fixed(*args, batch_dims=1)):.3f} "
                                 f"({kernel.registers}r {kernel.local_bytes}B {kernel.blocks_per_sm}b)")
            print("\n   ".join(lines), flush=True)


if __name__ == "__main__":
    main()
