"""tp.comm.treduce on the CPU backend: bit for bit the contract's fold (root first, then the other
ranks ascending, in the operand dtype) over rank counts, roots, ops, dtypes, chunkings, pingpong,
every algorithm, strided and N-D tensors; and every bad call raises before anything is written."""
import itertools
from dataclasses import dataclass, replace

import numpy as np
import pytest

import tileprim as tp
from conftest import NP, bits_equal, random_tile
from treduce_oracle import contract_order, fold_in_order, treduce_reference

OPS = ("sum", "max", "min")
ALGORITHMS = ("root_pull", "scatter_gather", "chain")
# every operand dtype, and the float32 accumulator the 16-bit ones may opt into
DTYPES = [pytest.param(dtype, acc, id=dtype + ("-acc-float32" if acc else ""))
          for dtype, acc in [("float32", None), ("float16", None), ("bfloat16", None), ("int32", None),
                             ("float16", "float32"), ("bfloat16", "float32")]]


def rank_groups(*groups):
    """(ranks, root) parameters."""
    return [pytest.param(n, root, id=f"{n}ranks-root{root}") for n, root in groups]


# 2, 3, 4 and 8 ranks; the root first, last or in between
GROUPS = rank_groups((2, 0), (2, 1), (3, 0), (3, 2), (4, 1), (4, 3), (8, 0), (8, 5))
TILE = (4, 16)


def np_dtype(name: str) -> np.dtype:
    return NP.get(name, np.dtype(name))


def random_source(rng, shape, dtype: str) -> np.ndarray:
    """One rank's values: floats with NaN, +-inf, subnormals and -0 mixed in; integers over their
    whole range, so that int32 sums wrap."""
    dt = np_dtype(dtype)
    if dt.kind == "i":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    return random_tile(rng, shape, dtype)


def random_sources(rng, nranks: int, shape, dtype: str) -> list:
    return [random_source(rng, shape, dtype) for _ in range(nranks)]


def poisoned(shape, dtype: str) -> np.ndarray:
    """A dst in which every element that was not written shows: NaN, or the integer minimum."""
    dt = np_dtype(dtype)
    return np.full(shape, np.iinfo(dt).min if dt.kind == "i" else np.nan, dt)


def treduce(tensors, root, dst=None, **kwargs):
    """One call on the CPU backend, the group built inside (its checks count as the call's)."""
    kwargs.setdefault("tile", TILE)
    return tp.comm.treduce(tp.comm.ParallelGroup(tensors, root=root), dst, backend="cpu", **kwargs)


def trace_entry(plan, variant):
    (entry,) = [e for e in plan.trace if e.variant == variant]
    return entry


