"""The tile-program benchmark (benchmarks/programs.py) without a GPU: its --smoke run on one tiny
shape (CPU backend against NumPy, every check; the forward + backward cases on torch CPU tensors
where torch is installed), a planted wrong result or gradient caught by its oracle, the gradients'
oracle against torch's float64 autograd, the case names, and its GPU side's code on torch CPU
tensors (the peers, torch.compile, Liger n/a where absent), forward and forward + backward.
Times are never checked, only that they are there."""
import importlib.util
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
from tileprim_bench.cases import Inputs
from tileprim_bench.program_sides import CPU_SHAPES, _GpuSide
from tileprim_bench.program_workloads import EPS, GRADIENT_WORKLOADS, WORKLOADS
from tileprim_bench.timing import HostWallTimer, WallTimer

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
    names = [f"program {w.name} {SHAPE} {dtype}{suffix}" for dtype in programs.DTYPES for w in WORKLOADS
             for suffix in ("", " fastmath")]  # each program exact, then with fastmath=True
    backward = [f"program {w.name} fwd+bwd {SHAPE} {dtype}"
                for dtype in programs.DTYPES for w in GRADIENT_WORKLOADS]
    assert [row["case"] for row in rows] == names + backward
    assert header["program_backward_tolerance"] == programs.GRADIENT_TOLERANCE
    printed = [line for line in proc.stdout.splitlines() if line.startswith("program ")]
    assert len(printed) == len(rows)
    for row, line in zip(rows[len(names):], printed[len(names):]):
        check_backward_row(row, line)
    for row, line in zip(rows[:len(names)], printed[:len(names)]):
        d = row["detail"]
        assert row["note"] is None, row["note"]
        assert d["fastmath"] is row["case"].endswith(" fastmath")
        tolerance = (programs.TOLERANCE_FASTMATH if d["fastmath"] else programs.TOLERANCE)[row["dtype"]]
        assert d["oracle_ok"] is True and 0 < d["oracle"] <= tolerance == d["tolerance"], row["case"]
        # the CPU backend runs the exact functions under fastmath: its bits are the exact ones
        assert d["bits"] == ("fastmath, against the exact: equal" if d["fastmath"] else "equal") and d["bits_rows"] == 64
        assert d["peers_ok"] == {"numpy": True}
        assert row["tileprim_ms"] > 0 and row["baselines"]["numpy"] > 0
        assert d["vs_best_peer"] == pytest.approx(row["baselines"]["numpy"] / row["tileprim_ms"])
        itemsize = 4 if row["dtype"] == "float32" else 2
        reads_writes = {"softmax": 2, "rmsnorm": 2, "add_rmsnorm": 4, "logsumexp": 1}[row["op"]]
        weight = 1024 if "rmsnorm" in row["op"] else 0
        values = 100 if row["op"] == "logsumexp" else 0
        assert row["bytes"] == itemsize * (reads_writes * 100 * 1024 + weight + values)
        assert line.startswith(row["case"]) and "oracle ok" in line and "equal" in line


def check_backward_row(row, line):
    """A --smoke forward + backward row: with torch, the CPU backend on the oracle and the CPU
    backend's bits, beside torch eager; without it, n/a with the reason."""
    d = row["detail"]
    assert row["kind"] == "program_backward" and row["shape"] == [100, 1024]
    itemsize = 4 if row["dtype"] == "float32" else 2
    weight = 3 * 1024 if row["op"] == "rmsnorm" else 0  # w read twice, dw written once
    assert row["bytes"] == itemsize * (5 * 100 * 1024 + weight)
    if importlib.util.find_spec("torch") is None:
        assert row["tileprim_ms"] is None and "torch autograd" in row["note"], row["note"]
        assert line.startswith(row["case"]) and "torch autograd" in line
        return
    assert row["note"] is None, row["note"]
    assert d["oracle_ok"] is True, row["case"]
    assert 0 < d["oracle"] <= programs.GRADIENT_TOLERANCE[row["dtype"]] and d["bits"] == "equal"
    assert d["bits_rows"] == 64
    peers = {"torch"} | ({"torch rms_norm"} if row["op"] == "rmsnorm" else set())
    assert d["peers_ok"] == dict.fromkeys(peers, True) and set(row["baselines"]) == peers
    assert set(d["n/a"]) == {"torch.compile", "liger"}
    assert row["tileprim_ms"] > 0 and d["vs_best_peer"] == pytest.approx(min(row["baselines"].values())
                                                                         / row["tileprim_ms"])
    assert line.startswith(row["case"]) and "oracle ok" in line and "bits equal" in line


