"""The tile-program benchmark (benchmarks/programs.py) without a GPU: its --smoke run on one tiny
shape (CPU backend against NumPy, every check), a planted wrong result caught by its oracle, and
its GPU side's code on torch CPU tensors (the peers, torch.compile, Liger n/a where absent).
Times are never checked, only that they are there."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tileprim as tp

import tileprim_bench as bench
from tileprim_bench import programs
from tileprim_bench.program_workloads import WORKLOADS

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHAPE = "100x1024"  # the smoke run's smallest shape: 100 rows (not a power of two) of 1024


def test_the_smoke_run_checks_every_workload_and_dtype_against_the_oracle_and_the_bits(tmp_path):
    path = tmp_path / "programs.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(tp.__file__).resolve().parent.parent),
                                         env.get("PYTHONPATH", "")])
    command = [sys.executable, str(ROOT / "benchmarks" / "programs.py"), "--smoke", "--only", SHAPE, "--json",
               str(path)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(path.read_text())
    header = result["header"]
    assert header["backend"] == "cpu" and header["program_bits_rows"] == programs.CHECK_ROWS
    rows = result["rows"]
    names = [f"program {w.name} {SHAPE} {dtype}" for dtype in programs.DTYPES for w in WORKLOADS]
    assert [row["case"] for row in rows] == names
    printed = [line for line in proc.stdout.splitlines() if line.startswith("program ")]
    assert len(printed) == len(rows)
    for row, line in zip(rows, printed):
        d = row["detail"]
        assert row["note"] is None, row["note"]
        assert d["oracle_ok"] is True and 0 < d["oracle"] <= programs.TOLERANCE[row["dtype"]], row["case"]
        assert d["bits"] == "equal" and d["bits_rows"] == 64
        assert d["peers_ok"] == {"numpy": True}
        assert row["tileprim_ms"] > 0 and row["baselines"]["numpy"] > 0
        assert d["vs_best_peer"] == pytest.approx(row["baselines"]["numpy"] / row["tileprim_ms"])
        itemsize = 4 if row["dtype"] == "float32" else 2
        reads_writes = {"softmax": 2, "rmsnorm": 2, "add_rmsnorm": 4, "logsumexp": 1}[row["op"]]
        weight = 1024 if "rmsnorm" in row["op"] else 0
        values = 100 if row["op"] == "logsumexp" else 0
        assert row["bytes"] == itemsize * (reads_writes * 100 * 1024 + weight + values)
        assert line.startswith(row["case"]) and "oracle ok" in line and "bits equal" in line


def test_a_wrong_result_fails_the_oracle_and_the_bits(monkeypatch):
    """A program that is off by one bfloat16 step in one element is caught twice."""
    side = programs.side_for(bench.NumpyLibrary())
    softmax = next(w for w in WORKLOADS if w.name == "softmax")
    x, r, w = side.inputs((70, 1024), "float32")
    args = softmax.arguments(x, r, w)
    good = softmax.program(*args, batch_dims=1, backend="cpu", scope=programs.scope_for(1024, "float32"))
    assert programs._worst_error(side, softmax, args, (good,), "float32") <= programs.TOLERANCE["float32"]
    bad = good.copy()
    bad[69, 1000] *= 1 + 2 ** -8
    assert programs._worst_error(side, softmax, args, (bad,), "float32") > programs.TOLERANCE["float32"]
    bad = good.copy()
    bad[3, 7] = np.nextafter(bad[3, 7], np.float32(1))
    scope = programs.scope_for(1024, "float32")
    assert programs._bits(side, softmax, args, (bad,), scope) == "1 of 65536 differ"
    with pytest.raises(ValueError, match=r"shape \(70,\) float32; expected \(70, 1024\)"):
        programs._worst_error(side, softmax, args, (good[:, 0],), "float32")


def test_the_gpu_side_on_torch_cpu_tensors_runs_the_peers_and_says_why_one_is_missing():
    """What runs on the GPU, on the CPU: PyTorch eager, torch's rms_norm and torch.compile, each
    checked against the oracle; Liger n/a with the reason where it cannot be imported or run."""
    torch = pytest.importorskip("torch")
    from tileprim_bench.cases import Inputs
    from tileprim_bench.timing import HostWallTimer, WallTimer
    lib = bench.GpuLibrary(torch)
    side = programs._GpuSide(lib, device="cpu")
    side.timer, side.small_timer = WallTimer(3), HostWallTimer(lambda: None, 3, 2)
    rmsnorm = next(w for w in WORKLOADS if w.name == "rmsnorm")
    measured = programs._measure(side, Inputs(lambda: None), rmsnorm, (70, 1024), "float32", per_call=False)
    d = measured.detail
    assert measured.note is None and measured.tileprim_ms > 0
    assert d["oracle_ok"] is True and d["bits"] == "equal"
    assert set(measured.baselines) == {"torch", "torch rms_norm", "torch.compile"}
    assert d["peers_ok"] == {"torch": True, "torch rms_norm": True, "torch.compile": True}
    assert set(d["n/a"]) == {"liger"} and d["n/a"]["liger"]
    x, _, _ = side.inputs((3, 5), "bfloat16")  # the GPU result's bits come to NumPy as ml_dtypes' bfloat16
    host = side.host(x)
    assert host.dtype.name == "bfloat16" and np.array_equal(host.astype(np.float32), x.float().numpy())
