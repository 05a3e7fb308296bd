"""``python -m tileprim``: help, info, and ``show`` drawing a layout written as text, where the
text is read by a walker that knows only the layout syntax, never by eval."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import tileprim as tp
from tileprim import R, S, TileLayout, laneid, warpid
from tileprim._layout.text import LayoutTextError, parse_layout

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=None):
    """The CLI in a fresh interpreter that imports this same tileprim (PYTHONPATH made absolute,
    since the test may run it from another directory)."""
    env = dict(os.environ)
    paths = [str(pathlib.Path(tp.__file__).resolve().parent.parent)]
    paths += [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return subprocess.run([sys.executable, "-m", "tileprim", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=env)


def test_help_and_no_command_print_usage_and_exit_zero():
    for args in (["--help"], []):
        proc = run_cli(*args)
        assert proc.returncode == 0, proc.stderr
        assert "usage: python -m tileprim" in proc.stdout
        assert all(command in proc.stdout for command in ("demo", "info", "show", "bench"))


def test_info_prints_a_summary_and_json_on_request():
    proc = run_cli("info")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"tileprim {tp.__version__}"
    assert lines[1].startswith(f"default backend: {tp.info()['default_backend']}")
    for start in ("driver: ", "NVRTC: ", "NCCL: ", "kernel cache: ", "ops:", "variants:"):
        assert any(line.startswith(start) for line in lines), start
    assert any("sum, max, min" in line for line in lines) and "{" not in proc.stdout
    proc = run_cli("info", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["backends"]["cpu"] == "available"


@pytest.mark.parametrize("command", ["demo", "info", "show", "bench"])
def test_every_command_describes_itself(command):
    proc = run_cli(command, "--help")
    assert proc.returncode == 0, proc.stderr
    usage, description = proc.stdout.split("\n\n")[:2]
    assert usage.startswith("usage:") and len(description.split()) >= 12, proc.stdout


def test_bench_finds_the_suite_of_its_own_checkout_from_any_directory(tmp_path):
    """The suite is found beside the package's own files, not in the working directory: a checkout
    laid out here (python/tileprim, a copy of the package under test, installed or not, and this
    repository's benchmarks/ and pyproject.toml beside it) run from a directory of its own."""
    checkout = tmp_path / "checkout"
    shutil.copytree(pathlib.Path(tp.__file__).resolve().parent, checkout / "python" / "tileprim",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "benchmarks").symlink_to(ROOT / "benchmarks", target_is_directory=True)
    (checkout / "pyproject.toml").symlink_to(ROOT / "pyproject.toml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTHONPATH=str(checkout / "python"))
    proc = subprocess.run([sys.executable, "-m", "tileprim", "bench", "--backend", "cpu", "--list", "--only", "K=128 "],
                          capture_output=True, text=True, timeout=120, cwd=elsewhere, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "sum K=128 thread" in proc.stdout.splitlines()


def test_an_installed_package_says_where_the_benchmarks_are(tmp_path):
    """The benchmark suite is not installed with tileprim: a copy of the package with no checkout
    around it says where the suite lives, whatever options ``bench`` is given (also when run from a
    checkout: the working directory is never searched), and its help says so too."""
    site = tmp_path / "site"
    shutil.copytree(pathlib.Path(tp.__file__).resolve().parent, site / "tileprim",
                    ignore=shutil.ignore_patterns("__pycache__"))

    def run_installed(*args):
        env = dict(os.environ, PYTHONPATH=str(site))
        return subprocess.run([sys.executable, "-m", "tileprim", *args], capture_output=True, text=True,
                              timeout=120, cwd=ROOT, env=env)
    assert run_installed("info", "--json").returncode == 0  # the copy imports
    for args in (["bench"], ["bench", "--quick", "--only", "sum"]):
        proc = run_installed(*args)
        said = " ".join(proc.stderr.split())
        assert proc.returncode == 2 and "not installed with tileprim" in said, proc.stderr
        assert "benchmarks/ of its source checkout" in said and "python benchmarks/run.py" in said
    proc = run_installed("bench", "--help")
    assert proc.returncode == 0 and "benchmarks/ of its source checkout" in " ".join(proc.stdout.split())
    proc = run_installed("info", "--quick")  # other commands still refuse what they do not take
    assert proc.returncode == 2 and "unrecognized arguments: --quick" in proc.stderr


def test_show_keeps_labels_on_a_large_layout_when_asked(tmp_path):
    layout = "S[(32, 64) : (1@laneid, 1)]"   # 2048 cells: colour only unless asked
    def texts(name):
        return [t.text for t in ET.parse(tmp_path / name).getroot().iter("{http://www.w3.org/2000/svg}text")]
    for labels, name in (("auto", "auto.svg"), ("on", "on.svg"), ("off", "off.svg")):
        proc = run_cli("show", layout, "--labels", labels, "-o", name, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    assert texts("on.svg").count("r63") == 32 and "lane 31" in texts("on.svg")
    assert "r63" not in texts("auto.svg") and "r63" not in texts("off.svg")
    proc = run_cli("show", "S[8, 8]", "--labels", "maybe", cwd=tmp_path)
    assert proc.returncode == 2 and "--labels" in proc.stderr


def test_show_writes_a_parseable_svg_and_prints_its_path(tmp_path):
    out = tmp_path / "warp.svg"
    proc = run_cli("show", "S[(32, 8) : (1@laneid, 1)] + R[4:1@warpid]", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out)
    root = ET.parse(out).getroot()
    cells = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class", "").startswith("cell")]
    assert len(cells) == 256


def test_show_defaults_to_layout_svg_and_takes_shape_and_swizzle(tmp_path):
    proc = run_cli("show", "S[8, 8]", "--swizzle", "0,3,3", "--shape", "64", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    svg = (tmp_path / "layout.svg").read_text()
    assert "swizzled" in svg and "element (9,) (swizzled): offset 8, bank 8" in svg


def test_a_malicious_layout_is_rejected_without_running(tmp_path):
    proc = run_cli("show", "__import__('os').system('touch pwned')", cwd=tmp_path)
    assert proc.returncode == 2
    assert "a function call at column 1 is not layout syntax" in proc.stderr
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "layout.svg").exists()


@pytest.mark.parametrize("args, message", [
    (["show", "S[8, 8]", "--shape", "3,3"], "has 9 elements but the layout places 64"),
    (["show", "S[8, 8]", "--shape", "a,b"], "expected integers"),
    (["show", "S[8:1:2]"], "a slice other than extents : strides"),
])
def test_bad_arguments_exit_2_with_the_rule(tmp_path, args, message):
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_layout_text_reads_the_layout_syntax():
    assert parse_layout("S[(32, 8) : (1@laneid, 1)] + R[4:1@warpid]") == \
        TileLayout(S[(32, 8):(1 @ laneid, 1)] + R[4:1 @ warpid])
    assert parse_layout("S[8, 4]") == TileLayout(S[8, 4])
    assert parse_layout(" S[(4, 8) : (2, 1)] + 5 + 3@laneid") == TileLayout(S[(4, 8):(2, 1)] + 5 + 3 @ laneid)


@pytest.mark.parametrize("text, found", [
    ("S[8].__class__", "an attribute (.__class__)"),
    ("(lambda: 0)()", "a function call"),
    ("open", "the name 'open'"),
    ("S[8] * 2", "the operator Mult"),
    ("S[1.5]", "the constant 1.5"),
    ("[S[8]][0]", "indexing something other than S or R"),
    ("S[8", "not a layout expression"),
    ("R[8:1]", "TileLayout takes S[...]"),
])
def test_layout_text_rejects_everything_else(text, found):
    with pytest.raises(LayoutTextError) as caught:
        parse_layout(text)
    assert found in str(caught.value)
