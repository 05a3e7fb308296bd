"""treduce's one rule for where dst may lie (_C.treduce_dst_overlaps, which the first call of a
signature, its repeats and the root's call across processes all ask): no byte of dst may be a
byte of a rank's source on its device, save where dst is the root's tensor itself (in place).
The rule on its own, by the addresses it is given; then through tp.comm.treduce."""
import numpy as np
import pytest

import tileprim as tp
from tileprim import _C

SHAPE, STRIDES = [4, 8], [8, 1]  # float32: 128 bytes each, from its address
BYTES = 4 * 8 * 4


def ref(arg: str, shape=SHAPE, strides=STRIDES, device: int = -1, dtype: str = "float32") -> "_C.TileRef":
    return _C.TileRef(arg, dtype, list(shape), "global", None, device, list(strides))


def ranks(n: int, **kwargs) -> list:
    return [ref(f"tensors[{r}]", **kwargs) for r in range(n)]


def met(pointers, dst_pointer, root=0, rank_refs=None, dst=None):
    rank_refs = rank_refs if rank_refs is not None else ranks(len(pointers))
    return _C.treduce_dst_overlaps(rank_refs, dst if dst is not None else ref("dst"), pointers, dst_pointer, root)


BASE = 1 << 20  # rank r's tensor at BASE + r * 4096: apart from each other


def apart(n: int) -> list:
    return [BASE + r * 4096 for r in range(n)]


def test_dst_apart_from_every_source_meets_none():
    assert met(apart(3), BASE + 3 * 4096) == []


def test_dst_just_past_a_source_meets_none():
    assert met(apart(2), BASE + 4096 + BYTES, root=0) == []
    assert met(apart(2), BASE - BYTES, root=1) == []  # just before rank 0


@pytest.mark.parametrize("shift", [0, 4, BYTES - 4])
def test_dst_over_a_non_root_source_meets_it(shift):
    assert met(apart(3), BASE + 2 * 4096 + shift, root=0) == [2]


def test_dst_is_the_root_tensor_itself_in_place():
    assert met(apart(3), BASE + 4096, root=1) == []


def test_dst_at_the_root_address_with_other_strides_meets_the_root():
    transposed = ref("dst", shape=SHAPE, strides=[1, 4])
    assert met(apart(2), BASE, root=0, dst=transposed) == [0]


def test_dst_over_part_of_the_root_meets_the_root():
    assert met(apart(2), BASE + 4, root=0) == [0]


def test_non_root_ranks_come_first_then_the_root():
    """One buffer under ranks 0 and 1 (root 0) and dst: the non-root rank's error is the one raised."""
    everywhere = [BASE, BASE + 16]
    assert met(everywhere, BASE + 8, root=0) == [1, 0]
    assert met([BASE, BASE + 16, BASE + 8], BASE + 12, root=1) == [0, 2, 1]


def test_a_rank_on_another_device_meets_none():
    on_gpu_1 = ranks(2, device=1)
    assert met(apart(2), BASE + 4096, root=0, rank_refs=on_gpu_1, dst=ref("dst", device=0)) == []
    assert met(apart(2), BASE + 4096, root=0, rank_refs=ranks(2, device=0), dst=ref("dst", device=0)) == [1]


def test_a_rank_not_in_this_process_meets_none():
    """Pointer 0: the rank's data lies in another process (the root checks its own only)."""
    assert met([BASE, 0], 16, root=0) == []


def test_empty_tensors_meet_nothing():
    empty = ranks(2, shape=[0, 8])
    assert met([BASE, BASE], BASE, root=0, rank_refs=empty, dst=ref("dst", shape=[0, 8])) == []


def test_negative_strides_span_below_the_address():
    """A row-reversed view: its bytes lie from 3 rows below its address to a row past it."""
    reversed_rows = ranks(2, strides=[-8, 1])
    assert met([BASE + 96, BASE + 4096], BASE + BYTES, root=1, rank_refs=reversed_rows) == []
    assert met([BASE + 96, BASE + 4096], BASE + BYTES - 4, root=1, rank_refs=reversed_rows) == [0]
    assert met([BASE + 96, BASE + 4096], BASE - BYTES, root=1, rank_refs=reversed_rows) == []
    assert met([BASE + 96, BASE + 4096], BASE - BYTES + 4, root=1, rank_refs=reversed_rows) == [0]


def test_the_element_size_counts():
    """float16: 64 bytes from the address, where float32 spans 128."""
    halves = ranks(2, dtype="float16")
    assert met(apart(2), BASE + 64, root=1, rank_refs=halves, dst=ref("dst", dtype="float16")) == []
    assert met(apart(2), BASE + 62, root=1, rank_refs=halves, dst=ref("dst", dtype="float16")) == [0]
    assert met(apart(2), BASE + 64, root=1) == [0]


def test_one_pointer_per_rank():
    with pytest.raises(ValueError, match="pointers: 1 for 2 ranks"):
        met([BASE], BASE + 4096, rank_refs=ranks(2))


# ---- through tp.comm.treduce ---------------------------------------------------------------------
def group(rng, nranks: int = 3, root: int = 1):
    return tp.comm.ParallelGroup([rng.standard_normal((4, 8)).astype(np.float32) for _ in range(nranks)], root=root)


def test_interleaved_numpy_views_share_no_byte_and_pass(rng):
    """Extents meet, yet NumPy's exact look finds no shared element: dst and a source interleave."""
    buffers = [rng.standard_normal((4, 16)).astype(np.float32) for _ in range(3)]
    xs = [b[:, ::2] for b in buffers]  # every rank's strides alike
    dst = buffers[2][:, 1::2]
    want = (xs[0] + xs[1]) + xs[2]
    g = tp.comm.ParallelGroup(xs, root=0)
    for _ in range(2):  # the first call's check, then the memo's
        dst[...] = np.nan
        assert tp.comm.treduce(g, dst, tile=(2, 4)) is dst
        np.testing.assert_array_equal(dst, want)


@pytest.mark.parametrize("calls", [1, 2], ids=["first-call", "repeat"])
def test_each_path_raises_the_rule_s_error_and_writes_nothing(calls, rng):
    """The first call checks the call; a repeat of its signature (the memo) checks the addresses."""
    g = group(rng)
    buffer = np.full((5, 8), np.nan, np.float32)
    xs = list(g.tensors)
    if calls == 2:
        tp.comm.treduce(tp.comm.ParallelGroup(xs[:2] + [buffer[:4]], root=1), np.empty((4, 8), np.float32))
    before = [x.copy() for x in xs[:2]] + [buffer.copy()]
    with pytest.raises(ValueError, match=r"dst: overlaps tensors\[2\], a non-root rank's source"):
        tp.comm.treduce(tp.comm.ParallelGroup(xs[:2] + [buffer[:4]], root=1), buffer[1:])
    with pytest.raises(ValueError, match="dst: overlaps the root's tensor without being it"):
        tp.comm.treduce(tp.comm.ParallelGroup([xs[0], buffer[:4], xs[2]], root=1), buffer[1:])
    for x, was in zip(xs[:2] + [buffer], before):
        np.testing.assert_array_equal(x, was)


def test_the_root_s_tensor_as_dst_reduces_in_place(rng):
    g = group(rng)
    want = (g.tensors[1] + g.tensors[0]) + g.tensors[2]
    assert tp.comm.treduce(g, g.tensors[1]) is g.tensors[1]
    np.testing.assert_array_equal(g.tensors[1], want)