def test_a_wrong_result_fails_the_oracle_and_the_bits(monkeypatch):
    """A program that is off by one bfloat16 step in one element is caught twice."""
    side = programs.side_for(bench.NumpyLibrary())
    softmax = next(w for w in WORKLOADS if w.name == "softmax")
    x, r, w = side.inputs((70, 1024), "float32")
    args = softmax.arguments(x, r, w)
    good = softmax.program(*args, batch_dims=1, backend="cpu")  # no scope: as the benchmark calls it
    assert programs._worst_error(side, softmax, args, (good,), "float32") <= programs.TOLERANCE["float32"]
    bad = good.copy()
    bad[69, 1000] *= 1 + 2 ** -8
    assert programs._worst_error(side, softmax, args, (bad,), "float32") > programs.TOLERANCE["float32"]
    bad = good.copy()
    bad[3, 7] = np.nextafter(bad[3, 7], np.float32(1))
    assert programs._bits(side, softmax, args, (bad,)) == "1 of 65536 differ"
    with pytest.raises(ValueError, match=r"shape \(70,\) float32; expected \(70, 1024\)"):
        programs._worst_error(side, softmax, args, (good[:, 0],), "float32")


def test_the_gpu_side_on_torch_cpu_tensors_runs_the_peers_and_says_why_one_is_missing():
    """What runs on the GPU, on the CPU: PyTorch eager, torch's rms_norm and torch.compile, each
    checked against the oracle; Liger n/a with the reason where it cannot be imported or run."""
    torch = pytest.importorskip("torch")
    lib = bench.GpuLibrary(torch)
    side = _GpuSide(lib, device="cpu")
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


def gradient_workload(name):
    return next(w for w in GRADIENT_WORKLOADS if w.name == name)


def dry_run_side(torch):
    """The GPU side on torch CPU tensors, timed briefly."""
    side = _GpuSide(bench.GpuLibrary(torch), device="cpu")
    side.timer, side.small_timer = WallTimer(3), HostWallTimer(lambda: None, 3, 2)
    return side


def test_the_gpu_side_runs_forward_and_backward_beside_the_peers_on_torch_cpu_tensors():
    """The forward + backward cases' GPU code, on the CPU: the program's derived backward and each
    peer's (torch eager, torch's rms_norm, torch.compile's) checked against the gradients' oracle,
    tileprim's dx against the CPU backend's bits; Liger n/a with the reason where absent."""
    torch = pytest.importorskip("torch")
    side = dry_run_side(torch)
    rmsnorm, softmax = gradient_workload("rmsnorm"), gradient_workload("softmax")
    measured = programs._measure_gradients(side, Inputs(lambda: None), rmsnorm, (70, 1024), "float32")
    d = measured.detail
    assert measured.note is None and measured.tileprim_ms > 0
    assert d["oracle_ok"] is True and 0 < d["oracle"] <= 1e-5
    assert d["bits"] == "equal" and d["bits_rows"] == 64
    assert d["peers_ok"] == {"torch": True, "torch rms_norm": True, "torch.compile": True}
    assert set(measured.baselines) == {"torch", "torch rms_norm", "torch.compile"}
    assert set(d["n/a"]) == {"liger"} and d["n/a"]["liger"]
    # no scope named: the planner's choice, which the detail records
    x, w, _ = side.gradient_inputs((70, 1024), "float32")
    chosen = tp.plan(rmsnorm.program, x.detach(), w.detach(), EPS, batch_dims=1, backend="cpu")
    assert (d["scope"], d["staging"]) == (chosen.scope, chosen.staging) and d["unit"] == "TB/s"
    assert d["tolerance"] == programs.GRADIENT_TOLERANCE["float32"]
    side.gpu_only = "eager alone here"  # torch.compile once is enough; bfloat16 softmax beside torch eager
    measured = programs._measure_gradients(side, Inputs(lambda: None), softmax, (33, 4096), "bfloat16")
    d = measured.detail
    assert measured.note is None and d["oracle_ok"] is True and d["bits"] == "equal" and d["bits_rows"] == 33
    assert d["oracle"] > 2 ** -12  # one bfloat16 rounding shows
    assert d["peers_ok"] == {"torch": True}
    assert d["n/a"] == {"torch.compile": "eager alone here", "liger": "eager alone here"}


