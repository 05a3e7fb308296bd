"""The pictures rendered to PNG by cairosvg, a renderer that is not a browser (as PDF and slide
tools are): every cell must come out in its own colour, not black. CSS colour functions such as
hsl(), which such renderers do not know, drew every cell black."""
import io
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import tileprim as tp
from tileprim import R, S, Swizzle, TileLayout, laneid, warpid
from tileprim._viz.layout_grid import layout_svg
from tileprim._viz.plan_diagram import plan_diagram_svg

try:  # cairosvg (the test extra) needs the system's libcairo, which it loads at import
    import cairosvg
    from PIL import Image
except (ImportError, OSError) as e:
    pytest.skip(f"cairosvg cannot render here: {e}", allow_module_level=True)

SVG = "{http://www.w3.org/2000/svg}"


def render(svg: str) -> np.ndarray:
    png = cairosvg.svg2png(bytestring=svg.encode("utf-8"))
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def cell_rects(svg: str):
    """(x, y, fill) of every grid cell's rectangle."""
    out = []
    for g in ET.fromstring(svg).iter(SVG + "g"):
        if g.get("class", "").startswith("cell"):
            rect = g.find(SVG + "rect")
            out.append((float(rect.get("x")), float(rect.get("y")), rect.get("fill")))
    return out


def hex_rgb(fill: str):
    return tuple(int(fill[k:k + 2], 16) for k in (1, 3, 5))


def sampled(svg: str):
    """Each cell's colour as rendered, read 2 px inside its top-left corner (clear of the text)."""
    image = render(svg)
    return [tuple(int(c) for c in image[int(y) + 2, int(x) + 2]) for x, y, _ in cell_rects(svg)], image


def assert_drawn(image: np.ndarray):
    black = np.all(image < 16, axis=-1).mean()
    assert black < 0.05, f"{black:.0%} of the picture is black"
    assert image.mean() > 150, "a picture on white should be mostly light"


@pytest.mark.parametrize("layout, dtype, colours", [
    (TileLayout(S[(32, 8):(1 @ laneid, 1)]), None, 32),                     # one colour per lane
    (TileLayout(S[(32, 8):(1 @ laneid, 1)] + R[4:1 @ warpid]), None, 32),   # replicas: first holder's
    (TileLayout(S[8, 32], swizzle=Swizzle.for_bytes(128, "float32")), "float32", 32),   # one per bank
    (TileLayout(S[(128, 8):(1 @ tp.tid_in_wg, 1)]), None, 128),             # colour only, 128 threads
])
def test_layout_cells_render_in_their_own_colours(layout, dtype, colours):
    svg = layout_svg(layout, dtype=dtype)
    seen, image = sampled(svg)
    assert_drawn(image)
    assert len(set(seen)) == colours
    for (_, _, fill), got in zip(cell_rects(svg), seen):
        assert max(abs(a - b) for a, b in zip(hex_rgb(fill), got)) <= 2, (fill, got)


def test_bank_conflict_marks_render_red():
    svg = layout_svg(TileLayout(S[8, 32]))
    image = render(svg)
    x, y, _ = cell_rects(svg)[0]
    corner = image[int(y) + 1, int(x) + 52 - 2]        # the cell's top-right corner (cells are 52 px wide)
    assert corner[0] > 180 and corner[1] < 80 and corner[2] < 80, corner


@pytest.mark.parametrize("variant, params", [
    ("local", {"path": "warp_shuffle", "shuffle_masks": [1, 2, 4, 8, 16], "n_shuffles": 5}),
    ("shared", {"group_size": 8, "groups": 4, "n_shuffles": 3, "working_threads": 32}),
    ("sm100_packed", {"algorithm": "packed_add_sum", "slots": 8, "full_chunks": 4, "remainder": 5}),
    ("reg", {"registers_per_thread": 8, "bundle": 8, "vec_len": 1}),
])
def test_plan_diagrams_render(variant, params):
    image = render(plan_diagram_svg(variant, params))
    assert_drawn(image)
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 8, "more than text on white"