# ---- results, bit for bit ------------------------------------------------------------------------------
@pytest.mark.parametrize("nranks,root", GROUPS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype,accumulate", DTYPES)
def test_matches_the_reference_bit_for_bit(nranks, root, op, dtype, accumulate, rng):
    xs = random_sources(rng, nranks, (13, 37), dtype)  # 4 x 3 chunks of TILE, the last ones partial
    before = [x.copy() for x in xs]
    dst = poisoned((13, 37), dtype)
    assert treduce(xs, root, dst, op=op, accumulate=accumulate) is dst
    assert bits_equal(dst, treduce_reference(xs, root, op, accumulate))
    assert all(bits_equal(x, b) for x, b in zip(xs, before)), "a source was written"


@pytest.mark.parametrize("nranks,root", GROUPS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_rank_distinct_integers_land_exactly_in_an_allocated_dst(nranks, root, op, dtype):
    """PTO's test data: element i of rank r holds i + 100 r, so a value from the wrong place or rank
    shows; every sum is an integer below 2**24, exact in float32."""
    shape = (9, 40)
    i = np.arange(np.prod(shape)).reshape(shape)
    xs = [(i + 100 * r).astype(dtype) for r in range(nranks)]
    expected = {"sum": nranks * i + 100 * sum(range(nranks)), "max": i + 100 * (nranks - 1), "min": i}[op]
    out = treduce(xs, root, op=op)
    assert isinstance(out, np.ndarray) and out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, expected.astype(dtype))


ORDER_GROUPS = rank_groups((3, 0), (3, 1), (4, 2), (8, 0), (8, 5))  # 2 ranks: a + b == b + a
# (big, small): big + small is a tie in the working precision and rounds back to big
ORDER_VALUES = {("float32", None): (2.0 ** 24, 1.0), ("float16", None): (2.0 ** 11, 1.0),
                ("bfloat16", None): (2.0 ** 8, 1.0), ("float16", "float32"): (2.0 ** 13, 2.0 ** -11),
                ("bfloat16", "float32"): (2.0 ** 24, 1.0)}


def same_fold(a, b) -> bool:
    """Two fold orders that give the same bits for any data: + is commutative, not associative."""
    return set(a[:2]) == set(b[:2]) and a[2:] == b[2:]


@pytest.mark.parametrize("nranks,root", ORDER_GROUPS)
@pytest.mark.parametrize("dtype,accumulate", [p for p in DTYPES if tuple(p.values) in ORDER_VALUES])
def test_sum_folds_in_the_stated_order_and_precision(nranks, root, dtype, accumulate, rng):
    """Values where each fold order (and precision) gives other bits; checked, so that this test can fail."""
    big, small = ORDER_VALUES[(dtype, accumulate)]
    values = np.array([big, -big, small, -small, small / 2])
    xs = [rng.choice(values, size=(9, 40)).astype(np_dtype(dtype)) for _ in range(nranks)]
    out = treduce(xs, root, op="sum", accumulate=accumulate)
    assert bits_equal(out, treduce_reference(xs, root, "sum", accumulate))

    stated = contract_order(nranks, root)
    for order in (sorted(stated), stated[::-1], stated[:1] + stated[:0:-1]):
        if not same_fold(order, stated):
            assert not bits_equal(fold_in_order(xs, order, "sum", accumulate), out), f"order {order} agrees"
    if dtype != "float32":
        other_precision = None if accumulate else "float32"
        assert not bits_equal(fold_in_order(xs, stated, "sum", other_precision), out), "no precision shows"


def meeting_specials(nranks: int, dtype: str) -> list:
    """Per rank, one array in which each element is one way the ranks' NaN, +-inf and numbers meet."""
    values = [np.nan, np.inf, -np.inf, 1.5, -2.0]
    combos = np.array(list(itertools.product(values, repeat=nranks)))
    return [combos[:, r].reshape(-1, len(values)).astype(np_dtype(dtype)) for r in range(nranks)]


@pytest.mark.parametrize("root", [0, 2])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_nan_and_inf_follow_fmax_fmin_and_ieee_sums(root, op, dtype):
    """A NaN meeting a number gives the number (np.fmax); only NaNs give NaN; inf - inf gives NaN."""
    xs = meeting_specials(3, dtype)
    out = treduce(xs, root, op=op)
    with np.errstate(invalid="ignore"):
        expected = {"sum": np.sum, "max": np.fmax.reduce, "min": np.fmin.reduce}[op](
            np.stack(xs).astype(np.float64), axis=0)
    assert bits_equal(out, expected.astype(np_dtype(dtype)))


@pytest.mark.parametrize("dispatch", ALGORITHMS)
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype,accumulate", [("float16", None), ("float16", "float32"), ("bfloat16", None),
                                              ("bfloat16", "float32")])
def test_a_16_bit_max_or_min_of_nans_is_the_one_quiet_nan(dispatch, op, dtype, accumulate):
    """The README's NaN rule: the NaN max/min return is 0x7fff in float16 and bfloat16 (as tp.max
    and the GPU's cvt give it), whatever NaN the ranks hold."""
    payloads = [0x7e00, 0xfe01, 0x7fff] if dtype == "float16" else [0x7fc0, 0xffc1, 0x7fff]
    one = 0x3c00 if dtype == "float16" else 0x3f80
    xs = [np.array([payloads[r], payloads[r], one], np.uint16).view(np_dtype(dtype)) for r in range(3)]
    xs[1][2] = np.nan  # a number meeting a NaN stays the number
    out = treduce(xs, 1, op=op, accumulate=accumulate, dispatch=dispatch)
    assert out.view(np.uint16)[:2].tolist() == [0x7fff, 0x7fff]
    assert out.view(np.uint16)[2] == xs[0].view(np.uint16)[2]


