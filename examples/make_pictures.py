"""The reference pictures a person checks by eye after changing the drawing code:
layouts (who holds each element) and the algorithm each variant's plan runs.

    python examples/make_pictures.py [DIRECTORY]     # default: examples/pictures
"""
import pathlib
import sys

import numpy as np

import tileprim as tp
from tileprim import R, S, Swizzle, TileLayout, laneid, tid_in_wg
from tileprim._draw import plan_diagram_svg

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


def main(directory: pathlib.Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, (layout, dtype) in LAYOUTS.items():
        layout.draw(path=str(directory / name), dtype=dtype)
        print(directory / name)
    for name, plan in plans().items():
        (directory / name).write_text(plan_diagram_svg(plan.variant, plan.params), encoding="utf-8")
        print(directory / name)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "pictures")