def test_the_gradients_oracle_is_torch_autograd_in_float64():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(3)
    x, dy = (torch.randn(9, 300, generator=g, dtype=torch.float64) for _ in range(2))
    w = torch.rand(300, generator=g, dtype=torch.float64)
    xs = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(xs.softmax(-1), xs, dy)
    (got,) = gradient_workload("softmax").gradients([x], dy)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)
    xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
    want = torch.autograd.grad(xs * (xs * xs).mean(-1, keepdim=True).add(EPS).rsqrt() * ws, (xs, ws), dy)
    rmsnorm = gradient_workload("rmsnorm")
    for got, wanted in zip(rmsnorm.gradients([x, w], dy), want):
        torch.testing.assert_close(got, wanted, rtol=1e-12, atol=1e-14)
    # the NumPy arrays' oracle is the same function
    dw = rmsnorm.gradients([x.numpy(), w.numpy()], dy.numpy())[1]
    np.testing.assert_allclose(dw, want[1].numpy(), rtol=1e-12)


def test_a_wrong_gradient_fails_the_oracle_and_the_bits():
    """One row of dx off by 2^-6, dw off by 1e-4, a NaN: each fails; one ulp in dx fails the bits."""
    torch = pytest.importorskip("torch")
    side = dry_run_side(torch)
    side.options = {"backend": "cpu"}
    rmsnorm = gradient_workload("rmsnorm")
    x, w, g = side.gradient_inputs((70, 1024), "float32")
    args = rmsnorm.arguments(x, None, w)
    dx, dw = torch.autograd.grad(rmsnorm.program(*args, batch_dims=1, backend="cpu"), (x, w), g)
    tolerance = programs.GRADIENT_TOLERANCE["float32"]

    def error(dx, dw):
        return programs._gradient_error(side, rmsnorm, (x, w), g, (dx, dw), "float32")
    assert 0 < error(dx, dw) <= tolerance
    bad = dx.clone()
    bad[69] *= 1 + 2 ** -6
    assert error(bad, dw) > tolerance
    assert error(dx, dw * (1 + 1e-4)) > tolerance
    bad = dx.clone()
    bad[5, 5] = float("nan")
    assert np.isnan(error(bad, dw))
    assert programs._gradient_bits(side, rmsnorm, args, g, (dx, dw)) == "equal"
    bad = dx.clone()
    bad[3, 7] = torch.nextafter(bad[3, 7], torch.tensor(1.0))
    assert programs._gradient_bits(side, rmsnorm, args, g, (bad, dw)) == "1 of 65536 differ"
    with pytest.raises(ValueError, match=r"shape \(1024,\) float32; expected \(70, 1024\)"):
        error(dw, dw)


def test_the_forward_and_backward_cases_are_named_listed_and_selected(capsys):
    assert programs.main(["--smoke", "--list", "--only", "fwd+bwd"]) == 0
    listed = capsys.readouterr().out.split("\n")[:-1]
    assert listed == [f"program {w.name} fwd+bwd {m}x{n} {dtype}" for m, n in CPU_SHAPES
                      for dtype in programs.DTYPES for w in GRADIENT_WORKLOADS]
    with pytest.raises(SystemExit):  # --quick: a quarter of the rows, so no case matches
        programs.main(["--smoke", "--list", "--quick", "--only", "rmsnorm fwd+bwd 24x4096"])
    assert "no case matches" in capsys.readouterr().err
    assert programs.main(["--smoke", "--list", "--quick", "--only", "rmsnorm fwd+bwd 6x4096"]) == 0
    assert capsys.readouterr().out.split() == ["program", "rmsnorm", "fwd+bwd", "6x4096", "float32",
                                               "program", "rmsnorm", "fwd+bwd", "6x4096", "bfloat16"]
    whole = [case for case in bench.suite("cpu", quick=True).cases if case.kind == "program_backward"]
    assert len(whole) == len(CPU_SHAPES) * len(programs.DTYPES) * len(GRADIENT_WORKLOADS)
    assert [case.op for case in whole[:2]] == ["softmax", "rmsnorm"]


def test_without_torch_the_forward_and_backward_cases_are_na_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    s = programs.suite("cpu", quick=True)
    s.cases = [case for case in s.cases if case.name == "program rmsnorm fwd+bwd 25x1024 bfloat16"]
    (row,) = bench.run(s)["rows"]
    assert row["tileprim_ms"] is None and row["baselines"] == {}
    assert row["note"].startswith("ImportError: a program's gradient goes through torch autograd")
