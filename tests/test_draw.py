"""Pictures: layouts as SVG grids, plan diagrams, plan and DispatchError HTML. The SVGs are read
back as XML and checked cell by cell against what the layout algebra says."""
import pathlib
import re
import runpy
import xml.etree.ElementTree as ET
from html import escape

import numpy as np
import pytest

import tileprim as tp
from tileprim import R, S, Swizzle, TileLayout, laneid, warpid
from tileprim._ops.lower import kernel_origin_words
from tileprim._viz.layout_grid import bank_conflicts, layout_svg, thread_colour
from tileprim._viz.plan_diagram import plan_diagram_svg
from tileprim._viz.plan_html import dispatch_error_html, plan_html

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg"
    return root


def cells(svg: str):
    """(tooltip, [label lines], fill) for every grid cell, in row-major order."""
    out = []
    for g in parse(svg).iter(SVG + "g"):
        if g.get("class", "").startswith("cell"):
            out.append((g.find(SVG + "title").text, [t.text for t in g.findall(SVG + "text")],
                        g.find(SVG + "rect").get("fill")))
    return out


def caption(svg: str) -> str:
    root = parse(svg)
    return "\n".join(t.text for t in root.findall(SVG + "text"))


def numbers_after(word: str, text: str):
    return [int(n) for n in re.findall(rf"{word} (\d+)", text)]


def test_warp_rows_each_element_names_its_lane_and_register():
    layout = TileLayout(S[(32, 8):(1 @ laneid, 1)])
    drawn = cells(layout_svg(layout))
    assert len(drawn) == 32 * 8
    for i in range(32):
        for j in range(8):
            tooltip, lines, _ = drawn[i * 8 + j]
            assert lines == [f"lane {i}", f"r{j}"]
            assert tooltip == f"element ({i}, {j}): laneid {i}, m {j}"
    fills = {fill for _, _, fill in drawn}
    assert len(fills) == 32, "one hue per lane"


def test_replicated_elements_list_all_holders_in_numeric_order():
    layout = TileLayout(S[8:1] + R[32:1 @ laneid])
    svg = layout_svg(layout)
    drawn = cells(svg)
    assert len(drawn) == 8
    for j, (tooltip, lines, _) in enumerate(drawn):
        assert "held by 32 threads" in tooltip
        assert numbers_after("laneid", tooltip) == list(range(32))
        assert set(numbers_after("m", tooltip)) == {j}
        assert lines == ["lane 0–31", f"r{j} ×32"]
    assert "replicated: each element is held by 32 places" in caption(svg)


def test_several_thread_axes_name_threads_by_index():
    layout = TileLayout(S[(32, 8):(1 @ laneid, 1)] + R[4:1 @ warpid])
    svg = layout_svg(layout)
    tooltip, lines, _ = cells(svg)[3 * 8 + 5]
    assert lines == ["T3…", "r5 ×4"]
    assert re.findall(r"T(\d+) \(", tooltip) == ["3", "35", "67", "99"]
    assert "T = laneid + 32·warpid" in caption(svg)


def test_thread_offsets_move_threads_and_show_in_the_caption():
    layout = TileLayout(S[(4, 8):(1 @ laneid, 1 @ warpid)] + 3 @ laneid)
    svg = layout_svg(layout)
    assert "offset: 3@laneid" in caption(svg)
    tooltip, lines, _ = cells(svg)[1 * 8 + 2]
    assert lines[0] == "T68"                          # laneid 1 + 3, warpid 2
    assert "laneid 4, warpid 2" in tooltip


def shared_cell(layout, i, j, cols=8, dtype=None):
    tooltip, lines, fill = cells(layout_svg(layout, dtype=dtype))[i * cols + j]
    return tooltip, lines, fill


def test_shared_layouts_show_offset_and_bank_and_the_swizzle_changes_them():
    plain = TileLayout(S[8, 8])
    swizzled = TileLayout(S[8, 8], swizzle=Swizzle(0, 3, 3))
    tooltip, lines, fill = shared_cell(plain, 1, 0)
    assert lines == ["8", "b8"] and tooltip == "element (1, 0): offset 8, bank 8; 2-way bank conflict when a warp reads this column"
    assert fill == thread_colour(8), "no thread axes: coloured by bank"
    tooltip, lines, _ = shared_cell(swizzled, 1, 0)
    assert lines == ["9", "b9"] and tooltip == "element (1, 0) (swizzled): offset 9, bank 9"
    def column(layout):
        return [int(c[1][1][1:]) for c in cells(layout_svg(layout))[0::8]]
    assert len(set(column(plain))) == 4, "rows 4 apart share a bank"
    assert len(set(column(swizzled))) == 8, "the swizzle spreads a column over 8 banks"
    assert shared_cell(plain, 1, 0, dtype="float16")[1] == ["8", "b4"]
    assert "float16" in caption(layout_svg(plain, dtype=np.float16))