@pytest.mark.parametrize("nranks,root", rank_groups((3, 1), (4, 0), (8, 6)))
@pytest.mark.parametrize("op", OPS)
def test_same_bits_whatever_algorithm_tile_or_pingpong(nranks, root, op, rng):
    xs = random_sources(rng, nranks, (2, 11, 45), "float32")
    expected = treduce_reference(xs, root, op)
    for dispatch, tile, pingpong in itertools.product(ALGORITHMS, [(1, 8), (4, 16), (16, 64)], [False, True]):
        out = treduce(xs, root, op=op, dispatch=dispatch, tile=tile, pingpong=pingpong)
        assert bits_equal(out, expected), (dispatch, tile, pingpong)


# ---- chunking, layouts, shapes -------------------------------------------------------------------------
CHUNKINGS = [  # (name, shape, tile)
    ("one-tile", (4, 16), (4, 16)),
    ("smaller-than-tile", (3, 5), (8, 16)),
    ("rows-chunked", (24, 16), (8, 16)),
    ("cols-chunked", (4, 48), (4, 16)),
    ("rows-and-cols-chunked", (16, 48), (8, 16)),
    ("partial-last-row-chunk", (13, 16), (4, 16)),
    ("partial-last-col-chunk", (4, 37), (4, 16)),
    ("partial-last-row-and-col-chunk", (13, 37), (4, 16)),
    ("one-row-tile-partial-cols", (5, 33), (1, 32)),
    ("rows-in-one-tile-partial-cols", (3, 70), (8, 16)),
]


def divisible(shape, tile) -> bool:
    return shape[-2] % tile[0] == 0 and shape[-1] % tile[1] == 0


# valid="static" where the tile divides the shape; elsewhere it raises (BAD_CALLS)
CHUNK_CASES = [pytest.param(shape, tile, valid, id=f"{name}-{valid}")
               for name, shape, tile in CHUNKINGS for valid in ("dynamic", "static")
               if valid == "dynamic" or divisible(shape, tile)]


@pytest.mark.parametrize("shape,tile,valid", CHUNK_CASES)
@pytest.mark.parametrize("pingpong", [False, True], ids=["acc-recv", "pingpong"])
@pytest.mark.parametrize("dispatch", ALGORITHMS)
def test_chunking(shape, tile, valid, pingpong, dispatch, rng):
    xs = random_sources(rng, 4, shape, "float32")
    dst = poisoned(shape, "float32")
    assert treduce(xs, 2, dst, tile=tile, valid=valid, pingpong=pingpong, dispatch=dispatch) is dst
    assert bits_equal(dst, treduce_reference(xs, 2, "sum"))


@pytest.mark.parametrize("shape", [(2, 5, 37), (2, 3, 9, 20), (2, 1, 3, 6, 17)], ids=["3d", "4d", "5d"])
@pytest.mark.parametrize("dispatch", ALGORITHMS)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_outer_dims_are_looped(shape, dispatch, op, rng):
    xs = random_sources(rng, 4, shape, "float32")
    dst = poisoned(shape, "float32")
    treduce(xs, 3, dst, op=op, dispatch=dispatch)
    assert bits_equal(dst, treduce_reference(xs, 3, op))


# How a tensor of `shape` lies in its buffer: (buffer shape for `shape`, the view of the buffer).
SOURCE_LAYOUTS = {
    "src-contiguous": (lambda s: s, lambda b: b),
    "src-every-other-col": (lambda s: s[:-1] + (2 * s[-1],), lambda b: b[..., ::2]),
    "src-transposed": (lambda s: s[::-1], lambda b: b.T),
    "src-offset-every-other-row": (lambda s: s[:-2] + (2 * s[-2] + 1, s[-1] + 3), lambda b: b[..., 1::2, 3:]),
}
DST_LAYOUTS = {
    "dst-contiguous": (lambda s: s, lambda b: b),
    "dst-every-other-element": (lambda s: tuple(2 * d + 3 for d in s),
                                lambda b: b[tuple(slice(1, -2, 2) for _ in b.shape)]),
    "dst-transposed": (lambda s: s[::-1], lambda b: b.T),
}


