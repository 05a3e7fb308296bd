"""Repeated treduce calls on torch tensors in one process: once a call signature has been checked,
its repeats are read through DLPack's C exchange table and launched from C++
(_C.RepeatedCollective). They must give the checking path's bits, follow the current streams,
and leave every check that depends on the call's arrays (layout, overlap, dtype) in force."""
import numpy as np
import pytest

import tileprim as tp
from conftest import bits_equal
from test_treduce_gpu import to_host
from treduce_oracle import treduce_reference
from tileprim.comm.one_process import calls

pytestmark = pytest.mark.gpu


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip(f"torch {torch.__version__} publishes no DLPack C exchange table")
    return torch


@pytest.fixture
def no_checking_path(monkeypatch):
    """Calls from here on fail if they reach the checking path."""
    def refuse(*args, **kwargs):
        raise AssertionError("a repeated call took the checking path")
    return lambda: monkeypatch.setattr(calls, "bound_treduce", refuse)


def gpus(torch, nranks: int) -> list:
    count = torch.cuda.device_count()
    return [r % count for r in range(nranks)]


def fill(torch, tensors, values) -> None:
    for t, v in zip(tensors, values):
        t.copy_(torch.from_numpy(v))


@pytest.mark.parametrize("nranks,root", [(2, 0), (2, 1), (3, 2)])
def test_repeats_run_from_cpp_with_fresh_values_and_give_the_cpu_bits(nranks, root, torch, rng, no_checking_path):
    devices = gpus(torch, nranks)
    xs = [torch.empty((37, 300), device=f"cuda:{d}") for d in devices]
    dst = torch.empty((37, 300), device=f"cuda:{devices[root]}")
    group = tp.comm.ParallelGroup(xs, root=root)
    for call in range(4):
        values = [rng.standard_normal((37, 300)).astype(np.float32) for _ in range(nranks)]
        fill(torch, xs, values)
        dst.fill_(float("nan"))
        assert tp.comm.treduce(group, dst, tile=(8, 64), pingpong=True) is dst
        assert bits_equal(to_host(torch, dst, "float32"), treduce_reference(values, root, "sum", None))
        if call == 0:
            no_checking_path()


def test_a_repeat_with_another_layout_or_shape_is_checked_and_bound_afresh(torch, rng, monkeypatch):
    monkeypatch.setattr(calls, "_REPEATED", {})
    devices = gpus(torch, 2)
    values = [rng.standard_normal((64, 48)).astype(np.float32) for _ in range(2)]
    xs = [torch.from_numpy(v).to(f"cuda:{d}") for v, d in zip(values, devices)]
    group = tp.comm.ParallelGroup(xs, root=0)
    expected = treduce_reference(values, 0, "sum", None)
    dense = torch.full((64, 48), float("nan"), device=f"cuda:{devices[0]}")
    transposed = torch.full((48, 64), float("nan"), device=f"cuda:{devices[0]}").t()
    for dst in (dense, transposed, dense, transposed):
        dst.fill_(float("nan"))
        tp.comm.treduce(group, dst, tile=(4, 16))
        assert bits_equal(to_host(torch, dst.contiguous(), "float32"), expected)
    halves = [x[:, :24] for x in xs]  # same dtype and devices, another shape and strides
    out = tp.comm.treduce(tp.comm.ParallelGroup(halves, root=0), dense[:, :24], tile=(4, 16))
    assert bits_equal(to_host(torch, out.contiguous(), "float32"), treduce_reference([v[:, :24] for v in values], 0,
                                                                                    "sum", None))
    # one set of options and array type: one table, holding each signature once
    assert [r.signatures for r in calls._REPEATED.values()] == [3]


def test_a_repeat_whose_dst_overlaps_a_source_raises_and_writes_nothing(torch, rng):
    """Ranks 0 and 1 on one GPU: a dst that overlaps the non-root rank, or part of the root, is
    refused on a repeat as on a first call; dst = the root's tensor (in place) runs."""
    values = [rng.standard_normal((16, 40)).astype(np.float32) for _ in range(2)]
    xs = [torch.from_numpy(v).to("cuda:0") for v in values]
    group = tp.comm.ParallelGroup(xs, root=0)
    dst = torch.empty((16, 40), device="cuda:0")
    for _ in range(2):
        tp.comm.treduce(group, dst, tile=(4, 16))
    with pytest.raises(ValueError, match=r"dst: overlaps tensors\[1\]"):
        tp.comm.treduce(group, xs[1], tile=(4, 16))
    shifted = torch.empty(16 * 40 + 1, device="cuda:0")
    group_shifted = tp.comm.ParallelGroup([shifted[:-1].view(16, 40), xs[1]], root=0)
    for _ in range(2):
        tp.comm.treduce(group_shifted, dst, tile=(4, 16))
    with pytest.raises(ValueError, match="overlaps the root's tensor without being it"):
        tp.comm.treduce(group_shifted, shifted[1:].view(16, 40), tile=(4, 16))
    assert bits_equal(to_host(torch, xs[1], "float32"), values[1])
    for _ in range(3):  # in place: the root's value is the first operand, then it is overwritten
        expected = treduce_reference([to_host(torch, x, "float32") for x in xs], 0, "sum", None)
        tp.comm.treduce(group, xs[0], tile=(4, 16))
        assert bits_equal(to_host(torch, xs[0], "float32"), expected)


