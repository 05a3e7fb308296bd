"""A/B of a change to the device headers on the tile-program kernels: times tileprim's programs
alone (no peers, no oracle) under the headers the installed package holds, and prints one JSON
line per case with a checksum of the result's bits, so that two processes, one under each version
of a header, compare speed and bits in one lease:

    python benchmarks/program_ab.py new > ab.jsonl
    INC=$(python -c 'import tileprim, os; print(os.path.dirname(tileprim.__file__))')/include/tileprim
    cp old/transcendental.cuh "$INC/"                  # the kernel cache keys on the headers' digest
    python benchmarks/program_ab.py old >> ab.jsonl

Timing as benchmarks/programs.py: CUDA events around 5 back-to-back calls after 3 warm-up calls,
the median of 15 batches; TB/s = bytes read + written / time. Needs a GPU and torch."""
import json
import statistics
import sys

import torch

import tileprim as tp
from tileprim_bench.program_workloads import WORKLOADS

# (workload, rows, row length, dtype): the rows issue 31 names, and the rows of 1024
CASES = [("softmax", 32768, 4096, "bfloat16"), ("softmax", 32768, 16384, "bfloat16"),
         ("logsumexp", 32768, 4096, "float32"), ("logsumexp", 32768, 16384, "float32"),
         ("logsumexp", 32768, 4096, "bfloat16"), ("logsumexp", 32768, 16384, "bfloat16"),
         ("logsumexp", 262144, 1024, "float32"), ("softmax", 262144, 1024, "bfloat16"),
         ("softmax", 32768, 4096, "float32")]


def bits_checksum(y: torch.Tensor) -> int:
    """A position-weighted sum of the result's bit patterns: equal for equal bits (with all but
    certainty for unequal)."""
    ints = y.view(torch.int16 if y.element_size() == 2 else torch.int32).to(torch.int64).flatten()
    weights = torch.arange(1, ints.numel() + 1, device=ints.device)
    return int((ints * weights % 1000003).sum().item())


def median_ms(call) -> float:
    """The median over 15 batches of 5 back-to-back calls, after 3 warm-up calls, in ms per call."""
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(15):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 5)
    return statistics.median(times)


def main(label: str) -> None:
    workloads = {w.name: w for w in WORKLOADS}
    for name, m, n, dtype in CASES:
        workload = workloads[name]
        program = workload.program  # no scope named: the planner's choice, as a user calls it
        generator = torch.Generator(device="cuda").manual_seed(1)
        x = torch.randn(m, n, device="cuda", generator=generator).to(getattr(torch, dtype))
        ms = median_ms(lambda: program(x, batch_dims=1))
        y = program(x, batch_dims=1)
        scope = tp.plan(program, x, batch_dims=1).scope
        print(json.dumps({"label": label, "case": f"{name} {m}x{n} {dtype}", "scope": scope, "ms": ms,
                          "tbps": workload.bytes(m, n, x.element_size()) / ms / 1e9,
                          "bits_checksum": bits_checksum(y)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "installed")