def laid_out(layout, shape, make):
    """(buffer, view): a view of `shape` in a buffer made by make(buffer_shape)."""
    buffer_shape, view = layout
    buffer = make(buffer_shape(shape))
    return buffer, view(buffer)


def expected_buffer(dst_layout: str, shape, dtype: str, result: np.ndarray) -> np.ndarray:
    """The dst buffer after a call: the result in the view, the poison everywhere else."""
    buffer, view = laid_out(DST_LAYOUTS[dst_layout], shape, lambda s: poisoned(s, dtype))
    view[...] = result
    return buffer


@pytest.mark.parametrize("shape", [(9, 37), (3, 6, 37)], ids=["2d", "3d"])
@pytest.mark.parametrize("src_layout", SOURCE_LAYOUTS)
@pytest.mark.parametrize("dst_layout", DST_LAYOUTS)
@pytest.mark.parametrize("dispatch", ALGORITHMS)
def test_strided_sources_and_dst(shape, src_layout, dst_layout, dispatch, rng):
    xs = [laid_out(SOURCE_LAYOUTS[src_layout], shape, lambda s: random_source(rng, s, "float32"))[1]
          for _ in range(4)]
    buffer, dst = laid_out(DST_LAYOUTS[dst_layout], shape, lambda s: poisoned(s, "float32"))
    assert treduce(xs, 1, dst, dispatch=dispatch) is dst
    assert bits_equal(buffer, expected_buffer(dst_layout, shape, "float32", treduce_reference(xs, 1, "sum")))


