"""The benchmark suite from a checkout: the same as ``python -m tileprim bench`` (see
benchmarks/tileprim_bench/, or ``--help``).

    python benchmarks/run.py [--quick] [--backend cpu|cuda] [--only TEXT] [--list] [--json PATH]
"""
import sys

from tileprim_bench import main

if __name__ == "__main__":
    sys.exit(main())
