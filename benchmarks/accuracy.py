"""Measure the accuracy of tileprim's one-operand maps on the CPU backend (which gives the GPU's
bits) and print the table the op table's ``max_ulp`` and the README's accuracy table come from.

    python benchmarks/accuracy.py --exhaustive         # as in the op table (~15 min on 2 cores)
    python benchmarks/accuracy.py --samples 65536 --ops exp,silu

Every float16/bfloat16 input is checked for correct rounding; float64 uses a tenth of the samples
(mpmath is the oracle there). Needs mpmath."""
import argparse
import math

from tileprim_bench.accuracy import OPS, exhaustive_float32, table


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1 << 20,
                        help="random float32 inputs per op (float64: a tenth)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--exhaustive", action="store_true",
                        help="float32 also over every input of the binades where each op's error is largest "
                             "(tileprim_bench.accuracy._EXHAUSTIVE; minutes per op)")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
