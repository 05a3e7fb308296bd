"""``python -m tileprim bench`` on the CPU backend: the rows it writes, a refused case recorded
as n/a, the progress lines without tqdm, the command line. Timings are only checked to be
positive and consistent with each other, never against a speed."""
import doctest
import json
import math
import os
import pathlib
import re
import subprocess
import sys

import pytest

import tileprim as tp
from tileprim.__main__ import main as cli

import tileprim_bench as bench
from tileprim_bench.cases import CPU_KS, FASTMATH_MAPS, MAP_DTYPES, MAPS, NORMAL_MAPS, REDUCTIONS, reduction_cases

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """The whole quick CPU suite, once: its JSON and what it printed."""
    path = tmp_path_factory.mktemp("bench") / "bench.json"
    capture = tmp_path_factory.mktemp("bench") / "stdout.txt"
    with open(capture, "w") as out:
        saved, sys.stdout = sys.stdout, out
        try:
            status = cli(["bench", "--quick", "--backend", "cpu", "--json", str(path)])
        finally:
            sys.stdout = saved
    assert status == 0
    return json.loads(path.read_text()), capture.read_text()


def rows_by_name(result):
    return {row["case"]: row for row in result["rows"]}


def test_the_json_has_every_throughput_case_with_times_bandwidth_and_ratios(quick_run):
    result, _ = quick_run
    header = result["header"]
    assert header["backend"] == "cpu" and header["options"]["quick"] is True
    assert header["tileprim"] == tp.__version__ and header["elements_per_input"] == 1 << 16
    rows = rows_by_name(result)
    expected = [f"{op} K={k} thread" for k in CPU_KS for op in REDUCTIONS]
    expected += [f"{op} {dtype}{suffix}" for dtype in MAP_DTYPES for op in MAPS
                 for suffix in (("", " fastmath") if op in FASTMATH_MAPS else ("",))
                 + ((" normal",) if op in NORMAL_MAPS else ())]
    assert set(FASTMATH_MAPS) == {"exp", "log2", "silu", "sigmoid"}  # each with its exact row, then its fastmath row
    assert NORMAL_MAPS == ("silu", "sigmoid")  # and then its row on standard normal values
    assert [name for name in rows if rows[name]["kind"] == "throughput"] == expected
    for name in expected:
        row = rows[name]
        assert row["note"] is None, (name, row["note"])
        assert row["tileprim_ms"] > 0 and set(row["baselines"]) == {"numpy"} and row["baselines"]["numpy"] > 0
        assert row["ratio"] == pytest.approx(row["tileprim_ms"] / row["baselines"]["numpy"])
        assert row["ratios"] == {"numpy": row["ratio"]} and row["best_baseline"] == "numpy"
        assert math.isfinite(row["ratio"]) and row["ratio"] > 0
        assert row["tileprim_GBps"] == pytest.approx(row["bytes"] / row["tileprim_ms"] / 1e6)
    k32 = rows["max K=32 thread"]
    assert (k32["op"], k32["dtype"], k32["scope"], k32["K"]) == ("max", "float32", "thread", 32)
    assert k32["shape"] == [(1 << 16) // 32, 32] and k32["bytes"] == ((1 << 16) + (1 << 16) // 32) * 4
    fma = rows["fma bfloat16"]
    assert fma["bytes"] == 4 * (1 << 16) * 2 and fma["shape"] == [(1 << 16) // 8, 8]


def test_the_small_calls_and_kernel_rows(quick_run):
    result, _ = quick_run
    rows = rows_by_name(result)
    small = [row for row in rows.values() if row["kind"] == "latency"]
    assert [row["case"] for row in small] == ["small: tp.plan of a 4x8 row sum (cpu)",
                                              "small: 4x8 row sum, backend='cpu'"]
    for row in small:
        assert row["tileprim_ms"] > 0 and row["baselines"]["numpy"] > 0 and row["ratio"] > 0
        assert row["bytes"] is None and row["tileprim_GBps"] is None
    kernel = [row for row in rows.values() if row["kind"] == "kernel"]
    assert len(kernel) == 3
    if tp.info()["nvrtc"]["ok"]:
        cold, disk, hit = kernel
        assert cold["detail"]["origin"] == "compiled" and disk["detail"]["origin"] == "disk"
        assert all(row["tileprim_ms"] > 0 for row in kernel)
        assert cold["detail"]["lower_ms"] >= cold["tileprim_ms"]
    else:
        assert all(row["tileprim_ms"] is None and "needs NVRTC" in row["note"] for row in kernel)


def test_the_table_has_a_line_per_case_with_its_ratio(quick_run):
    result, printed = quick_run
    lines = printed.splitlines()
    for row in result["rows"]:
        (found,) = [line for line in lines if re.match(re.escape(row["case"]) + r"\s{2,}", line)]
        if row["kind"].startswith("program"):  # the ratio to the fastest peer (test_bench_programs.py)
            if row["ratio"] is not None:
                assert f"{1 / row['ratio']:.2f}x best peer" in found
        elif row["ratio"] is not None:
            assert f"({row['ratio']:.2f})" in found
    assert sum(line.startswith("== ") for line in lines) == 5


def test_a_refused_case_is_recorded_as_na_and_the_run_goes_on(tmp_path, capsys):
    s = bench.suite("cpu", quick=True)
    # a thread cannot hold a row of 8192 in its registers; a row of 8 is fine
    s.cases = reduction_cases(s.lib, s.inputs, s.timer, 1 << 13, ks=(8192, 8), ops=("sum",))
    path = tmp_path / "refused.json"
    result = bench.run(s, json_path=str(path))
    refused, fine = result["rows"]
    assert refused["case"] == "sum K=8192 thread" and refused["tileprim_ms"] is None
    assert refused["note"].startswith("ValueError: ") and "register" in refused["note"]
    assert "\n" not in refused["note"] and refused["baselines"] == {} and refused["ratio"] is None
    assert fine["case"] == "sum K=8 thread" and fine["tileprim_ms"] > 0 and fine["ratio"] > 0
    assert json.loads(path.read_text())["rows"][0]["note"] == refused["note"]
    assert "sum K=8192 thread  tileprim n/a: ValueError: " in capsys.readouterr().out


def test_without_tqdm_progress_is_one_line_per_case_on_stderr(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `from tqdm import tqdm` raises ImportError
    assert cli(["bench", "--quick", "--backend", "cpu", "--only", "sqrt", "--only", "K=4 "]) == 0
    out, err = capsys.readouterr()
    names = ["sum K=4 thread", "max K=4 thread", "min K=4 thread", "sqrt float32", "sqrt float16",
             "sqrt bfloat16"]
    assert err.splitlines() == [f"[{i}/{len(names)}] {name}" for i, name in enumerate(names, 1)]
    printed = [line.split("  tileprim ")[0].strip() for line in out.splitlines() if "  tileprim " in line]
    assert printed == names


def test_with_tqdm_the_table_still_goes_to_stdout(capsys):
    pytest.importorskip("tqdm")
    assert cli(["bench", "--quick", "--backend", "cpu", "--only", "exp float32"]) == 0  # exact and fastmath
    out, err = capsys.readouterr()
    assert re.search(r"^exp float32\s{2,}tileprim", out, re.M) and "exp float32 fastmath  tileprim" in out
    assert "2/2" in err


def test_list_only_and_usage_errors(capsys):
    assert cli(["bench", "--backend", "cpu", "--list", "--only", "K=128 "]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed == ["sum K=128 thread", "max K=128 thread", "min K=128 thread"]
    with pytest.raises(SystemExit) as exit_:
        cli(["bench", "--backend", "cpu", "--only", "no such case"])
    assert exit_.value.code == 2 and "no case matches" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no case name contains"):
        bench.run(bench.suite("cpu", quick=True), only=["no such case"])
    if tp.info()["backends"]["cuda"] != "available":
        with pytest.raises(SystemExit) as exit_:
            cli(["bench", "--backend", "cuda"])
        assert exit_.value.code == 2
        assert "--backend cuda: the CUDA backend is unavailable" in capsys.readouterr().err


def test_benchmarks_run_py_is_the_same_command(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(tp.__file__).resolve().parent.parent),
                                         env.get("PYTHONPATH", "")])
    path = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--backend", "cpu",
                           "--only", "add float32", "--json", str(path)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "add float32  tileprim" in proc.stdout
    assert [row["case"] for row in json.loads(path.read_text())["rows"]] == ["add float32"]


def test_the_docstring_examples_run():
    results = doctest.testmod(bench, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert results.attempted > 0 and results.failed == 0
