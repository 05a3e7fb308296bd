"""The backward of a tile program, derived from its traced steps: a second tile program whose
arguments are the forward's arrays and the gradients of its results, and whose results are the
gradients of the forward arguments that need one. It recomputes the forward values the
vector-Jacobian products read (only those), then takes the forward steps in reverse order, each
step's product written with tileprim ops (``_opspec.derivatives``, the rules standalone ops' backward
use). Being a tile program, it is planned, lowered and run as one kernel like any, with the same
bits on the CPU and the GPU.

A value that several steps read gets its gradient summed in reverse step order. A reduction
without ``keepdims`` over dims that are not the tile's leading ones has no gradient here (a
program has no reshape to broadcast it back): such a step raises, naming its line."""
from __future__ import annotations

import inspect
from typing import Dict, List, Sequence

from .._arrays.dtypes import TILE_DTYPES, dtype_name
from .._opspec.derivatives import GATHER, NARY, UNARY, VALUELESS
from .._opspec.table import OPS
from .scalar_argument import ScalarArgument
from .tile import Tile
from .trace import TRACING, Trace

__all__ = ["derive_backward"]


def derive_backward(forward, output_ids: Sequence[int], needs_grad: Sequence[bool], stopped: Sequence[bool] = (),
                    floats: Sequence[float] = ()):
    """(function, wanted, sources): the function of the tile program computing the gradients of
    the forward arguments flagged in ``needs_grad`` (one flag per array argument, in order;
    ``wanted`` lists those that get one), or None when none does. ``forward`` is the forward's
    Trace. Its arguments: the forward's arrays, then one gradient per result, then the forward's
    float arguments (``floats``, their values in this call), which it hands to its ops as the forward
    did (run-time scalars where the forward's were: one backward plan for every value). ``sources`` says
    where each wanted gradient is: ``("argument", k)``, the function's argument k unchanged (a
    result's gradient passed on, through casts that widen exactly and back), or ``("result", j)``,
    the function's result j. The function returns each gradient it computes once (an add's two
    operands share one) and none that is an argument (it is None where that leaves none), so a
    caller takes those as they are, with no copy written. ``stopped`` flags the results returned
    through tp.stop_gradient: their gradients are taken and passed nowhere."""
    names = [name for name, _, _, _ in forward.inputs]
    grad_names = [f"grad_{forward.tiles[i].name or f'result{k}'}" for k, i in enumerate(output_ids)]
    passed = [(i, k) for k, i in enumerate(output_ids) if not (k < len(stopped) and stopped[k])]
    reaches = _depends_on(forward, [i for i, _ in passed])
    wanted = [i for i, need in enumerate(needs_grad) if need and i in reaches]
    if not wanted:
        return None

    def gradients(*tiles):
        derivation = _Derivation(forward, tiles[:len(names)], wanted, tiles[len(names) + len(output_ids):])
        derivation.seed([i for i, _ in passed], [tiles[len(names) + k] for _, k in passed])
        return tuple(derivation.gradient_of_input(i, f"grad_{names[i]}") for i in wanted)

    sources, computed = _sources(forward, output_ids, gradients, floats)
    if not computed:
        return None, wanted, sources

    def body(*tiles):
        made = gradients(*tiles)
        return tuple(made[k] for k in computed)

    body.__name__ = body.__qualname__ = f"{forward.name}_backward"
    scalar_names = [f"scalar{k}" for k in range(len(floats))]
    body.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names + grad_names + scalar_names])
    return body, wanted, sources


def _sources(forward, output_ids, gradients, floats):
    """(sources, computed): ``gradients`` traced once on tiles of the forward's shapes; for each
    tile it returns, ("argument", k) where it is argument k, else ("result", j) where it is the
    j-th distinct tile computed; ``computed`` the positions of those distinct tiles."""
    trace = Trace(f"{forward.name}_backward", forward.scope)
    tiles = [trace.input(name, t.dtype, t.shape, shared)
             for (name, _, _, shared), t in zip(forward.inputs, forward.tiles)]
    tiles += [trace.input(f"grad{k}", forward.tiles[i].dtype, tuple(forward.tiles[i].shape) or (1,), False)
              for k, i in enumerate(output_ids)]
    outer, TRACING[0] = TRACING[0], trace
    try:
        results = gradients(*tiles, *(ScalarArgument(v, k, trace) for k, v in enumerate(floats)))
    finally:
        TRACING[0] = outer
    sources, computed, first = [], [], {}
    for position, t in enumerate(results):
        if t._id < len(tiles):
            sources.append(("argument", t._id))
            continue
        if t._id not in first:
            first[t._id] = len(computed)
            computed.append(position)
        sources.append(("result", first[t._id]))
    return sources, computed


