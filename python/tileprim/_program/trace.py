"""Tracing a tile program: while its function runs, every op called with tiles records a step
(op, operand values, options, the user's file:line) instead of running. Nothing is planned here:
the steps go to C++ (``_C.plan_program``) as they are."""
from __future__ import annotations

import os
import sys
from typing import List, Optional

import numpy as np

import tileprim._C as _C
from .._arrays.dtypes import INDEX_DTYPES, TILE_DTYPES, check_index_scalar, dtype_name
from .._calls.scope import ExecScope, check_storage, not_a_scope
from .._checks import as_axis, as_bool, short_repr
from .._layout.value import as_layout
from .._opspec.table import SPECS
from .scalar_argument import ScalarArgument
from .tile import Tile

__all__ = ["TRACING", "Trace", "record_step", "user_location"]

# The trace being recorded, or None. A one-element list: the generated op functions read it on
# every call, and a list item is the cheapest lookup that can change.
TRACING: List[Optional["Trace"]] = [None]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PROGRAMS_SHIPPED = os.path.join(_PACKAGE, "layers.py")  # programs written as a user's: their lines are named
SCALAR_TYPES = (int, float, bool, np.integer, np.floating)  # what a program takes as a scalar, not an array
# What belongs to the program call, not to one of its steps.
_CALL_ONLY = ("batch_dims", "backend", "target", "out")


def user_location(depth: int = 1) -> str:
    """file:line of the innermost frame outside tileprim (the user's line that made this call)."""
    frame = sys._getframe(depth)
    while frame is not None:
        name = frame.f_code.co_filename
        if name == _PROGRAMS_SHIPPED or not (name.startswith(_PACKAGE) or name.startswith("<tileprim.")):
            return f"{os.path.basename(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>:0"


class Trace:
    """One tracing of one program: its input tiles, its steps, and the tiles they made."""

    def __init__(self, name: str, scope):
        self.name, self.scope = name, scope
        self.inputs: List[tuple] = []  # (name, dtype, core shape, batch_broadcast)
        self.steps: List[dict] = []
        self.tiles: list = []          # value id -> Tile
        self.location: Optional[str] = None  # the steps' file:line while a derivation records them

    def input(self, name: str, dtype: str, shape: tuple, batch_broadcast: bool):
        tile = Tile(self, len(self.tiles), tuple(shape), dtype, None, None, name)
        self.tiles.append(tile)
        self.inputs.append((name, dtype, list(shape) or [1], batch_broadcast))
        return tile

    def add(self, step: dict, shape: tuple, dtype: str, storage, layout):
        step["name"] = ""
        tile = Tile(self, len(self.tiles), shape, dtype, storage, layout, "")
        self.tiles.append(tile)
        self.steps.append(step)
        return tile

    def name_results(self, local_names: dict) -> None:
        """Gives each step's result the name the user's code bound it to (e, m, xf, ...)."""
        n_inputs = len(self.inputs)
        for name, value in local_names.items():
            if type(value) is Tile and value._trace is self and value._id >= n_inputs:
                value = self.tiles[value._id]  # the value's own tile (not a tp.stop_gradient view of it)
                if not value.name:
                    value.name = name
                    self.steps[value._id - n_inputs]["name"] = name


