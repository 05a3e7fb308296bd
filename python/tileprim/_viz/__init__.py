"""Pictures, drawn as SVG with no drawing library: a layout as a grid of cells (``layout_grid``),
the algorithm a plan runs (``plan_diagram``), a plan and a DispatchError as notebook HTML
(``plan_html``), all on one small canvas (``canvas``).

Pure Python; the reprs import these modules only when a picture is asked for, so ``import
tileprim`` stays lean."""
