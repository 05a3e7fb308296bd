"""Plans as readable HTML for notebooks: a headline, the declined variants, a diagram of the
algorithm and tables; a DispatchError's trace as it prints."""
from __future__ import annotations

from html import escape

from .plan_diagram import plan_diagram_svg
from .program_html import scope_html

__all__ = ["plan_html", "dispatch_error_html"]

# Jupyter's stylesheet centres or right-aligns table cells; reasons and params read from the left.
_LEFT = "text-align:left; vertical-align:top; padding:1px 10px 1px 0"


def _table(rows, head) -> str:
    header = "".join(f'<th style="{_LEFT}">{escape(h)}</th>' for h in head)
    body = "".join("<tr>" + "".join(f'<td style="{_LEFT}">{escape(str(c))}</td>' for c in row) + "</tr>"
                   for row in rows)
    return f'<table style="border-collapse:collapse; margin:2px 0 8px 0"><tr>{header}</tr>{body}</table>'


def _why(params: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in params.items()) or "no parameters"


def plan_html(plan) -> str:
    """A Plan (``.variant .priority .call .target .params .numerics .trace``) for a notebook:
    what was chosen and why, what declined and why, a diagram, then the tables."""
    params, trace = dict(plan.params), list(plan.trace)
    declined = [e for e in trace if e.status == "declined"]
    not_tried = [e for e in trace if e.status == "not tried"]
    parts = [
        f'<div style="font-size:1.15em"><b>chosen: {escape(plan.variant)}</b> '
        f'(priority {plan.priority})</div>',
        f"<div>why: {escape(_why(params))}</div>",
        f"<div>call: <code>{escape(plan.call)}</code></div>",
        f"<div>target: {escape(plan.target or 'none (sm_version 0)')}</div>",
    ]
    if declined:
        items = "".join(
            f'<li><b>{escape(e.variant)}</b> (priority {e.priority})<ul style="margin:0; padding-left:1.4em">'
            + "".join(f"<li>{escape(r)}</li>" for r in e.reasons) + "</ul></li>" for e in declined)
        parts.append(f'<div style="margin-top:6px">declined:</div>'
                     f'<ul style="text-align:left; margin:0; padding-left:1.4em">{items}</ul>')
    if not_tried:
        names = ", ".join(f"{e.variant} (priority {e.priority})" for e in not_tried)
        parts.append(f"<div>not tried (a variant before them accepted): {escape(names)}</div>")
    scope_trace = getattr(plan, "scope_trace", [])
    if scope_trace:
        parts.append(scope_html(scope_trace))
    diagram = plan_diagram_svg(plan.variant, params)
    if diagram:
        parts.append(f'<div style="margin:8px 0">{diagram}</div>')
    parts.append("<b>params</b>" + _table(params.items(), ("name", "value")))
    parts.append("<b>numerics</b>" + _table(dict(plan.numerics).items(), ("aspect", "rule")))
    return f'<div class="tileprim-plan" style="text-align:left">{"".join(parts)}</div>'


def dispatch_error_html(message: str) -> str:
    """A DispatchError's message (the call, then the trace table) kept on its own lines."""
    return ('<div class="tileprim-dispatch-error" style="text-align:left"><b>DispatchError</b>'
            '<pre style="font-family:monospace; white-space:pre; text-align:left; overflow-x:auto">'
            f"{escape(message)}</pre></div>")