def _arguments_of(forward) -> List[set]:
    """For each forward value: the arguments it depends on through operands that pass a gradient
    (not those read through tp.stop_gradient)."""
    depends: List[set] = [{i} for i in range(len(forward.inputs))]
    for step in forward.steps:
        depends.append(set().union(*(depends[u] for u in _passing(step))))
    return depends


def _passing(step: dict) -> List[int]:
    """The step's tile operands a gradient flows back to."""
    stopped = step.get("stopped", ())
    return [u for k, u in enumerate(step["operands"]) if u >= 0 and k not in stopped]


def _depends_on(forward, output_ids) -> set:
    """The forward arguments some result depends on."""
    depends = _arguments_of(forward)
    return set().union(*(depends[o] for o in output_ids))


class _Lazy:
    """A forward value the derivation may read: recomputed in the backward program on first use."""
    __slots__ = ("vid",)

    def __init__(self, vid: int):
        self.vid = vid


# casts that widen exactly: a tile cast to one of these and back is the tile
_WIDER = {"float16": ("float32", "float64"), "bfloat16": ("float32", "float64"), "float32": ("float64",)}


class _Ops:
    """The op functions, taking forward values lazily (a rule that never reads one costs nothing);
    an op called again on the same tiles and options gives the tile it gave (two rules sharing a
    product compute it once); a tile cast to its own dtype, or widened exactly and cast back, is the
    tile itself (a gradient through a cast to float32 and back: often the gradient passed in, which
    then needs no copy)."""

    def __init__(self, derivation: "_Derivation"):
        self._ops, self._derivation, self._made = OPS, derivation, {}
        self._widened: Dict[int, Tile] = {}  # tile id -> the tile it widens exactly

    def __getattr__(self, name):
        fn, value = self._ops[name], self._derivation.value

        def call(*args, **kwargs):
            args = [value(a.vid) if type(a) is _Lazy else a for a in args]
            if name == "cast" and type(args[0]) is Tile and not kwargs:
                to = dtype_name(args[1], "dtype", TILE_DTYPES)
                if to == args[0].dtype:
                    return args[0]
                narrower = self._widened.get(args[0]._id)
                if narrower is not None and narrower.dtype == to:
                    return narrower
            key = (name, *((a._id,) if type(a) is Tile else ("scalar", a._tp_index) if type(a) is ScalarArgument
                           else a for a in args), *sorted(kwargs.items()))
            made = self._made.get(key)
            if made is None:
                made = self._made[key] = fn(*args, **kwargs)
                if name == "cast" and type(args[0]) is Tile and made.dtype in _WIDER.get(args[0].dtype, ()):
                    self._widened[made._id] = args[0]
            return made
        return call


