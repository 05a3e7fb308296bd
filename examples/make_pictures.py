"""The reference pictures a person checks by eye after changing the drawing code:
layouts (who holds each element) and the algorithm each variant's plan runs.

    python examples/make_pictures.py [DIRECTORY]             # SVGs; default: examples/pictures
    python examples/make_pictures.py docs/images --png       # the docs' PNGs (needs cairosvg)
"""
import pathlib
import sys

import numpy as np

import tileprim as tp
from tileprim import R, S, Swizzle, TileLayout, laneid, tid_in_wg
from tileprim._viz.plan_diagram import plan_diagram_svg

WARP_ROWS = TileLayout(S[(32, 8):(1 @ laneid, 1)])

LAYOUTS = {
    # lane i holds row i in registers 0..7 (the elementwise demonstration program's layout)
    "warp_rows.svg": (WARP_ROWS, None),
    # the result of a column sum over the lanes: 8 values, each on all 32 lanes
    "replicated.svg": (TileLayout(S[8:1] + R[32:1 @ laneid]), None),
    # an 8 x 32 float32 shared tile, 128-byte rows, without and with the 128-byte swizzle
    "shared_plain.svg": (TileLayout(S[8, 32]), "float32"),
    "shared_swizzled.svg": (TileLayout(S[8, 32], swizzle=Swizzle.for_bytes(128, "float32")), "float32"),
    # a warpgroup's 128 threads, one row each: too many cells for text, colour only
    "warpgroup_rows.svg": (TileLayout(S[(128, 8):(1 @ tid_in_wg, 1)]), None),
}


def plans() -> dict:
    f32 = np.float32
    return {
        "plan_local.svg": tp.plan(tp.warp.sum, np.ones((32, 8), f32), axes=0, layout=WARP_ROWS),
        "plan_local_thread.svg": tp.plan(tp.sum, np.ones(4, f32), scope=tp.thread, storage="local"),
        "plan_shared.svg": tp.plan(tp.cta(32).sum, np.ones((4, 8), f32), axes=-1, storage="shared"),
        "plan_sm100_packed.svg": tp.plan(tp.sum, np.ones(37, f32), scope=tp.thread, target="sm_100a"),
        "plan_sm100_packed_max.svg": tp.plan(tp.max, np.ones(37, f32), scope=tp.thread, target="sm_100a"),
        "plan_reg.svg": tp.plan(tp.warp.sqrt, np.ones((32, 8), f32), layout=WARP_ROWS),
    }


def pictures() -> dict:
    """name.svg -> the SVG text."""
    drawn = {name: layout.draw(dtype=dtype) for name, (layout, dtype) in LAYOUTS.items()}
    drawn.update({name: plan_diagram_svg(plan.variant, plan.params) for name, plan in plans().items()})
    return drawn


def write_png(svg: str, path: pathlib.Path) -> None:
    """Rendered by cairosvg (a renderer that is not a browser, as PDF and slide tools are), then
    reduced to 128 colours: a third of the bytes, and the cells' few hues come through unchanged."""
    import io

    import cairosvg
    from PIL import Image
    image = Image.open(io.BytesIO(cairosvg.svg2png(bytestring=svg.encode("utf-8")))).convert("RGB")
    image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def main(directory: pathlib.Path, png: bool = False) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, svg in pictures().items():
        if png:
            path = directory / name.replace(".svg", ".png")
            write_png(svg, path)
        else:
            path = directory / name
            path.write_text(svg, encoding="utf-8")
        print(path)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--png"]
    main(pathlib.Path(args[0]) if args else pathlib.Path(__file__).parent / "pictures", png="--png" in sys.argv)
