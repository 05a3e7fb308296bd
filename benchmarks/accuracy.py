"""Measure the accuracy of tileprim's one-operand maps on the CPU backend (which gives the GPU's
bits) and print the table the op table's ``max_ulp`` and the README's accuracy table come from;
with ``--fastmath``, on a GPU, the errors of the approximations fastmath=True runs, written as the
package's fastmath_errors.json (tp.op_table()[op]["fastmath"] reads it).

    python benchmarks/accuracy.py --exhaustive         # as in the op table (~15 min on 2 cores)
    python benchmarks/accuracy.py --samples 65536 --ops exp,silu
    python benchmarks/accuracy.py --fastmath --json fastmath_errors.json   # on a GPU: then copy the
                                                       # file over python/tileprim/fastmath_errors.json

Every float16/bfloat16 input is checked for correct rounding; float64 uses a tenth of the samples
(mpmath is the oracle there). ``--fastmath``: every 16-bit input, 2^24 float32 samples, against
float64. Needs mpmath."""
import argparse
import json
import math
import sys

import tileprim as tp
from tileprim_bench.accuracy import OPS, exhaustive_float32, fastmath_table, table


def exact_table(args) -> None:
    dtypes = ("float32", "float64", "float16", "bfloat16")
    results = table(args.samples, args.seed, args.ops.split(","), dtypes)
    if args.exhaustive:
        for op, row in results.items():
            row["float32"] = exhaustive_float32(op)
    print("| op | " + " | ".join(dtypes) + " |")
    print("|---|" + "---|" * len(dtypes))
    for op, row in results.items():
        cells = []
        for d in dtypes:
            r = row[d]
            if r.not_correctly_rounded is not None:
                wrong = f"{r.not_correctly_rounded} of {r.inputs} inputs wrong, max {r.max_ulp:.3f}"
                cells.append("correctly rounded" if r.not_correctly_rounded == 0 else wrong)
            else:
                cells.append(f"{r.max_ulp:.3f}")
        print(f"| {op} | " + " | ".join(cells) + " |")
    print("\nop table (max_ulp float32, float64: rounded up to 2 decimals with a margin of 0.01 for the "
          "inputs not checked; worst inputs):")
    for op, row in results.items():
        up = [math.ceil((row[d].max_ulp + 0.01) * 100) / 100 for d in ("float32", "float64")]
        f32, f64 = row["float32"], row["float64"]
        print(f"  {op}: {up[0]:.2f}, {up[1]:.2f}   worst at x = {f32.worst_input!r} (float32), "
              f"{f64.worst_input!r} (float64); inputs {f32.inputs}, {f64.inputs}")


def fastmath(args) -> None:
    """The approximations' table on this GPU; --json writes it as fastmath_errors.json."""
    if tp.info()["backends"]["cuda"] != "available":
        sys.exit(f"--fastmath measures the GPU's approximations: the CUDA backend is {tp.info()['backends']['cuda']}")
    samples = args.samples if args.samples != 1 << 20 else 1 << 24
    results = fastmath_table(samples, args.seed)
    device = tp.info()["devices"][0]["name"]
    print(f"fastmath=True on {device}: max error in ulps where the result is normal (max absolute error); "
          "flushed = subnormal results that came out 0")
    print("| op | float32 | float16 | bfloat16 |\n|---|---|---|---|")
    for op, row in results.items():
        cells = [f"{r.max_ulp:.3g} ({r.max_abs:.3g}), worst at {r.worst_input!r}"
                 + (f", {r.flushed} flushed" if r.flushed else "")
                 + (f", {r.overflow_edge} at the overflow edge" if r.overflow_edge else "")
                 + (f", {r.wrong_specials} WRONG SPECIALS" if r.wrong_specials else "") for r in row.values()]
        print(f"| {op} | " + " | ".join(cells) + " |")
    if args.json:
        data = {"about": "The max error of each fastmath=True approximation, measured on a GPU by "
                         "benchmarks/accuracy.py --fastmath (every float16 and bfloat16 input, 2^24 float32 "
                         "samples, against float64); tp.op_table()[op]['fastmath'] reads it. max_ulp: where the "
                         "result is a normal number; max_abs: over every finite result; fdiv: a division by one "
                         "value. An op or dtype missing here is 'not measured'.",
                "device": device, "tileprim": tp.__version__,
                "ops": {op: {d: r.row() for d, r in row.items()} for op, row in results.items()}}
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        print(f"written: {args.json} (copy it over python/tileprim/fastmath_errors.json)")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1 << 20,
                        help="random float32 inputs per op (float64: a tenth; --fastmath: 2^24)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--exhaustive", action="store_true",
                        help="float32 also over every input of the binades where each op's error is largest "
                             "(tileprim_bench.accuracy._EXHAUSTIVE; minutes per op)")
    parser.add_argument("--fastmath", action="store_true",
                        help="on a GPU: the errors of the approximations fastmath=True runs")
    parser.add_argument("--json", metavar="PATH", help="--fastmath: write the table as fastmath_errors.json")
    args = parser.parse_args()
    fastmath(args) if args.fastmath else exact_table(args)


if __name__ == "__main__":
    main()