def test_a_repeat_with_a_rank_of_another_dtype_raises_as_the_first_call_would(torch, rng):
    devices = gpus(torch, 2)
    xs = [torch.randn((8, 32), device=f"cuda:{d}") for d in devices]
    dst = torch.empty((8, 32), device=f"cuda:{devices[0]}")
    group = tp.comm.ParallelGroup(xs, root=0)
    tp.comm.treduce(group, dst, tile=(4, 16))
    dst.fill_(float("nan"))
    with pytest.raises(TypeError, match=r"tensors\[1\]"):
        tp.comm.treduce(tp.comm.ParallelGroup([xs[0], xs[1].double()], root=0), dst, tile=(4, 16))
    assert torch.isnan(dst).all()


def test_repeats_follow_each_ranks_current_stream(torch, rng):
    """A source written late on a side stream made current is read after that write."""
    devices = gpus(torch, 2)
    xs = [torch.zeros((256, 256), device=f"cuda:{d}") for d in devices]
    dst = torch.empty((256, 256), device=f"cuda:{devices[0]}")
    group = tp.comm.ParallelGroup(xs, root=0)
    sides = [torch.cuda.Stream(device=f"cuda:{d}") for d in devices]
    for _ in range(3):
        values = [rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2)]
        incoming = [torch.from_numpy(v).to(x.device) for v, x in zip(values, xs)]
        for d in set(devices):
            torch.cuda.synchronize(d)
        with torch.cuda.stream(sides[0]), torch.cuda.stream(sides[1]):
            for r, x in enumerate(xs):
                with torch.cuda.device(x.device):
                    torch.cuda._sleep(1_000_000)
                    x.copy_(incoming[r])
            tp.comm.treduce(group, dst, tile=(64, 256))
            with torch.cuda.device(dst.device):
                result = dst.clone()  # on the root's side stream, after the call
        assert bits_equal(to_host(torch, result, "float32"), treduce_reference(values, 0, "sum", None))


def test_tensors_that_need_grad_and_a_list_tile_repeat_with_the_same_bits(torch, rng):
    devices = gpus(torch, 2)
    values = [rng.standard_normal((8, 40)).astype(np.float32) for _ in range(2)]
    xs = [torch.from_numpy(v).to(f"cuda:{d}").requires_grad_() for v, d in zip(values, devices)]
    dst = torch.empty((8, 40), device=f"cuda:{devices[0]}")
    # treduce has no backward: under grad mode it refuses rather than drop the gradient (issue 33)
    with pytest.raises(TypeError, match="treduce: has no backward"):
        tp.comm.treduce(tp.comm.ParallelGroup(xs, root=0), dst, tile=[4, 16])
    with torch.no_grad():
        for tile in ([4, 16], (4, 16), [4, 16]):
            dst.fill_(float("nan"))
            tp.comm.treduce(tp.comm.ParallelGroup(xs, root=0), dst, tile=tile)
            assert bits_equal(to_host(torch, dst, "float32"), treduce_reference(values, 0, "sum", None))
    # a repeat of a signature that ran (its C++ path leaves tensors that need a gradient to the checks)
    plain = [x.detach() for x in xs]
    tp.comm.treduce(tp.comm.ParallelGroup(plain, root=0), dst, tile=(4, 16))
    with pytest.raises(TypeError, match="treduce: has no backward"):
        tp.comm.treduce(tp.comm.ParallelGroup(xs, root=0), dst, tile=(4, 16))
    with pytest.raises(TypeError, match="treduce: has no backward"):
        tp.comm.treduce(tp.comm.ParallelGroup(plain, root=0), torch.empty_like(dst).requires_grad_(), tile=(4, 16))


def test_a_rank_or_dst_whose_negative_bit_is_set_is_refused_on_a_first_call_and_on_a_repeat(torch, rng):
    """A lazily negated view (z.conj().imag; torch._neg_view) holds -values in memory: treduce,
    which reads and writes arrays in place, refuses it, also where a normal call of its layout
    was remembered, and writes nothing."""
    devices = gpus(torch, 2)
    xs = [torch.randn((8, 32), device=f"cuda:{d}") for d in devices]
    dst = torch.full((8, 32), float("nan"), device=f"cuda:{devices[0]}")
    group = tp.comm.ParallelGroup(xs, root=0)
    for _ in range(2):
        tp.comm.treduce(group, dst, tile=(4, 16))
    dst.fill_(float("nan"))
    lazy_sources = [torch.randn((8, 32), dtype=torch.complex64, device=f"cuda:{d}").conj().imag for d in devices]
    for tensors, bad in (([xs[0], torch._neg_view(xs[1])], r"tensors\[1\]"), (lazy_sources, r"tensors\[0\]")):
        with pytest.raises(TypeError, match=bad + ": its negative bit is set"):
            tp.comm.treduce(tp.comm.ParallelGroup(tensors, root=0), dst, tile=(4, 16))
    with pytest.raises(TypeError, match="dst: its negative bit is set"):
        tp.comm.treduce(group, torch._neg_view(dst), tile=(4, 16))
    assert torch.isnan(dst).all()
