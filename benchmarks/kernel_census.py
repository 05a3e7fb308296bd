"""What each benchmarked kernel compiles to, read without a GPU: registers, local memory and SASS
instructions per thread, per kernel, for sm_90a (or --target). The kernels: the tile programs of
the benchmark (softmax, RMSNorm, add+RMSNorm and logsumexp, float32 and bfloat16, rows of 4096 and
16384, at the scope the planner chooses for each staging, held in registers, staged in shared memory or streamed),
the standalone maps (exp, sqrt, silu, add, fma on tiles of 8 as the benchmark runs them, and a
thread's 1024 slots a chunk at a time), the standalone reductions (sum and max at thread, warp,
warpgroup and CTA scope, rows short enough to be staged and long enough to be read in place or
streamed through the warps' windows) and one kernel per other way the frame stages an operand.

    python benchmarks/kernel_census.py                       # the table
    python benchmarks/kernel_census.py --json before.json    # ... and kept
    python benchmarks/kernel_census.py --compare before.json # ... beside an earlier run

benchmarks/results/kernel-census-sm_90a-bbc55ac.json is the census before the frame's loops moved
into device templates (bbc55ac), the one to --compare against.

`instructions` counts the kernel's SASS instructions (NOPs aside): static, so a loop counts once;
`per element` divides them by the elements of one block's tiles (tiles per block x a tile's
elements, inputs and outputs alike). `sass` is a digest of the instruction text (addresses and
encodings aside): the same digest, the same machine code. Needs NVRTC and cuobjdump (CUDA's, on
PATH or under $CUDA_HOME/bin, or Triton's copy), not a GPU."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import ml_dtypes
import numpy as np

import tileprim as tp
from tileprim_bench import program_workloads as workloads

ROWS = 64  # tiles in the batch: the kernel does not depend on it (the count is a parameter)
PROGRAM_ROWS = (4096, 16384)
PROGRAM_STAGINGS = ("registers", "shared", "streamed")
MAP_OPS = {"exp": 1, "sqrt": 1, "silu": 1, "add": 2, "fma": 3}
DTYPES = ("float32", "bfloat16")


def numpy_dtype(dtype: str):
    return ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)


def values(shape, dtype: str, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 1.5, shape).astype(numpy_dtype(dtype))


# a name, its lowering, and the elements one tile reads and writes (a row the batch shares aside)
Case = Tuple[str, Callable[[], "tp.Kernel"], int]


def program_cases(target: str) -> Iterator[Case]:
    for workload in workloads.WORKLOADS:
        for n in PROGRAM_ROWS:
            for dtype in DTYPES:
                x = values((ROWS, n), dtype)
                args = workload.arguments(x, values((ROWS, n), dtype, 1), values((n,), dtype, 2))
                for staging in PROGRAM_STAGINGS:  # no scope named: the planner's best for the staging
                    program = tp.program(workload.program._fn, staging=staging)
                    name = f"program {workload.name} {n} {dtype} {staging}"
                    elements = (workload.rows_in + workload.rows_out) * n + workload.values_out
                    yield name, (lambda p=program, a=args: tp.lower(p, *a, batch_dims=1, target=target)), elements


def map_cases(target: str) -> Iterator[Case]:
    for dtype in DTYPES:
        for op, arity in MAP_OPS.items():
            arrays = [values((1 << 12, 8), dtype, k) for k in range(arity)]
            yield f"map {op} {dtype} 8/thread", (lambda o=op, a=arrays: tp.lower(getattr(tp, o), *a, batch_dims=1,
                                                                                  target=target)), 8 * (arity + 1)
    for dtype in DTYPES:  # a thread's many slots, mapped a chunk at a time
        arrays = [values((256, 1024), dtype, k) for k in range(3)]
        yield f"map fma {dtype} 1024/thread", (lambda a=arrays: tp.lower(
            tp.fma, *a, batch_dims=1, target=target)), 4 * 1024


def spread(scope, k: int):
    """Rows of k spread over the scope's threads in runs (a warpgroup's lanes are 128)."""
    axis = tp.tx if scope.kind == "cta" else tp.laneid
    return tp.S[(scope.threads, k // scope.threads):(1 @ axis, 1)]


# (scope, row length, spread over the threads in runs): staged through the block's skewed area (a
# whole row per thread too, or shared at CTA scope by default), straight from global memory, read
# in place (1001: runs no 16-byte vector divides) or streamed through the warps' windows
REDUCTIONS = [(tp.thread, k, False) for k in (8, 128, 1000, 1001)] + \
             [(tp.warp, 128, False)] + [(tp.warp, k, True) for k in (128, 1024, 8192)] + \
             [(tp.warpgroup, k, True) for k in (1024, 16384)] + \
             [(tp.cta(256), k, False) for k in (1024, 32768)] + [(tp.cta(256), k, True) for k in (4096, 32768)]


def reduction_cases(target: str) -> Iterator[Case]:
    for op in ("sum", "max"):
        for scope, k, spreads in REDUCTIONS:
            name = f"{op} K={k} {scope.kind if scope.kind != 'cta' else f'cta({scope.threads})'}"
            options = {}
            if spreads:
                name += " runs"
                options = {"layout": spread(scope, k), "dispatch": "local" if scope.kind == "warp" else "cross_warp"}
            x = values((ROWS, k), "float32")
            yield name, (lambda o=op, s=scope, x=x, kw=options: tp.lower(
                getattr(s, o), x, axes=-1, batch_dims=1, target=target, **kw)), k + 1


@tp.program(scope=tp.cta(256))
def scaled(x, w):  # w: the batch's one row, read where it lies
    return x * w


@tp.program(scope=tp.warp)
def centred(x):  # a warp's rows through a shared tile between steps, instances synced by barriers
    return x - tp.max(x, axes=-1, keepdims=True)


@tp.program(scope=tp.cta(64))
def through_shared(x, w):  # the block's run of shared tiles, the batch's one tile, the body's own, an input returned
    s = tp.sum(tp.copy(x, storage="shared"), axes=-1, storage="shared", keepdims=True)
    return x - s + tp.sum(w, axes=-1, storage="shared", keepdims=True), x


@tp.program(scope=tp.cta(64))
def doubled(x):  # a register input returned as it is
    return x + x, x


def other_cases(target: str) -> Iterator[Case]:
    """One kernel per other way the frame stages an operand or syncs its instances."""
    x = values((ROWS, 16, 256), "float32")
    yield "sum shared row-major cta(32)", lambda: tp.lower(tp.cta(32).sum, x, axes=-1, batch_dims=1, storage="shared",
                                                           target=target), 16 * 257
    t = values((ROWS, 64, 64), "float32")
    yield "sum shared column-major cta(64)", lambda: tp.lower(
        tp.cta(64).sum, t, axes=-1, batch_dims=1, layout=tp.S[(64, 64):(1, 64)], target=target), 64 * 65
    r = values((ROWS, 8, 32), "float32")
    yield "add where it lies warp", lambda: tp.lower(tp.add, r, r, batch_dims=1, scope=tp.warp,
                                                     layout=tp.S[(8, 32):(1, 1 @ tp.laneid)], target=target), 3 * 256
    yield "program scaled broadcast row cta(256)", lambda: tp.lower(
        scaled, values((ROWS, 4096), "float32"), values((4096,), "float32"), batch_dims=1, target=target), 2 * 4096
    yield "program centred warp", lambda: tp.lower(centred, values((ROWS, 64), "float32"), batch_dims=1,
                                                   target=target), 2 * 64
    yield "program centred cta(64)", lambda: tp.lower(centred, values((ROWS, 64), "float32"), batch_dims=1,
                                                      scope=tp.cta(64), target=target), 2 * 64
    yield "program through_shared cta(64)", lambda: tp.lower(
        through_shared, values((ROWS, 256), "float32"), values((256,), "float32"), batch_dims=1, target=target), 3 * 256
    yield "program doubled cta(64)", lambda: tp.lower(doubled, values((ROWS, 256), "float32"), batch_dims=1,
                                                      target=target), 3 * 256


def cuobjdump() -> str:
    found = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    for root in filter(None, (os.environ.get("CUDA_HOME"), "/usr/local/cuda")):
        found = found or (os.path.join(root, "bin", "cuobjdump") if os.path.exists(os.path.join(root, "bin", "cuobjdump"))
                          else None)
    if not found:
        try:
            import triton
            bundled = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
            found = bundled if os.path.exists(bundled) else None
        except ImportError:
            pass
    if not found:
        sys.exit("kernel_census: no cuobjdump (set CUOBJDUMP, or put CUDA's bin on PATH)")
    return found


INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


def sass_instructions(cubin: bytes, tool: str) -> List[str]:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([tool, "-sass", f.name], check=True, capture_output=True, text=True).stdout
    # branch targets are addresses: one instruction more or less before them changes every later one
    lines = [re.sub(r"0x[0-9a-f]+", "#", m.group(1)) if m.group(1).split()[0].startswith(("BRA", "BSSY", "CALL", "RET"))
             else m.group(1) for m in INSTRUCTION.finditer(text)]
    return [line for line in lines if not line.startswith("NOP")]


def census(kernel, elements: int, tool: str) -> Dict[str, object]:
    sass = sass_instructions(kernel.cubin, tool)
    elements *= kernel.tiles_per_block
    return {"registers": kernel.registers, "local_bytes": kernel.local_bytes, "shared_bytes": kernel.shared_bytes,
            "block_threads": kernel.block_threads, "tiles_per_block": kernel.tiles_per_block,
            "instructions": len(sass), "per_element": len(sass) / max(elements, 1),
            "sass": hashlib.sha256("\n".join(sass).encode()).hexdigest()[:10]}


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="sm_90a")
    parser.add_argument("--only", default="", help="kernels whose name contains this")
    parser.add_argument("--json", help="write the census here")
    parser.add_argument("--compare", help="an earlier census (--json) to show beside this one")
    parser.add_argument("--sources", help="write each kernel's CUDA source into this folder")
    args = parser.parse_args(argv)
    tool = cuobjdump()
    before = json.load(open(args.compare)) if args.compare else {}
    rows: Dict[str, Dict[str, object]] = {}
    header = f"{'kernel':58} {'regs':>4} {'local':>5} {'instr':>6} {'/elem':>8} {'sass':>10}"
    print(header + ("   before: regs instr  /elem  same sass" if before else ""))
    for name, lower, elements in (*program_cases(args.target), *map_cases(args.target), *reduction_cases(args.target),
                        *other_cases(args.target)):
        if args.only not in name:
            continue
        try:
            kernel = lower()
            row = census(kernel, elements, tool)
        except (tp.DispatchError, ValueError) as e:  # a staging this row does not take
            print(f"{name:58} refused: {str(e).splitlines()[0][:80]}")
            continue
        rows[name] = row
        if args.sources:
            os.makedirs(args.sources, exist_ok=True)
            with open(os.path.join(args.sources, re.sub(r"[^\w.-]+", "_", name) + ".cu"), "w") as f:
                f.write(kernel.source)
        line = (f"{name:58} {row['registers']:>4} {row['local_bytes']:>5} {row['instructions']:>6} "
                f"{row['per_element']:>8.3f} {row['sass']:>10}")
        old = before.get(name)
        if old:
            worse = row["registers"] > old["registers"] or row["instructions"] > old["instructions"]
            line += (f"   {old['registers']:>4} {old['instructions']:>6} {old['per_element']:>6.3f}  "
                     f"{'yes' if old['sass'] == row['sass'] else 'no '}{'  WORSE' if worse else ''}")
        print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
