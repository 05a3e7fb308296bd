"""The tile-program benchmark (issue 31): softmax, RMSNorm, residual-add + RMSNorm and logsumexp
as tile programs, one fused kernel each, beside PyTorch eager, torch.compile of the same PyTorch
code, torch's own rms_norm and Liger's Triton kernels, on the same inputs, checked in the same run;
then softmax and RMSNorm forward + backward (issue 33), the program's backward derived from it.

    python benchmarks/programs.py [--quick] [--only TEXT] [--json PATH] [--list]
    python benchmarks/programs.py --smoke        # no GPU: CPU backend against NumPy, tiny shapes
    python -m tileprim bench --only program      # the same cases inside the whole suite

Every program is called as a user calls it: no scope, no staging (the planner's choice, which
each case's detail records as "scope" and "staging"); "first_call_s" is its first call's cost
(trace, plan and, on the GPU, NVRTC unless the kernel cache holds it), "copy_tbps" the device's
copy bandwidth on the same rows and "vs_copy" the program's TB/s over it.

On a GPU: issue 49's rows, 32768 rows of N = 1000, 2048, 4096, 4097, 8192, 16384 and 32000 and
rows of 50257, 65536, 131072 and 262144 as many as fit in 8 GiB (program_sides.GPU_SHAPES),
float32 and bfloat16, each program exact (the default); on rows of 4096 and 16384 also with
fastmath=True (the GPU's approximations: "... fastmath" cases, checked against the same oracle
within TOLERANCE_FASTMATH, their bits against the CPU's exact ones for information; the peers'
figures are those the exact case measured on the same inputs just before, where it ran), CUDA events around batches of 5
back-to-back calls after a warm-up that also compiles, the median of 15 batches; TB/s = bytes
read + written / time. RMSNorm at 140x4096 is timed as host wall time per call (200 back-to-back
calls, one synchronize). Every case checks tileprim's result against a float64 oracle and its
first 64 rows against the CPU backend's bits; every peer's result against the oracle too. A peer
that cannot be imported or run is n/a with the reason, as is tileprim where it cannot run.

Forward + backward ("program softmax fwd+bwd 32768x4096 float32"): the same shapes and dtypes,
each call ``y = f(x[, w, eps])`` on x (and w) that need a gradient, then
``torch.autograd.grad(y, (x[, w]), g)`` with a fixed random g: tileprim's program (its backward a
second program derived from its steps; w's per-row gradients summed over the batch by torch)
beside the same peers, whose backward is torch's. TB/s counts the fewest bytes: the forward reads
x (and w) and writes y, the backward reads x (and w) and g and writes dx (and dw, N values): 5 M N
elements, RMSNorm's 3 N more. Each gradient is checked against the float64 oracle by
||got - want|| / ||want|| (per element, g - sum(g y) cancels), tileprim's dx of the first 64 rows
against the CPU backend's forward + backward of those rows alone. On the CPU (--smoke) these
cases run the CPU backend on torch CPU tensors beside torch eager; without torch they are n/a.
"""
from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from typing import List, Optional, Tuple

import numpy as np

import tileprim as tp
from tileprim._arrays.dtypes import numpy_dtype

from .baselines import GpuLibrary, NumpyLibrary
from .cases import Case, Inputs, Measured
from .program_sides import side_for
from .program_workloads import GRADIENT_WORKLOADS, WORKLOADS, Workload
from .report import reason
from .runner import Sizes, Suite, cuda_usable, run_as_asked

__all__ = ["side_for", "program_cases", "suite", "main", "TOLERANCE", "TOLERANCE_FASTMATH", "GRADIENT_TOLERANCE",
           "CHECK_ROWS"]

DTYPES = ("float32", "bfloat16")
SMALL_SHAPE = (140, 4096)  # a decode step's RMSNorm: what the host spends per call decides
# worst |got - want| / |want| against float64: float32 keeps ~1e-6 through long rows' sums; a
# bfloat16 result is one rounding (2^-8) of a float32 one
TOLERANCE = {"float32": 1e-5, "bfloat16": 2.0 ** -8 + 2.0 ** -14}
# fastmath=True (the " fastmath" cases): the GPU's approximations err by a few float32 ulps more
# (ex2.approx of x log2(e) grows with |x|, lg2.approx is 2^-22 absolute)
TOLERANCE_FASTMATH = {"float32": 2.0 ** -14, "bfloat16": 2.0 ** -8 + 2.0 ** -12}
TINY = np.finfo(np.float32).tiny  # |want| below this counts as this (both dtypes' smallest normal)
# ||got - want|| / ||want|| of each gradient against float64 (per element, g - sum(g y) and its like
# cancel, so a relative error per element says nothing): float32 keeps ~2e-7; a bfloat16 gradient
# is one rounding of a float32 one (~1.7e-3 on these inputs), w's a sum of per-row roundings rounded
# once more (~2.3e-3, the same at 100 and 4096 rows)
GRADIENT_TOLERANCE = {"float32": 1e-5, "bfloat16": 2.0 ** -8}
CHECK_ROWS = 64          # rows whose bits are compared with the CPU backend's
CHECK_CHUNK = 1 << 25    # elements per float64 oracle chunk
# The peers' figures of each exact case (workload, shape, dtype, per_call), which its fastmath twin
# reports instead of timing the same peers on the same inputs again (torch.compile compiles anew)
_PEER_FIGURES: dict = {}


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


