"""A standalone gather op (take_along_axis, scatter_add_along_axis): a tile program of one step,
so that its operands keep their own shapes (x's rows beside idx's picks) and their batch dims
broadcast as a program's arguments do, on every backend and array library, under autograd (the
program's derived backward) and ``torch.compile`` alike. One program per op and step options;
``axis`` is its last argument, a constant of the traced step."""
from __future__ import annotations

from typing import Dict

from .._checks import as_axis
from .._opspec.table import OPS, SPECS
from .program import Program

__all__ = ["run_gather"]

_PROGRAMS: Dict[tuple, Program] = {}


def run_gather(op, operands, axis, out, accum, scope, storage, layout, out_layout, batch_dims, target, backend,
               dispatch, extra, config, keepdims, runs=True):
    """Runs the op's program on ``operands`` (``runs=False``: its ProgramPlan, nothing run)."""
    axis = as_axis(axis, "axis")  # checked here: as a program argument it would be taken for an array
    program = _program(op, storage, layout, out_layout, dispatch, tuple(sorted(config.items())))
    if not runs:
        return program._tp_planner(*operands, axis, batch_dims=batch_dims, scope=scope, backend=backend, target=target)
    return program(*operands, axis, batch_dims=batch_dims, scope=scope, backend=backend, target=target, out=out)


def _program(op, storage, layout, out_layout, dispatch, config) -> Program:
    key = (op, storage, layout, out_layout, dispatch, config)
    program = _PROGRAMS.get(key)
    if program is None:
        names = SPECS[op]["operands"]
        fn = OPS[op]
        options = dict(storage=storage, layout=layout, out_layout=out_layout, dispatch=dispatch, **dict(config))
        # a function of the op's operand names and axis, for the program's signature and messages
        namespace = {"fn": fn, "options": options}
        source = f"def {op}({', '.join(names)}, axis):\n    return fn({', '.join(names)}, axis, **options)\n"
        exec(compile(source, f"<tileprim.{op}>", "exec"), namespace)  # a step's location is the caller's line
        program = _PROGRAMS[key] = Program(namespace[op], None, None)
    return program
