"""Small pictures of the algorithm a Plan will run, one drawer per variant, drawn from the plan's
params alone. A missing param is drawn generically (``r…``, ``?``), never an error: the pictures
must survive the planners growing or renaming params."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

from .canvas import Canvas

LANE_STEP = 15          # px between lane columns; 32 lanes fit in 600 px with row labels
LANES_LEFT = 96
ROW_STEP = 34
STEP_COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e")
REGISTERS_SHOWN = 10    # a longer register row is drawn as r0 … r(n-1)
REGISTER = "#cfe3f7"    # fill of a value in a register (or an element being loaded)
OPERATION = "#fff3c4"   # fill of an op applied, or of an accumulator


def _int(params: Dict, key: str) -> Optional[int]:
    value = params.get(key)
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def _masks(params: Dict, n_key: str = "n_shuffles") -> List[int]:
    masks = params.get("shuffle_masks")
    if isinstance(masks, (list, tuple)) and all(isinstance(m, int) for m in masks):
        return list(masks)
    n = _int(params, n_key)
    return [1 << i for i in range(n)] if n else []


def _known(value: Optional[int]) -> str:
    return "?" if value is None else str(value)


def _register_labels(n: Optional[int], prefix: str = "r") -> List[str]:
    if n is None:
        return [f"{prefix}0", f"{prefix}1", f"{prefix}…"]
    if n <= REGISTERS_SHOWN:
        return [f"{prefix}{i}" for i in range(n)]
    return [f"{prefix}{i}" for i in range(REGISTERS_SHOWN - 2)] + ["…", f"{prefix}{n - 1}"]


def _title(canvas: Canvas, head: str, sub: str) -> None:
    canvas.text(8, 18, head, size=13, anchor="start", bold=True)
    canvas.text(8, 34, sub, size=11, anchor="start")


def _note(canvas: Canvas, y: float, words: str) -> None:
    canvas.text(8, y, words, size=10, anchor="start", fill="#555")


def _butterfly(canvas: Canvas, lanes: int, masks: List[int], top: float,
               group: Optional[int] = None) -> float:
    """Lanes as columns, one row per XOR step: each lane takes its own value (grey) and lane
    ``lane ^ mask``'s (coloured). Returns the y of the last row."""
    x = [LANES_LEFT + LANE_STEP * lane for lane in range(lanes)]
    for lane in range(lanes):
        canvas.text(x[lane], top - 8, str(lane), size=7, fill="#666")
    y = top
    for k, mask in enumerate(masks):
        colour = STEP_COLOURS[k % len(STEP_COLOURS)]
        canvas.text(LANES_LEFT - 14, y + ROW_STEP / 2 + 4, f"xor {mask}", size=10, anchor="end", fill=colour)
        for lane in range(lanes):
            partner = lane ^ mask
            if partner < lanes and (group is None or partner // group == lane // group):
                canvas.line(x[lane], y, x[lane], y + ROW_STEP, stroke="#bbb", width=0.8)
                canvas.line(x[partner], y, x[lane], y + ROW_STEP - 3, stroke=colour, width=0.9, arrow=True)
        y += ROW_STEP
    for level in range(len(masks) + 1):
        for lane in range(lanes):
            canvas.circle(x[lane], top + level * ROW_STEP, 2.5, "white" if level < len(masks) else "#333")
    return y


def _register_fold(canvas: Canvas, labels: List[str], top: float, result: str) -> float:
    """identity -> op r0 -> op r1 -> ... -> result, each register folded in order."""
    step, left = 48, 64
    chain_y = top + 56
    canvas.rect(8, chain_y - 11, 44, 22, "#f4f4f4", rx=4)
    canvas.text(30, chain_y + 4, "init", size=10)
    prev = 52
    for k, label in enumerate(labels):
        cx = left + 20 + k * step
        canvas.rect(cx - 18, top, 36, 22, REGISTER)
        canvas.text(cx, top + 15, label, size=10, mono=True)
        if label == "…":
            canvas.text(cx, chain_y + 4, "…", size=12)
            prev = cx + 8
            continue
        canvas.line(cx, top + 22, cx, chain_y - 10, arrow=True)
        canvas.line(prev, chain_y, cx - 10, chain_y, arrow=True)
        canvas.circle(cx, chain_y, 10, OPERATION)
        canvas.text(cx, chain_y + 4, "⊕", size=12)
        prev = cx + 10
    end = prev + 40
    canvas.line(prev, chain_y, end, chain_y, arrow=True)
    canvas.text(end + 4, chain_y + 4, result, size=11, anchor="start")
    _note(canvas, chain_y + 34,
          "init = the op's identity (accum: the old value); ⊕ = the op (sum, max or min)")
    return chain_y + 34


def _local(canvas: Canvas, params: Dict) -> None:
    masks = _masks(params)
    path = params.get("path") or ("warp_shuffle" if masks else "thread_wise")
    outputs, sources = _int(params, "outputs_per_thread"), _int(params, "sources_per_output")
    if path == "warp_shuffle":
        _title(canvas, "reduction → local · warp_shuffle",
               f"each lane folds its {_known(sources)} register(s) per output, then an XOR butterfly "
               "over lanes")
        y = _butterfly(canvas, 32, masks, 62)
        _note(canvas, y + 24,
              f"{len(masks)} shuffle(s) (shfl.sync.bfly); afterwards every lane holds the result")
        _note(canvas, y + 38, f"{_known(outputs)} output(s) per lane, each through the same butterfly")
        return
    why = ("the reduced dims live inside each thread: no value crosses lanes" if path == "view"
           else "one thread folds its registers in order")
    _title(canvas, f"reduction → local · {path}", why)
    y = _register_fold(canvas, _register_labels(sources), 52, "dst")
    _note(canvas, y + 16, f"repeated for each of the {_known(outputs)} output(s) per thread")


def _shared(canvas: Canvas, params: Dict) -> None:
    g = _int(params, "group_size")
    groups, working = _int(params, "groups"), _int(params, "working_threads")
    reduction = _int(params, "reduction_len")
    lanes = min(32, working or (g * groups if g and groups else 32))
    _title(canvas, "reduction → shared · groups of G lanes",
           f"G = {_known(g)}: each group reduces one output; lane l gathers sources l, l+G, l+2G, …")
    top = 62
    masks = [m for m in _masks(params) if not g or m < g]
    if g:
        for start in range(0, lanes, g):
            canvas.rect(LANES_LEFT + LANE_STEP * start - 6, top - 22, LANE_STEP * min(g, lanes - start) - 3,
                        len(masks) * ROW_STEP + 30, "#f3f7fb", stroke="#9bb", rx=4)
    canvas.text(LANES_LEFT - 14, top + 4, "gathered", size=10, anchor="end")
    y = _butterfly(canvas, lanes, masks, top, group=g)
    if g:
        for k, start in enumerate(range(0, lanes, g)):
            x = LANES_LEFT + LANE_STEP * start
            canvas.line(x, y + 4, x, y + 24, stroke="#333", arrow=True)
            canvas.text(x, y + 36, f"out[{k}]" if g >= 4 else str(k), size=9, anchor="middle")
    per_lane = -(-reduction // g) if reduction and g else None
    _note(canvas, y + 56,
          f"lane 0 of each group writes its output · {_known(per_lane)} source(s) gathered per lane")
    shown = f"; the first {lanes} drawn" if working and working > lanes else ""
    _note(canvas, y + 70, f"{_known(groups)} group(s), {_known(working)} working thread(s){shown}, "
          f"{_known(_int(params, 'steps'))} round(s) over the outputs")


def _toward(x1: float, y1: float, x2: float, y2: float, gap: float) -> tuple:
    """The point ``gap`` short of (x2, y2) on the way from (x1, y1): arrows stop at a circle's rim."""
    d = max(((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5, 1e-9)
    return x2 - gap * (x2 - x1) / d, y2 - gap * (y2 - y1) / d


def _sm100_packed(canvas: Canvas, params: Dict) -> None:
    slots = _int(params, "slots") or (4 if "maxmin" in str(params.get("algorithm", "")) else 8)
    chunks, remainder = _int(params, "full_chunks"), _int(params, "remainder")
    packed_sum = slots == 8
    _title(canvas, " · ".join(filter(None, ("reduction → sm100_packed", params.get("algorithm")))),
           f"{slots} slots over chunks of 8 elements; "
           + ("add.rn.ftz.f32x2 adds two slots at once" if packed_sum else "a 3-input max/min folds two in"))
    left, step, top = (190, 50, 56) if packed_sum else (210, 90, 56)
    xs = [left + step * k for k in range(slots)]
    for k, x in enumerate(xs):
        canvas.text(x, top, f"s{k}", size=11, bold=True)

    def row(y: float, label: str, cells: Dict[int, str]) -> None:
        canvas.text(8, y + 4, label, size=10, anchor="start")
        for k, text in cells.items():
            canvas.rect(xs[k] - step / 2 + 3, y - 10, step - 6, 20, REGISTER, rx=3)
            canvas.text(xs[k], y + 4, text, size=9, mono=True)

    per = 8 // slots   # elements each slot takes from a chunk
    y = top + 22
    row(y, "chunk 0: load", {k: ",".join(f"e{per * k + i}" for i in range(per)) for k in range(slots)})
    more = None if chunks is None else chunks - 1
    if more is None or more > 0:
        y += 28
        span = "chunks c ≥ 1" if more is None else ("chunk c = 1" if more == 1 else f"chunks c = 1–{more}")
        row(y, f"{span}: {'add f32x2' if packed_sum else 'max3/min3'}",
            {k: f"e8c+{per * k}" + ("" if per == 1 else f",{per * k + 1}") for k in range(slots)})
        if packed_sum:
            for k in range(0, slots, 2):
                canvas.line(xs[k] - 20, y + 13, xs[k + 1] + 20, y + 13, stroke="#1f77b4", width=1.5)
    if remainder is None or remainder > 0:
        y += 28
        first = None if chunks is None else 8 * chunks
        last = None if first is None else first + remainder - 1
        span = "e…" if first is None else (f"e{first}" if remainder == 1 else f"e{first}–{last}")
        row(y, "remainder: into s0, scalar", {0: span})

    y += 40
    live = list(range(slots))
    canvas.text(8, y + 4, "accumulators", size=10, anchor="start", bold=True)
    for k in live:
        canvas.circle(xs[k], y, 7, OPERATION)
    if packed_sum:
        folds = [("8 → 4 (f32x2)", [(2, 0), (3, 1), (6, 4), (7, 5)]), ("4 → 2 (f32x2)", [(4, 0), (5, 1)]),
                 ("2 → 1: s0 + s1", [(1, 0)])]
    else:
        folds = [("op(s0, s1)", [(1, 0)]), ("op3(·, s2, s3)", [(2, 0), (3, 0)])]
    for label, moves in folds:
        below = y + 40
        sources = {src for src, _ in moves}
        live = [k for k in live if k not in sources]
        for k in live:
            canvas.line(xs[k], y + 7, xs[k], below - 7, stroke="#aaa")
        for src, dst in moves:
            end = _toward(xs[src], y + 7, xs[dst], below, 8)
            canvas.line(xs[src], y + 7, *end, stroke="#d62728", arrow=True)
        for k in live:
            canvas.circle(xs[k], below, 7, OPERATION)
        canvas.text(8, below + 4, label, size=10, anchor="start")
        y = below
    canvas.text(xs[0], y + 22, "result", size=10, bold=True)


def _reg(canvas: Canvas, params: Dict) -> None:
    registers, bundle = _int(params, "registers_per_thread"), _int(params, "bundle")
    _title(canvas, "elementwise → reg · one thread's bundle",
           "each thread applies the op to every register it holds; no value crosses threads")
    labels = _register_labels(registers)
    top, step = 56, 48
    for k, label in enumerate(labels):
        x = 30 + k * step
        canvas.rect(x - 18, top, 36, 22, REGISTER)
        canvas.text(x, top + 15, label, size=10, mono=True)
        if label == "…":
            continue
        canvas.line(x, top + 22, x, top + 44, arrow=True)
        canvas.circle(x, top + 54, 10, OPERATION)
        canvas.text(x, top + 58, "f", size=11)
        canvas.line(x, top + 64, x, top + 86, arrow=True)
        canvas.rect(x - 18, top + 88, 36, 22, REGISTER)
        canvas.text(x, top + 103, label, size=10, mono=True)
    _note(canvas, top + 132, f"{_known(registers)} register slot(s) per thread, {_known(bundle)} holding "
          f"elements (the bundle); vec_len {_known(_int(params, 'vec_len'))}")
    _note(canvas, top + 146, "f = the op (sqrt, exp, add, fma, …), one rounding per register")


DRAWERS: Dict[str, Callable[[Canvas, Dict], None]] = {
    "local": _local, "shared": _shared, "sm100_packed": _sm100_packed, "reg": _reg,
}


def plan_diagram_svg(variant: str, params: Dict) -> str:
    """The algorithm a plan of ``variant`` runs, as a small SVG; '' for a variant with no drawer."""
    drawer = DRAWERS.get(variant)
    if drawer is None:
        return ""
    canvas = Canvas()
    drawer(canvas, dict(params or {}))
    return canvas.document(f"{variant}: the algorithm this plan runs")
