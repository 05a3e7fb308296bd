"""The tile-program benchmark (issue 31): softmax, RMSNorm, residual-add + RMSNorm and logsumexp
as tile programs, one fused kernel each, beside PyTorch eager, torch.compile of the same PyTorch
code, torch's own rms_norm and Liger's Triton kernels, on the same inputs, checked in the same run.

    python benchmarks/programs.py [--quick] [--only TEXT] [--json PATH] [--list]
    python benchmarks/programs.py --smoke        # no GPU: CPU backend against NumPy, tiny shapes
    python -m tileprim bench --only program      # the same cases inside the whole suite

On a GPU: rows of N = 1024, 4096, 16384, 65536 (M = 262144, 32768, 32768, 4096: inputs of
0.25-2 GiB, far larger than L2), float32 and bfloat16, CUDA events around batches of 5
back-to-back calls after a warm-up that also compiles, the median of 15 batches; TB/s = bytes
read + written / time. RMSNorm at 140x4096 is timed as host wall time per call (200 back-to-back
calls, one synchronize). Every case checks tileprim's result against a float64 oracle and its
first 64 rows against the CPU backend's bits; every peer's result against the oracle too. A peer
that cannot be imported or run is n/a with the reason, as is tileprim where it cannot run.
"""
from __future__ import annotations

import argparse
import functools
import math
import sys
from typing import List, Optional, Tuple

import numpy as np

import tileprim as tp
from tileprim._dtypes import numpy_dtype

from .baselines import GpuLibrary, NumpyLibrary
from .cases import Case, Inputs, Measured, scope_name
from .program_workloads import WORKLOADS, Workload, scope_for
from .report import reason
from .runner import Sizes, Suite, cuda_usable, run_as_asked
from .timing import CudaEventTimer, HostWallTimer, WallTimer

__all__ = ["side_for", "program_cases", "suite", "main", "TOLERANCE", "CHECK_ROWS"]

DTYPES = ("float32", "bfloat16")
GPU_SHAPES = ((262144, 1024), (32768, 4096), (32768, 16384), (4096, 65536))
CPU_SHAPES = ((100, 1024), (24, 4096), (6, 16384), (3, 65536))
SMALL_SHAPE = (140, 4096)  # a decode step's RMSNorm: what the host spends per call decides
# worst |got - want| / |want| against float64: float32 keeps ~1e-6 through long rows' sums; a
# bfloat16 result is one rounding (2^-8) of a float32 one
TOLERANCE = {"float32": 1e-5, "bfloat16": 2.0 ** -8 + 2.0 ** -14}
TINY = np.finfo(np.float32).tiny  # |want| below this counts as this (both dtypes' smallest normal)
CHECK_ROWS = 64          # rows whose bits are compared with the CPU backend's
CHECK_CHUNK = 1 << 25    # elements per float64 oracle chunk