def _bits(side, workload: Workload, args: tuple, results: tuple) -> str:
    """tileprim's first CHECK_ROWS rows against the CPU backend's run of those rows alone."""
    k = min(CHECK_ROWS, args[0].shape[0])
    host_args = tuple(a if isinstance(a, float) else side.host(a[:k] if i < workload.rows_in else a)
                      for i, a in enumerate(args))
    cpu = _as_tuple(workload.program(*host_args, batch_dims=1, backend="cpu"))
    return _differing((side.host(side.device(res)[:k]), ref) for res, ref in zip(results, cpu))


def _differing(pairs) -> str:
    """"equal" where each (got, want) pair of NumPy arrays holds the same bits, else how many
    elements differ."""
    differ = total = 0
    for got, ref in pairs:
        unsigned = f"u{got.dtype.itemsize}"
        differ += int(np.count_nonzero(got.view(unsigned) != ref.view(unsigned)))
        total += got.size
    return "equal" if differ == 0 else f"{differ} of {total} differ"


def _gradient_error(side, workload: Workload, arrays: tuple, g, grads: tuple, dtype: str) -> float:
    """The worst ||got - want|| / ||want|| over ``grads`` (one per array of ``arrays``: those of
    the rows, then w's summed over the rows) against the float64 oracle, taken in chunks of rows;
    NaN where a gradient holds a NaN."""
    if len(grads) != len(arrays):
        raise ValueError(f"{len(grads)} gradients; expected {len(arrays)}")
    for got, a in zip(grads, arrays):
        if tuple(got.shape) != tuple(a.shape) or _dtype_name(got) != dtype:
            raise ValueError(f"a gradient of shape {tuple(got.shape)} {_dtype_name(got)}; "
                             f"expected {tuple(a.shape)} {dtype}")
    m, n = g.shape
    rows_in = workload.rows_in
    off, norm = [0.0] * len(grads), [0.0] * len(grads)
    summed = [0.0] * len(grads)  # the oracle's gradients of w, summed over the chunks so far
    step = max(1, CHECK_CHUNK // n)
    for start in range(0, m, step):
        rows = slice(start, start + step)
        ins = [side.float64(a[rows]) for a in arrays[:rows_in]] + [side.float64(a) for a in arrays[rows_in:]]
        wanted = workload.gradients(ins, side.float64(g[rows]))
        for i, (got, want) in enumerate(zip(grads[:rows_in], wanted)):
            off[i] += float(((side.float64(got[rows]) - want) ** 2).sum())
            norm[i] += float((want ** 2).sum())
        for i in range(rows_in, len(grads)):
            summed[i] = summed[i] + wanted[i]
    for i in range(rows_in, len(grads)):
        off[i] = float(((side.float64(grads[i]) - summed[i]) ** 2).sum())
        norm[i] = float((summed[i] ** 2).sum())
    errors = [math.sqrt(o / max(w, TINY)) for o, w in zip(off, norm)]
    return math.nan if any(map(math.isnan, errors)) else max(errors)


def _gradient_bits(side, workload: Workload, args: tuple, g, grads: tuple) -> str:
    """tileprim's gradients of the rows (dx) on the first CHECK_ROWS rows against the CPU
    backend's forward + backward of those rows alone, on CPU copies (w's gradient sums every row
    of the batch: the oracle checks it; tests/test_layers_gpu.py its bits)."""
    torch, rows_in = side.torch, workload.rows_in
    k = min(CHECK_ROWS, g.shape[0])
    host = tuple(a if isinstance(a, float) else (a[:k] if i < rows_in else a).detach().cpu().requires_grad_()
                 for i, a in enumerate(args))
    y = workload.program(*host, batch_dims=1, backend="cpu")
    cpu = torch.autograd.grad(y, [a for a in host if torch.is_tensor(a)], g[:k].cpu())
    return _differing((side.host(got[:k]), side.host(ref)) for got, ref in zip(grads[:rows_in], cpu))


def _measure(side, inputs: Inputs, workload: Workload, shape: tuple, dtype: str, per_call: bool,
             fastmath: bool = False) -> Measured:
    x, r, w = inputs.get(("program", shape, dtype), lambda: side.inputs(shape, dtype))
    args = workload.arguments(x, r, w)
    peers, missing = side.peers(workload, args)
    options = dict(side.options, fastmath=fastmath)
    detail = {"unit": "µs" if per_call else "TB/s",
              "tolerance": (TOLERANCE_FASTMATH if fastmath else TOLERANCE)[dtype], "n/a": missing, "fastmath": fastmath}
    # called as a user calls it: no scope, no staging (the planner's choice, which the detail records)
    ours = functools.partial(workload.program, *args, batch_dims=1, **options)

    def bits(results):  # under fastmath the GPU's bits, which differ from the CPU's exact ones
        return ("fastmath, against the exact: " if fastmath else "") + _bits(side, workload, args, _as_tuple(results))
    key = (workload.name, shape, dtype, per_call)
    known = _PEER_FIGURES.get(key) if fastmath else None
    if known is not None:  # the exact twin timed these peers on these inputs
        peers = {}
        missing.update(known["n/a"])
        detail["peers_from"] = "the exact case's run"
    measured = _checked_and_timed(side.small_timer if per_call else side.timer, ours, peers, detail,
                                  lambda results: _worst_error(side, workload, args, _as_tuple(results), dtype),
                                  bits, min(CHECK_ROWS, shape[0]))
    _chosen(detail, workload.program, args, options)
    copy = side.copy_timed(x) if not per_call else None  # the device's copy bandwidth on these rows
    if copy is not None:
        detail["copy_tbps"] = 2 * x.numel() * x.element_size() / copy / 1e9
        if measured.tileprim_ms:
            m, n = shape
            tbps = workload.bytes(m, n, x.element_size()) / measured.tileprim_ms / 1e9
            detail["vs_copy"] = tbps / detail["copy_tbps"]
    if known is not None:
        measured.baselines.update(known["baselines"])
        detail["peers_ok"] = dict(known["peers_ok"])
        if measured.tileprim_ms and measured.baselines:
            detail["vs_best_peer"] = min(measured.baselines.values()) / measured.tileprim_ms
    elif not fastmath:
        _PEER_FIGURES[key] = {"baselines": dict(measured.baselines), "peers_ok": dict(detail["peers_ok"]),
                              "n/a": dict(missing)}
    return measured


def _chosen(detail: dict, program, args: tuple, options: dict) -> None:
    """The planner's scope and staging for the call (no scope named), in the case's detail."""
    try:
        plan = tp.plan(program, *args, batch_dims=1, **options)
        detail.update(scope=plan.scope, staging=plan.staging)
    except Exception as e:  # refused: the note says why
        detail.update(scope="refused", staging=reason(e))


def _forward_backward(torch, wrt: tuple, g, forward):
    """``forward()``'s gradients with respect to ``wrt`` given its result's gradient ``g``."""
    return torch.autograd.grad(forward(), wrt, g)


def _measure_gradients(side, inputs: Inputs, workload: Workload, shape: tuple, dtype: str) -> Measured:
    side = side.autograd()  # on the CPU: torch CPU tensors (raises where torch is missing)
    x, w, g = inputs.get(("program fwd+bwd", shape, dtype), lambda: side.gradient_inputs(shape, dtype))
    args = workload.arguments(x, None, w)
    wrt = tuple(a for a in args if not isinstance(a, float))
    with_backward = functools.partial(_forward_backward, side.torch, wrt, g)
    forwards, missing = side.peers(workload, args)
    peers = {name: functools.partial(with_backward, fn) for name, fn in forwards.items()}
    detail = {"unit": "TB/s", "tolerance": GRADIENT_TOLERANCE[dtype], "n/a": missing}
    forward = functools.partial(workload.program, *args, batch_dims=1, **side.options)
    ours = functools.partial(with_backward, forward)
    measured = _checked_and_timed(side.timer, ours, peers, detail,
                                  lambda grads: _gradient_error(side, workload, wrt, g, grads, dtype),
                                  lambda grads: _gradient_bits(side, workload, args, g, grads),
                                  min(CHECK_ROWS, shape[0]))
    _chosen(detail, workload.program, args, side.options)
    return measured


def _checked_and_timed(timer, ours, peers: dict, detail: dict, error_of, bits_of, bits_rows: int) -> Measured:
    """tileprim's call checked on its first results (``error_of``: the error against the oracle,
    ``bits_of``: against the CPU backend's bits), then timed; each peer checked by ``error_of`` and
    timed. A peer that fails is n/a with the reason (in ``detail["n/a"]``); where tileprim fails,
    the peers are still measured and the reason is the note."""
    tolerance, missing = detail["tolerance"], detail["n/a"]
    ours_ms, note = None, None
    try:
        start = time.perf_counter()
        results = ours()  # traces, plans and compiles; the check runs on this first result
        detail["first_call_s"] = time.perf_counter() - start
        error = error_of(results)
        detail.update(oracle=None if math.isnan(error) else error, oracle_ok=error <= tolerance,
                      bits=bits_of(results), bits_rows=bits_rows)
        del results
        ours_ms = timer(ours)
    except Exception as e:  # not yet on this backend, a refused tile: the peers are still measured
        # a DispatchError says what was refused on its first line and why on its second
        lines = [text.strip() for text in str(e).splitlines() if text.strip()]
        note, detail["tileprim_error"] = f"{type(e).__name__}: {' '.join(lines[:2])}", str(e)
    baselines, peers_ok = {}, {}
    for name, fn in peers.items():
        try:
            peers_ok[name] = error_of(fn()) <= tolerance
            baselines[name] = timer(fn)
        except Exception as e:
            missing[name] = reason(e)
    detail["peers_ok"] = peers_ok
    if ours_ms and baselines:
        detail["vs_best_peer"] = min(baselines.values()) / ours_ms
    return Measured(ours_ms, baselines, detail, note)


def _case(side, inputs: Inputs, workload: Workload, shape: tuple, dtype: str, per_call: bool = False,
          fastmath: bool = False) -> Case:
    m, n = shape
    # the dtype before any suffix: "exp float32" picks the exp map, not logsumexp
    name = (f"program {workload.name} {m}x{n} {dtype}" + (" host wall time" if per_call else "")
            + (" fastmath" if fastmath else ""))
    return Case(name, "program", lambda: _measure(side, inputs, workload, shape, dtype, per_call, fastmath),
                op=workload.name, dtype=dtype, scope="planner", K=n, shape=shape,
                bytes=workload.bytes(m, n, numpy_dtype(dtype).itemsize))


def _gradient_case(side, inputs: Inputs, workload: Workload, shape: tuple, dtype: str) -> Case:
    m, n = shape
    return Case(f"program {workload.name} fwd+bwd {m}x{n} {dtype}", "program_backward",
                lambda: _measure_gradients(side, inputs, workload, shape, dtype), op=workload.name,
                dtype=dtype, scope="planner", K=n, shape=shape,
                bytes=workload.gradient_bytes(m, n, numpy_dtype(dtype).itemsize))


def program_cases(side, inputs: Inputs, quick: bool = False) -> Tuple[List[Case], dict]:
    """The tile-program cases, and what the run's header says of them.

    Parameters
    ----------
    side : from :func:`side_for`
        GPU: the shapes of ``program_sides.GPU_SHAPES`` against PyTorch, torch.compile and Liger.
        CPU: tiny shapes against NumPy, to run the code paths and checks (the times are no
        claim); the forward + backward cases there run the CPU backend on torch CPU tensors
        beside torch eager (n/a without torch).
    inputs : Inputs
        Holds the inputs of one (shape, dtype) at a time; the workloads of that pair share them
        (the forward + backward cases come after all others, with inputs of their own).
    quick : bool
        A quarter of the rows.

    Returns
    -------
    (list of Case, dict)
    """
    # each workload on both paths: exact (the default) and fastmath=True, beside the same peers
    # each workload exact (the default) on every shape; fastmath=True and forward + backward on the
    # side's shorter list, beside the same peers
    cases = [_case(side, inputs, workload, shape, dtype, fastmath=fastmath)
             for shape in side.shapes(quick) for dtype in DTYPES for workload in WORKLOADS
             for fastmath in ((False, True) if shape in side.extra_shapes(quick) else (False,))]
    rmsnorm = next(w for w in WORKLOADS if w.name == "rmsnorm")
    cases += [_case(side, inputs, rmsnorm, SMALL_SHAPE, dtype, per_call=True) for dtype in DTYPES]
    cases += [_gradient_case(side, inputs, workload, shape, dtype)
              for shape in side.extra_shapes(quick) for dtype in DTYPES for workload in GRADIENT_WORKLOADS]
    header = {"program_timing": side.timer.describe(), "program_small_timing": side.small_timer.describe(),
              "program_tolerance": TOLERANCE, "program_tolerance_fastmath": TOLERANCE_FASTMATH,
              "program_bits_rows": CHECK_ROWS,
              "program_backward_tolerance": GRADIENT_TOLERANCE}
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
                             "'bfloat16', 'x16384', 'host wall', 'fwd+bwd'")
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
