"""Random layouts and random tile-op calls: each either works and agrees with an exact
big-integer reference, or raises ValueError / TypeError. Never another exception, never a crash.

HYPOTHESIS_PROFILE=dev runs more examples than the default "ci" profile."""
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import tileprim as tp
from tileprim import R, S, Swizzle, TileLayout
from test_layout import expected_positions

settings.register_profile("ci", max_examples=300, deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", parent=settings.get_profile("ci"), max_examples=3000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

INT64_MAX = 2**63 - 1
MAX_POSITIONS = 2**16      # what apply lists for one element
MAX_SWIZZLE_BITS = 32      # per_element + swizzle_len + atom_len
AXES = ("m", "laneid", "warpid", "tx", "wgid", "tid_in_wg", "wid_in_wg")
THREAD_WEIGHT = {"laneid": 1, "warpid": 32, "tx": 1, "wgid": 128, "tid_in_wg": 1, "wid_in_wg": 32}


def numbers(lo, hi):
    """Small values, values anywhere in [lo, hi], and powers of two give or take 2 (the edges)."""
    near_pow2 = st.builds(lambda k, d: 2**k + d, st.integers(0, 63), st.integers(-2, 2))
    return st.one_of(st.integers(lo, min(hi, 40)), st.integers(lo, hi),
                     near_pow2.filter(lambda v: lo <= v <= hi))


def iters(extents):
    axis = st.one_of(st.just("m"), st.sampled_from(AXES))
    return st.tuples(extents, numbers(0, 2**63), axis)


# Mostly valid parts, with out-of-range ones mixed in for the error paths.
EXTENTS = st.one_of(numbers(1, 2**63), st.integers(-2, 0))
REPLICA_EXTENTS = st.one_of(st.integers(1, 4), st.sampled_from([MAX_POSITIONS + 1, 2**40, 2**63]))
OFFSETS = st.dictionaries(st.sampled_from(AXES), st.one_of(numbers(0, 2**63), st.just(-1)), max_size=2)
SWIZZLES = st.none() | st.tuples(st.integers(-1, 24), st.integers(0, 6), st.integers(0, 24))


def layout_from(shard, replica, offset, swizzle):
    """The seeds' syntax for these parts: S[extents : strides] + R[...] + v @ axis + ..."""
    def part(head, it):
        return head[tuple(e for e, _, _ in it):tuple(s @ tp.Axis(a) for _, s, a in it)]
    expr = part(S, shard)
    if replica:
        expr = expr + part(R, replica)
    for axis, v in offset.items():
        expr = expr + v @ tp.Axis(axis)
    return TileLayout(expr, swizzle=None if swizzle is None else Swizzle(*swizzle))


def swizzled(addr, swizzle):
    if swizzle is None or swizzle[1] == 0:
        return addr
    per_element, swizzle_len, atom_len = swizzle
    x = addr >> per_element
    x ^= (x & (((1 << swizzle_len) - 1) << atom_len)) >> atom_len
    return (x << per_element) | (addr & ((1 << per_element) - 1))


def reference(shard, replica, offset, swizzle):
    """(size, span) by the layout's rules in exact integers, or None where a rule rejects it."""
    in_int64 = [(e, 1) for e, _, _ in shard + replica] + [(v, 0) for _, v, _ in shard + replica]
    in_int64 += [(v, 0) for v in offset.values()]
    if not all(low <= v <= INT64_MAX for v, low in in_int64):  # extents >= 1, strides and offsets >= 0
        return None
    if swizzle is not None:
        per_element, swizzle_len, atom_len = swizzle
        if min(swizzle) < 0 or atom_len < swizzle_len or sum(swizzle) > MAX_SWIZZLE_BITS:
            return None
    size = math.prod(e for e, _, _ in shard)
    last = dict(offset)
    for e, s, a in shard + replica:
        last[a] = last.get(a, 0) + (e - 1) * s
    last_thread = sum(v * THREAD_WEIGHT[a] for a, v in last.items() if a != "m")
    span = last.get("m", 0) + 1
    if swizzle is not None and swizzle[1]:
        block = 2 ** (swizzle[0] + swizzle[1])
        span = -(-span // block) * block
    if max([size, last_thread, span, *last.values()]) > INT64_MAX:
        return None
    return size, span


@given(shard=st.lists(iters(EXTENTS), min_size=1, max_size=4),
       replica=st.lists(iters(REPLICA_EXTENTS), max_size=3),
       offset=OFFSETS, swizzle=SWIZZLES, data=st.data())
def test_random_layouts_match_the_exact_formula_or_raise(shard, replica, offset, swizzle, data):
    want = reference(shard, replica, offset, swizzle)
    if want is None:
        with pytest.raises((ValueError, TypeError)):
            layout_from(shard, replica, offset, swizzle)
        return
    L = layout_from(shard, replica, offset, swizzle)
    size, span = want
    assert (L.size, L.span) == (size, span)
    assert L.storage().span == span
    assert [d.thread_extent * d.local_extent for d in L.dims()] == [e for e, _, _ in shard]
    assert str(L).startswith("S[")
    copies = math.prod(e for e, _, _ in replica)
    for flat in {0, size - 1, data.draw(st.integers(0, size - 1), label="flat")}:
        if copies > MAX_POSITIONS:
            with pytest.raises(ValueError, match="places; the limit on the positions listed"):
                L.apply(flat)
            continue
        places = [{**p, "m": swizzled(p["m"], swizzle)} if "m" in p else p
                  for p in expected_positions(shard, replica, offset, flat)]
        got = L.apply(flat)
        assert got == ({tp.Position(p) for p in places} if replica else places[0])


# Tile shapes, each with the shard extents that cover it (one iter per dim, or one for all).
SHAPES = [(8,), (32,), (4, 8), (32, 2), (32, 8), (2, 16)]
SMALL_STRIDES = st.sampled_from([0, 1, 2, 3, 8, 32, 2**40, 2**62])


@st.composite
def tile_layouts(draw, shape):
    """Layouts for a tile of this shape: often compact (row-major on each axis), often not."""
    extents = draw(st.sampled_from([shape, (math.prod(shape),)]))
    axes = [draw(st.sampled_from(["m", "m", "laneid"])) for _ in extents]
    shard = []
    for k, (e, axis) in enumerate(zip(extents, axes)):
        compact = math.prod(f for f, a in zip(extents[k + 1:], axes[k + 1:]) if a == axis)
        shard.append((e, draw(st.just(compact) | SMALL_STRIDES), axis))
    lanes_or_m = st.sampled_from(["m", "laneid"])
    replica = draw(st.lists(st.tuples(st.sampled_from([1, 2, 32]), SMALL_STRIDES, lanes_or_m), max_size=1))
    offset = draw(st.dictionaries(lanes_or_m, st.sampled_from([0, 1, 5, 2**62]), max_size=1))
    swizzle = draw(st.sampled_from([None, (0, 1, 1), (1, 2, 3)]))
    return shard, replica, offset, swizzle


@st.composite
def tile_calls(draw):
    shape = draw(st.sampled_from(SHAPES))
    scope = draw(st.sampled_from([tp.thread, tp.warp]))
    parts = draw(tile_layouts(shape))
    axes = draw(st.sampled_from([-1, 0, tuple(range(len(shape)))]))
    return shape, scope, parts, axes


def surely_valid(shape, scope, parts, op) -> bool:
    """Calls no rule refuses, known without tileprim: a row-major layout in one thread's registers
    (every axis m, compact strides, no replica, offset or swizzle), at thread scope, or at a warp for
    a sum (each lane then folds its own copy of the tile)."""
    shard, replica, offset, swizzle = parts
    compact, stride = True, 1
    for e, s, axis in reversed(shard):
        compact &= axis == "m" and s == stride
        stride *= e
    return compact and not replica and not offset and swizzle is None and (scope is tp.thread or op == "sum")


@example(call=((4, 8), tp.thread, ([(4, 8, "m"), (8, 1, "m")], [], {}, None), -1), op="sqrt")
@example(call=((32, 8), tp.warp, ([(32, 1, "laneid"), (8, 1, "m")], [], {}, None), -1), op="sum")
@given(call=tile_calls(), op=st.sampled_from(["sum", "sqrt"]))
def test_random_tile_ops_give_numpys_answer_or_raise(call, op):
    shape, scope, parts, axes = call
    # small positive integers: every summation order gives the same float32, sqrt is exact-rounded
    A = np.random.default_rng(0).integers(1, 100, size=shape).astype(np.float32)
    try:
        layout = layout_from(*parts)
        if op == "sum":
            got, want = tp.sum(A, axes=axes, scope=scope, layout=layout, backend="cpu"), A.sum(axis=axes)
        else:
            got, want = tp.sqrt(A, scope=scope, layout=layout, backend="cpu"), np.sqrt(A)
    except (ValueError, TypeError):
        # a refusal is a correct answer only where a rule may refuse; the errors name the argument
        assert not surely_valid(shape, scope, parts, op), f"a plain row-major call was refused: {parts}"
        event("refused")
        return
    event("ran")
    assert got.shape == want.shape and np.array_equal(got, want)


SCOPES = [("thread", 1), ("warp", 32), ("warpgroup", 128), ("cta", 3), ("cta", 64), ("cta", 96)]
OFFERED = {"thread": set(), "warp": {"laneid"}, "warpgroup": {"laneid", "wid_in_wg", "tid_in_wg"},
           "cta": set(THREAD_WEIGHT)}


def placement_reference(shard, replica, offset, swizzle, span, threads, private):
    """A placement's (load, store) tables from the reference positions, or None where two places
    share a register or a place's thread is past the scope's."""
    size = math.prod(e for e, _, _ in shard)
    load, store = [-1] * (span * threads), [-1] * (span * threads)
    for e in range(size):
        for i, p in enumerate(expected_positions(shard, replica, offset, e)):
            m = swizzled(p["m"], swizzle) if "m" in p else 0
            t = sum(v * THREAD_WEIGHT[a] for a, v in p.items() if a != "m")
            if t >= threads:
                return None
            for th in range(threads) if private else [t]:
                if load[m * threads + th] >= 0:
                    return None
                load[m * threads + th] = e
            if i == 0:
                store[m * threads + t] = e
    return load, store


@st.composite
def small_layouts(draw):
    """Small layouts, mostly placeable: each iter's stride is often the compact one (the extents
    after it on its axis), so that distinct elements and replicas land on distinct registers."""
    axis = st.sampled_from(["m", "m", "laneid", "warpid", "tx", "wid_in_wg", "tid_in_wg", "wgid"])
    iters = draw(st.lists(st.tuples(st.integers(1, 6), axis), min_size=1, max_size=5))
    n_shard = draw(st.integers(1, min(3, len(iters))))
    parts = []
    for k, (e, a) in enumerate(iters):
        compact = math.prod(f for f, b in iters[k + 1:] if b == a)
        parts.append((e, draw(st.just(compact) | st.integers(0, 9)), a))
    offset = draw(st.dictionaries(st.sampled_from(AXES), st.integers(0, 40), max_size=2))
    swizzle = draw(st.sampled_from([None, (0, 1, 1), (1, 2, 3), (0, 2, 2)]))
    return parts[:n_shard], parts[n_shard:], offset, swizzle


@given(parts=small_layouts(), scope=st.sampled_from(SCOPES))
def test_register_placement_matches_the_reference_positions(parts, scope):
    """place_in_registers (which sums per-iter steps rather than listing positions) fills exactly
    the registers the reference formula names, or refuses where that formula collides."""
    shard, replica, offset, swizzle = parts
    L = layout_from(shard, replica, offset, swizzle)
    kind, threads = scope
    try:
        got = L._core.placement(kind, threads)
    except ValueError:
        got = None
    if not set(L.thread_axes) <= OFFERED[kind]:
        assert got is None
        return
    want = placement_reference(shard, replica, offset, swizzle, L.span, threads,
                               private=not L.thread_axes and threads > 1)
    event("placed" if want else "refused")
    assert got == (None if want is None else (threads, L.span, *want))


def run_form_reference(threads, slots, load, store):
    """The first closed form (tp::RunPlace: lane l holds in slot s element
    ((s // vec) * owners + l % owners) * vec + s % vec, nothing past the elements, lanes below
    owners write back) that gives these tables: every lane an owner first, then the lanes that
    write slot 0 back; the widest vec first. (owners, vec, padded elements or 0), or (0, 0, 0)."""
    load = np.asarray(load).reshape(slots, threads)
    store = np.asarray(store).reshape(slots, threads)
    elements = int((store >= 0).sum())
    writers = store[0] >= 0
    leading = threads if writers.all() else int(np.argmin(writers))
    s, t = np.arange(slots)[:, None], np.arange(threads)[None, :]
    for owners in (threads, leading):
        for vec in (v for v in range(slots, 0, -1) if owners and slots % v == 0):
            e = ((s // vec) * owners + t % owners) * vec + s % vec
            e = np.where(e >= elements, -1, e)
            if np.array_equal(load, e) and np.array_equal(store, np.where(t < owners, e, -1)):
                return owners, vec, elements if owners * slots > elements else 0
    return 0, 0, 0


@st.composite
def run_layouts(draw):
    """Layouts the planner makes (runs of vec elements dealt to `owners` threads, replicated over
    the threads past them, padded past the elements), some nudged off that form (a stride or an
    offset), at a cta scope of the owners' threads or a few more."""
    runs, owners, vec, copies = (draw(st.integers(1, k)) for k in (4, 9, 5, 3))
    shard = [(runs, draw(st.sampled_from([vec, vec, vec + 1])), "m"), (owners, 1, "tx"), (vec, 1, "m")]
    replica = [(copies, owners, "tx")] if copies > 1 else []
    offset = draw(st.sampled_from([{}, {}, {"m": 1}, {"tx": 1}]))
    core = layout_from(shard, replica, offset, None)._core
    size = runs * owners * vec
    core = core.padded_to(draw(st.sampled_from([size, size, draw(st.integers(1, size))])))
    return core, ("cta", owners * copies + draw(st.sampled_from([0, 0, 1, 3])))


def small_layouts_in_place(parts, scope):
    return layout_from(*parts)._core, scope


@example(case=(layout_from([(2, 4, "m"), (3, 1, "tx"), (4, 1, "m")], [], {}, None)._core.padded_to(19), ("cta", 3)))
@example(case=(layout_from([(1, 2, "m"), (4, 1, "tx"), (2, 1, "m")], [(2, 4, "tx")], {}, None)._core, ("cta", 8)))
@given(case=st.one_of(run_layouts(), st.builds(small_layouts_in_place, small_layouts(), st.sampled_from(SCOPES))))
def test_run_form_is_the_first_closed_form_of_the_placement(case):
    """The placement's run form (found once when it is made, RegisterPlacement::run) is the first
    (owners, vec) whose formula gives its tables, exactly as a brute-force search finds it."""
    core, (kind, threads) = case
    try:
        placement = core.placement(kind, threads)
    except ValueError:
        event("refused")
        return
    want = run_form_reference(*placement)
    event("closed form" if want[0] else "tables only")
    event("padded" if want[2] else "whole")
    assert core.run_form(kind, threads) == want
