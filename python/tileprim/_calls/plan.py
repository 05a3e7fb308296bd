"""Plan: which variant runs, why the others declined, with what parameters and numerics: a
table as text; in Jupyter a headline, the declined variants' reasons, a diagram of the
algorithm and the tables."""
from __future__ import annotations

from typing import Dict, List, Optional

from .autotune import described

__all__ = ["Plan"]


class Plan:
    """The outcome of dispatch for one call; nothing has run. Immutable: a repeated call of the
    same signature gets the same Plan back from the call-shape cache.

    Attributes
    ----------
    variant : str
        The chosen variant ('local', 'shared', 'sm100_packed', 'reg', 'root_pull', ...).
    priority : int
        Its priority in the registry.
    params : dict
        What its planner decided (group_size, n_shuffles, chunks, ...).
    numerics : dict
        Accumulation dtype, identity, NaN rule, summation order, flush-to-zero.
    scope : str
        The scope the call runs at.
    scope_trace : list of dict
        A batched call with no scope named: the planner's candidates, as
        ``ProgramPlan.scope_trace`` (empty where a scope is named).
    autotuned : dict or None
        A batched call with no scope named on a GPU's arrays under ``TILEPRIM_AUTOTUNE=1``: the
        GPU, the scope and staging kept, each candidate's measured ms, and whether they were
        measured now or remembered (``ProgramPlan.autotuned``).
    map_tiles : str or None
        A map over rows with no scope, storage, layout or variant named: how its rows are taken as
        tiles of 8 elements (``ProgramPlan.map_tiles``); the plan is then that of the tiles.
    trace : list
        Every registered variant of the op: ``.variant``, ``.priority``, ``.status`` (chosen,
        declined, not tried) and ``.reasons`` (every failing predicate's).

    Examples
    --------
    >>> p = tp.plan(tp.cta(32).sum, np.ones((4, 8), "f4"), axes=-1, storage="shared")
    >>> p.variant, p.params["group_size"], p.params["n_shuffles"]
    ('shared', 8, 3)
    >>> [e.status for e in p.trace]
    ['declined', 'declined', 'chosen', 'not tried']
    """

    def __init__(self, core, out_shape=None, bound=None, tiles=None):
        self._core = core
        self.out_shape = out_shape
        self._bound = bound
        self._tiles = tiles
        self.autotuned: Optional[dict] = None
        self.map_tiles: Optional[str] = None

    variant = property(lambda self: self._core.variant, doc="the chosen variant's name")
    priority = property(lambda self: self._core.priority, doc="the chosen variant's priority")
    target = property(lambda self: self._core.target, doc="the architecture dispatch modelled ('' for none)")
    sm_version = property(lambda self: self._core.sm_version, doc="the target's number (100 for sm_100a), 0 for none")
    backend = property(lambda self: self._core.backend, doc="the backend that runs it: 'cpu' or 'cuda'")
    scope = property(lambda self: self._core.call.scope, doc="the scope it runs at: named, or the planner's choice")

    @property
    def scope_trace(self) -> List[dict]:
        """A batched call with no scope named: the planner's candidates (``ProgramPlan.scope_trace``)."""
        program = self._program()
        return program.scope_trace if program is not None else []

    def _program(self):
        """The program of one step a tile op's call is (a collective's Plan has none)."""
        program = getattr(self._bound, "plan", None)
        return program if hasattr(program, "scope_trace") else None

    @property
    def params(self) -> Dict[str, object]:
        return dict(self._core.params)

    @property
    def numerics(self) -> Dict[str, str]:
        return dict(self._core.numerics)

    @property
    def trace(self) -> List[object]:
        """One entry per registered variant of the op: .variant, .priority, .status, .reasons."""
        return list(self._core.trace)

    @property
    def call(self) -> str:
        """The call as dispatch saw it: operands, axes, scope, options."""
        return str(self._core.call)

    def declined(self) -> Dict[str, List[str]]:
        """The variants that declined, with every reason."""
        return {e.variant: list(e.reasons) for e in self.trace if e.status == "declined"}

    def launch(self) -> Dict[str, str]:
        """How the backend will run it (binds it, compiling the kernel on CUDA): on CUDA the
        block (threads, tiles per block and why, shared memory), the grid (tiles, blocks), the
        blocks resident per SM and the bytes they keep in flight, where the kernel came from."""
        shape = dict(self._bound.describe()) if self._bound is not None else {}
        if "tiles_per_block" in shape and self._tiles is not None:
            per_block = int(shape["tiles_per_block"])
            shape["tiles"] = str(self._tiles)
            shape["blocks"] = str(-(-self._tiles // per_block))
        return shape

    def __eq__(self, other) -> bool:
        return isinstance(other, Plan) and str(self._core) == str(other._core)

    def __hash__(self) -> int:
        return hash(str(self._core))

    def __str__(self) -> str:
        program = self._program()
        return ((f"{self.map_tiles}\n" if self.map_tiles else "") + str(self._core) +
                (program.scope_trace_str() if program is not None else "") +
                (f"\n{described(self.autotuned)}" if self.autotuned else ""))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        from .._viz.plan_html import plan_html
        return plan_html(self)