def test_small_tiles_draw_every_element_and_fold_leading_dims():
    assert len(cells(layout_svg(TileLayout(S[8])))) == 8
    svg = layout_svg(TileLayout(S[(2, 3, 4)]))
    drawn = cells(svg)
    assert len(drawn) == 24
    assert drawn[13][0].startswith("element (1, 0, 1):")
    assert "(2, 3, 4) drawn as 6 rows × 4 columns" in caption(svg)
    one_row = layout_svg(TileLayout(S[(32, 8):(1 @ laneid, 1)]), shape=(256,))
    assert len(cells(one_row)) == 128 and "showing 1×128 of 1×256" in caption(one_row)


def test_medium_tiles_keep_colour_and_drop_cell_text():
    drawn = cells(layout_svg(TileLayout(S[40, 40])))
    assert len(drawn) == 1600
    assert all(lines == [] for _, lines, _ in drawn)
    assert drawn[-1][0].startswith("element (39, 39): offset 1599, bank 31")


HEX = re.compile(r"#[0-9a-f]{3}|#[0-9a-f]{6}")


def fills(svg: str):
    return [e.get("fill") for e in parse(svg).iter() if e.get("fill") is not None]


def test_every_colour_is_hex_so_any_renderer_draws_it():
    pictures = [layout_svg(TileLayout(S[(32, 8):(1 @ laneid, 1)] + R[4:1 @ warpid])),
                layout_svg(TileLayout(S[8, 32], swizzle=Swizzle.for_bytes(128, "float32"))),
                *(plan_diagram_svg(v, p) for v, p in TYPICAL_PARAMS.items())]
    for svg in pictures:
        assert "hsl(" not in svg and "rgb(" not in svg
        assert all(HEX.fullmatch(f) or f in ("white", "none") for f in fills(svg)), set(fills(svg))
    assert len({thread_colour(i) for i in range(128)}) == 128


def conflicted(svg: str):
    return [g.get("class") == "cell conflict" for g in parse(svg).iter(SVG + "g")
            if g.get("class", "").startswith("cell")]


def test_shared_layouts_are_coloured_by_bank_and_mark_bank_conflicts():
    plain = layout_svg(TileLayout(S[8, 32]))
    drawn = cells(plain)
    assert [fill for _, _, fill in drawn[:32]] == [thread_colour(b) for b in range(32)], "one hue per bank"
    assert all(drawn[i * 32 + 5][2] == thread_colour(5) for i in range(8)), "a column lies in one bank"
    assert all(conflicted(plain)), "a warp reading a column hits one bank 8 times"
    assert "reading a column: 8-way bank conflict" in caption(plain) and "reading a row: 1-way (none)" in caption(plain)
    assert "8-way bank conflict when a warp reads this column" in drawn[0][0]
    swizzled = layout_svg(TileLayout(S[8, 32], swizzle=Swizzle.for_bytes(128, "float32")))
    assert not any(conflicted(swizzled)) and "reading a column: 1-way bank conflict (none)" in caption(swizzled)
    half = layout_svg(TileLayout(S[8, 64]), dtype="float16")       # two elements to a 4-byte word
    assert "reading a column: 8-way" in caption(half) and "reading a row: 1-way" in caption(half)
    assert not any(conflicted(layout_svg(TileLayout(S[(32, 8):(1 @ laneid, 1)]))))


def test_bank_conflicts_count_distinct_words_per_bank():
    assert bank_conflicts([[0], [32], [64], [1]]) == [[3], [3], [3], [1]]
    assert bank_conflicts([[0], [0], [32]]) == [[2], [2], [2]], "the same word twice is one access (a broadcast)"
    tall = [[32 * i] for i in range(40)]                      # a warp reads 32 rows at a time
    assert bank_conflicts(tall)[0] == [32] and bank_conflicts(tall)[39] == [8]


def test_labels_keep_or_drop_the_text():
    big = TileLayout(S[(32, 64):(1 @ laneid, 1)])
    assert all(lines == [] for _, lines, _ in cells(layout_svg(big)))
    kept = cells(layout_svg(big, labels=True))
    assert len(kept) == 2048 and kept[5 * 64 + 63][1] == ["lane 5", "r63"]
    assert "labels=True" in caption(layout_svg(big))
    assert all(lines == [] for _, lines, _ in cells(layout_svg(TileLayout(S[4, 4]), labels=False)))
    with pytest.raises(TypeError, match="labels: expected True, False or None"):
        layout_svg(big, labels="yes")


def test_large_tiles_are_summarised():
    svg = layout_svg(TileLayout(S[200, 200]))
    assert len(cells(svg)) == 128 * 128
    assert "showing 128×128 of 200×200" in caption(svg)


