"""Plan (which variant runs, why the others declined, with what parameters and numerics):
a table as text, an HTML table in Jupyter."""
from __future__ import annotations

import html
from typing import Dict, List

__all__ = ["Plan"]


class Plan:
    """The outcome of dispatch for one call; nothing has run. Immutable: a repeated call of the
    same signature gets the same Plan back from the call-shape cache."""

    def __init__(self, core, out_shape=None, bound=None):
        self._core = core
        self.out_shape = out_shape
        self._bound = bound

    backend = property(lambda self: self._core.backend, doc="the backend that runs it: 'cpu' or 'cuda'")

    def launch(self) -> Dict[str, str]:
        """How the backend will run it (binds it, compiling the kernel on CUDA): launch shape,
        tiles per block, shared memory, where the kernel came from."""
        return dict(self._bound.describe()) if self._bound is not None else {}

    def __eq__(self, other) -> bool:
        return isinstance(other, Plan) and str(self._core) == str(other._core)

    def __hash__(self) -> int:
        return hash(str(self._core))

    variant = property(lambda self: self._core.variant, doc="the chosen variant's name")
    priority = property(lambda self: self._core.priority)
    target = property(lambda self: self._core.target, doc="the architecture dispatch modelled ('' for none)")
    sm_version = property(lambda self: self._core.sm_version)

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
        return str(self._core.call)

    def declined(self) -> Dict[str, List[str]]:
        return {e.variant: list(e.reasons) for e in self.trace if e.status == "declined"}

    def __str__(self) -> str:
        return str(self._core)

    def __repr__(self) -> str:
        return str(self._core)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><b>{html.escape(e.variant)}</b></td><td>{e.priority}</td>"
            f"<td style='color:{'green' if e.status == 'chosen' else 'gray' if e.status == 'not tried' else 'darkred'}'>"
            f"{html.escape(e.status)}</td><td>{'<br>'.join(html.escape(r) for r in e.reasons)}</td></tr>"
            for e in self.trace)
        params = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>"
                         for k, v in self.params.items())
        numerics = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>"
                           for k, v in self.numerics.items())
        target = html.escape((self.target or "none (sm_version 0)") + ", backend " + self.backend)
        return (f"<div><code>{html.escape(self.call)}</code><br>target: {target}"
                "<table><tr><th>variant</th><th>priority</th><th>status</th><th>reasons</th></tr>"
                f"{rows}</table><b>params</b><table>{params}</table>"
                f"<b>numerics</b><table>{numerics}</table></div>")