@pytest.mark.parametrize("dispatch", ["root_pull", "chain"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
def test_one_rank_is_a_copy(op, dtype, dispatch, rng):
    (x,) = random_sources(rng, 1, (2, 13, 37), dtype)
    dst = poisoned(x.shape, dtype)
    treduce([x], 0, dst, op=op, dispatch=dispatch)
    assert bits_equal(dst, x)


@pytest.mark.parametrize("shape", [(0, 16), (5, 0), (0, 0), (3, 0, 16), (0, 4, 16)])
@pytest.mark.parametrize("nranks", [1, 3])
@pytest.mark.parametrize("dispatch", [None, "chain"])
def test_empty_tensor_leaves_dst_untouched(shape, nranks, dispatch):
    xs = [np.ones(shape, np.float32) for _ in range(nranks)]
    buffer = poisoned(tuple(d + 2 for d in shape), "float32")
    dst = buffer[tuple(slice(1, 1 + d) for d in shape)]  # the empty view, inside poison
    assert treduce(xs, 0, dst, dispatch=dispatch) is dst
    assert np.isnan(buffer).all()


# ---- plans ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("nranks", [2, 4])
def test_plan_names_the_algorithm_its_chunks_and_every_variant_and_runs_nothing(nranks, rng):
    group = tp.comm.ParallelGroup(random_sources(rng, nranks, (128, 512), "float32"), root=0)
    dst = poisoned((128, 512), "float32")
    plan = tp.plan(tp.comm.treduce, group, dst, op="sum", tile=(64, 256), backend="cpu")
    assert plan.variant in ALGORITHMS
    assert any("chunk" in key for key in plan.params), plan.params
    assert {e.variant for e in plan.trace} >= set(ALGORITHMS)
    assert [e.variant for e in plan.trace if e.status == "chosen"] == [plan.variant]
    assert all(name in str(plan) for name in ALGORITHMS)
    assert np.isnan(dst).all()


def test_scatter_gather_declines_two_ranks_and_says_why(rng):
    group = tp.comm.ParallelGroup(random_sources(rng, 2, (8, 32), "float32"), root=1)
    plan = tp.plan(tp.comm.treduce, group, op="sum", tile=TILE, backend="cpu")
    assert plan.variant == "root_pull"
    declined = trace_entry(plan, "scatter_gather")
    assert declined.status == "declined"
    assert any("rank" in reason.lower() for reason in declined.reasons), declined.reasons


# ---- bad calls: each raises before anything is written ------------------------------------------------
@dataclass
class Call:
    """One treduce call's arguments; each error case breaks the valid one."""
    tensors: list
    root: int
    dst: object
    kwargs: dict

    def run(self):
        return treduce(self.tensors, self.root, self.dst, **self.kwargs)


SHAPE = (6, 20)


def valid_call(rng, dtype: str) -> Call:
    return Call(random_sources(rng, 3, SHAPE, dtype), 1, poisoned(SHAPE, dtype), {"op": "sum", "tile": TILE})


def changed(call: Call, **changes) -> Call:
    """The call with `tensors`, `root` or `dst` replaced, and the other changes as keyword arguments."""
    fields = {k: changes.pop(k) for k in ("tensors", "root", "dst") if k in changes}
    return replace(call, **fields, kwargs={**call.kwargs, **changes})


def last_rank(call: Call, x) -> Call:
    return changed(call, tensors=call.tensors[:-1] + [x])


def dst_overlapping_rank_2(call: Call) -> Call:
    """dst and rank 2's (non-root) source: two views of one buffer, one row apart."""
    buffer = np.concatenate([call.tensors[2], call.dst[:1]])
    return changed(call, tensors=call.tensors[:2] + [buffer[:-1]], dst=buffer[1:])


def six_dims(call: Call) -> Call:
    def to_6d(a):
        return a.reshape((1, 1, 1, 1) + SHAPE)
    return changed(call, tensors=[to_6d(x) for x in call.tensors], dst=to_6d(call.dst))


STATIC = ("rows", "cols")  # the message states the rule for both
BAD_CALLS = [  # (valid call's dtype, how it is broken, the error, words its message must hold)
    pytest.param("float32", lambda c: last_rank(c, c.tensors[-1][:, :-1]), ValueError, ("shape",),
                 id="rank-shape-differs"),
    pytest.param("float32", lambda c: last_rank(c, c.tensors[-1][None]), ValueError, ("shape",),
                 id="rank-ndim-differs"),
    pytest.param("float32", lambda c: last_rank(c, c.tensors[-1].astype(np.float16)), TypeError, ("dtype",),
                 id="rank-dtype-differs"),
    pytest.param("float32", lambda c: last_rank(c, np.asfortranarray(c.tensors[-1])), ValueError, ("stride",),
                 id="rank-strides-differ"),
    pytest.param("float32", lambda c: changed(c, root=-1), ValueError, ("root",), id="root-negative"),
    pytest.param("float32", lambda c: changed(c, root=3), ValueError, ("root",), id="root-equals-nranks"),
    pytest.param("float32", lambda c: changed(c, tensors=[], root=0), ValueError, (), id="empty-group"),
    pytest.param("float32", six_dims, ValueError, (), id="six-dims"),
    pytest.param("int64", lambda c: c, TypeError, ("dtype",), id="dtype-int64-unsupported"),
    pytest.param("float32", lambda c: changed(c, dst=c.dst[:, :-1]), ValueError, ("dst",), id="dst-shape"),
    pytest.param("float32", lambda c: changed(c, dst=c.dst.T.copy()), ValueError, ("dst",),
                 id="dst-transposed-shape"),
    pytest.param("float32", lambda c: changed(c, dst=c.dst.astype(np.float64)), TypeError, ("dst",),
                 id="dst-dtype"),
    pytest.param("float16", lambda c: changed(c, dst=c.dst.astype(np.float32), accumulate="float32"),
                 TypeError, ("dst",), id="dst-float32-for-float16-accumulate-float32"),
    pytest.param("float32", lambda c: changed(c, dst=c.tensors[2]), ValueError, ("dst",),
                 id="dst-is-a-non-root-source"),
    pytest.param("float32", dst_overlapping_rank_2, ValueError, ("dst",),
                 id="dst-overlaps-a-non-root-source"),
    pytest.param("float32", lambda c: changed(c, op="prod"), ValueError, ("op",), id="op-unknown"),
    pytest.param("float32", lambda c: changed(c, tile=(0, 16)), ValueError, ("tile",), id="tile-zero"),
    pytest.param("float32", lambda c: changed(c, tile=(4, -16)), ValueError, ("tile",), id="tile-negative"),
    pytest.param("float32", lambda c: changed(c, tile=(4,)), ValueError, ("tile",), id="tile-one-number"),
    pytest.param("float32", lambda c: changed(c, tile=(1, 4, 16)), ValueError, ("tile",),
                 id="tile-three-numbers"),
    pytest.param("float32", lambda c: changed(c, valid="partial"), ValueError, ("valid",),
                 id="valid-unknown"),
    pytest.param("float32", lambda c: changed(c, valid="static", tile=(4, 20)), ValueError, STATIC,
                 id="static-rows-not-divisible"),
    pytest.param("float32", lambda c: changed(c, valid="static", tile=(3, 16)), ValueError, STATIC,
                 id="static-cols-not-divisible"),
    pytest.param("float32", lambda c: changed(c, valid="static", tile=(4, 16)), ValueError, STATIC,
                 id="static-rows-and-cols-not-divisible"),
    pytest.param("float32", lambda c: changed(c, valid="static", tile=(8, 32)), ValueError, STATIC,
                 id="static-smaller-than-tile"),
    pytest.param("float32", lambda c: changed(c, accumulate="float32"), ValueError, ("accumulate",),
                 id="accumulate-on-float32"),
    pytest.param("int32", lambda c: changed(c, accumulate="float32"), ValueError, ("accumulate",),
                 id="accumulate-on-int32"),
    pytest.param("float16", lambda c: changed(c, accumulate="float64"), ValueError, ("accumulate",),
                 id="accumulate-unknown"),
    pytest.param("float32", lambda c: changed(c, dispatch="ring"), ValueError, ("dispatch",),
                 id="dispatch-unknown"),
    pytest.param("float32", lambda c: changed(c, tensors=c.tensors[:2], dispatch="scatter_gather"),
                 tp.DispatchError, ("scatter_gather",), id="scatter_gather-with-two-ranks"),
    pytest.param("float32", lambda c: changed(c, tile=(1 << 63, 1)), ValueError, ("tile", "2**63"),
                 id="tile-past-int64"),
    pytest.param("float32", lambda c: changed(c, tile=b"ab"), ValueError, ("tile",), id="tile-bytes"),
    pytest.param("float32", lambda c: changed(c, tile="12"), ValueError, ("tile",), id="tile-str"),
    pytest.param("float32", lambda c: changed(c, tile=(2.0, 4.0)), TypeError, ("tile",), id="tile-floats"),
    pytest.param("float32", lambda c: changed(c, tile=(True, 4)), TypeError, ("tile",), id="tile-bool"),
    pytest.param("float32", lambda c: changed(c, pingpong=1), TypeError, ("pingpong",), id="pingpong-int"),
    pytest.param("float16", lambda c: changed(c, accumulate=""), ValueError, ("accumulate",),
                 id="accumulate-empty"),
    pytest.param("float32", lambda c: changed(c, dispatch=""), ValueError, ("dispatch",), id="dispatch-empty"),
    pytest.param("float32", lambda c: changed(c, timeout="x"), TypeError, ("timeout",), id="timeout-str"),
    pytest.param("float32", lambda c: changed(c, timeout=-1), ValueError, ("timeout",), id="timeout-negative"),
]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_the_call_the_error_cases_break_is_valid(dtype, rng):
    call = valid_call(rng, dtype)
    assert bits_equal(call.run(), treduce_reference(call.tensors, call.root, "sum"))


@pytest.mark.parametrize("dtype,break_call,error,words", BAD_CALLS)
@pytest.mark.parametrize("after_a_valid_call", [False, True], ids=["fresh", "after-a-valid-call"])
def test_bad_call_raises_before_writing_anything(dtype, break_call, error, words, after_a_valid_call, rng):
    """Also when an equal (1 == True, 2.0 == 2) valid call of the same arrays ran just before."""
    valid = valid_call(rng, dtype)
    call = break_call(valid)
    if after_a_valid_call:  # the same options as valid values they compare equal to: ints, bools
        try:
            tile = tuple(int(t) for t in call.kwargs["tile"])
        except (TypeError, ValueError):
            tile = TILE
        kwargs = {**call.kwargs, "tile": tile, "pingpong": bool(call.kwargs.get("pingpong", False))}
        kwargs.pop("timeout", None)
        try:
            treduce(call.tensors, call.root, valid.dst.copy(), **kwargs)
        except (TypeError, ValueError):
            pass  # the break is elsewhere than the options
    arrays = call.tensors + [call.dst]
    before = [a.copy() for a in arrays]
    with pytest.raises(error) as err:
        call.run()
    message = str(err.value).lower()
    assert all(word in message for word in words), message
    assert all(bits_equal(a, b) for a, b in zip(arrays, before)), "a failed call wrote into dst or a source"


@pytest.mark.parametrize("tile", [((1 << 63) - 5, 1), (4, 1 << 40), (1 << 40, 1 << 40)],
                         ids=["rows-near-int64", "cols-2**40", "both-2**40"])
def test_a_tile_past_the_tensor_is_one_chunk_of_its_rows_or_cols(tile, rng):
    """Any int64 is a tile: no count overflows and no buffer grows with it."""
    xs = random_sources(rng, 3, (6, 20), "float32")
    dst = poisoned((6, 20), "float32")
    plan = tp.plan(tp.comm.treduce, tp.comm.ParallelGroup(xs, root=1), dst, tile=tile)
    chunks = -(-6 // min(tile[0], 6)) * -(-20 // min(tile[1], 20))
    assert plan.params["chunks"] == chunks and plan.params["chunk"] == f"{tile[0]} x {tile[1]}", plan.params
    assert treduce(xs, 1, dst, tile=tile) is dst
    assert bits_equal(dst, treduce_reference(xs, 1, "sum"))


def test_a_forced_variant_shows_the_preference_it_overrides(rng):
    group = tp.comm.ParallelGroup(random_sources(rng, 3, (8, 32), "float32"), root=0)
    assert tp.plan(tp.comm.treduce, group, backend="cpu").variant == "root_pull"  # preferred on the CPU
    chosen = trace_entry(tp.plan(tp.comm.treduce, group, backend="cpu", dispatch="scatter_gather"), "scatter_gather")
    assert chosen.status == "chosen"
    assert any("preference" in reason and "dispatch=" in reason for reason in chosen.reasons), chosen.reasons


def test_plan_and_variants_take_treduce_by_name(rng):
    group = tp.comm.ParallelGroup(random_sources(rng, 3, (8, 32), "float32"), root=2)
    assert tp.plan("treduce", group).params == tp.plan(tp.comm.treduce, group).params
    assert tp.variants(tp.comm.treduce) == tp.variants("treduce")
    assert [v[0] for v in tp.variants("treduce")] == ["chain", "scatter_gather", "root_pull"]


def test_a_group_is_immutable_ranks_included():
    g = tp.comm.ParallelGroup([np.ones((2, 3), np.float32)] * 3, root=1)
    with pytest.raises(AttributeError):
        g.root = 0
    with pytest.raises(AttributeError):
        g.tensors.append(np.ones((2, 3), np.float32))  # no rank is added behind the group's back
    assert g.size == 3 and isinstance(g.tensors, tuple)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_torch_cpu_tensors_meet_in_host_memory_as_numpy_arrays_do(dtype, rng):
    """DESIGN §2: operands are any arrays with __dlpack__; torch's CPU tensors reduce as their NumPy
    views do (bits, strides), into a new tensor or in place into a given one, and a tensor that
    needs a gradient is refused (treduce has no backward)."""
    torch = pytest.importorskip("torch")
    from tileprim._torch.host import to_numpy, to_torch
    xs = random_sources(rng, 3, (6, 40), dtype)
    want = treduce_reference(xs, root=2, op="sum")
    tensors = [to_torch(x)[:, ::2] for x in xs]  # strided views, as in test_strided_sources_and_dst
    got = treduce(tensors, root=2)
    assert isinstance(got, torch.Tensor) and bits_equal(to_numpy(got), want[:, ::2])
    dst = to_torch(poisoned((6, 20), dtype))
    assert treduce(tensors, root=1, dst=dst) is dst
    assert bits_equal(to_numpy(dst), treduce_reference(xs, root=1, op="sum")[:, ::2])
    assert tp.plan(tp.comm.treduce, tp.comm.ParallelGroup(tensors, root=0), tile=TILE).variant
    if dtype == "float32":
        with pytest.raises(TypeError, match="treduce: has no backward"):
            treduce([t.clone().requires_grad_() for t in tensors], root=0)