class _CpuSide:
    """The CPU backend beside NumPy on NumPy arrays: tiny shapes, every code path, no GPU."""

    repeats, inner, small_inner = 7, 1, 20

    def __init__(self, lib: NumpyLibrary):
        self.lib = lib
        self._rng = np.random.default_rng(0)
        self.timer = WallTimer(self.repeats)
        self.small_timer = HostWallTimer(lambda: None, self.repeats, self.small_inner)

    @staticmethod
    def shapes(quick: bool):
        return tuple((max(1, m // 4) if quick else m, n) for m, n in CPU_SHAPES)

    def inputs(self, shape: tuple, dtype: str):
        dt = numpy_dtype(dtype)
        x = (self._rng.standard_normal(shape) * 2).astype(dt)
        r = self._rng.standard_normal(shape).astype(dt)
        return x, r, self._rng.uniform(0.5, 1.5, shape[-1]).astype(dt)

    def peers(self, workload: Workload, args: tuple):
        return {"numpy": functools.partial(workload.numpy_peer, *args)}, {}

    @staticmethod
    def device(result):
        return np.asarray(result)

    @staticmethod
    def float64(a):
        return a.astype(np.float64)

    @staticmethod
    def host(a) -> np.ndarray:
        return np.asarray(a)


class _GpuSide:
    """tileprim on PyTorch CUDA tensors beside PyTorch eager, torch.compile of the same code,
    torch's rms_norm and Liger (imported on first use; n/a with the reason without it)."""

    repeats, inner, small_inner = 15, 5, 200

    def __init__(self, lib: GpuLibrary, device: str = "cuda"):
        self.lib, self.torch, self.device_name = lib, lib.torch, device  # "cpu": the tests' dry run
        self._generator = None
        self._liger = None
        self.timer = CudaEventTimer(self.torch, self.repeats, self.inner, budget_s=None)
        self.small_timer = HostWallTimer(self.torch.cuda.synchronize, self.repeats, self.small_inner)

    @staticmethod
    def shapes(quick: bool):
        return tuple((m // 4 if quick else m, n) for m, n in GPU_SHAPES)

    def inputs(self, shape: tuple, dtype: str):
        torch = self.torch
        if self._generator is None:
            self._generator = torch.Generator(device=self.device_name).manual_seed(0)
        g, dt, on = self._generator, getattr(torch, dtype), self.device_name
        x = torch.randn(shape, device=on, generator=g).mul_(2).to(dt)
        r = torch.randn(shape, device=on, generator=g).to(dt)
        return x, r, torch.rand(shape[-1], device=on, generator=g).add_(0.5).to(dt)

    def _liger_functional(self):
        """liger_kernel.transformers.functional, or the reason it cannot be had."""
        if self._liger is None:
            try:
                import liger_kernel.transformers.functional as functional
                self._liger = functional
            except Exception as e:  # not installed, or its Triton does not load
                self._liger = f"liger_kernel not importable: {reason(e)}"
        return self._liger

    def peers(self, workload: Workload, args: tuple):
        torch = self.torch
        fns = {"torch": functools.partial(workload.torch_peer, *args)}
        if workload.torch_rms_norm is not None:
            fns["torch rms_norm"] = functools.partial(workload.torch_rms_norm, *args)
        torch.compiler.reset()  # each case compiles afresh: no recompile limit, no other shape's code
        fns["torch.compile"] = functools.partial(torch.compile(workload.torch_peer, dynamic=False), *args)
        missing = {}
        liger = self._liger_functional()
        if workload.liger is None:
            missing["liger"] = f"Liger has no {workload.name} op"
        elif isinstance(liger, str):
            missing["liger"] = liger
        else:
            fns["liger"] = functools.partial(workload.liger, liger, *args)
        return fns, missing

    def device(self, result):
        """The result as a torch tensor (from DLPack where the call gave another library's array)."""
        return result if self.torch.is_tensor(result) else self.torch.from_dlpack(result)

    @staticmethod
    def float64(a):
        return a.double()

    def host(self, a) -> np.ndarray:
        a = a.detach().contiguous().cpu()
        if a.dtype == self.torch.bfloat16:  # NumPy has no bfloat16 of its own: the same bits as ml_dtypes'
            return a.view(self.torch.int16).numpy().view(numpy_dtype("bfloat16"))
        return a.numpy()


def _as_tuple(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


def _dtype_name(a) -> str:
    return str(a.dtype).replace("torch.", "")


def _worst_error(side, workload: Workload, args: tuple, results: tuple, dtype: str) -> float:
    """The worst |got - want| / max(|want|, TINY) over every element of ``results`` against the
    float64 oracle, taken in chunks of rows; NaN where any result is NaN and the oracle is not."""
    arrays = [a for a in args if not isinstance(a, float)]
    m, n = arrays[0].shape
    results = tuple(side.device(res) for res in results)
    wanted = [(m, n)] * workload.rows_out + [(m, 1)] * workload.values_out
    for res, shape in zip(results, wanted):
        if tuple(res.shape) != shape or _dtype_name(res) != dtype:
            raise ValueError(f"a result of shape {tuple(res.shape)} {_dtype_name(res)}; "
                             f"expected {shape} {dtype}")
    if len(results) != len(wanted):
        raise ValueError(f"{len(results)} results; expected {len(wanted)}")
    worst, step = 0.0, max(1, CHECK_CHUNK // n)
    for start in range(0, m, step):
        rows = slice(start, start + step)
        ins = [side.float64(a[rows]) for a in arrays[:workload.rows_in]]
        ins += [side.float64(a) for a in arrays[workload.rows_in:]]
        got = [side.float64(res[rows]) for res in results]
        for g, want in zip(got, workload.oracle(ins, got)):
            error = float((abs(g - want) / abs(want).clip(TINY)).max())
            if math.isnan(error):
                return error
            worst = max(worst, error)
    return worst


def _bits(side, workload: Workload, args: tuple, results: tuple, scope) -> str:
    """tileprim's first CHECK_ROWS rows against the CPU backend's run of those rows alone."""
    k = min(CHECK_ROWS, args[0].shape[0])
    host_args = tuple(a if isinstance(a, float) else side.host(a[:k] if i < workload.rows_in else a)
                      for i, a in enumerate(args))
    cpu = _as_tuple(workload.program(*host_args, batch_dims=1, scope=scope, backend="cpu"))
    differ = total = 0
    for res, ref in zip(results, cpu):
        got = side.host(side.device(res)[:k])
        unsigned = f"u{got.dtype.itemsize}"
        differ += int(np.count_nonzero(got.view(unsigned) != ref.view(unsigned)))
        total += got.size
    return "equal" if differ == 0 else f"{differ} of {total} differ"


def _measure(side, inputs: Inputs, workload: Workload, shape: tuple, dtype: str, per_call: bool) -> Measured:
    x, r, w = inputs.get(("program", shape, dtype), lambda: side.inputs(shape, dtype))
    args = workload.arguments(x, r, w)
    scope = scope_for(shape[-1], dtype, workload.name)
    timer = side.small_timer if per_call else side.timer
    tolerance = TOLERANCE[dtype]
    peers, missing = side.peers(workload, args)
    detail = {"scope": scope_name(scope), "unit": "µs" if per_call else "TB/s", "tolerance": tolerance,
              "n/a": missing}
    ours = functools.partial(workload.program, *args, batch_dims=1, scope=scope, **side.lib.tileprim_options)
    ours_ms, note = None, None
    try:
        results = _as_tuple(ours())  # compiles; the check runs on this first result
        error = _worst_error(side, workload, args, results, dtype)
        detail.update(oracle=None if math.isnan(error) else error, oracle_ok=error <= tolerance,
                      bits=_bits(side, workload, args, results, scope), bits_rows=min(CHECK_ROWS, shape[0]))
        del results
        ours_ms = timer(ours)
    except Exception as e:  # not yet on this backend, a refused tile: the peers are still measured
        # a DispatchError says what was refused on its first line and why on its second
        lines = [text.strip() for text in str(e).splitlines() if text.strip()]
        note, detail["tileprim_error"] = f"{type(e).__name__}: {' '.join(lines[:2])}", str(e)
    baselines, peers_ok = {}, {}
    for name, fn in peers.items():
        try:
            peers_ok[name] = _worst_error(side, workload, args, _as_tuple(fn()), dtype) <= tolerance
            baselines[name] = timer(fn)
        except Exception as e:
            missing[name] = reason(e)
    detail["peers_ok"] = peers_ok
    if ours_ms and baselines:
        detail["vs_best_peer"] = min(baselines.values()) / ours_ms
    return Measured(ours_ms, baselines, detail, note)


def _case(side, inputs: Inputs, workload: Workload, shape: tuple, dtype: str, per_call: bool = False) -> Case:
    m, n = shape
    # the dtype last: "exp float32" picks the exp map, not logsumexp
    name = f"program {workload.name} {m}x{n} {dtype}" + (" host wall time" if per_call else "")
    return Case(name, "program", lambda: _measure(side, inputs, workload, shape, dtype, per_call),
                op=workload.name, dtype=dtype, scope=scope_name(scope_for(n, dtype, workload.name)), K=n, shape=shape,
                bytes=workload.bytes(m, n, numpy_dtype(dtype).itemsize))


def side_for(lib):
    """What the tile-program cases run on beside ``lib`` (a GpuLibrary or NumpyLibrary): its
    inputs, peers, timers and shapes."""
    return _GpuSide(lib) if lib.backend == "cuda" else _CpuSide(lib)


def program_cases(side, inputs: Inputs, quick: bool = False) -> Tuple[List[Case], dict]:
    """The tile-program cases, and what the run's header says of them.

    Parameters
    ----------
    side : from :func:`side_for`
        GPU: the shapes above against PyTorch, torch.compile and Liger. CPU: tiny shapes against
        NumPy, to run the code paths and checks (the times are no claim).
    inputs : Inputs
        Holds the inputs of one (shape, dtype) at a time; the workloads of that pair share them.
    quick : bool
        A quarter of the rows.

    Returns
    -------
    (list of Case, dict)
    """
    cases = [_case(side, inputs, workload, shape, dtype)
             for shape in side.shapes(quick) for dtype in DTYPES for workload in WORKLOADS]
    rmsnorm = next(w for w in WORKLOADS if w.name == "rmsnorm")
    cases += [_case(side, inputs, rmsnorm, SMALL_SHAPE, dtype, per_call=True) for dtype in DTYPES]
    header = {"program_timing": side.timer.describe(), "program_small_timing": side.small_timer.describe(),
              "program_tolerance": TOLERANCE, "program_bits_rows": CHECK_ROWS}
    return cases, header


def suite(backend: str, quick: bool = False):
    """A bench Suite of the tile-program cases alone (see :func:`tileprim_bench.suite`); nothing
    runs yet.

    Parameters
    ----------
    backend : {"cuda", "cpu"}
    quick : bool

    Returns
    -------
    tileprim_bench.runner.Suite
    """
    if backend == "cuda":
        import torch
        lib = GpuLibrary(torch)
    else:
        lib = NumpyLibrary()
    side, inputs = side_for(lib), Inputs(lib.free)
    cases, header = program_cases(side, inputs, quick)
    header["small_call_timing"] = side.small_timer.describe()
    sizes = Sizes(max(math.prod(case.shape) for case in cases), side.repeats, side.inner, side.small_inner)
    return Suite(backend, quick, lib, side.timer, sizes, inputs, cases, header)


def main(argv: Optional[List[str]] = None) -> int:
    """``benchmarks/programs.py``: the tile-program cases alone, on the GPU, or with ``--smoke``
    on the CPU backend.

    Parameters
    ----------
    argv : list of str, optional
        The options (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0, or 1 where a tileprim result was off the oracle.
    """
    parser = argparse.ArgumentParser(prog="benchmarks/programs.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true",
                        help="no GPU needed: the CPU backend against NumPy on tiny shapes, every code path "
                             "and check; the times are no claim")
    parser.add_argument("--quick", action="store_true", help="a quarter of the rows")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="only the cases whose name contains TEXT (repeatable), e.g. 'softmax', "
                             "'bfloat16', 'x16384', 'host wall'")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("--json", metavar="PATH",
                        help="also write the header (GPU, driver, versions) and one row per case as JSON")
    args = parser.parse_args(argv)
    if not args.smoke and not cuda_usable():
        parser.error(f"the CUDA backend is {tp.info()['backends']['cuda']}; --smoke runs the CPU backend")
    try:
        s = suite("cpu" if args.smoke else "cuda", args.quick)
    except ImportError as e:
        parser.error(f"the GPU run makes its inputs with PyTorch: {e}; --smoke runs the CPU backend")
    result = run_as_asked(s, args, parser.error)
    if result is None:
        return 0
    off = [row["case"] for row in result["rows"] if row["detail"].get("oracle_ok") is False]
    if off:
        print(f"tileprim off the float64 oracle: {', '.join(off)}", file=sys.stderr)
    return 1 if off else 0
