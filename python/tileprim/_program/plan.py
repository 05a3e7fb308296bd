"""ProgramPlan: a tile program as the planner left it: one Plan per step (inserted copies
included) with the variant, the registry's trace and the planner's reasons; where every tile
lives; the shared memory the program needs (by live range) and the barriers between steps.
``str()`` is a table; in Jupyter a diagram of the steps."""
from __future__ import annotations

import functools
from typing import Dict, List, Optional

from .._calls.autotune import described
from .._calls.plan import Plan
from .._viz.program_html import program_html

__all__ = ["ProgramPlan", "StepPlan"]


class StepPlan(Plan):
    """The Plan of one step of a program: the standalone call's Plan, plus where the step is in
    the user's code (``where``), whether the planner inserted it (``inserted``), the planner's
    ``reasons`` (the placement and layout it chose, or why a copy is needed) and the barrier
    before it (``sync_before``)."""

    def __init__(self, core, info: dict, values: list, run_time: Optional[list] = None):
        super().__init__(core)
        self.op, self.where, self.inserted = info["op"], info["where"], info["inserted"]
        self.reasons: List[str] = list(info["reasons"])
        self.sync_before: str = info["sync_before"]
        self.operands = [None if i < 0 else values[i]["name"] for i in info["operands"]]
        # a run-time scalar (the call's float argument, left out of the plan): the call's value
        taken = list(info["scalar_args"]) or [-1] * len(info["operands"])
        self.scalars = [None if i >= 0 else v if k < 0 else run_time[k]
                        for i, v, k in zip(info["operands"], info["scalars"], taken)]
        self.result = values[info["result"]]["name"]
        self.operand_ids, self.result_id = list(info["operands"]), info["result"]

    def __str__(self) -> str:
        head = f"step {self.result} = {self.op}({', '.join(o or 'scalar' for o in self.operands)}) at {self.where}"
        if self.inserted:
            head += " (inserted by the planner)"
        return "\n".join([head, *("  " + r for r in self.reasons), super().__str__()])

    __repr__ = __str__


def _of_core(name: str, doc: str) -> property:
    """A ProgramPlan attribute read from the C++ plan."""
    return property(lambda self: getattr(self._core, name), doc=doc)


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
    autotuned : dict or None
        Where the call was autotuned (``tp.program(autotune=True)``): the GPU, the scope and staging
        kept, each candidate's measured ms, and whether they were measured now or remembered.
    map_tiles : str or None
        Where a program of maps alone is called over rows with no scope named: how its rows are
        taken as tiles of a few elements (``_program.map_tiles``); the plan is then that of the
        tiles.

    Examples
    --------
    >>> @tp.program(scope=tp.cta(32))
    ... def norm1(x):
    ...     return x / tp.sum(x, axes=-1, keepdims=True)
    >>> p = tp.plan(norm1, np.ones((4, 64), np.float32), batch_dims=1)
    >>> p.variants
    ['cross_warp', 'stage', 'reg']
    """

    def __init__(self, core, out_shapes, run_time: Optional[list] = None):
        self._core, self._run_time = core, run_time
        self.out_shapes = out_shapes
        self.autotuned: Optional[dict] = None
        self.map_tiles: Optional[str] = None

    # made from the C++ plan when first read: a call keeps its plan, and the calls of a program with a
    # new float each (one C++ plan) would each hold a copy of every step's reasons
    @functools.cached_property
    def tiles(self) -> List[dict]:
        return list(self._core.values)

    @functools.cached_property
    def steps(self) -> List[StepPlan]:
        core = self._core
        return [StepPlan(c, info, self.tiles, self._run_time) for c, info in zip(core.step_plans, core.steps)]

    variants = property(lambda self: [s.variant for s in self.steps], doc="the steps' variants, in order")
    shared_bytes = _of_core("shared_bytes", "shared memory an instance's kernel block takes, bytes (static + dynamic)")
    registers = _of_core("peak_registers", "the planner's count of register slots a thread holds at the program's peak")
    register_budget = _of_core("register_budget",
                               "register slots a thread may hold at this scope before the rows are staged elsewhere")
    staging = _of_core("staging", "how the kernel holds the rows: 'registers', 'shared', 'streamed' or 'spilled'")
    staging_trace = _of_core("staging_trace", "each staging tried, in priority order, with its verdict and reasons")
    scope_trace = _of_core("scope_trace", "with no scope named: each candidate scope and staging, its score (ns a "
                                          "row) and reasons, the chosen one marked; empty where a scope was named")
    rows = _of_core("rows", "the tiles held as rows in passes over memory (streamed or spilled stagings), else None")
    scope = _of_core("scope", "the scope each instance runs at, as its name")
    backend = _of_core("backend", "the backend planned for: 'cpu' or 'cuda'")

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
        return ((f"{self.map_tiles}\n" if self.map_tiles else "") + str(self._core)
                + (f"\n{described(self.autotuned)}" if self.autotuned else ""))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return program_html(self)
