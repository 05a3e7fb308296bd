"""The seeds' demonstration programs, as `python -m tileprim demo` runs them."""
import io
import subprocess
import sys

import numpy as np

import tileprim as tp
from tileprim import demo


def test_each_seed_program_chooses_its_variant_and_matches_numpy():
    rng = np.random.default_rng()
    chosen = []
    for title, variant, fn, args, kwargs, expected, scale, tol in demo.programs(rng):
        plan = tp.plan(fn, *args, **kwargs)
        chosen.append(plan.variant)
        assert plan.variant == variant, title
        assert demo.relative_error(fn(*args, **kwargs), expected, scale) <= tol, title
    assert chosen == ["local", "shared", "sm100_packed", "reg"]


def test_demo_prints_choices_reasons_and_checks():
    buf = io.StringIO()
    assert demo.main(out=buf) == 0
    text = buf.getvalue()
    assert text.count("-> PASS") == 4 and "FAIL" not in text
    assert "declined sm100_packed (priority 20):" in text
    assert "reduction_len: reduction_len 4 < 8" in text
    assert "group_size = 8" in text
    assert text.count("the variant this program demonstrates") == 4 and "NOT" not in text
    assert "seed" not in text.lower(), "user-facing words are the specification's, not the file names"
    assert "specification" not in text, "a newcomer's first output speaks of algorithms, not of documents"


def test_demo_says_once_whether_a_gpu_runs_it():
    buf = io.StringIO()
    demo.main(out=buf)
    text = buf.getvalue()
    if tp.info()["backends"]["cuda"] == "available":
        assert "No usable CUDA GPU" not in text and "CUDA backend" in text
    else:
        assert text.count("No usable CUDA GPU here (") == 1
        assert "everything runs on the CPU backend, which executes the same algorithm step for step" in text


def test_python_m_tileprim_demo_exits_zero():
    proc = subprocess.run([sys.executable, "-m", "tileprim", "demo"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "all programs match NumPy" in proc.stdout
