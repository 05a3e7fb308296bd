"""torch.compile with Inductor's on-disk caches (the FX graph cache and AOTAutograd's, on by
default) across processes: a tile program's custom ops are named by what they compute, never by
the order a process met them, and a process that loads a compiled forward and backward from the
cache finds every op and call option they name (the backward's too, which it never traces).
Run as a script, this file is the training step each fresh process compiles."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tileprim as tp  # noqa: E402
from conftest import cuda_usable  # noqa: E402
from tileprim._torch.program_op import op_name  # noqa: E402
import programs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def training_step(seed: int, other_signature_first: bool, device: str) -> dict:
    """Compiles a loss over a softmax and an RMSNorm program and a standalone silu and mul, runs
    its forward and backward, and the same eagerly. other_signature_first: a call of another
    signature first makes this process meet the ops in another order than a plain one does."""
    from torch._dynamo.utils import counters
    from tileprim._torch import program_op
    softmax = tp.program(programs.softmax, scope=tp.warp)
    rmsnorm = tp.program(programs.rmsnorm, scope=tp.warp)
    backend = "cpu" if device == "cpu" else None

    def terms(x, w, g):
        y = softmax(x, batch_dims=1, backend=backend) * rmsnorm(x, w, 1e-6, batch_dims=1, backend=backend)
        y = y + tp.mul(tp.silu(x, backend=backend), w, batch_dims=1, backend=backend)
        return y * g

    def loss(x, w, g):
        return terms(x, w, g).sum()

    if other_signature_first:
        other = np.random.default_rng(seed + 1).standard_normal((3, 20)).astype(np.float32)
        x = torch.from_numpy(other).to(device).requires_grad_()
        rmsnorm(x, torch.ones(20, device=device), 1e-5, batch_dims=1, backend=backend).sum().backward()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((7, 45)).astype(np.float32) * 3
    w = rng.uniform(-1.5, 1.5, 45).astype(np.float32)
    g = rng.standard_normal((7, 45)).astype(np.float32)
    results = {}
    for name, fn in (("compiled", torch.compile(loss, fullgraph=True)), ("eager", loss)):
        xt, wt = (torch.from_numpy(a).to(device).requires_grad_() for a in (x, w))
        value = fn(xt, wt, torch.from_numpy(g).to(device))
        value.backward()
        results[name] = [value.item(), xt.grad.cpu().tolist(), wt.grad.cpu().tolist()]
    with torch.no_grad():  # the sum's terms' magnitude, for the bound on two orders of summing them
        magnitude = terms(*(torch.from_numpy(a).to(device) for a in (x, w, g))).abs().sum().item()
    return dict(results, magnitude=magnitude, terms=x.size,
                counters={k: dict(counters[k]) for k in ("aot_autograd", "inductor")},
                ops=sorted(program_op._NAMED))


def run_step(cache_dir: str, seed: int, other_signature_first: bool, device: str) -> dict:
    # one compile thread: Inductor's pool of compile workers takes longer to start than this
    # step's few kernels take to compile
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir, TORCHINDUCTOR_COMPILE_THREADS="1",
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(tp.__file__)), HERE,
                                           os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, __file__, str(seed), str(int(other_signature_first)), device],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("device", [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu,
                                           pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]),
])
def test_a_second_process_loads_the_compiled_forward_and_backward_from_the_cache(tmp_path, device):
    seed = int(np.random.SeedSequence().entropy % 2**32)
    first = run_step(str(tmp_path), seed, False, device)
    second = run_step(str(tmp_path), seed, True, device)
    assert first["counters"]["aot_autograd"].get("autograd_cache_miss") == 1, first["counters"]
    assert second["counters"]["aot_autograd"].get("autograd_cache_hit") == 1, second["counters"]
    assert second["counters"]["inductor"].get("fxgraph_cache_hit", 0) >= 2, second["counters"]  # fw and bw
    assert "fxgraph_cache_miss" not in second["counters"]["inductor"], second["counters"]
    assert set(first["ops"]) < set(second["ops"])  # the same names, met in another order
    for step in (first, second):
        compiled, eager = step["compiled"], step["eager"]
        # torch's own sum of y * g, in Inductor's order and eager's: each within gamma_n of the terms'
        # magnitude from the exact sum
        gamma = step["terms"] * 2.0 ** -24 / (1 - step["terms"] * 2.0 ** -24)
        assert abs(compiled[0] - eager[0]) <= 2 * gamma * step["magnitude"], (compiled[0], eager[0])
        for got, want in zip(compiled[1:], eager[1:]):  # the gradients: tileprim's, bit for bit
            np.testing.assert_array_equal(np.float32(got), np.float32(want))
        assert np.isfinite(np.float32(compiled[1])).all() and np.abs(np.float32(compiled[2])).max() > 0
    for got, want in zip(second["compiled"][1:], first["compiled"][1:]):
        np.testing.assert_array_equal(np.float32(got), np.float32(want))


def test_a_programs_op_name_is_a_function_of_what_it_computes():
    def name(prog, shape=(3, 40), eps=1e-6, scope=None, fastmath=False, dtype="float32"):
        described = ((dtype, shape, "cpu"), (dtype, shape[-1:], "cpu"), eps)
        return op_name(prog._key, described, 1, scope, "cpu", None, fastmath)[0]
    rmsnorm, again = tp.program(programs.rmsnorm), tp.program(programs.rmsnorm)
    base = name(rmsnorm)
    assert base.startswith("program_rmsnorm_") and base.replace("_", "").isalnum()
    assert name(again) == base  # the same program made twice: one op
    assert name(rmsnorm, shape=(7, 40)) == base  # every batch size: one op (a dynamic batch under torch.compile)
    assert name(rmsnorm, shape=(1, 40)) != base  # but a batch of 1 broadcasts
    assert name(tp.program(programs.rmsnorm, scope=tp.warp)) != base
    others = {name(rmsnorm, shape=(3, 41)), name(rmsnorm, eps=1e-5), name(rmsnorm, scope=tp.cta(64).key),
              name(rmsnorm, fastmath=True), name(rmsnorm, dtype="float64"), base}
    assert len(others) == 6


if __name__ == "__main__":
    print(json.dumps(training_step(int(sys.argv[1]), bool(int(sys.argv[2])), sys.argv[3])))
