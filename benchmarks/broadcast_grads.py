"""The sum of a broadcast operand's gradient over the batch (a norm's weight: rows x hidden per-row
products summed to hidden), tileprim's (``sum_to``: the same bits on the CPU and the GPU) beside
torch's ``sum_to_size`` (what ran before; its CPU and CUDA orders differ), on the tensors of an
RMSNorm/LayerNorm backward. Each case checked against float64 in the same run; TB/s counts the
fewest bytes (the rows read once).

    python benchmarks/broadcast_grads.py            # CUDA events on the GPU
    python benchmarks/broadcast_grads.py --smoke    # small shapes, wall clock, on the CPU backend
"""
from __future__ import annotations

import argparse

import torch

from tileprim._torch.sum_to import sum_to
from tileprim_bench.timing import CudaEventTimer, WallTimer

SHAPES = [(8192, 4096), (16384, 4096), (32768, 4096), (16384, 8192), (8192, 2048)]
SMOKE_SHAPES = [(100, 256), (37, 301)]
TOLERANCE = {"float32": 2.0 ** -20, "bfloat16": 2.0 ** -8}  # relative to the sum of |rows|


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small shapes on the CPU")
    args = parser.parse_args(argv)
    device = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    timer = CudaEventTimer(torch, repeats=20, inner=10) if device == "cuda" else WallTimer(repeats=3, warmup=1)
    print(f"timing: {timer.describe()}; device {device}")
    failed = 0
    for rows, n in SMOKE_SHAPES if args.smoke else SHAPES:
        for dtype in ("bfloat16", "float32"):
            g = torch.randn(rows, n, device=device).to(getattr(torch, dtype))
            ours, theirs = sum_to(g, (n,)), g.sum_to_size((n,))
            exact = g.double().sum(0)
            bound = TOLERANCE[dtype] * g.double().abs().sum(0) + 1e-30
            ok = bool(((ours.double() - exact).abs() <= bound).all())
            failed += not ok
            ms = {"tileprim": timer(lambda: sum_to(g, (n,))), "torch": timer(lambda: g.sum_to_size((n,)))}
            sides = "  ".join(f"{k} {v * 1e3:8.1f} us ({g.numel() * g.element_size() / v / 1e9:.2f} TB/s)"
                              for k, v in ms.items())
            print(f"sum_to {rows}x{n} {dtype}: {sides}  ratio {ms['torch'] / ms['tileprim']:.2f}  "
                  f"{'ok' if ok else 'WRONG'} against float64; torch's bits "
                  f"{'equal' if torch.equal(ours, theirs) else 'differ'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
