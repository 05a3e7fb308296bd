"""Op functions written from the op table: each op's signature follows its family and operand
names (``sum(src, axes=-1, *, out=None, accum=False, keepdims=False, scope=None, ...)``); its
body hands the arguments to ``prepare`` (the call memo for tileprim's own functions, the custom op
for the twins torch.compile traces) and runs what that makes, or, inside a tile program being
traced, records a step instead."""
from __future__ import annotations

from .._opspec.docs import op_docstring
from .._program.gather_call import run_gather
from .._program.map_tiles import op_tiles
from .._program.trace import TRACING, record_step
from .where_condition import where_condition

__all__ = ["op_function"]

_COMMON = ("scope=None, storage=None, layout=None, out_layout=None, batch_dims=0, target=None, backend=None, "
           "dispatch=None, **config")
# A scope's method (tp.warp.sum) passes its scope under this name: a scope= given beside it that
# names another is refused, not silently taken (DESIGN §2: the method and scope= are one call)
_BOUND = ("    if '_method_scope' in config:\n"
          "        scope = method_scope(config.pop('_method_scope'), scope)\n")


def _gather_source(spec: dict, runs: bool) -> str:
    """A gather op's (take_along_axis, scatter_add_along_axis): its operands and ``axis``; it runs as
    a tile program of one step (``gather_call``), and tp.plan gives that program's plan."""
    pack = "(" + "".join(f"{o}, " for o in spec["operands"]) + ")"
    args = (f"{spec['name']!r}, {pack}, axis, out, False, scope, storage, layout, out_layout, batch_dims, target, "
            f"backend, dispatch, None, config, False")
    record = f"    if TRACING[0] is not None:\n        return record_step({args})\n" if runs else ""
    return (f"def op({', '.join(spec['operands'])}, axis=-1, *, out=None, {_COMMON}):\n{_BOUND}{record}"
            f"    return gather_call({args}, runs={runs})\n")


def _source(spec: dict, runs: bool) -> str:
    """The op function's source: its signature, then one call of ``prepare``, whose result runs,
    or (``runs=False``: what tp.plan calls) gives its Plan."""
    if spec["family"] == "gather":
        return _gather_source(spec, runs)
    operands = spec["operands"]
    reduction = spec["family"] == "reduction"
    params = list(operands) + ([spec["extra_arg"]] if spec["extra_arg"] else [])
    signature = ", ".join(params) + (", axes=-1" if reduction else "")
    keywords = "out=None, accum=False, keepdims=False, " if reduction else "out=None, "
    # fastmath: an elementwise op's option (C++ reads it from config); None leaves it unsaid, so
    # that a step of a tile program takes the program's
    fastmath = "fastmath=None, " if "fastmath" in spec["options"] else ""
    with_fastmath = "    if fastmath is not None:\n        config['fastmath'] = fastmath\n" if fastmath else ""
    pack = "(" + "".join(f"{o}, " for o in operands) + ")"
    tail = f".run({pack}, out)" if runs else ".plan"
    args = (f"{spec['name']!r}, {pack}, {'axes' if reduction else 'None'}, out, "
            f"{'accum' if reduction else 'False'}, scope, storage, layout, out_layout, batch_dims, target, "
            f"backend, dispatch, {spec['extra_arg'] or 'None'}, config, {'keepdims' if reduction else 'False'}")
    # inside a tile program being traced, a call records a step instead of running
    record = f"    if TRACING[0] is not None:\n        return record_step({args})\n" if runs else ""
    condition = ("    cond = where_condition(cond, a, b, scope=scope, batch_dims=batch_dims, target=target, "
                 "backend=backend)\n" if spec["name"] == "where" and runs else "")
    tiles = _tiles_source(spec, pack, runs) if spec["family"] == "elementwise" else ""
    return (f"def op({signature}, *, {keywords}{fastmath}{_COMMON}):\n{_BOUND}{with_fastmath}{condition}{record}"
            f"{tiles}    return prepare({args}){tail}\n")


def _tiles_source(spec: dict, pack: str, runs: bool) -> str:
    """A map over rows with nothing placed by hand takes them as tiles of 8, as a program of maps
    alone does (``_program.map_tiles``): the call on the tiles, its result in the rows' shape (tp.plan:
    the tiles' plan, saying so)."""
    args = (f"{spec['name']!r}, tiles.args, None, tiles.out, False, None, None, None, None, 1, target, backend, "
            f"None, {spec['extra_arg'] or 'None'}, config, False")
    done = ("        return tiles.results(prepare(" + args + ").run(tiles.args, tiles.out), out)\n" if runs
            else "        return tiles.plan(prepare(" + args + ").plan, batch_dims)\n")
    return ("    if batch_dims and scope is None and storage is None and layout is None and out_layout is None "
            "and dispatch is None:\n"
            f"        tiles = op_tiles({pack}, batch_dims, out)\n"
            "        if tiles is not None:\n" + done.replace("        return", "            return"))


def _method_scope(bound, scope):
    """The scope of a scope's method, where a scope= beside it names none or the same."""
    if scope is not None and scope != bound:
        raise TypeError(f"scope: {bound!r}'s method was called with scope={scope!r}; call tp.<op>(..., scope=...) "
                        "or the method of the scope meant, not both")
    return bound


def op_function(spec: dict, prepare, runs: bool = True):
    """The function of the op ``spec`` (an entry of ``_opspec.table.SPECS``): it hands its arguments to
    ``prepare`` and runs what comes back (``runs=False``: returns its Plan instead); ``scope=None``
    (named nowhere) is ``prepare``'s to resolve: tp.thread for one tile, the planner's choice for a
    batch."""
    namespace = {"prepare": prepare, "TRACING": TRACING, "record_step": record_step, "op_tiles": op_tiles,
                 "gather_call": run_gather, "method_scope": _method_scope, "where_condition": where_condition}
    exec(compile(_source(spec, runs), f"<tileprim.{spec['name']}>", "exec"), namespace)
    fn = namespace["op"]
    fn.__name__ = fn.__qualname__ = spec["name"]
    fn.__module__ = "tileprim"
    fn._tp_op = spec["name"]
    if runs:
        fn.__doc__ = op_docstring(spec)
    return fn
