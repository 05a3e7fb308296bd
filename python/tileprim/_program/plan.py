"""ProgramPlan: a tile program as the planner left it: one Plan per step (inserted copies
included) with the variant, the registry's trace and the planner's reasons; where every tile
lives; the shared memory the program needs (by live range) and the barriers between steps.
``str()`` is a table; in Jupyter a diagram of the steps."""
from __future__ import annotations

from html import escape
from typing import Dict, List

from .._calls.plan import Plan

__all__ = ["ProgramPlan", "StepPlan"]


class StepPlan(Plan):
    """The Plan of one step of a program: the standalone call's Plan, plus where the step is in
    the user's code (``where``), whether the planner inserted it (``inserted``), the planner's
    ``reasons`` (the placement and layout it chose, or why a copy is needed) and the barrier
    before it (``sync_before``)."""

    def __init__(self, core, info: dict, values: list):
        super().__init__(core)
        self.op, self.where, self.inserted = info["op"], info["where"], info["inserted"]
        self.reasons: List[str] = list(info["reasons"])
        self.sync_before: str = info["sync_before"]
        self.operands = [None if i < 0 else values[i]["name"] for i in info["operands"]]
        self.scalars = [v if i < 0 else None for i, v in zip(info["operands"], info["scalars"])]
        self.result = values[info["result"]]["name"]
        self.operand_ids, self.result_id = list(info["operands"]), info["result"]

    def __str__(self) -> str:
        head = f"step {self.result} = {self.op}({', '.join(o or 'scalar' for o in self.operands)}) at {self.where}"
        if self.inserted:
            head += " (inserted by the planner)"
        return "\n".join([head, *("  " + r for r in self.reasons), super().__str__()])

    __repr__ = __str__


class ProgramPlan:
    """The plan of one tile program call signature; nothing has run.

    Attributes
    ----------
    steps : list of StepPlan
        One per step in order, inserted copies included.
    variants : list of str
        The steps' variants in order.
    numerics : dict
        How the program rounds: each step as its standalone op (the steps' numerics by step).
    shared_bytes : int
        Shared memory of the whole program, tiles reusing bytes when their live ranges do not meet.
    registers : int
        32-bit registers per thread of the tiles live at once in registers, at the peak (a 64-bit
        element takes two).
    register_budget : int
        The registers a thread of the scope may hold on the target (its share of a block's, within a
        thread's limit: 65536 and 255 on every architecture so far).
    staging : str
        How the kernel holds the rows, chosen like a variant (the first candidate whose predicate
        accepts, or the program's ``staging=``): ``"registers"`` (every tile in registers for the
        whole program), ``"shared"`` (the row inputs staged once in shared memory, each pass of the
        program, up to a reduction and then the outputs, taking them a chunk of registers at a
        time), ``"streamed"`` (the same passes re-reading the rows from global memory) or
        ``"spilled"`` (registers past the budget, which the GPU spills to local memory; with the
        fix). The steps and their bits are the same whichever runs.
    staging_trace : list of dict
        Every candidate in priority order: name, accepted, reasons.
    scope : str
        The scope it runs at: the named one, or the planner's choice where none is named.
    scope_trace : list of dict
        Where the scope is named nowhere, every candidate the planner tried (thread, warp,
        cta(64), warpgroup, cta(128) ... cta(1024), each with every staging it accepts): scope,
        staging, accepted, chosen, ns_per_row (the cost model's estimate per row on one SM of
        the target; None where it refuses) and reasons (the refusal, or the model's terms:
        memory, cores, barriers). Empty where a scope is named.
    rows : dict or None
        For ``"shared"`` and ``"streamed"``: the row shape, registers per thread for a whole row,
        the chunks and their size.
    tiles : list of dict
        Every tile: name, dtype, shape, storage, layout, live range, shared offset.
    out_shapes : list of tuple
        The shape of each result of the call.

    Examples
    --------
    >>> @tp.program(scope=tp.cta(32))
    ... def norm1(x):
    ...     return x / tp.sum(x, axes=-1, keepdims=True)
    >>> p = tp.plan(norm1, np.ones((4, 64), np.float32), batch_dims=1)
    >>> p.variants
    ['cross_warp', 'stage', 'reg']
    """

    def __init__(self, core, out_shapes):
        self._core = core
        self.out_shapes = out_shapes
        self.tiles: List[dict] = list(core.values)
        self.steps: List[StepPlan] = [StepPlan(c, info, self.tiles)
                                      for c, info in zip(core.step_plans, core.steps)]

    variants = property(lambda self: [s.variant for s in self.steps], doc="the steps' variants, in order")
    shared_bytes = property(lambda self: self._core.shared_bytes)
    registers = property(lambda self: self._core.peak_registers)
    register_budget = property(lambda self: self._core.register_budget)
    staging = property(lambda self: self._core.staging)
    staging_trace = property(lambda self: self._core.staging_trace)
    scope_trace = property(lambda self: self._core.scope_trace)
    rows = property(lambda self: self._core.rows)
    scope = property(lambda self: self._core.scope)
    backend = property(lambda self: self._core.backend)

    @property
    def numerics(self) -> Dict[str, object]:
        steps = {f"{i} {s.op} ({s.result})": s.numerics for i, s in enumerate(self.steps)}
        approximated = [name for name, n in steps.items() if "approximation" in n]
        rounding = ("each step rounds exactly as its standalone op: the program's bits are those of the chain of "
                    "standalone calls, on every backend")
        if approximated and self.backend == "cuda":  # fastmath=True
            rounding = (f"fastmath: steps {', '.join(approximated)} use the GPU's approximations (the GPU's bits, "
                        "not the CPU's; their numerics say which); every other step rounds exactly as its "
                        "standalone op")
        elif approximated:
            rounding += f" (fastmath: the cpu backend runs exact functions; a GPU approximates {', '.join(approximated)})"

        return {"rounding": rounding, "order": "steps in program order; copies move values unchanged", "steps": steps}

    def __str__(self) -> str:
        return str(self._core)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return program_html(self)


