"""A TileLayout as a picture: the logical tile as a grid, each cell coloured by the thread that
holds it and labelled with thread and register. A layout without thread axes is drawn as shared
memory: each cell coloured by its 4-byte bank and labelled with its physical offset (swizzle
included) and bank; cells whose bank another cell of the same warp-wide read also uses (a bank
conflict) are marked. Colours are hex, so renderers without CSS3 colours (cairosvg, PDF and slide
tools) draw them."""
from __future__ import annotations

import colorsys
import math
import operator
from typing import Dict, List, Sequence, Tuple

from .canvas import Canvas, text_width

__all__ = ["layout_svg", "layout_html", "thread_index", "thread_colour", "bank_conflicts"]

# Thread index = laneid + 32*warpid + tx + 128*wgid + tid_in_wg + 32*wid_in_wg.
THREAD_WEIGHTS = {"laneid": 1, "warpid": 32, "tx": 1, "wgid": 128, "tid_in_wg": 1, "wid_in_wg": 32}
AXIS_ORDER = ("laneid", "warpid", "tx", "wgid", "tid_in_wg", "wid_in_wg", "m")
TEXT_CELLS = 1024  # labels=None: per-cell text up to 1024 cells drawn; beyond, colour only
DRAW_LIMIT = 128   # beyond 128 x 128 cells, draw the top-left 128 x 128 and say so
CONFLICT = "#d62728"
TEXT_CELL = (52, 32)
BANK_BYTES = 4
BANKS = 32


def thread_index(position: Dict[str, int]) -> int:
    return sum(THREAD_WEIGHTS[a] * v for a, v in position.items() if a in THREAD_WEIGHTS)


def thread_colour(index: int) -> str:
    """A distinct light hue per thread (or bank) as #rrggbb; the golden angle keeps neighbours
    far apart in hue."""
    r, g, b = colorsys.hls_to_rgb(index * 137.508 % 360 / 360, 0.8, 0.7)
    return "#" + "".join(f"{round(c * 255):02x}" for c in (r, g, b))


def bank_conflicts(words: List[List[int]], banks: int = BANKS) -> List[List[int]]:
    """For a grid of 4-byte word addresses (one per cell), how many ways each cell's bank is
    contended when a warp reads one column at once (32 consecutive rows of it): the number of
    distinct words that read asks of that cell's bank; 1 means no conflict. Two cells in the
    same word (two float16 values, say) are one access."""
    ways = [[1] * len(row) for row in words]
    for j in range(len(words[0]) if words else 0):
        for start in range(0, len(words), 32):
            per_bank: Dict[int, set] = {}
            for i in range(start, min(start + 32, len(words))):
                per_bank.setdefault(words[i][j] % banks, set()).add(words[i][j])
            for i in range(start, min(start + 32, len(words))):
                ways[i][j] = len(per_bank[words[i][j] % banks])
    return ways


def _row_ways(words: List[List[int]], banks: int = BANKS) -> int:
    """The worst bank contention of a warp reading 32 consecutive elements of a row."""
    worst = 1
    for row in words:
        for start in range(0, len(row), 32):
            per_bank: Dict[int, set] = {}
            for w in row[start:start + 32]:
                per_bank.setdefault(w % banks, set()).add(w)
            worst = max(worst, max(len(v) for v in per_bank.values()))
    return worst


def _axis_key(axis: str) -> Tuple[int, str]:
    return (AXIS_ORDER.index(axis) if axis in AXIS_ORDER else len(AXIS_ORDER), axis)


def _position_text(position: Dict[str, int]) -> str:
    return ", ".join(f"{a} {position[a]}" for a in sorted(position, key=_axis_key))


def _holder_order(position: Dict[str, int]) -> Tuple:
    """Numeric order: by thread index, then by every coordinate in axis order."""
    return (thread_index(position),) + tuple(position[a] for a in sorted(position, key=_axis_key))


def _element_bytes(dtype) -> int:
    if dtype is None:
        return 4
    import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy)
    import numpy as np
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        raise ValueError(f"dtype: {dtype!r} is not a NumPy data type") from None


def _dtype_name(dtype) -> str:
    return "float32" if dtype is None else str(getattr(dtype, "__name__", dtype))


def _grid_shape(shape: Tuple[int, ...]) -> Tuple[int, int]:
    if len(shape) <= 1:
        return 1, (shape[0] if shape else 1)
    return math.prod(shape[:-1]), shape[-1]


def _unravel(flat: int, shape: Sequence[int]) -> Tuple[int, ...]:
    index = []
    for d in reversed(shape):
        flat, i = divmod(flat, d)
        index.append(i)
    return tuple(reversed(index))


