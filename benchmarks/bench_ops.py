"""tileprim beside PyTorch and CuPy on the same inputs, timed with CUDA events.

Each case moves far more bytes than L2 holds; each timing is the median over repeats of a
batch of back-to-back calls between two events (so host overhead overlaps the GPU as it does
in a real program), after a warm-up that also compiles. Prints time, achieved bandwidth
(bytes read + written) and tileprim's time over the best other library's.

    python benchmarks/bench_ops.py [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np


def timed(fn, repeats: int, inner: int) -> float:
    """Median milliseconds per call."""
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times)


def cases(torch, cupy, tp, quick: bool):
    from tileprim import S, laneid
    scale = 4 if quick else 1
    rows32 = torch.randn((1 << 23) // scale, 32, device="cuda")            # 1 GiB
    rows1k = torch.randn((1 << 18) // scale, 1024, device="cuda")          # 1 GiB
    tiles = torch.randn((1 << 20) // scale, 32, 8, device="cuda")          # 1 GiB
    flat8 = torch.randn((1 << 25) // scale, 8, device="cuda")              # 1 GiB
    lane_rows = S[(32, 8):(1 @ laneid, 1)]
    cp = (lambda t: cupy.asarray(t)) if cupy else None
    yield ("sum over rows of 32 (thread scope, local)", rows32.numel() * 4 + rows32.shape[0] * 4,
           lambda: tp.sum(rows32, batch_dims=1), lambda: rows32.sum(-1),
           (lambda a=cp(rows32) if cp else None: a.sum(-1)) if cupy else None)
    yield ("sum over rows of 1024 (cta(128), shared)", rows1k.numel() * 4 + rows1k.shape[0] * 4,
           lambda: tp.cta(128).sum(rows1k, batch_dims=1, storage="shared"), lambda: rows1k.sum(-1),
           (lambda a=cp(rows1k) if cp else None: a.sum(-1)) if cupy else None)
    yield ("max over lanes of 32x8 tiles (warp, shuffle)", tiles.numel() * 4 + tiles.shape[0] * 8 * 4,
           lambda: tp.warp.max(tiles, axes=0, layout=lane_rows, batch_dims=1), lambda: tiles.amax(1),
           (lambda a=cp(tiles) if cp else None: a.max(1)) if cupy else None)
    yield ("sqrt of 32x8 register tiles (warp, reg)", tiles.numel() * 8,
           lambda: tp.warp.sqrt(tiles, layout=lane_rows, batch_dims=1), lambda: tiles.sqrt(),
           (lambda a=cp(tiles) if cp else None: cupy.sqrt(a)) if cupy else None)
    b, c = torch.randn_like(flat8), torch.randn_like(flat8)
    yield ("fma a*b+c on 8-element tiles (thread, reg)", flat8.numel() * 16,
           lambda: tp.fma(flat8, b, c, batch_dims=1), lambda: torch.addcmul(c, flat8, b),
           (lambda x=cp(flat8), y=cp(b), z=cp(c): x * y + z) if cupy else None)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="quarter-size inputs, fewer repeats")
    args = parser.parse_args()
    import torch
    try:
        import cupy
    except ImportError:
        cupy = None
    import tileprim as tp
    if tp.info()["backends"]["cuda"] != "available":
        print(f"no GPU: {tp.info()['backends']['cuda']}")
        return 1
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; tileprim {tp.__version__}, torch {torch.__version__}, "
          f"cupy {cupy.__version__ if cupy else 'absent'}")
    repeats, inner = (5, 3) if args.quick else (15, 5)
    print(f"{'case':48s} {'tileprim':>16s} {'torch':>16s} {'cupy':>16s} {'tp/best':>8s}")
    for name, nbytes, ours, theirs, cupys in cases(torch, cupy, tp, args.quick):
        t_tp = timed(ours, repeats, inner)
        t_torch = timed(theirs, repeats, inner)
        t_cupy = timed(cupys, repeats, inner) if cupys else float("nan")
        best = np.nanmin([t_torch, t_cupy])

        def cell(t):
            return f"{t:7.3f}ms {nbytes / t / 1e6:5.0f}GB/s" if t == t else "       n/a      "
        print(f"{name:48s} {cell(t_tp)} {cell(t_torch)} {cell(t_cupy)} {t_tp / best:8.2f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
