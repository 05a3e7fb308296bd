"""SASS instructions per element of the benchmark's kernels, without a GPU: each kernel lowered as
the benchmark calls it (tp.lower, NVRTC, sm_90a by default), its cubin disassembled with cuobjdump
(on PATH, or Triton's copy), and the instructions of its common path counted:

    python benchmarks/sass_counts.py [--target sm_90a] [--only TEXT] [--json PATH]

The common path is the cheapest one from the kernel's entry to an unconditional EXIT, a call
costing its callee's cheapest path to RET and a predicated EXIT never taken (a tile past the
batch); 2-byte global loads and stores count 10 when choosing it, so that where the kernel tests
its rows' alignment the vector path (aligned rows, as the benchmark's) is the one counted. On the
bfloat16 programs of issue 31 this gives what Nsight Compute counted on an H200 (softmax at 16384
30.9 per element against 31.1, logsumexp 26.6 against 26.5). float32 maps and layers stage their
tiles through shared memory, so their rows count that staging too (the arithmetic is in --opcodes).
Each row: the case, both paths
(exact, fastmath), registers, the whole kernel's instructions and the common path's per element."""
from __future__ import annotations

import argparse
import collections
import heapq
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

import numpy as np

import tileprim as tp
from tileprim._arrays.dtypes import numpy_dtype
from tileprim_bench import program_workloads as workloads
from tileprim_bench.cases import MAP_TILE

_LINE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_WIDE_AS = 10  # what a 2-byte global access costs when the common path is chosen

# (program, row length, dtype) and (map, dtype): the rows of issue 45
PROGRAMS = [(w, n, "bfloat16") for w in ("softmax", "logsumexp") for n in (4096, 16384)]
# (the 16-bit maps: float32 maps stage their tiles through shared memory in loops, which a common
# path of one iteration does not count per element)
MAPS = [(op, dtype) for op in ("exp", "exp2", "silu", "log2", "log", "rsqrt", "sigmoid", "tanh") for dtype in ("float16", "bfloat16")]
# the activation layers of issue 48 as maps (tp.layers' programs, float32 inside): layer -> operands
LAYER_ARITY = {"gelu_tanh": 1, "gelu_erf": 1, "silu_mul": 2, "gelu_tanh_mul": 2}
LAYER_MAPS = [(layer, dtype) for layer in LAYER_ARITY for dtype in ("float32", "bfloat16")]


def cuobjdump() -> str:
    """cuobjdump's path: on PATH, or the copy Triton ships."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton
        path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
        if os.path.exists(path):
            return path
    except ImportError:
        pass
    raise SystemExit("cuobjdump: not on PATH and no Triton copy found (the CUDA toolkit's bin/ has it)")


def sass(cubin: bytes) -> List[Tuple[int, str]]:
    """The kernel's instructions as (address, text), callees included."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        out = subprocess.run([cuobjdump(), "-sass", f.name], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    return [(int(m.group(1), 16), m.group(2)) for m in map(_LINE.match, out.splitlines()) if m]


def _opcode(text: str) -> str:
    return text.split()[1] if text.startswith("@") else text.split()[0]


class CommonPath:
    """The common path of a listing: from an address to an unconditional EXIT or RET, through what
    a tile of aligned rows whose values all take the fast forms executes. A conditional branch
    forward over a block that rejoins at its target (an if, a loop's guard) runs the block, but
    for a block of calls that moves no global memory (a rare path kept out of line); one backward (a loop's) falls
    through, so a loop runs once; elsewhere (an if/else, BRA.DIV) the cheaper side."""

    def __init__(self, instructions: List[Tuple[int, str]]):
        self.ins = instructions
        self.index = {a: i for i, (a, _) in enumerate(instructions)}
        self.memo: Dict[int, Tuple[float, collections.Counter]] = {}

    def _target(self, i: int) -> int:
        text = self.ins[i][1]
        op = _opcode(text)
        return self.index[int(re.search(r"0x([0-9a-f]+)", text[text.index(op) + len(op):]).group(1), 16)]

    def _weight(self, op: str) -> float:
        if op.startswith("NOP"):
            return 0
        return _WIDE_AS if re.match(r"(LDG|STG)\.E\.(U16|S16|16)$", op) else 1

    def _rejoins(self, i: int, target: int) -> bool:
        """The block after branch i reaches its target on its own, and is not a rare path: one that
        calls out of line (an IEEE division's slow path, a bundle's exact forms) and moves nothing
        to or from global memory (as a tile's loads, which a tile past the batch skips, do), or calls
        in a loop (an estimated chain's missed slots in turn, each slot's inputs read again)."""
        ops = [_opcode(t) for _, t in self.ins[i + 1:target]]
        loops = any(_opcode(t).startswith("BRA") and self._target(j) <= j
                    for j, (_, t) in enumerate(self.ins[i + 1:target], i + 1))
        if any(op.startswith("CALL") for op in ops) and (loops or not any(op.startswith(("LDG", "STG")) for op in ops)):
            return False
        seen, todo = set(), [i + 1]
        while todo:
            j = todo.pop()
            if j == target:
                return True
            if j in seen or j >= len(self.ins) or j < i:
                continue
            seen.add(j)
            text = self.ins[j][1]
            op = _opcode(text)
            if op in ("EXIT", "RET") and not text.startswith("@"):
                continue
            if op.startswith("BRA"):
                todo.append(self._target(j))
                if text.startswith("@") or op != "BRA":
                    todo.append(j + 1)
            else:
                todo.append(j + 1)
        return False

    def _next(self, i: int) -> List[int]:
        text = self.ins[i][1]
        op, predicated = _opcode(text), text.startswith("@")
        if not op.startswith("BRA"):
            return [i + 1]
        target = self._target(i)
        if op == "BRA" and not predicated:
            return [target]
        if op == "BRA" and (target <= i or self._rejoins(i, target)):
            return [i + 1]
        return [target, i + 1]

    def from_(self, start: int = 0) -> Tuple[float, collections.Counter]:
        """(weight, instructions by opcode) of the common path from instruction ``start``."""
        if start in self.memo:
            return self.memo[start]
        self.memo[start] = (float("inf"), collections.Counter())  # a recursive call: no path
        dist, prev, heap, end = {start: 0.0}, {}, [(0.0, start)], None
        while heap:
            d, i = heapq.heappop(heap)
            if d > dist[i] or i >= len(self.ins):
                continue
            text = self.ins[i][1]
            op = _opcode(text)
            if (op == "EXIT" or op.startswith("RET")) and not text.startswith("@"):
                end = i
                break
            cost = self._weight(op) + (self.from_(self._target(i))[0] if op.startswith("CALL") else 0)
            for j in self._next(i):
                if d + cost < dist.get(j, float("inf")):
                    dist[j], prev[j] = d + cost, i
                    heapq.heappush(heap, (d + cost, j))
        counts: collections.Counter = collections.Counter()
        i = end
        while i is not None:
            op = _opcode(self.ins[i][1])
            if not op.startswith("NOP"):
                counts[op] += 1
            if op.startswith("CALL"):
                counts.update(self.from_(self._target(i))[1])
            i = prev.get(i)
        self.memo[start] = (dist[end] if end is not None else float("inf"), counts)
        return self.memo[start]