_CELL = "text-align:left; vertical-align:top; padding:2px 10px 2px 0; border-bottom:1px solid #ddd"
_COLOURS = {"local": "#e8f1fb", "shared": "#fdf0dc", "shared.dyn": "#fdf0dc", "": "#eee"}


def _tile_box(tile: dict) -> str:
    colour = _COLOURS.get(tile["storage"], "#eee")
    where = (tile["storage"] or "not staged") if not tile["storage"].startswith("shared") else (
        f"shared @{tile['shared_offset']} ({tile['shared_bytes']} B)" if tile["shared_offset"] >= 0
        else f"shared, staged by the kernel ({tile['shared_bytes']} B)")
    return (f'<span style="background:{colour}; border:1px solid #999; border-radius:3px; padding:0 4px; '
            f'white-space:nowrap"><b>{escape(tile["name"])}</b> {escape(tile["dtype"])}{list(tile["shape"])} '
            f'{escape(where)} <code>{escape(tile["layout"])}</code></span>')


def program_html(p: ProgramPlan) -> str:
    """The steps top to bottom: each with its operands' and result's placement, inserted copies
    marked, and the barriers between steps as rules."""
    tiles = p.tiles
    rows = []
    inputs = [t for t in tiles if t["input"] >= 0]
    rows.append(f'<tr><td style="{_CELL}">inputs</td><td colspan="3" style="{_CELL}">'
                + " ".join(_tile_box(t) for t in inputs) + "</td></tr>")
    for i, s in enumerate(p.steps):
        if s.sync_before:
            rows.append(f'<tr><td colspan="4" style="text-align:center; color:#b00; border-top:2px dashed #b00">'
                        f'{escape(s.sync_before)}</td></tr>')
        operands = " ".join(_tile_box(tiles[i]) if i >= 0 else f"scalar {s.scalars[k]:g}"
                            for k, i in enumerate(s.operand_ids))
        label = f"{i}{' + copy (inserted)' if s.inserted else ''}"
        style = _CELL + ("; background:#fff8e1" if s.inserted else "")
        rows.append(f'<tr><td style="{style}">{escape(label)}<br><small>{escape(s.where)}</small></td>'
                    f'<td style="{style}"><b>{escape(s.op)}</b> &rarr; <b>{escape(s.variant)}</b><br>{operands}</td>'
                    f'<td style="{style}">&rarr; {_tile_box(tiles[s.result_id])}</td>'
                    f'<td style="{style}"><small>{"<br>".join(escape(r) for r in s.reasons)}</small></td></tr>')
    outs = ", ".join(escape(tiles[i]["name"]) for i in p._core.outputs)
    chosen = next(v for v in p.staging_trace if v["name"] == p.staging)
    staging = (f'<div>staging <b>{escape(p.staging)}</b>: <small>{"; ".join(escape(r) for r in chosen["reasons"])}'
               f'</small></div>')
    return (f'<div><b>program {escape(p._core.name)}</b> at {escape(p.scope)} on {escape(p.backend)}: '
            f'{len(p.steps)} steps, shared memory between steps {p.shared_bytes} B (by live range); outputs {outs}'
            f'{staging}{scope_html(p.scope_trace)}<table style="border-collapse:collapse">{"".join(rows)}</table></div>')


def scope_html(scope_trace: list) -> str:
    """The planner's choice of scope (where none is named): one row per candidate and staging,
    the chosen one bold, the refusals grey."""
    if not scope_trace:
        return ""
    rows = []
    for v in scope_trace:
        score = f"{v['ns_per_row']:.0f} ns/row" if v["accepted"] else "refuses"
        style = _CELL + ("; font-weight:bold" if v["chosen"] else "" if v["accepted"] else "; color:#888")
        rows.append(f'<tr><td style="{style}">{escape(v["scope"])} {escape(v["staging"])}</td>'
                    f'<td style="{style}">{score}</td>'
                    f'<td style="{style}"><small>{"<br>".join(escape(r) for r in v["reasons"])}</small></td></tr>')
    return (f'<details><summary>scope: the planner\'s choice (no scope named), {len(scope_trace)} candidates'
            f'</summary><table style="border-collapse:collapse">{"".join(rows)}</table></details>')