def record_step(op, operands, axes, out, accum, scope, storage, layout, out_layout, batch_dims, target, backend,
                dispatch, extra, config, keepdims):
    """Records one op call of the program being traced; returns its result tile."""
    trace = TRACING[0]
    where = trace.location or user_location(2)
    given = {"batch_dims": batch_dims != 0, "backend": backend is not None, "target": target is not None,
             "out": out is not None}
    for name in _CALL_ONLY:
        if given[name]:
            raise ValueError(f"{where}: {op}: {name}= belongs to the program call, not to a step "
                             f"(call the program with {name}=...)")
    if as_bool(accum, "accum"):
        raise ValueError(f"{where}: {op}: accum=True folds into out=, which a program's step does not take")
    if scope is not None and not isinstance(scope, ExecScope):
        raise not_a_scope(scope, f"{where}: scope")
    if trace.scope is None:  # the first step to name a scope names the program's
        trace.scope = scope
    elif scope is not None and scope is not trace.scope:
        raise ValueError(f"{where}: {op}: scope={scope!r}, but the program runs at {trace.scope!r}; a program has "
                         f"one scope (give it to the decorator or the call)")
    if "axis" in config:
        raise TypeError(f"{where}: unexpected keyword argument 'axis': tileprim reduces over axes=")
    ids, scalars, tiles, stopped, run_time, given = [], [], [], [], [], []  # given: each scalar as passed
    for x in operands:
        # a float argument of this call handed straight to the op: a run-time scalar (its value kept)
        run_time.append(x._tp_index if type(x) is ScalarArgument and x._tp_trace is trace else -1)
        if type(x) is Tile:
            if x.stopped:
                stopped.append(len(ids))
            if x._trace is not trace:
                raise ValueError(f"{where}: {op}: {x!r} is a tile of another program (or of an earlier tracing); "
                                 f"pass it to this program as an argument")
            ids.append(x._id)
            scalars.append(0.0)
            tiles.append(x)
        elif isinstance(x, SCALAR_TYPES) and not isinstance(x, np.bool_):
            ids.append(-1)
            try:
                scalars.append(float(x))
            except OverflowError:  # an int past float64's range, e.g. 10**400
                raise ValueError(f"{where}: {op}: the scalar {short_repr(x)} is beyond float64's range (about 1.8e308)"
                                 ) from None
            given.append(x)
        else:
            raise TypeError(f"{where}: {op}: an operand is a {type(x).__name__}, not a tile of this program; inside "
                            f"a program, ops take its tiles and Python scalars (pass arrays as program arguments)")
    if not tiles:
        raise ValueError(f"{where}: {op}: at least one operand must be a tile (all are scalars)")
    if op == "fill" and ids[1] != -1:
        raise TypeError(f"{where}: value: fill takes a Python scalar value")
    family = SPECS[op]["family"]
    dtype = tiles[0].dtype
    if dtype in INDEX_DTYPES:
        scalar = iter(given)
        for name, u in zip(SPECS[op]["operands"], ids):
            if u < 0:
                check_index_scalar(next(scalar), dtype, f"{where}: {op}: {name}")
    if op == "cast":
        dtype = dtype_name(extra, "dtype", TILE_DTYPES)
    if family == "reduction":
        shape, axes_list = _reduced(tiles[0].shape, axes, as_bool(keepdims, "keepdims"), where)
    elif family == "gather":  # take: idx's shape; scatter: x's (the planner checks that they fit)
        if isinstance(axes, bool) or not isinstance(axes, (int, np.integer)):
            raise TypeError(f"{where}: axis: expected an int, not {axes!r}")
        for name, u in zip(SPECS[op]["operands"], ids):
            if u < 0:
                raise TypeError(f"{where}: {op}: {name}: {op} takes tiles, not a scalar")
        shape, axes_list = tiles[1 if op == "take_along_axis" else 0].shape, [as_axis(axes, f"{where}: axis")]
    else:  # the planner's rule (C++'s)
        axes_list = []
        shape = tuple(_C.broadcast_shapes([list(t.shape) for t in tiles], where, op))
    core_layout = as_layout(layout, "layout")
    core_out_layout = as_layout(out_layout, "out_layout")
    step = {"op": op, "operands": ids, "scalars": scalars, "axes": axes_list,
            "keepdims": bool(keepdims) if family == "reduction" else False,
            "dtype": dtype if op == "cast" else "", "storage": storage or "",
            "layout": core_layout._core if core_layout is not None else None,
            "out_layout": core_out_layout._core if core_out_layout is not None else None,
            "dispatch": dispatch or "", "config": dict(config), "where": where}
    if any(k >= 0 for k in run_time):  # the call's float arguments among its operands (only where there are)
        step["scalar_args"] = run_time
    if stopped:  # operands read through tp.stop_gradient (the key only where there are: other programs' digests stay)
        step["stopped"] = stopped
    check_storage(storage, f"{where}: storage")
    if dispatch is not None and not isinstance(dispatch, str):
        raise TypeError(f"{where}: dispatch: expected a variant name, not {dispatch!r}")
    shown_layout = core_out_layout if op != "copy" else core_layout
    return trace.add(step, shape, dtype, storage, shown_layout)


def _reduced(shape: tuple, axes, keepdims: bool, where: str):
    """The result's shape by the planner's rule (C++'s), and the axes as given."""
    items = axes if isinstance(axes, (tuple, list)) else (axes,)
    out = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"{where}: axes: expected an int or a tuple of ints, not {axes!r}")
        out.append(as_axis(a, f"{where}: axes"))
    reduced, _ = _C.reduced_shape(list(shape), out, keepdims, where)
    return reduced, out
