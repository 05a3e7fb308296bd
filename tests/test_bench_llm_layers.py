"""benchmarks/llm_layers.py without a GPU (--smoke): every layer forward and forward + backward,
tileprim (the CPU backend; with fastmath=True too) beside torch eager, each checked against float64 in the run; Liger and
torch.compile n/a with their reasons."""
import json

import pytest

torch = pytest.importorskip("torch")
llm_layers = pytest.importorskip("llm_layers")  # benchmarks/ is on sys.path (conftest)


def test_the_layer_benchmark_runs_and_checks_on_the_cpu(tmp_path, capsys):
    out = tmp_path / "layers.json"
    assert llm_layers.main(["--smoke", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["case"].split()[:2] for r in rows] == [[name, mode] for name in llm_layers.SMOKE_SHAPES
                                                    for mode in ("fwd", "fwd+bwd")]
    for row in rows:
        ours, fast, eager = row["sides"]["tileprim"], row["sides"][llm_layers.FAST], row["sides"]["torch"]
        assert ours["ok"] and eager["ok"] and ours["ms"] > 0 and "ratio" in row, row
        assert fast["ok"] and fast["ms"] > 0 and "ratio fastmath" in row, row  # the CPU: the exact functions
        assert "n/a" in row["sides"]["liger"] and "n/a" in row["sides"]["torch.compile"]
    assert "ratio" in capsys.readouterr().out
