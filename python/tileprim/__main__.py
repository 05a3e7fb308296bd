"""``python -m tileprim``: run four small programs, one per tile variant (``demo``), say what this
installation can do (``info``), draw a layout as an SVG picture (``show``), or time tileprim
against PyTorch/CuPy on a GPU or NumPy on the CPU (``bench``: the benchmark suite of the source
checkout this package is imported from, which ``pip install`` leaves out)."""
from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import re
import sys
from typing import Callable, List, Optional

BENCHMARKS_ELSEWHERE = ("the benchmarks are not installed with tileprim: they live in benchmarks/ of its "
                        "source checkout (benchmarks/tileprim_bench). Run this command with tileprim imported from "
                        "a checkout (PYTHONPATH=python, or pip install -e .), or there: python benchmarks/run.py")

SHOW_EXAMPLES = """examples:
  python -m tileprim show "S[(32, 8) : (1@laneid, 1)]" -o warp_rows.svg
  python -m tileprim show "S[8:1] + R[32:1@laneid]"
  python -m tileprim show "S[8, 8]" --swizzle 0,3,3
  python -m tileprim show "S[(32, 8) : (1@laneid, 1)] + R[4:1@warpid]" --shape 8,32 --labels on"""


def _integers(text: str, what: str) -> tuple:
    parts = [p for p in re.split(r"[,x×\s()]+", text) if p]
    if not parts or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"{what} {text!r}: expected integers separated by commas, e.g. 32,8")
    return tuple(int(p) for p in parts)


def _shape(text: str) -> tuple:
    return _integers(text, "shape")


def _swizzle(text: str):
    from ._layout.value import Swizzle
    numbers = _integers(text, "swizzle")
    if len(numbers) not in (2, 3):
        raise argparse.ArgumentTypeError(f"swizzle {text!r}: expected per_element,swizzle_len[,atom_len], "
                                         "e.g. 0,3,3")
    return Swizzle(*numbers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tileprim",
        description="tileprim: GPU tile primitives with a dispatch registry, NVRTC-compiled CUDA kernels "
                    "and a CPU backend that runs the same algorithms step for step.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser(
        "demo", help="run four small programs, one per tile variant, and check them against NumPy",
        description="Run four small programs, one for each tile variant (a thread's register sum, a CTA's "
                    "shared-memory row sums, Blackwell's packed sum modelled on sm_100a, a warp's sqrt), on "
                    "the GPU when one is usable, else on the CPU backend. For each: the call, the variant "
                    "dispatch chose and why the others declined, and the result checked against NumPy "
                    "(float64). Exit status 0 when every result matches.").set_defaults(run=_demo)
    info = commands.add_parser(
        "info", help="say what this installation can do: backends, GPUs, NVRTC, NCCL, kernel cache",
        description="Say what this installation can do: the backends (and why CUDA is unavailable, where "
                    "each library was looked for), the GPUs, NVRTC, NCCL, the kernel cache, the ops and "
                    "their variants. --json prints tp.info() as JSON.")
    info.add_argument("--json", action="store_true", help="print tp.info() as JSON")
    info.set_defaults(run=_info)
    show = commands.add_parser(
        "show", help="draw a layout as an SVG picture", epilog=SHOW_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Draw LAYOUT, written in the layout syntax, as an SVG grid: each cell coloured by the "
                    "thread that holds it and labelled with thread and register, or, for a layout without "
                    "thread axes (shared memory), coloured by 4-byte bank, labelled with its offset and "
                    "bank, bank conflicts marked.")
    show.add_argument("layout", metavar="LAYOUT", help='e.g. "S[(32, 8) : (1@laneid, 1)] + R[4:1@warpid]"')
    show.add_argument("--shape", type=_shape, metavar="R,C",
                      help="the logical shape to draw (default: the layout's own); same number of elements")
    show.add_argument("--swizzle", type=_swizzle, metavar="M,B[,S]",
                      help="a shared-memory swizzle: per_element, swizzle_len, atom_len (default 3)")
    show.add_argument("--dtype", metavar="DTYPE",
                      help="element type for shared-memory banks (default float32)")
    show.add_argument("--labels", choices=("auto", "on", "off"), default="auto",
                      help="text in every cell: auto (up to 1024 cells), on (any size), off (colour only)")
    show.add_argument("-o", "--output", default="layout.svg", metavar="FILE.svg",
                      help="where to write the picture (default layout.svg)")
    show.set_defaults(run=lambda args: _show(args, show.error))
    bench = commands.add_parser(
        "bench", help="time tileprim against PyTorch and CuPy on a GPU (against NumPy without one): "
                      "GB/s, ratios, optionally JSON",
        description="Time tileprim beside PyTorch (which makes the inputs) and CuPy (where installed) with "
                    "CUDA events: row sum/max/min for K in 4..8192 at thread, warp and cta(32/128/256) "
                    "scope, sqrt/exp/add/fma in float32/float16/bfloat16 on 1 GiB inputs, then small-call "
                    "latencies, cold compile and disk-cache load. Without a GPU: the CPU backend against "
                    "NumPy, wall-clock timed. Ratios are tileprim's time over the baseline's (below 1: "
                    "tileprim is faster).")
    suite = _benchmark_suite()
    if suite is None:
        bench.epilog = BENCHMARKS_ELSEWHERE
        bench.set_defaults(run=lambda args: bench.error(BENCHMARKS_ELSEWHERE), takes_any_options=True)
    else:
        suite.add_arguments(bench)
        bench.set_defaults(run=lambda args: suite.run_from_args(args, bench.error))
    return parser


def _benchmark_suite():
    """The benchmark suite (``tileprim_bench``) of the source checkout this package is imported
    from (python/tileprim beside benchmarks/), else None: an installed package has none beside it.
    Found from the package's own files, never the working directory: the suite measures the
    tileprim that imports it."""
    if "tileprim_bench" in sys.modules:  # imported already (the tests, benchmarks/run.py)
        return sys.modules["tileprim_bench"]
    root = pathlib.Path(__file__).resolve().parents[2]
    suite = root / "benchmarks" / "tileprim_bench"
    if not ((root / "pyproject.toml").is_file() and (suite / "__init__.py").is_file()):
        return None
    spec = importlib.util.spec_from_file_location("tileprim_bench", suite / "__init__.py",
                                                  submodule_search_locations=[str(suite)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["tileprim_bench"] = module  # its modules import each other by this name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["tileprim_bench"]
        raise
    return module


def _demo(args) -> int:
    from .demo import main as demo
    return demo()


def _info(args) -> int:
    from ._platform.info import info, info_text
    print(json.dumps(info(), indent=2) if args.json else info_text(info()))
    return 0


def _show(args, fail: Callable[[str], None]) -> int:
    from ._layout.text import LayoutTextError, parse_layout
    from ._layout.value import TileLayout
    try:
        layout = parse_layout(args.layout)
    except LayoutTextError as e:
        fail(f"LAYOUT {args.layout!r}: {e}")
    if args.swizzle is not None:
        layout = TileLayout(layout, swizzle=args.swizzle)
    try:
        layout.draw(args.shape, args.output, dtype=args.dtype,
                    labels={"auto": None, "on": True, "off": False}[args.labels])
    except (TypeError, ValueError) as e:
        fail(str(e))
    except OSError as e:
        print(f"python -m tileprim show: cannot write {args.output}: {e.strerror}", file=sys.stderr)
        return 1
    print(args.output)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "takes_any_options", False):  # bench without its suite says where it is
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_help()
        return 0
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
