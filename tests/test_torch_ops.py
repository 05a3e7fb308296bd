"""tileprim ops on torch tensors: torch CPU tensors in and out, the custom ops
(torch.ops.tileprim.*) that autograd and tracing take, their results equal to the direct path
bit for bit, opcheck on every op, and the errors where a gradient would be dropped."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tileprim as tp
from conftest import cuda_usable, random_tile

torch = pytest.importorskip("torch")

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu,
                                           pytest.mark.skipif(not cuda_usable(), reason="no usable CUDA GPU")]),
]
BACKEND = {"cpu": "cpu", "cuda": "cuda"}
UNARY = ("sqrt", "rsqrt", "exp", "exp2", "log", "log2", "reciprocal", "silu", "tanh", "erf", "sigmoid", "zero")
BINARY = ("add", "sub", "mul", "fdiv", "maximum", "eq", "ne", "lt", "le", "gt", "ge")


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


def tensor(rng, shape, dtype="float64", device="cpu", special=True, **kw):
    x = torch.from_numpy(random_tile(rng, shape, dtype if dtype != "bfloat16" else "float32", special, **kw))
    return x.to(getattr(torch, dtype)).to(device)


def calls(rng, device):
    """(op, args, kwargs) for every op on torch tensors: scalars, broadcasting and batches included."""
    b = BACKEND[device]
    x, y, z = (tensor(rng, (3, 5), device=device) for _ in range(3))
    row = tensor(rng, (5,), device=device)
    out = [(op, (x,), dict(batch_dims=1, backend=b)) for op in UNARY]
    out += [(op, (x, y), dict(batch_dims=1, backend=b)) for op in BINARY]
    out += [("add", (x, 1.5), dict(backend=b)), ("fdiv", (-2.0, x), dict(backend=b)),
            ("mul", (x, row), dict(batch_dims=1, backend=b)), ("fma", (x, y, z), dict(backend=b)),
            ("fma", (x, 0.5, row), dict(backend=b)), ("fill", (x, -3.25), dict(backend=b)),
            ("where", (x, y, z), dict(backend=b)), ("where", (x, y, 0.0), dict(batch_dims=1, backend=b)),
            ("cast", (x, "float32"), dict(backend=b)), ("maximum", (x, y), dict(backend=b, propagate_nan=True))]
    for op in ("sum", "max", "min"):
        out += [(op, (x,), dict(batch_dims=1, backend=b)), (op, (x,), dict(axes=(0, 1), backend=b)),
                (op, (x,), dict(axes=0, backend=b)), (op, (x,), dict(batch_dims=1, keepdims=True, backend=b))]
    if device == "cpu":  # copy has no CUDA executor until programs run fused on the GPU (issue 31)
        out += [("copy", (x,), dict(backend=b))]
    return out


def plain_numpy(v):
    return v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v


def test_cpu_tensors_in_give_cpu_tensors_out_with_numpys_bits(rng):
    for op, args, kw in calls(rng, "cpu"):
        got = getattr(tp, op)(*args, **kw)
        expected = getattr(tp, op)(*map(plain_numpy, args), **kw)
        assert isinstance(got, torch.Tensor) and got.device.type == "cpu", op
        np.testing.assert_array_equal(got.numpy(), expected, err_msg=op)


def test_cpu_tensors_of_16_bits_strided_and_into_out(rng):
    x = tensor(rng, (6, 8), "bfloat16")
    r = tp.exp(x[:, ::2], backend="cpu")
    assert r.dtype == torch.bfloat16 and r.shape == (6, 4)
    x_np = x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(r.view(torch.int16).numpy(),
                                  tp.exp(x_np[:, ::2], backend="cpu").view(np.int16))
    out = torch.full((12,), float("nan"), dtype=torch.float16)[::2]
    h = tensor(rng, (6, 4), "float16")
    ret = tp.sum(h, batch_dims=1, out=out, backend="cpu")
    assert ret is out
    np.testing.assert_array_equal(out.numpy(), tp.sum(h.numpy(), batch_dims=1, backend="cpu"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_custom_ops_give_the_direct_paths_bits(rng, device, dtype):
    """requires_grad inputs take torch.ops.tileprim.*; no_grad takes the direct path: the same bits."""
    for op, args, kw in calls(rng, device):
        args = tuple(a.to(getattr(torch, dtype)) if isinstance(a, torch.Tensor) else a for a in args)
        if op == "cast":
            args = (args[0], "float16")
        with torch.no_grad():
            direct = getattr(tp, op)(*args, **kw)
        leaves = tuple(a.detach().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args)
        routed = getattr(tp, op)(*leaves, **kw)
        node = routed.grad_fn
        if kw.get("keepdims"):  # the custom op's result reshaped to keep the reduced dims
            assert type(node).__name__ == "ViewBackward0", op
            node = node.next_functions[0][0]
        assert node is not None and "tileprim" in type(node).__name__, op
        assert not direct.requires_grad
        assert routed.dtype == direct.dtype and routed.shape == direct.shape and routed.device == direct.device
        np.testing.assert_array_equal(routed.detach().cpu().float().numpy(), direct.cpu().float().numpy(),
                                      err_msg=op)


def test_opcheck_passes_for_every_op(rng, device):
    from torch.library import opcheck
    from tileprim._torch.ops import TORCH_OPS
    checked = set()
    for op, args, kw in calls(rng, device):
        if op in checked:
            continue
        checked.add(op)
        # finite positive values: opcheck compares outputs and gradients as numbers (NaN != NaN)
        leaves = tuple(a.detach().nan_to_num(1.0, 8.0, -8.0).abs().add(0.5).requires_grad_()
                       if isinstance(a, torch.Tensor) else a for a in args)
        recorded = []
        real = TORCH_OPS[op]

        class Recorder(torch.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, a=(), k=None):
                if func is real:
                    recorded.append(a)
                return func(*a, **(k or {}))
        with Recorder():
            getattr(tp, op)(*leaves, **kw)
        assert recorded, op
        opcheck(real, recorded[0])
    # the gather ops run as tile programs, whose custom ops test_program_autograd.py checks
    gather = {op for op, spec in tp.op_table().items() if spec["family"] == "gather"}
    assert checked == set(tp._OPS) - gather - ({"copy"} if device != "cpu" else set())


def test_accum_into_out_takes_the_custom_op_with_a_gradient_for_out(rng, device):
    b = BACKEND[device]
    x = tensor(rng, (4, 6), device=device, special=False).requires_grad_()
    for op in ("sum", "max"):
        old = tensor(rng, (4,), device=device, special=False)
        leaf = old.clone().requires_grad_()
        out = leaf.clone()
        r = getattr(tp, op)(x, batch_dims=1, out=out, accum=True, backend=b)
        expected = getattr(tp, op)(x.detach(), batch_dims=1, out=old.clone(), accum=True, backend=b)
        assert r is out
        np.testing.assert_array_equal(r.detach().cpu().numpy(), expected.cpu().numpy())
        r.sum().backward()
        assert leaf.grad is not None


def test_a_gradient_tileprim_cannot_give_is_refused_not_dropped(rng):
    x = tensor(rng, (4, 8), "float32", special=False).requires_grad_()
    with pytest.raises(TypeError, match="treduce: has no backward"):
        tp.comm.treduce(tp.comm.ParallelGroup([x, x.detach()], root=0), tile=(4, 8), backend="cpu")
    assert tp.plan(tp.sum, x, batch_dims=1, backend="cpu").variant in ("local", "shared", "sm100_packed")


def test_a_mix_of_tensors_and_numpy_under_autograd_is_a_type_error(rng):
    x = tensor(rng, (4, 8), special=False).requires_grad_()
    with pytest.raises(TypeError, match="torch tensors or Python scalars"):
        tp.add(x, np.ones((4, 8)), backend="cpu")


def test_an_op_defined_without_a_backward_refuses_a_gradient(rng):
    """The helper a tile program registers its custom op with: no backward given, a requires_grad
    input under grad mode raises instead of a gradient through the ops its impl happens to call."""
    from tileprim._torch.ops import define
    name = f"doubled_{rng.integers(1 << 30)}"
    doubled = define(name, "(Tensor x, str options) -> Tensor", lambda x, o: tp.mul(x, 2.0, backend="cpu"),
                     lambda x, o: torch.empty_like(x))
    x = tensor(rng, (3, 4), special=False)
    np.testing.assert_array_equal(doubled(x, "").numpy(), x.numpy() * 2)
    with pytest.raises(TypeError, match=f"tileprim::{name}: has no backward"):
        doubled(x.requires_grad_(), "")
    with torch.no_grad():
        assert not doubled(x, "").requires_grad


def test_torch_operands_refuse_a_numpy_out_as_numpy_operands_refuse_a_tensor_out():
    a = torch.ones(4, 8)
    with pytest.raises(TypeError, match="out: expected a torch CPU tensor for torch operands, not ndarray"):
        tp.sum(a, axes=-1, out=np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="out: expected a NumPy array for NumPy operands"):
        tp.sum(a.numpy(), axes=-1, out=torch.zeros(4))
    out = torch.zeros(4)
    assert tp.sum(a, axes=-1, out=out) is out and torch.equal(out, torch.full((4,), 8.0))


def test_an_out_torch_would_not_write_is_refused_and_left_alone(device):
    """out= that requires grad with no input that does (autograd would not see the write), and an
    inference tensor outside inference mode: refused as torch refuses them, out untouched."""
    x = torch.ones(4, 8, device=device)
    program = tp.program(lambda a: a * 2)
    leaf = torch.full((4, 8), 7.0, device=device, requires_grad=True)
    for call in (lambda: tp.exp(x, out=leaf), lambda: program(x, batch_dims=1, out=leaf)):
        with pytest.raises(ValueError, match=r"out: requires grad, and no input does"):
            call()
    with torch.inference_mode():
        frozen = torch.full((4, 8), 7.0, device=device)
    with pytest.raises(ValueError, match=r"out: an inference tensor is written in place only inside"):
        tp.exp(x, out=frozen)
    assert (leaf == 7).all() and (frozen == 7).all()
    with torch.no_grad():
        tp.exp(x, out=leaf)
    with torch.inference_mode():
        tp.exp(x, out=frozen)
    assert torch.equal(leaf.detach(), frozen)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_tensors_whose_memory_is_not_their_dense_values_are_refused_by_name():
    dense = torch.randn(4, 8)
    cases = [(dense.to_sparse(), r"torch.sparse_coo tensors are not supported"),
             (torch.nested.nested_tensor([torch.randn(3), torch.randn(4)]), r"nested tensors are not supported"),
             (torch.randn(4, dtype=torch.complex64).conj(), r"dtype complex64 is not supported"),
             (torch.empty(4, 8, device="meta"), r"src: a Tensor NumPy cannot read as an array")]
    for x, message in cases:
        for _ in range(2):  # the second call meets the first one's memo
            tp.exp(dense)
            with pytest.raises(TypeError, match=message):
                tp.exp(x)