class _Derivation:
    """One tracing of a backward program: forward values recomputed on demand, gradients summed."""

    def __init__(self, forward, inputs, wanted, scalars=()):
        self.forward, self.trace = forward, TRACING[0]
        self.scalars = list(scalars)  # the backward's float arguments: the forward's, by the forward's index
        # the values a gradient is worth sending to: those that depend on a wanted argument
        self.relevant = {v for v, args in enumerate(_arguments_of(forward)) if args.intersection(wanted)}
        self.n_inputs = len(forward.inputs)
        self.values: Dict[int, object] = dict(enumerate(inputs))  # forward value id -> backward tile
        self.grads: Dict[int, object] = {}
        self.tp = _Ops(self)

    # ---- forward values ----------------------------------------------------------------------
    def value(self, vid: int):
        """The backward program's tile holding forward value ``vid`` (its step replayed once)."""
        tile = self.values.get(vid)
        if tile is None:
            step = self.forward.steps[vid - self.n_inputs]
            operands = [self.value(u)._id if u >= 0 else -1 for u in step["operands"]]
            source = self.forward.tiles[vid]
            tile = self.trace.add(dict(step, operands=operands), source.shape, source.dtype, source.storage,
                                  source.layout)
            tile.name = self.trace.steps[-1]["name"] = step["name"]
            self.values[vid] = tile
        return tile

    def shape(self, vid: int) -> tuple:
        return tuple(self.forward.tiles[vid].shape)

    # ---- gradients -----------------------------------------------------------------------------
    def seed(self, output_ids, grads) -> None:
        """The results' gradients, then every step's product in reverse order."""
        for vid, g in zip(output_ids, grads):
            self.accumulate(vid, g)
        for k in reversed(range(len(self.forward.steps))):
            vid = self.n_inputs + k
            if vid in self.grads and vid in self.relevant:
                self.trace.location = f"{self.forward.steps[k]['where']} (backward)"
                try:
                    self.step_backward(self.forward.steps[k], vid)
                finally:
                    self.trace.location = None

    def accumulate(self, vid: int, g) -> None:
        have = self.grads.get(vid)
        self.grads[vid] = g if have is None else self.tp.add(have, g)

    def gradient(self, vid: int):
        """Value vid's gradient at its own shape (a broadcast one made whole)."""
        g, shape = self.grads[vid], self.shape(vid)
        if len(g.shape) > len(shape):  # a result of shape (): its gradient came in as (1,)
            g = self.sum_to(g, shape)
        if tuple(g.shape) != shape:
            g = self.tp.add(self.tp.zero(_Lazy(vid)), g)
        forward_name = self.forward.tiles[vid].name
        if forward_name:
            self.name(g, f"grad_{forward_name}")
        return g

    def name(self, tile, name: str) -> None:
        """Names a step's result (a gradient passed in unchanged keeps its argument's name)."""
        n_inputs = len(self.trace.inputs)
        if tile._id >= n_inputs and not tile.name:
            tile.name = self.trace.steps[tile._id - n_inputs]["name"] = name

    def gradient_of_input(self, i: int, name: str):
        g = self.gradient(i) if i in self.grads else self.tp.zero(_Lazy(i))
        self.name(g, name)
        return g

    def step_backward(self, step: dict, vid: int) -> None:
        op, tp, g = step["op"], self.tp, self.gradient(vid)
        operands, stopped = step["operands"], step.get("stopped", ())
        if op in VALUELESS or not _passing(step):
            return
        if op in ("sum", "max", "min"):
            self.accumulate(operands[0], self.reduction_backward(step, vid, g))
            return
        if op in UNARY:
            x = operands[0]
            self.accumulate(x, UNARY[op](tp, g, _Lazy(x), _Lazy(vid), self.forward.tiles[x].dtype))
            return
        # the forward's run-time scalars: the backward's float arguments (given none, their values as constants)
        taken = step.get("scalar_args", ()) if self.scalars else ()
        values = []
        for i, (u, s) in enumerate(zip(operands, step["scalars"])):
            k = taken[i] if taken else -1
            values.append(_Lazy(u) if u >= 0 else self.scalars[k] if k >= 0 else s)
        if op in GATHER:
            for k, (u, rule) in enumerate(zip(operands, GATHER[op])):
                if rule is not None and u in self.relevant and k not in stopped:
                    self.accumulate(u, rule(tp, g, values, step["axes"][0]))
            return
        for k, (u, rule) in enumerate(zip(operands, NARY[op])):
            if u >= 0 and u in self.relevant and rule is not None and k not in stopped:
                self.accumulate(u, self.sum_to(rule(tp, g, values, _Lazy(vid)), self.shape(u)))

    def reduction_backward(self, step: dict, vid: int, g):
        x = step["operands"][0]
        shape = self.shape(x)
        rank = max(len(shape), 1)
        axes = sorted({a % rank for a in step["axes"]})
        if not step["keepdims"] and axes != list(range(len(axes))) and len(shape) > 1:
            raise ValueError(f"{step['where']}: {step['op']}: the backward of a reduction over axes "
                             f"{tuple(step['axes'])} of a {len(shape)}-dim tile needs keepdims=True (a program "
                             f"cannot broadcast its gradient back otherwise)")
        if step["op"] == "sum":
            return g  # broadcast over the reduced dims
        tp = self.tp
        mask = tp.eq(_Lazy(x), _Lazy(vid))
        count = tp.sum(mask, axes=tuple(axes), keepdims=True)  # broadcasts against g either way
        return tp.mul(mask, tp.fdiv(g, tp.maximum(count, 1.0)))

    def sum_to(self, g, shape: tuple):
        """An operand's gradient summed over the dims it was broadcast along."""
        if tuple(g.shape) == shape:
            return g
        lead = len(g.shape) - len(shape)
        stretched = tuple(lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
        if stretched:
            g = self.tp.sum(g, axes=stretched, keepdims=True)
        if lead:
            g = self.tp.sum(g, axes=tuple(range(lead)))
        return g
