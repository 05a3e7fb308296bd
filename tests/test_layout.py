"""TileLayout algebra, host only, index by index (like CuTe's test/unit/cute/core)."""
import itertools
import math

import numpy as np
import pytest

import tileprim as tp
from tileprim import R, S, Swizzle, TileLayout, laneid, m, tid_in_wg, tx, warpid, wid_in_wg
from tileprim._layout.value import PositionSet


def expected_positions(shard, replica, offset, flat):
    """The reference formula, in Python's exact integers: digits of flat over the shard extents,
    times strides, + offset, over every replica combination (no swizzle)."""
    extents = [e for e, _, _ in shard]
    base = {}
    for k, (e, s, ax) in enumerate(shard):
        digit = (flat // math.prod(extents[k + 1:])) % e
        base[ax] = base.get(ax, 0) + digit * s
    for ax, v in offset.items():
        base[ax] = base.get(ax, 0) + v
    out = []
    for combo in itertools.product(*[range(e) for e, _, _ in replica]):
        p = dict(base)
        for (e, s, ax), r in zip(replica, combo):
            p[ax] = p.get(ax, 0) + r * s
        out.append(p)
    return out


CASES = [
    (S[(32, 8):(1 @ laneid, 1)], [(32, 1, "laneid"), (8, 1, "m")], [], {}),
    (S[8:1] + R[32:1 @ laneid], [(8, 1, "m")], [(32, 1, "laneid")], {}),
    (S[(8, 4, 2):(4 @ laneid, 1 @ laneid, 1)], [(8, 4, "laneid"), (4, 1, "laneid"), (2, 1, "m")], [], {}),
    (S[(4, 6):(1, 4)] + 5 @ warpid, [(4, 1, "m"), (6, 4, "m")], [], {"warpid": 5}),
    (S[(2, 16, 4):(1 @ wid_in_wg, 1 @ laneid, 2)] + R[2:1] + 3, [(2, 1, "wid_in_wg"), (16, 1, "laneid"), (4, 2, "m")],
     [(2, 1, "m")], {"m": 3}),
    (S[(3, 5):(5, 1)] + R[(2, 2):(16 @ laneid, 1 @ tx)], [(3, 5, "m"), (5, 1, "m")],
     [(2, 16, "laneid"), (2, 1, "tx")], {}),
]


@pytest.mark.parametrize("expr,shard,replica,offset", CASES, ids=range(len(CASES)))
def test_apply_matches_formula_at_every_index(expr, shard, replica, offset):
    L = TileLayout(expr)
    assert [(i.extent, i.stride, i.axis) for i in L.shard] == shard
    assert [(i.extent, i.stride, i.axis) for i in L.replica] == replica
    assert L.offset == offset
    assert L.size == int(np.prod([e for e, _, _ in shard]))
    for flat in range(L.size):
        want = expected_positions(shard, replica, offset, flat)
        got = L.apply(flat)
        if replica:
            assert got == {tp.Position(p) for p in _complete(want, L)}
        else:
            assert got == _complete(want, L)[0]


def _complete(positions, L):
    """Every axis the layout names appears in its positions (at 0 when unused)."""
    axes = {i.axis for i in L.shard + L.replica} | set(L.offset)
    return [{a: p.get(a, 0) for a in axes} for p in positions]


def test_seed_lane_per_row_layout():
    L = TileLayout(S[(32, 8):(1 @ laneid, 1)])
    assert L.apply((5, 3)) == {"laneid": 5, "m": 3}
    assert L.apply((31, 7)) == {"laneid": 31, "m": 7}
    assert L.storage() == TileLayout(S[8:1])
    assert L.span == 8 and L.storage().span == 8
    assert L.thread_extents() == (32, 1) and L.local_extents() == (1, 8)
    assert str(L) == "S[(32, 8) : (1@laneid, 1)]"
    assert repr(L) == "TileLayout(S[(32, 8) : (1@laneid, 1)])"


def test_replica_gives_the_set_of_holders():
    L = TileLayout(S[8:1] + R[32:1 @ laneid])
    places = L.apply(3)
    assert isinstance(places, PositionSet) and isinstance(places, frozenset) and len(places) == 32
    assert places == {tp.Position({"m": 3, "laneid": lane}) for lane in range(32)}
    assert L.storage() == TileLayout(S[8:1])
    assert str(L) == "S[8 : 1] + R[32 : 1@laneid]"


def test_extents_only_is_row_major_on_m():
    L = TileLayout(S[8, 4])
    assert [(i.extent, i.stride, i.axis) for i in L.shard] == [(8, 4, "m"), (4, 1, "m")]
    for i, j in itertools.product(range(8), range(4)):
        assert L.apply((i, j)) == {"m": 4 * i + j}
    assert TileLayout(S[(4,)]) == TileLayout(S[4:1])
    assert TileLayout.row_major((3, 5)) == TileLayout(S[3, 5])


def test_offsets_merge_and_bare_ints_go_to_m():
    L = TileLayout(S[4:1] + 2 @ warpid + 3 @ warpid + 7)
    assert L.offset == {"warpid": 5, "m": 7}
    assert L.apply(2) == {"m": 9, "warpid": 5}
    assert L.span == 4 + 7


def test_storage_drops_thread_iters_and_thread_offsets():
    L = TileLayout(S[(4, 32, 2):(1 @ wid_in_wg, 1 @ laneid, 1)] + R[2:4 @ tx] + 1 @ laneid + 3)
    st = L.storage()
    assert [(i.extent, i.stride, i.axis) for i in st.shard] == [(2, 1, "m")]
    assert st.replica == [] and st.offset == {"m": 3}
    assert st.span == 2 + 3


def test_dims_split_iters_at_dim_boundaries():
    L = TileLayout(S[32:1])  # one iter serving a 4 x 8 tile
    dims = L.dims((4, 8))
    assert [(i.extent, i.stride) for i in dims[0].iters] == [(4, 8)]
    assert [(i.extent, i.stride) for i in dims[1].iters] == [(8, 1)]
    for i, j in itertools.product(range(4), range(8)):
        assert L.apply((i, j), shape=(4, 8)) == {"m": 8 * i + j}
    W = TileLayout(S[(16, 128):(1, 1 @ tid_in_wg)])
    assert W.thread_extents((16, 4, 32)) == (1, 4, 32)
    assert W.local_extents((16, 4, 32)) == (16, 1, 1)


@pytest.mark.parametrize("bad,shape,rule", [
    (S[(4, 6):(1, 4)], (4, 5), "places 24 elements"),
    (S[(4, 6):(6, 1)], (6, 4), "does not divide"),
    (S[12:1], (8,), "places 12 elements"),
])
def test_dims_reject_shapes_that_do_not_fit(bad, shape, rule):
    with pytest.raises(ValueError, match=rule):
        TileLayout(bad).dims(shape)


def test_swizzle_permutes_within_blocks_and_is_a_bijection():
    sw = Swizzle(per_element=2, swizzle_len=3, atom_len=3)
    L = TileLayout(S[(8, 64):(64, 1)], swizzle=sw)
    addrs = [L.apply(i)["m"] for i in range(L.size)]
    assert sorted(addrs) == list(range(512))
    for i, a in enumerate(addrs):  # reference formula
        x = i >> 2
        f = x ^ ((x & (7 << 3)) >> 3)
        assert a == (f << 2) | (i & 3)
    assert L.swizzle == sw and L.storage().swizzle == sw
    assert Swizzle.for_bytes(128, np.float16) == Swizzle(3, 3, 3)
    assert Swizzle.for_bytes(64, np.float32) == Swizzle(2, 2, 3)


def test_layout_errors_name_the_rule():
    with pytest.raises(ValueError, match="extent 0 must be at least 1"):
        TileLayout(S[0:1])
    with pytest.raises(ValueError, match="2 extents but 1 strides"):
        S[(4, 8):(1,)]
    with pytest.raises(ValueError, match="one shard"):
        S[4:1] + S[4:1]
    with pytest.raises(TypeError, match="TileLayout takes S"):
        TileLayout(R[4:1])
    with pytest.raises(ValueError, match="unknown axis 'lane'"):
        tp.Axis("lane")
    with pytest.raises(ValueError, match="atom_len >= swizzle_len"):
        TileLayout(S[64:1], swizzle=Swizzle(1, 3, 2))
    with pytest.raises(ValueError, match="index"):
        TileLayout(S[4:1]).apply(4)


def test_axes_and_value_semantics():
    assert {laneid, laneid} == {laneid} and laneid != warpid
    assert repr(1 @ laneid) == "1@laneid"
    a, b = TileLayout(S[(32, 8):(1 @ laneid, 1)]), TileLayout(S[(32, 8):(1 @ laneid, 1)])
    assert a == b and hash(a) == hash(b) and a != TileLayout(S[(32, 8):(8, 1)])
    assert a == S[(32, 8):(1 @ laneid, 1)]
    assert m.name == "m"


W = np.ones((32, 8), np.float32)

# Each call must raise this error with this text: never a crash, a wrapped-around number, an
# OverflowError/MemoryError or pybind11's signature mismatch.
BAD_LAYOUTS = [
    (lambda: TileLayout(S[(8,):(2**61,)]).span, ValueError,
     "layout: S[8 : 2305843009213693952] spans more than 2**63 - 1 positions on axis m "
     "(shard iter 0: extent 8, stride 2**61)"),
    (lambda: TileLayout(S[(2**40, 2**40)]).size, ValueError,
     "places more than 2**63 - 1 elements (shard iter 1: extent 2**40)"),
    (lambda: TileLayout(S[(3, 2**40):(2**62, 1)]), ValueError,
     "spans more than 2**63 - 1 positions on axis m"),
    (lambda: TileLayout(S[(4, 4):(1, 2**61)] + R[2:2**62]), ValueError,
     "(replica iter 0: extent 2, stride 2**62, after the offset and earlier iters reach"),
    (lambda: TileLayout(S[8:1] + (2**63 - 1)), ValueError, "spans more than 2**63 - 1 positions on axis m"),
    (lambda: TileLayout(S[8:1] + (2**63 - 8)), ValueError, "(the last is 9223372036854775807)"),
    (lambda: TileLayout(S[8:1] + (2**63 - 2**23 - 8), swizzle=Swizzle(16, 8, 8)), ValueError,
     "(rounded up to whole swizzle blocks of 2**24)"),
    (lambda: TileLayout(S[(2, 8):(2**62 @ tp.wgid, 1)]), ValueError,
     "reaches thread indices beyond 2**63 - 1 (wgid up to 2**62, weight 128)"),
    (lambda: tp.plan(tp.sum, np.ones(8, "f4"), layout=S[(8,):(2**61,)]), ValueError,
     "spans more than 2**63 - 1"),
    (lambda: tp.warp.sqrt(W, layout=S[(32, 8):(1 @ laneid, 2**56)], backend="cpu"), ValueError,
     "layout: registers per thread: S[(32, 8) : (1@laneid, 72057594037927936)] needs 504403158265495553 "
     "register slots per thread; the limit is 1024 (split the tile with batch_dims; with batch_dims and no "
     "scope named the planner spreads each tile over a scope's threads)"),
    (lambda: tp.sum(np.ones((4, 2048), np.float32), axes=-1, layout=S[4, 2048], backend="cpu"), ValueError,
     "needs 8192 register slots per thread; the limit is 1024"),
    (lambda: tp.plan(tp.exp, np.zeros((2, 8192), np.float32), batch_dims=1, scope=tp.warp), ValueError,
     "(the layout names no thread axis of warp, so each thread would hold the whole tile: name a layout that "
     "spreads it over the threads, or no scope with batch_dims for the planner's)"),
    (lambda: tp.warp.sqrt(np.ones(8, np.float32), layout=S[8:1] + R[(32, 2):(1 @ laneid, 0)], backend="cpu"),
     ValueError, "puts element 0 twice (its replicas coincide) in register 0 of thread 0"),
    (lambda: TileLayout(S[8:1] + R[2**30:1]).apply(3), ValueError,
     "copies each element to more than 2**16 places; "
     "the limit on the positions listed for one element is 2**16"),
    (lambda: Swizzle(62, 3, 3), ValueError,
     "swizzle: Swizzle(62, 3, 3) needs per_element + swizzle_len + atom_len <= 32"),
    (lambda: TileLayout(S[64:1], swizzle=(2**40, 0, 0)), ValueError,
     "needs per_element + swizzle_len + atom_len"),
    (lambda: Swizzle(-1, 0, 0), ValueError, "must not be negative"),
    (lambda: Swizzle(2**64, 0, 0), ValueError,
     "layout: swizzle per_element 18446744073709551616 does not fit in int64"),
    (lambda: Swizzle(1.0, 0, 0), TypeError, "swizzle per_element 1.0 must be an integer"),
    (lambda: S[-1], ValueError,
     "layout: row-major shape (-1,) has dim 0 of size -1; dims must be at least 1"),
    (lambda: S[(4, -2)], ValueError, "row-major shape (4, -2) has dim 1 of size -2"),
    (lambda: S[(2**40, 2**40, 2**40)], ValueError, "has more than 2**63 - 1 elements"),
    (lambda: TileLayout(S[-1:1]), ValueError, "layout: shard iter 0: extent -1 must be at least 1"),
    (lambda: TileLayout(S[(4, 2):(1, -2)]), ValueError,
     "layout: shard iter 1: stride -2 must not be negative"),
    (lambda: TileLayout(S[4:1] + R[2:-1]), ValueError,
     "layout: replica iter 0: stride -1 must not be negative"),
    (lambda: TileLayout(S[8:1] + (-3)), ValueError, "layout: offset -3 on m must not be negative"),
    (lambda: TileLayout(S[8:2**63]), ValueError, "layout: stride 9223372036854775808 does not fit in int64"),
    (lambda: TileLayout(S[8:-2**63 - 1]), ValueError, "stride -9223372036854775809 does not fit in int64"),
    (lambda: TileLayout(S[2**63:1]), ValueError, "layout: extent 9223372036854775808 does not fit in int64"),
    (lambda: TileLayout(S[4:2**64 @ laneid]), ValueError, "stride or offset on laneid 18446744073709551616"),
    (lambda: TileLayout(S[8:1] + 2**64), ValueError,
     "offset on m 18446744073709551616 does not fit in int64"),
    (lambda: TileLayout(S[8:1] + 2**62 @ warpid + 2**62 @ warpid), ValueError,
     "offset on warpid 9223372036854775808 does not fit in int64"),
    (lambda: TileLayout(S[8:1.5]), TypeError, "layout: stride 1.5 must be an integer"),
    (lambda: TileLayout(S[True:1]), TypeError, "layout: extent True must be an integer"),
    (lambda: tp.Iter(2**63, 1), ValueError, "layout: extent 9223372036854775808 does not fit in int64"),
    (lambda: tp.Iter(4, True), TypeError, "layout: stride True must be an integer"),
    (lambda: tp.Iter(4, 1, 3), ValueError, "axis: unknown axis '3'"),
    (lambda: TileLayout.from_iters([(8, 1, "m")]), TypeError, "from_iters takes tp.Iter(extent, stride, axis)"),
    (lambda: TileLayout(S[8:1]).apply(8), ValueError, "index: 8 is outside the layout's 8 elements"),
    (lambda: TileLayout(S[8:1]).apply(-1), ValueError, "index: -1 is outside the layout's 8 elements"),
    (lambda: TileLayout(S[8:1]).apply((8,)), ValueError, "index: (8,) is outside shape (8,)"),
    (lambda: TileLayout(S[8:1]).apply(2**70), ValueError,
     "layout: index 1180591620717411303424 does not fit"),
    (lambda: TileLayout(S[8:1]).dims((-8,)), ValueError, "tile shape (-8,) has dim 0 of size -8"),
    (lambda: TileLayout(S[8:1]).dims((2**40, 2**40, 2**40)), ValueError, "has more than 2**63 - 1 elements"),
    (lambda: TileLayout.row_major((2**64,)), ValueError,
     "layout: shape dim 18446744073709551616 does not fit"),
    (lambda: tp.Position({"lane": 3}), ValueError, "unknown axis 'lane'"),
]


@pytest.mark.parametrize("call,error,message", BAD_LAYOUTS, ids=[m[:50] for _, _, m in BAD_LAYOUTS])
def test_bad_layouts_raise_errors_naming_the_part_and_the_rule(call, error, message):
    with pytest.raises(error) as err:
        call()
    assert message in str(err.value)


def test_largest_layouts_that_fit_in_int64_work():
    L = TileLayout(S[(2, 2**31):(2**62, 1)] + (2**62 - 2**31 - 1))
    assert L.size == 2**32
    assert L.span == 2**63 - 1  # the last position is 2**63 - 2
    assert L.apply((1, 2**31 - 1)) == {"m": 2**63 - 2}
    big = TileLayout(S[(2**31 - 1, 2**32):(2**32, 1)])
    assert big.size == 2**63 - 2**32 and big.apply(big.size - 1) == {"m": 2**63 - 2**32 - 1}
    T = TileLayout(S[2:(2**63 - 1) // 128 @ tp.wgid])
    assert T.apply(1) == {"wgid": (2**63 - 1) // 128}


def test_register_tiles_up_to_the_slot_limit_run():
    A = np.arange(4 * 1024, dtype=np.float32).reshape(4, 1024)
    got = tp.sum(A, axes=-1, batch_dims=1, backend="cpu")
    assert np.array_equal(got, A.sum(-1))


def test_numpy_integers_are_accepted_wherever_an_int_is():
    i = np.int64
    L = TileLayout(S[(i(32), i(8)):(i(1) @ laneid, np.int32(1))] + i(2) + np.uint8(3) @ warpid,
                   swizzle=Swizzle(i(0), i(0), i(0)))
    assert L == TileLayout(S[(32, 8):(1 @ laneid, 1)] + 2 + 3 @ warpid)
    assert TileLayout(S[i(4), i(8)]) == TileLayout(S[4, 8])
    assert TileLayout.row_major((i(4), i(8))) == TileLayout(S[4, 8])
    assert L.apply(i(9)) == {"m": 3, "laneid": 1, "warpid": 3}
    assert L.apply((i(1), np.int16(1))) == {"m": 3, "laneid": 1, "warpid": 3}
    assert L.dims((i(32), i(8)))[0].thread_extent == 32
    assert tp.Iter(i(4), i(2), laneid) == tp.Iter(4, 2, "laneid")
    assert TileLayout(S[8:1], swizzle=Swizzle(i(1), i(2), i(3))).swizzle == Swizzle(1, 2, 3)
    A = np.arange(8, dtype=np.float32)
    assert tp.sum(A, layout=S[(i(8),):(i(1),)], backend="cpu") == A.sum()


def test_positions_print_in_numeric_order():
    p = tp.Position({"wid_in_wg": 1, "laneid": 5, "m": 3})
    assert list(p) == ["m", "laneid", "wid_in_wg"] and p.thread == 37
    assert repr(p) == "{'m': 3, 'laneid': 5, 'wid_in_wg': 1}"
    places = TileLayout(S[4:1] + R[(12, 2):(1 @ laneid, 4)]).apply(2)
    assert places == {tp.Position({"m": m_, "laneid": lane}) for lane in range(12) for m_ in (2, 6)}
    assert places == frozenset(places) and hash(places) == hash(frozenset(places))
    want = ", ".join(f"{{'m': {m_}, 'laneid': {lane}}}" for lane in range(12) for m_ in (2, 6))
    assert repr(places) == "{" + want + "}"  # laneid 10 after 9, not after 1
    # by thread index (laneid + 32 * warpid), not by the coordinates in axis order
    mixed = TileLayout(S[1:1] + R[(2, 2):(31 @ laneid, 1 @ warpid)]).apply(0)
    assert repr(mixed) == ("{{'m': 0, 'laneid': 0, 'warpid': 0}, {'m': 0, 'laneid': 31, 'warpid': 0}, "
                           "{'m': 0, 'laneid': 0, 'warpid': 1}, {'m': 0, 'laneid': 31, 'warpid': 1}}")


def test_layouts_hash_and_compare_by_value():
    a = TileLayout(S[(4, 8):(8, 1)])
    b = TileLayout.row_major((4, 8))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    c = TileLayout(S[(32, 8):(1 @ laneid, 1)] + 0 @ laneid)  # a zero offset is no offset
    d = TileLayout(S[(32, 8):(1 @ laneid, 1)])
    assert c == d and hash(c) == hash(d)
    assert TileLayout(S[(4, 8):(1, 4)]) != a and len({a, TileLayout(S[(4, 8):(1, 4)])}) == 2


def test_an_s_expression_equals_and_hashes_as_the_layout_it_spells():
    s = S[(32, 8):(1 @ laneid, 1)]
    layout = TileLayout(s)
    assert layout == s and s == layout and hash(s) == hash(layout) and {layout: 1}.get(s) == 1
    assert s == S[(32, 8):(1 @ laneid, 1)] and s != S[(32, 8):(8, 1)] and s != 3
    swizzled = TileLayout(S[8, 32], swizzle=tp.Swizzle.for_bytes(128, "float32"))
    assert swizzled != S[8, 32] and S[8, 32] != swizzled


def test_a_layout_round_trips_through_repr_pickle_and_copy():
    import copy
    import pickle
    for layout in (TileLayout(S[(32, 8):(1 @ laneid, 1)] + 2 @ laneid),
                   TileLayout(S[8, 32], swizzle=tp.Swizzle.for_bytes(128, "float32"))):
        again = [eval(repr(layout)), pickle.loads(pickle.dumps(layout)), copy.deepcopy(layout)]
        assert all(x == layout and hash(x) == hash(layout) for x in again), (layout, again)
    assert pickle.loads(pickle.dumps(tp.Iter(4, 2, "laneid"))) == tp.Iter(4, 2, "laneid")
