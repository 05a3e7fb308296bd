"""A TileLayout as a picture: the logical tile as a grid, each cell coloured by the thread that
holds it and labelled with thread and register. A layout without thread axes is drawn as shared
memory: each cell shows its physical offset (swizzle included) and its 4-byte bank."""
from __future__ import annotations

import math
import operator
from typing import Dict, List, Sequence, Tuple

from ._svg import Canvas, text_width

__all__ = ["layout_svg", "layout_html", "thread_index", "thread_colour"]

# Thread index = laneid + 32*warpid + tx + 128*wgid + tid_in_wg + 32*wid_in_wg.
THREAD_WEIGHTS = {"laneid": 1, "warpid": 32, "tx": 1, "wgid": 128, "tid_in_wg": 1, "wid_in_wg": 32}
AXIS_ORDER = ("laneid", "warpid", "tx", "wgid", "tid_in_wg", "wid_in_wg", "m")
TEXT_LIMIT = 32    # per-cell text up to 32 x 32 cells; beyond, colour only
DRAW_LIMIT = 128   # beyond 128 x 128 cells, draw the top-left 128 x 128 and say so
NEUTRAL = "#e4e4e4"
TEXT_CELL = (52, 32)
BANK_BYTES = 4
BANKS = 32


def thread_index(position: Dict[str, int]) -> int:
    return sum(THREAD_WEIGHTS[a] * v for a, v in position.items() if a in THREAD_WEIGHTS)


def thread_colour(index: int) -> str:
    """A distinct hue per thread; the golden angle keeps neighbouring threads far apart in hue."""
    return f"hsl({index * 137.508 % 360:.1f}, 70%, 80%)"


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
    if math.prod(shape) != layout.size:
        raise ValueError(f"shape: {shape} has {math.prod(shape)} elements but the layout places "
                         f"{layout.size}")
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

    def bank(self, offset: int) -> int:
        return offset * self.element_bytes // BANK_BYTES % BANKS

    def colour(self, holders: List[Dict[str, int]]) -> str:
        return NEUTRAL if self.shared else thread_colour(thread_index(holders[0]))

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


def _with_text(rows: int, cols: int) -> bool:
    return rows <= TEXT_LIMIT and cols <= TEXT_LIMIT


def _caption(layout, shape, rows, cols, shown, labels: _Labels, dtype, counts) -> List[str]:
    lines = [f"TileLayout {layout}"]
    with_text = _with_text(rows, cols)
    if labels.shared:
        swizzle = "swizzle applied" if layout.swizzle else "no swizzle"
        shows = "each cell shows" if with_text else "each cell's tooltip gives"
        lines.append(f"shape {shape} · no thread axes: {shows} its offset and 4-byte bank "
                     f"(b = offset·{labels.element_bytes} B / 4 mod 32: {_dtype_name(dtype)}; {swizzle})")
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
        lines.append(f"more than {TEXT_LIMIT}×{TEXT_LIMIT} cells: colour only; hover a cell for its place")
    return lines


def _fit(label: str, width: float) -> float:
    """Font size that keeps a monospace label inside its cell, 10 px at most."""
    return min(10.0, round((width - 8) / (0.6 * max(len(label), 1)), 1))


def layout_svg(layout, shape=None, dtype=None) -> str:
    """The layout's logical tile (``shape``, default ``layout.shape``) as an SVG grid. ``dtype``
    sets the element size for shared-memory banks (default float32)."""
    shape = _check_shape(layout, shape)
    rows, cols = _grid_shape(shape)
    shown_rows, shown_cols = min(rows, DRAW_LIMIT), min(cols, DRAW_LIMIT)
    with_text = _with_text(rows, cols)
    cells = [[_holders(layout, i * cols + j) for j in range(shown_cols)] for i in range(shown_rows)]
    axes = {a for row in cells for holders in row for p in holders for a in p if a in THREAD_WEIGHTS}
    labels = _Labels(axes, _element_bytes(dtype), layout.swizzle is not None)
    counts = [len(h) for row in cells for h in row]
    caption = _caption(layout, shape, rows, cols, (shown_rows, shown_cols), labels, dtype, counts)

    canvas = Canvas()
    for k, line in enumerate(caption):
        canvas.text(8, 18 + 16 * k, line, size=13 if k == 0 else 11, anchor="start", bold=k == 0)
    if with_text:
        w, h = TEXT_CELL
        tick_every = 1
    else:
        w = h = max(4, min(14, 1024 // max(shown_rows, shown_cols)))
        tick_every = 8 if max(shown_rows, shown_cols) <= 64 else 16
    left = 12 + text_width(str(shown_rows - 1), 10)
    top = 18 + 16 * len(caption) + 16
    for j in range(0, shown_cols, tick_every):
        canvas.text(left + j * w + w / 2, top - 5, str(j), size=9, fill="#666")
    for i in range(0, shown_rows, tick_every):
        canvas.text(left - 4, top + i * h + h / 2 + 3, str(i), size=9, anchor="end", fill="#666")
    with canvas.group(css_class="grid", stroke="#999" if with_text else "#fff"):
        for i, row in enumerate(cells):
            for j, holders in enumerate(row):
                x, y = left + j * w, top + i * h
                with canvas.group(labels.tooltip(_unravel(i * cols + j, shape), holders), "cell"):
                    canvas.rect(x, y, w, h, labels.colour(holders), stroke=None)
                    if with_text:
                        first, second = labels.lines(holders)
                        canvas.text(x + w / 2, y + 13, first, size=_fit(first, w), mono=True)
                        canvas.text(x + w / 2, y + 26, second, size=_fit(second, w), mono=True, fill="#444")
    return canvas.document(f"TileLayout {layout} over shape {shape}")


def layout_html(layout, shape=None, dtype=None) -> str:
    """The SVG in a scrolling box, so a large tile does not push the notebook apart."""
    return f'<div style="overflow:auto; max-height:720px">{layout_svg(layout, shape, dtype)}</div>'