def _check_shape(layout, shape) -> Tuple[int, ...]:
    given = layout.shape if shape is None else (shape if isinstance(shape, (tuple, list)) else (shape,))
    try:
        shape = tuple(operator.index(d) for d in given if not isinstance(d, bool))
    except TypeError:
        shape = ()
    if len(shape) != len(given) or not shape or min(shape) <= 0:
        raise ValueError(f"shape: {tuple(given)!r} must be a tuple of positive integers")
    if math.prod(shape) != layout.elements:
        raise ValueError(f"shape: {shape} has {math.prod(shape)} elements but the layout places "
                         f"{layout.elements}")
    return shape


def _holders(layout, flat: int) -> List[Dict[str, int]]:
    places = layout.apply(flat)
    places = places if isinstance(places, (set, frozenset)) else [places]
    return sorted((dict(p) for p in places), key=_holder_order)


class _Labels:
    """How cells are named: by thread and register, or (no thread axes) by offset and bank."""

    def __init__(self, axes: Sequence[str], element_bytes: int, swizzled: bool):
        self.axes = tuple(sorted(axes, key=_axis_key))
        self.element_bytes = element_bytes
        self.swizzled = swizzled

    @property
    def shared(self) -> bool:
        return not self.axes

    def thread_name(self, holders: List[Dict[str, int]]) -> str:
        """The holder's thread; for a replicated element, the range of threads when contiguous,
        else the first thread and an ellipsis."""
        first, last = thread_index(holders[0]), thread_index(holders[-1])
        contiguous = [thread_index(p) for p in holders] == list(range(first, last + 1))
        number = str(first) if len(holders) == 1 else (f"{first}–{last}" if contiguous else f"{first}…")
        prefix = {("laneid",): "lane ", ("tx",): "tx "}.get(self.axes, "T")
        return prefix + number

    def word(self, offset: int) -> int:
        return offset * self.element_bytes // BANK_BYTES

    def bank(self, offset: int) -> int:
        return self.word(offset) % BANKS

    def colour(self, holders: List[Dict[str, int]]) -> str:
        if self.shared:
            return thread_colour(self.bank(holders[0].get("m", 0)))
        return thread_colour(thread_index(holders[0]))

    def lines(self, holders: List[Dict[str, int]]) -> Tuple[str, str]:
        first = holders[0]
        badge = f" ×{len(holders)}" if len(holders) > 1 else ""
        if self.shared:
            return str(first.get("m", 0)), f"b{self.bank(first.get('m', 0))}{badge}"
        return self.thread_name(holders), f"r{first.get('m', 0)}{badge}"

    def tooltip(self, index: Tuple[int, ...], holders: List[Dict[str, int]]) -> str:
        """The element's index and every place holding it, in full, in numeric order."""
        if self.shared:
            where = f"element {index}" + (" (swizzled)" if self.swizzled else "")
            places = "; ".join(f"offset {p.get('m', 0)}, bank {self.bank(p.get('m', 0))}" for p in holders)
            count = f"{len(holders)} places: "
        else:
            where = f"element {index}"
            named = self.axes not in (("laneid",), ("tx",))
            places = "; ".join((f"T{thread_index(p)} ({_position_text(p)})" if named else _position_text(p))
                               for p in holders)
            count = f"held by {len(holders)} threads: "
        return f"{where}: {count if len(holders) > 1 else ''}{places}"


def _with_text(labels, shown: Tuple[int, int]) -> bool:
    if labels is None:
        return shown[0] * shown[1] <= TEXT_CELLS
    if not isinstance(labels, bool):
        raise TypeError(f"labels: expected True, False or None (automatic), not {labels!r}")
    return labels


def _caption(layout, shape, rows, cols, shown, labels: _Labels, dtype, counts, with_text,
             conflicts: Tuple[int, int]) -> List[str]:
    lines = [f"TileLayout {layout}"]
    if labels.shared:
        swizzle = "swizzle applied" if layout.swizzle else "no swizzle"
        shows = "labels: offset / bank" if with_text else "hover a cell for its offset and bank"
        lines.append(f"shape {shape} · no thread axes: colour = 4-byte bank, {shows} "
                     f"(b = offset·{labels.element_bytes} B / 4 mod 32: {_dtype_name(dtype)}; {swizzle})")
        column, row = conflicts
        marked = "; red corner: a cell in conflict" if column > 1 else ""
        lines.append(f"a warp reading a column: {column}-way bank conflict{'' if column > 1 else ' (none)'}"
                     f"{marked}; reading a row: {row}-way{'' if row > 1 else ' (none)'}")
        lines.append("(for one thread's register tile the offset is the register index)")
    else:
        terms = " + ".join(f"{THREAD_WEIGHTS[a]}·{a}" if THREAD_WEIGHTS[a] > 1 else a for a in labels.axes)
        naming = "" if labels.axes in (("laneid",), ("tx",)) else f"; T = {terms}"
        label = " · label = thread / register" if with_text else ""
        lines.append(f"shape {shape} · colour = thread{label}{naming}")
    offset = layout.offset
    terms = [f"{offset[a]}@{a}" for a in sorted(offset, key=_axis_key)]
    lines.append("offset: " + (" + ".join(terms) if terms else "none"))
    if max(counts) > 1:
        holders = f"{max(counts)}" if min(counts) == max(counts) else f"up to {max(counts)}"
        lines.append(f"replicated: each element is held by {holders} places (×{max(counts)}); "
                     "hover a cell for the list")
    if len(shape) > 2:
        lines.append(f"{shape} drawn as {rows} rows × {cols} columns: the leading dims are folded into rows")
    if shown != (rows, cols):
        lines.append(f"showing {shown[0]}×{shown[1]} of {rows}×{cols} (the top-left corner)")
    if not with_text:
        lines.append(f"{shown[0] * shown[1]} cells: colour only (labels=True, or show --labels, keeps the "
                     "text); hover a cell for its place")
    return lines


