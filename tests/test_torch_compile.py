"""torch.compile(fullgraph=True) over functions that call tileprim ops: one graph holding
torch.ops.tileprim.*, no graph break, no recompilation for new values, results equal to eager
bit for bit, and autograd through the compiled function. Few compiled cases: compiling is slow."""
from __future__ import annotations

import numpy as np
import pytest

import tileprim as tp
from conftest import cuda_usable, random_tile
from tileprim import S, TileLayout, laneid

torch = pytest.importorskip("torch")
from torch._dynamo.utils import counters  # noqa: E402

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu,
                                           pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]),
]
LANES = TileLayout(S[(32, 8): (1 @ laneid, 1)])


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


def softmax_like(x, w, backend):
    m = tp.max(x, batch_dims=1, backend=backend)
    e = tp.exp(tp.sub(x, m.unsqueeze(-1), backend=backend), backend=backend)
    s = tp.cta(32).sum(e, batch_dims=1, backend=backend)
    y = tp.fma(tp.fdiv(e, s.unsqueeze(-1), backend=backend), w, 0.5, batch_dims=1, backend=backend)
    lanes = tp.warp.sqrt(tp.fill(x[:32], 2.0, backend=backend), layout=LANES, backend=backend)
    return tp.cast(y, "float16", backend=backend), s, lanes


def inputs(rng, device):
    x = torch.from_numpy(rng.standard_normal((64, 8)).astype(np.float32) * 4).to(device)
    x[3, 2], x[5, 0] = float("nan"), -float("inf")
    return x, torch.from_numpy(rng.standard_normal(8).astype(np.float32)).to(device)


@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_one_graph_no_break_no_recompile_eager_bits(rng, device, compiler):
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(softmax_like, fullgraph=True, backend=compiler)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(3):
            x, w = inputs(rng, device)
            got, expected = compiled(x, w, device), softmax_like(x, w, device)
            for g, e in zip(got, expected):
                assert g.dtype == e.dtype and g.device == e.device
                np.testing.assert_array_equal(g.cpu().float().numpy(), e.cpu().float().numpy())
    assert not counters["graph_break"]
    assert counters["stats"]["unique_graphs"] == 1


def test_the_graph_holds_tileprims_custom_ops(rng):
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    torch._dynamo.reset()
    x, w = inputs(rng, "cpu")
    torch.compile(softmax_like, fullgraph=True, backend=keep)(x, w, "cpu")
    targets = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert [t for t in targets if t.startswith("tileprim.")] == [
        "tileprim.max.default", "tileprim.sub.default", "tileprim.exp.default", "tileprim.sum.default",
        "tileprim.fdiv.default", "tileprim.fma.default", "tileprim.fill.default", "tileprim.sqrt.default",
        "tileprim.cast.default"]


def test_autograd_through_a_compiled_function(rng, device):
    torch._dynamo.reset()

    def loss(x, w):
        return tp.sum(tp.mul(tp.silu(x, backend=device), w, batch_dims=1, backend=device), batch_dims=1,
                      backend=device)
    x = torch.from_numpy(rng.uniform(-3, 3, (16, 8))).to(device).requires_grad_()
    w = torch.from_numpy(rng.uniform(-3, 3, 8)).to(device).requires_grad_()
    got = torch.autograd.grad(torch.compile(loss, fullgraph=True, backend="aot_eager")(x, w).sum(), (x, w))
    expected = torch.autograd.grad(loss(x, w).sum(), (x, w))
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_a_second_shape_compiles_its_own_graph_with_dynamic_false(rng):
    """Each op and program signature is specialised on its shapes (docs/interop.md): with
    dynamic=False a second shape recompiles and runs, the eager bits each time."""
    program = tp.program(lambda a: tp.exp(a - tp.max(a, axes=-1, keepdims=True)))
    f = torch.compile(lambda x: (tp.sum(x, axes=-1, batch_dims=1), program(x, batch_dims=1)), fullgraph=True,
                      dynamic=False)
    for rows in (6, 3):
        x = torch.from_numpy(random_tile(rng, (rows, 10), "float32"))
        got, want = f(x), (tp.sum(x, axes=-1, batch_dims=1), program(x, batch_dims=1))
        assert all(torch.equal(g.view(torch.int32), w.view(torch.int32)) for g, w in zip(got, want))