def count(kernel, elements_per_thread: int) -> dict:
    """What the row of one lowered kernel reports."""
    listing = sass(kernel.cubin)
    counts = CommonPath(listing).from_(0)[1]
    total = sum(1 for _, text in listing if not _opcode(text).startswith("NOP"))
    path = sum(counts.values())
    return {"registers": kernel.registers, "kernel": total, "path": path,
            "per_element": round(path / elements_per_thread, 2),
            "opcodes": dict(counts.most_common())}


def _scope_threads(scope: str) -> int:
    """The threads of a plan's scope name: cta(256) -> 256, cluster(2x256) -> 512."""
    return int(np.prod([int(v) for v in re.findall(r"\d+", scope)]))


def program_kernels(target: str, only: List[str], paths):
    for name, n, dtype in PROGRAMS:
        case = f"program {name} 32768x{n} {dtype}"
        if only and not any(o in case for o in only):
            continue
        workload = next(w for w in workloads.WORKLOADS if w.name == name)
        x = np.zeros((2, n), numpy_dtype(dtype))
        args = workload.arguments(x, x, x[0])
        # no scope named: the planner's choice, as the benchmark calls it
        scope = tp.plan(workload.program, *args, batch_dims=1, target=target).scope
        threads = {"thread": 1, "warp": 32, "warpgroup": 128}.get(scope) or _scope_threads(scope)
        for fastmath in paths:
            kernel = tp.lower(workload.program, *args, batch_dims=1, target=target, fastmath=fastmath)
            yield case, fastmath, kernel, n // threads


def map_kernels(target: str, only: List[str], paths):
    for op, dtype in MAPS:
        case = f"{op} {dtype}"
        if only and not any(o in case for o in only):
            continue
        x = np.ones((1024, MAP_TILE), numpy_dtype(dtype))
        for fastmath in paths:
            yield case, fastmath, tp.lower(getattr(tp, op), x, batch_dims=1, target=target, fastmath=fastmath), MAP_TILE


def layer_kernels(target: str, only: List[str], paths):
    for layer, dtype in LAYER_MAPS:
        case = f"layer {layer} {dtype}"
        if only and not any(o in case for o in only):
            continue
        x = np.ones((1024, MAP_TILE), numpy_dtype(dtype))
        for fastmath in paths:
            yield case, fastmath, tp.lower(getattr(tp.layers, layer), *(x,) * LAYER_ARITY[layer], batch_dims=1,
                                           target=target, fastmath=fastmath), MAP_TILE


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="sm_90a")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--opcodes", action="store_true", help="also print each common path's opcodes")
    parser.add_argument("--path", choices=("both", "exact", "fastmath"), default="both",
                        help="the kernels of the exact path, of fastmath=True, or both (default)")
    args = parser.parse_args(argv)
    paths = {"both": (False, True), "exact": (False,), "fastmath": (True,)}[args.path]
    rows = []
    print(f"{'case':<36} {'path':<9} {'regs':>4} {'kernel':>7} {'path':>6} {'per element':>11}")
    for kernels in (program_kernels(args.target, args.only, paths), map_kernels(args.target, args.only, paths),
                    layer_kernels(args.target, args.only, paths)):
        for case, fastmath, kernel, per_thread in kernels:
            row = {"case": case, "fastmath": fastmath, "target": args.target, **count(kernel, per_thread)}
            rows.append(row)
            print(f"{case:<36} {'fastmath' if fastmath else 'exact':<9} {row['registers']:>4} {row['kernel']:>7} "
                  f"{row['path']:>6} {row['per_element']:>11}")
            if args.opcodes:
                print("    " + ", ".join(f"{op} {n}" for op, n in row["opcodes"].items()))
            sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