def _fit(label: str, width: float) -> float:
    """Font size that keeps a monospace label inside its cell, 10 px at most."""
    return min(10.0, round((width - 8) / (0.6 * max(len(label), 1)), 1))


def layout_svg(layout, shape=None, dtype=None, labels=None) -> str:
    """The layout's logical tile (``shape``, default ``layout.shape``) as an SVG grid. ``dtype``
    sets the element size for shared-memory banks (default float32); ``labels`` True or False
    keeps or drops the text in each cell (default: text up to 1024 cells drawn)."""
    shape = _check_shape(layout, shape)
    rows, cols = _grid_shape(shape)
    shown = (min(rows, DRAW_LIMIT), min(cols, DRAW_LIMIT))
    with_text = _with_text(labels, shown)
    cells = [[_holders(layout, i * cols + j) for j in range(shown[1])] for i in range(shown[0])]
    axes = {a for row in cells for holders in row for p in holders for a in p if a in THREAD_WEIGHTS}
    names = _Labels(axes, _element_bytes(dtype), layout.swizzle is not None)
    counts = [len(h) for row in cells for h in row]
    ways: List[List[int]] = []
    conflicts = (1, 1)
    if names.shared:
        words = [[names.word(h[0].get("m", 0)) for h in row] for row in cells]
        ways = bank_conflicts(words)
        conflicts = (max(max(r) for r in ways), _row_ways(words))
    caption = _caption(layout, shape, rows, cols, shown, names, dtype, counts, with_text, conflicts)

    canvas = Canvas()
    for k, line in enumerate(caption):
        canvas.text(8, 18 + 16 * k, line, size=13 if k == 0 else 11, anchor="start", bold=k == 0)
    if with_text:
        w, h = TEXT_CELL
        tick_every = 1
    else:
        w = h = max(4, min(14, 1024 // max(shown)))
        tick_every = 8 if max(shown) <= 64 else 16
    left = 12 + text_width(str(shown[0] - 1), 10)
    top = 18 + 16 * len(caption) + 16
    for j in range(0, shown[1], tick_every):
        canvas.text(left + j * w + w / 2, top - 5, str(j), size=9, fill="#666")
    for i in range(0, shown[0], tick_every):
        canvas.text(left - 4, top + i * h + h / 2 + 3, str(i), size=9, anchor="end", fill="#666")
    with canvas.group(css_class="grid", stroke="#999" if with_text else "#fff"):
        for i, row in enumerate(cells):
            for j, holders in enumerate(row):
                x, y = left + j * w, top + i * h
                tooltip = names.tooltip(_unravel(i * cols + j, shape), holders)
                conflict = bool(ways) and ways[i][j] > 1
                if conflict:
                    tooltip += f"; {ways[i][j]}-way bank conflict when a warp reads this column"
                with canvas.group(tooltip, "cell conflict" if conflict else "cell"):
                    canvas.rect(x, y, w, h, names.colour(holders), stroke=None)
                    if conflict:
                        corner = max(3.0, w / 4)
                        canvas.polygon([(x + w - corner, y), (x + w, y), (x + w, y + corner)], CONFLICT)
                    if with_text:
                        first, second = names.lines(holders)
                        canvas.text(x + w / 2, y + 13, first, size=_fit(first, w), mono=True)
                        canvas.text(x + w / 2, y + 26, second, size=_fit(second, w), mono=True, fill="#444")
    return canvas.document(f"TileLayout {layout} over shape {shape}")


def layout_html(layout, shape=None, dtype=None, labels=None) -> str:
    """The SVG in a scrolling box, so a large tile does not push the notebook apart."""
    return f'<div style="overflow:auto; max-height:720px">{layout_svg(layout, shape, dtype, labels)}</div>'
