"""The cost model's constants against what was measured: the 4-GPU H200 lease of 2026-11-28
(benchmarks/treduce.py, one process and cuda_ipc, float32, root 0; latency per call in
microseconds, the median of 5 batches of back-to-back calls). Automatic dispatch must take an
algorithm within 5 % of the fastest measured one at every point, and the model must say how
long each measured algorithm takes closely enough that its choice rests on more than luck. The
chain's points were taken with its first kernel (since reworked: chain.cuh), so they calibrate
nothing; where the model takes the chain it must expect it well ahead of every measured
alternative, so that the unmeasured kernel has room to fall short of its model."""
import pytest

from test_treduce_chain import KiB, MiB, estimates, modelled_plan

SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB, 256 * MiB]
# (gpus, transport) -> algorithm -> latency at each of SIZES
MEASURED = {
    (2, ""): {"root_pull": [16.1, 15.8, 16.1, 61.2, 195.5, 736.1]},
    (4, ""): {"root_pull": [18.4, 16.2, 29.4, 154.2, 556.1, 2163.2],
              "scatter_gather": [23.8, 24.3, 23.8, 102.8, 298.1, 1066.1]},
    (2, "cuda_ipc"): {"root_pull": [28.0, 26.5, 26.2, 61.1, 202.2, 743.3]},
    (4, "cuda_ipc"): {"root_pull": [35.6, 35.6, 34.3, None, None, None]},  # auto took the chain from 16 MiB
}
POINTS = [pytest.param(gpus, transport, i, id=f"{gpus}gpus-{transport or 'one_process'}-{SIZES[i] // KiB}KiB")
          for (gpus, transport), times in MEASURED.items() for i in range(len(SIZES))
          if any(t[i] is not None for t in times.values())]
MARGIN = 0.03  # the model's simpler_margin


def measured_at(gpus, transport, i) -> dict:
    return {a: t[i] for a, t in MEASURED[(gpus, transport)].items() if t[i] is not None}


@pytest.mark.parametrize("gpus,transport,i", POINTS)
def test_the_model_tells_the_measured_algorithms_times_apart(gpus, transport, i):
    """Each measured algorithm's estimate within 20 % of its time (the host floors at small sizes
    are the loosest), so the model ranks them as they ran."""
    times = estimates(modelled_plan(gpus, SIZES[i], transport))
    for algorithm, us in measured_at(gpus, transport, i).items():
        assert abs(times[algorithm] - us) <= 0.2 * us, (algorithm, times[algorithm], us)


@pytest.mark.parametrize("gpus,transport,i", POINTS)
def test_dispatch_takes_an_algorithm_within_5_percent_of_the_fastest_measured(gpus, transport, i):
    plan = modelled_plan(gpus, SIZES[i], transport)
    times, measured = estimates(plan), measured_at(gpus, transport, i)
    fastest = min(measured.values())
    if plan.variant == "chain":
        # its kernel is new: the model must expect it well ahead of everything measured
        assert times["chain"] <= 0.8 * fastest, (times, measured)
    else:
        assert plan.variant in measured and measured[plan.variant] <= 1.05 * fastest, (plan.variant, measured)


def test_the_chain_is_taken_on_four_gpus_from_16_mib_and_nowhere_on_two():
    for transport in ("", "cuda_ipc"):
        assert [modelled_plan(2, b, transport).variant for b in SIZES] == ["root_pull"] * 6
        assert [modelled_plan(4, b, transport).variant for b in SIZES][3:] == ["chain"] * 3


def test_a_simpler_algorithm_within_the_margin_is_taken_and_says_so():
    """2 ranks x 256 MiB: the chain's estimate is a hair below root_pull's (both one tensor over a
    link), and root_pull, measured there at 1.02x NCCL, is taken."""
    plan = modelled_plan(2, 256 * MiB)
    times = estimates(plan)
    assert times["chain"] < times["root_pull"] <= times["chain"] * (1 + MARGIN), times
    assert plan.variant == "root_pull"
    (entry,) = [e for e in plan.trace if e.variant == "chain"]
    assert any("cost model expects root_pull as fast (within 3%, and simpler)" in r for r in entry.reasons), entry.reasons
