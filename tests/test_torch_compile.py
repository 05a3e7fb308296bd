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


@pytest.mark.parametrize("dynamic", [None, True, False])
def test_new_batch_sizes_run_with_dynamos_dynamic_shapes(rng, dynamic):
    """A new batch size runs under fullgraph whatever ``dynamic`` says: with Dynamo's dynamic shapes
    (automatic after a second shape, or dynamic=True) one graph serves every batch size, the op's and
    the program's alike; a new tile shape compiles again (the tile dims are specialised). Results and
    gradients are the eager bits each time (a gradient summed over the batch, w's, is summed in an
    order made for the batch size: that backward is specialised on it)."""
    program = tp.program(lambda a, w: tp.exp(a - tp.max(a, axes=-1, keepdims=True)) * w)

    def fn(x, w):
        return tp.sum(x, axes=-1, batch_dims=1), program(x, w, batch_dims=1)
    shapes = ((6, 10), (3, 10), (9, 10), (5, 12))
    torch._dynamo.reset()
    counters.clear()
    f = torch.compile(fn, fullgraph=True, dynamic=dynamic, backend="aot_eager")
    for rows, cols in shapes:
        x, w = torch.from_numpy(random_tile(rng, (rows, cols), "float64")), torch.from_numpy(rng.uniform(-2, 2, cols))
        for g, e in zip(f(x, w), fn(x, w)):
            torch.testing.assert_close(g, e, rtol=0, atol=0, equal_nan=True)
    assert not counters["graph_break"]
    # dynamic=False: a graph per shape; dynamic: the first, the dynamic batch, the new tile shape
    assert counters["stats"]["unique_graphs"] == {False: 4, None: 3, True: 2}[dynamic]
    for rows, cols in shapes:
        x = torch.from_numpy(random_tile(rng, (rows, cols), "float64")).requires_grad_()
        w = torch.from_numpy(rng.uniform(-2, 2, cols)).requires_grad_()
        got, want = f(x, w), fn(x, w)
        grads = [torch.autograd.grad(sum(r.sum() for r in results), (x, w)) for results in (got, want)]
        for g, e in zip((*got, *grads[0]), (*want, *grads[1])):
            torch.testing.assert_close(g, e, rtol=0, atol=0, equal_nan=True)
    assert not counters["graph_break"]


class _Settings:
    batch_dims, scope = 1, tp.cta(64)


def test_ints_read_off_objects_under_dynamic_true(rng):
    """dynamic=True traces an int read off an object as a symbol: a scope's threads, batch_dims kept
    on a settings object, a program's own number are made constants of the graph."""
    program = tp.program(lambda a: a * tp.sum(a))

    def fn(x):
        return (tp.sum(x, axes=-1, batch_dims=_Settings.batch_dims, scope=_Settings.scope),
                program(x, batch_dims=_Settings.batch_dims, scope=_Settings.scope))
    torch._dynamo.reset()
    f = torch.compile(fn, fullgraph=True, dynamic=True)
    for rows in (5, 3):
        x = torch.from_numpy(random_tile(rng, (rows, 64), "float32"))
        for g, e in zip(f(x), fn(x)):
            assert torch.equal(g.view(torch.int32), e.view(torch.int32))


def test_mark_dynamic_on_the_batch_dim_keeps_one_graph(rng):
    program = tp.program(lambda a: a * tp.rsqrt(tp.sum(a * a) / a.shape[-1] + 1e-6))
    torch._dynamo.reset()
    counters.clear()
    f = torch.compile(lambda x: program(x, batch_dims=1), fullgraph=True)
    for rows in (7, 4, 11):
        x = torch.from_numpy(random_tile(rng, (rows, 16), "float32"))
        torch._dynamo.mark_dynamic(x, 0)
        assert torch.equal(f(x).view(torch.int32), program(x, batch_dims=1).view(torch.int32))
    assert counters["stats"]["unique_graphs"] == 1


def test_gradients_keep_one_graph_for_every_batch_size(rng):
    """dynamic=True with gradients: a map, a program and a gated product with no operand broadcast
    over the batch compile once for every batch size (only a gradient summed over the batch, a
    norm's weight, is made per size), the eager gradients' bits each time."""
    import tileprim.nn as tpnn
    program = tp.program(lambda a: tp.exp(a - tp.max(a, axes=-1, keepdims=True)))
    product = tpnn.SiLUMul()
    cases = {"map": lambda x: tp.exp(x), "program": lambda x: program(x, batch_dims=1),
             "module": lambda x: product(x, x)}
    for name, fn in cases.items():
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(fn, fullgraph=True, dynamic=True, backend="aot_eager")
        for rows in (3, 5, 6, 9, 10):
            x = torch.from_numpy(rng.uniform(-3, 3, (rows, 16))).requires_grad_()
            got, want = (torch.autograd.grad(f(x).sum(), x)[0] for f in (compiled, fn))
            assert torch.equal(got, want), name
        assert counters["stats"]["unique_graphs"] == 1, name
