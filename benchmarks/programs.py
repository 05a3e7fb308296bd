"""The tile-program benchmark from a checkout: softmax, RMSNorm, residual-add + RMSNorm and
logsumexp as tile programs beside torch, torch.compile, torch's rms_norm and Liger, TB/s, ratio to
the best peer and correctness checked in the same run (benchmarks/tileprim_bench/programs.py).

    python benchmarks/programs.py [--quick] [--only TEXT] [--json PATH] [--list]
    python benchmarks/programs.py --smoke     # no GPU: CPU backend against NumPy, tiny shapes

The same cases run inside ``python -m tileprim bench --only program``.
"""
import sys

from tileprim_bench.programs import main

if __name__ == "__main__":
    sys.exit(main())
