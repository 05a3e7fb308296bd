"""Small-call latency: what one repeated call costs, tileprim beside PyTorch on the same inputs.

    python benchmarks/small_calls.py [--calls 2000] [--json PATH]

On a GPU: a 4x8 row sum of a device-resident torch tensor (wall time per call including a
stream synchronize, and host time per call without one) against x.sum(-1); the NumPy 4x8 round
trip through the GPU against torch's from_numpy -> cuda -> sum -> cpu. Everywhere: a repeated
tp.plan and a repeated 4x8 sum on the CPU backend against NumPy. Medians of --calls calls after
a warm-up; the JSON has every figure."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

import tileprim as tp


def per_call(fn, calls: int, sync=None) -> float:
    """Median seconds of fn() (then sync()) over `calls` calls, after 50 warm-up calls."""
    for _ in range(50):
        fn()
    if sync:
        sync()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def row(name: str, ours: float, theirs: float, theirs_name: str) -> dict:
    print(f"{name:<44} tileprim {ours * 1e6:8.2f} us   {theirs_name} {theirs * 1e6:8.2f} us   ratio {ours / theirs:5.2f}")
    return {"case": name, "tileprim_us": ours * 1e6, "baseline": theirs_name, "baseline_us": theirs * 1e6,
            "ratio": ours / theirs}


def host_breakdown(torch, x, calls: int) -> list:
    """Where a repeated call's host time goes: the signature lookup, the result's allocation,
    the pointers and stream, and the launch through tileprim._C, each timed alone."""
    from tileprim._calls import bound_call
    from tileprim._scope import thread
    bound = bound_call("sum", (x,), -1, None, False, thread, None, None, None, 0, None, None, None, None, {})
    out = x.new_empty((4,))
    stream = torch.cuda.current_stream().cuda_stream
    parts = {
        "signature lookup (bound_call)": lambda: bound_call("sum", (x,), -1, None, False, thread, None, None, None,
                                                             0, None, None, None, None, {}),
        "result allocation (new_empty)": lambda: x.new_empty((4,)),
        "pointers and stream": lambda: (x.data_ptr(), out.data_ptr(), bound.adapter.stream(0)),
        "launch through _C (run_device)": lambda: bound.core.run_device([x.data_ptr()], [0.0], out.data_ptr(), 1, 0,
                                                                        stream),
    }
    rows = []
    for name, fn in parts.items():
        t = per_call(fn, calls)
        print(f"    {name:<40} {t * 1e6:8.2f} us")
        rows.append({"case": "host part: " + name, "tileprim_us": t * 1e6})
    torch.cuda.synchronize()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "small_calls.json"))
    args = parser.parse_args()
    rows = []
    a = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    rows.append(row("tp.plan of a repeated 4x8 thread sum (cpu)",
                    per_call(lambda: tp.plan(tp.sum, a, axes=-1, backend="cpu"), args.calls),
                    per_call(lambda: a.sum(-1), args.calls), "a.sum(-1)"))
    rows.append(row("repeated 4x8 row sum, backend='cpu'", per_call(lambda: tp.sum(a, axes=-1, backend="cpu"),
                                                                    args.calls),
                    per_call(lambda: a.sum(-1), args.calls), "a.sum(-1)"))
    if tp.info()["backends"]["cuda"] == "available":
        import torch
        x = torch.from_numpy(a).cuda()
        sync = torch.cuda.current_stream().synchronize
        rows.append(row("4x8 row sum of a torch CUDA tensor, wall + sync",
                        per_call(lambda: tp.sum(x, axes=-1), args.calls, sync),
                        per_call(lambda: x.sum(-1), args.calls, sync), "x.sum(-1)"))
        rows.append(row("  ... host time per call (no sync)", per_call(lambda: tp.sum(x, axes=-1), args.calls),
                        per_call(lambda: x.sum(-1), args.calls), "x.sum(-1)"))
        rows += host_breakdown(torch, x, args.calls)
        rows.append(row("NumPy 4x8 round trip through the GPU", per_call(lambda: tp.sum(a, axes=-1, backend="cuda"),
                                                                         args.calls),
                        per_call(lambda: torch.from_numpy(a).cuda().sum(-1).cpu(), args.calls),
                        "from_numpy.cuda.sum.cpu"))
    with open(args.json, "w") as f:
        json.dump({"calls": args.calls, "device": tp.info()["devices"], "rows": rows}, f, indent=2)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