def test_a_shape_must_cover_the_layout():
    with pytest.raises(ValueError, match="has 9 elements but the layout places 64"):
        layout_svg(TileLayout(S[8, 8]), shape=(3, 3))


def test_layout_methods_draw_write_and_render_in_notebooks(tmp_path):
    layout = TileLayout(S[(32, 8):(1 @ laneid, 1)])
    path = tmp_path / "warp.svg"
    svg = layout.draw(path=str(path))
    assert path.read_text() == svg
    assert layout.draw(shape=(256,)) != svg
    parse(layout._repr_svg_())
    assert layout._repr_html_().startswith("<div") and "<svg" in layout._repr_html_()


TYPICAL_PARAMS = {
    "local": {"path": "warp_shuffle", "outputs_per_thread": 8, "sources_per_output": 1,
              "shuffle_masks": [1, 2, 4, 8, 16], "n_shuffles": 5},
    "shared": {"group_size": 8, "groups": 4, "n_shuffles": 3, "working_threads": 32, "steps": 1,
               "reduction_len": 8},
    "sm100_packed": {"algorithm": "packed_add_sum", "slots": 8, "full_chunks": 4, "remainder": 5},
    "reg": {"registers_per_thread": 8, "bundle": 8, "vec_len": 1},
}


def width(svg: str) -> int:
    return int(parse(svg).get("width"))


@pytest.mark.parametrize("variant", sorted(TYPICAL_PARAMS))
def test_plan_diagrams_are_small_labelled_svgs(variant):
    svg = plan_diagram_svg(variant, TYPICAL_PARAMS[variant])
    assert width(svg) <= 600
    assert variant in caption(svg)
    bare = plan_diagram_svg(variant, {})
    assert width(bare) <= 600 and variant in caption(bare), "missing params: draw what is known"


def test_plan_diagrams_show_the_algorithm_steps():
    assert [f"xor {m}" for m in (1, 2, 4, 8, 16)] == re.findall(r"xor \d+", caption(
        plan_diagram_svg("local", TYPICAL_PARAMS["local"])))
    assert "xor 8" not in caption(plan_diagram_svg("shared", TYPICAL_PARAMS["shared"]))
    assert "out[3]" in caption(plan_diagram_svg("shared", TYPICAL_PARAMS["shared"]))
    packed = caption(plan_diagram_svg("sm100_packed", TYPICAL_PARAMS["sm100_packed"]))
    assert "e32–36" in packed and "8 → 4 (f32x2)" in packed
    maxmin = caption(plan_diagram_svg("sm100_packed", {"algorithm": "3input_maxmin", "slots": 4}))
    assert "op3(·, s2, s3)" in maxmin and "s4" not in maxmin
    thread_wise = caption(plan_diagram_svg("local", {"path": "thread_wise", "sources_per_output": 4}))
    assert [f"r{k}" for k in range(4)] == re.findall(r"\br\d+\b", thread_wise)
    assert plan_diagram_svg("treduce", {"algorithm": "root_pull"}) == ""


def test_plan_html_leads_with_the_choice_then_the_declined_reasons():
    layout = TileLayout(S[(32, 8):(1 @ laneid, 1)])
    plan = tp.plan(tp.warp.sum, np.ones((32, 8), np.float32), axes=0, layout=layout)
    html = plan_html(plan)
    assert html.index("chosen: local</b> (priority 10)") < html.index("declined") < html.index("<svg")
    for reason in plan.declined()["sm100_packed"]:
        assert reason.split(":")[0] in html
    assert "text-align:left" in html and "shuffle_masks" in html and "accumulate_dtype" in html


def test_dispatch_errors_keep_their_lines():
    with pytest.raises(tp.DispatchError) as caught:
        tp.plan(tp.sum, np.ones((4, 8), np.float32), scope=tp.warp, storage="shared", dispatch="local")
    html = dispatch_error_html(str(caught.value))
    body = re.search(r"<pre[^>]*>(.*)</pre>", html, re.S).group(1)
    assert body == escape(str(caught.value)) and body.count("\n") >= 3, "one line per trace row"
    assert "font-family:monospace" in html
    assert "&lt;b&gt;x" in dispatch_error_html("<b>x</b>")


def test_kernel_origin_in_words():
    assert kernel_origin_words("compiled", 31.2) == "compiled now in 31 ms"
    assert kernel_origin_words("disk", 0.83) == "loaded from the disk cache in 0.8 ms"
    assert kernel_origin_words("memory", 0.002) == "cached in this process"


def test_the_reference_pictures_script_draws_every_picture(tmp_path):
    script = pathlib.Path(__file__).parent.parent / "examples" / "make_pictures.py"
    runpy.run_path(str(script))["main"](tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(p.name for p in (script.parent / "pictures").iterdir())
    for name in names:
        parse((tmp_path / name).read_text())
