"""The HTML of a ProgramPlan (Jupyter's view): its steps with each tile's placement, the barriers,
the staging and, where no scope was named, the planner's candidates."""
from __future__ import annotations

from html import escape

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


def program_html(p) -> str:
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
