"""The benchmark suite (``python benchmarks/run.py``, or ``python -m tileprim bench`` from a
checkout): tileprim beside the libraries people would otherwise use, on the same inputs. It lives
beside the package, not in it: ``pip install`` installs the library alone.

On a GPU (PyTorch needed for the inputs; CuPy timed too where installed): row sum/max/min of
float32 ``(N, K)`` tensors for K in 4 ... 8192 with no scope named (the planner's, "planner") and at
thread, warp and cta(32/128/256) scope;
sqrt/exp/add/fma in float32/float16/bfloat16; 2^28 elements per input (1 GiB of float32, far more
than L2), CUDA events around batches of back-to-back calls after a warm-up that also compiles,
medians. Then the small-call latencies, what getting a kernel costs, and the tile programs
(softmax, RMSNorm, add + RMSNorm, logsumexp beside torch, torch.compile and Liger, then softmax
and RMSNorm forward + backward: ``--only program``, ``--only fwd+bwd``; see ``programs.py``).
Without a GPU the same against NumPy on the CPU backend (the forward + backward cases on torch
CPU tensors beside torch eager), wall-clock timed.

Each case prints one line (stdout) and becomes one JSON row; a case tileprim refuses (a tile too
big for a thread's registers, say) is recorded as n/a with the reason, and the run goes on.
"""
from __future__ import annotations

import argparse
from typing import Callable, List, Optional

import tileprim as tp

from .baselines import GpuLibrary, NumpyLibrary
from .cases import CPU_KS, CPU_SCOPES, GPU_KS, GPU_SCOPES, Inputs, map_cases, reduction_cases
from .latency import gpu_small_calls, host_small_calls, kernel_cases
from .programs import program_cases, side_for
from .runner import Sizes, Suite, cuda_usable, run, run_as_asked
from .timing import CudaEventTimer, WallTimer

__all__ = ["Sizes", "Suite", "suite", "run", "add_arguments", "run_from_args", "main"]

SIZES = {("cuda", False): Sizes(1 << 28, 15, 5, 2000), ("cuda", True): Sizes(1 << 26, 5, 3, 300),
         ("cpu", False): Sizes(1 << 20, 21, 1, 2000), ("cpu", True): Sizes(1 << 16, 7, 1, 300)}


def suite(backend: str = "cpu", quick: bool = False) -> Suite:
    """The benchmark cases for ``backend``; nothing runs yet.

    Parameters
    ----------
    backend : {"cpu", "cuda"}
        ``"cuda"``: tileprim on PyTorch CUDA tensors against PyTorch (and CuPy where installed).
        ``"cpu"``: tileprim's CPU backend against NumPy.
    quick : bool, default False
        Inputs a quarter (GPU) or a sixteenth (CPU) of the size, fewer repeats.

    Returns
    -------
    Suite

    Raises
    ------
    RuntimeError
        ``"cuda"`` without PyTorch, which makes the GPU inputs.

    Examples
    --------
    >>> import tileprim_bench
    >>> [case.name for case in tileprim_bench.suite("cpu", quick=True).cases][:3]
    ['sum K=4 thread', 'max K=4 thread', 'min K=4 thread']
    """
    sizes = SIZES[backend, quick]
    if backend == "cuda":
        try:
            import torch
        except ImportError:
            raise RuntimeError("the GPU suite makes its inputs with PyTorch, which is not installed; "
                               "--backend cpu runs the CPU suite") from None
        try:
            import cupy
        except ImportError:
            cupy = None
        lib = GpuLibrary(torch, cupy)
        timer = CudaEventTimer(torch, sizes.repeats, sizes.inner)
        ks, scopes = GPU_KS, GPU_SCOPES
    else:
        lib, timer, ks, scopes = NumpyLibrary(), WallTimer(sizes.repeats), CPU_KS, CPU_SCOPES
    inputs = Inputs(lib.free)
    cases = reduction_cases(lib, inputs, timer, sizes.elements, ks, scopes)
    cases += map_cases(lib, inputs, timer, sizes.elements)
    cases += host_small_calls(sizes.calls)
    if backend == "cuda":
        cases += gpu_small_calls(lib.torch, inputs, sizes.calls)
    cases += kernel_cases(sizes.calls)
    programs, header = program_cases(side_for(lib), inputs, quick)
    return Suite(backend, quick, lib, timer, sizes, inputs, cases + programs, header)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m tileprim bench`` (and ``benchmarks/run.py``)."""
    parser.add_argument("--backend", choices=("cpu", "cuda"),
                        help="cuda: tileprim on PyTorch tensors against PyTorch and CuPy; cpu: the CPU "
                             "backend against NumPy (default: cuda where a GPU is usable)")
    parser.add_argument("--quick", action="store_true", help="smaller inputs and fewer repeats")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="run only the cases whose name contains TEXT (repeatable), e.g. 'sum K=32 ', "
                             "'cta(128)', 'float16', 'small', 'kernel'")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("--json", metavar="PATH", help="also write the header and one row per case as JSON")


def run_from_args(args: argparse.Namespace, fail: Callable[[str], None]) -> int:
    """Runs the suite ``args`` (from :func:`add_arguments`) ask for; ``fail`` reports a usage error.

    Parameters
    ----------
    args : argparse.Namespace
    fail : callable
        ``parser.error``: prints the message and exits 2.

    Returns
    -------
    int
        0.
    """
    if args.backend == "cuda" and not cuda_usable():
        fail(f"--backend cuda: the CUDA backend is {tp.info()['backends']['cuda']}")
    backend = args.backend or ("cuda" if cuda_usable() else "cpu")
    try:
        s = suite(backend, args.quick)
    except RuntimeError as e:
        fail(str(e))
    run_as_asked(s, args, fail)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """``benchmarks/run.py``: the same as ``python -m tileprim bench``.

    Parameters
    ----------
    argv : list of str, optional
        The options (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("``", ""))
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv), parser.error)
