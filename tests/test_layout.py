"""TileLayout algebra, host only, index by index (like CuTe's test/unit/cute/core)."""
import itertools

import numpy as np
import pytest

import tileprim as tp
from tileprim import R, S, Swizzle, TileLayout, laneid, m, tid_in_wg, tx, warpid, wid_in_wg
from tileprim._layout import PositionSet


def expected_positions(shard, replica, offset, flat):
    """The reference formula: digits of flat over the shard extents, times strides, + offset,
    over every replica combination."""
    extents = [e for e, _, _ in shard]
    base = {}
    for k, (e, s, ax) in enumerate(shard):
        digit = (flat // int(np.prod(extents[k + 1:], dtype=np.int64))) % e
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
