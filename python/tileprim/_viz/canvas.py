"""A few SVG shapes on a canvas that grows to fit them: enough for the layout and plan pictures,
with no drawing library to install. Arrowheads are polygons, not markers, so several pictures
inline in one notebook page never share (or clash over) element ids."""
from __future__ import annotations

import math
from contextlib import contextmanager
from html import escape
from typing import Iterator, List, Optional

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"


def text_width(s: str, size: float) -> float:
    """A generous estimate of rendered width, for sizing the canvas around captions."""
    return len(s) * size * 0.62


class Canvas:
    """Collects SVG elements and tracks how far they reach, so the document fits them."""

    def __init__(self, margin: float = 8):
        self.parts: List[str] = []
        self.margin = margin
        self.right = 0.0
        self.bottom = 0.0

    def _reach(self, x: float, y: float) -> None:
        self.right = max(self.right, x)
        self.bottom = max(self.bottom, y)

    @contextmanager
    def group(self, title: Optional[str] = None, css_class: Optional[str] = None,
              stroke: Optional[str] = None) -> Iterator[None]:
        """Elements drawn inside share one tooltip (``title``), one class and one outline colour
        (said once here rather than on each of thousands of cells)."""
        cls = f' class="{css_class}"' if css_class else ""
        outline = f' stroke="{stroke}" stroke-width="0.6"' if stroke else ""
        tooltip = f"<title>{escape(title)}</title>" if title is not None else ""
        self.parts.append(f"<g{cls}{outline}>{tooltip}")
        yield
        self.parts.append("</g>")

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: Optional[str] = "#888",
             rx: float = 0) -> None:
        """``stroke=None`` leaves the outline to an enclosing group."""
        self._reach(x + w, y + h)
        corner = f' rx="{rx:g}"' if rx else ""
        outline = f' stroke="{stroke}" stroke-width="0.6"' if stroke else ""
        self.parts.append(f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}"{corner} '
                          f'fill="{fill}"{outline}/>')

    def text(self, x: float, y: float, s: str, size: float = 11, anchor: str = "middle", bold: bool = False,
             fill: str = "#222", mono: bool = False) -> None:
        width = text_width(s, size)
        left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
        self._reach(left + width, y + size * 0.3)
        weight = ' font-weight="bold"' if bold else ""
        family = f' font-family="{MONO}"' if mono else ""
        self.parts.append(f'<text x="{x:g}" y="{y:g}" font-size="{size:g}" text-anchor="{anchor}"'
                          f'{weight}{family} fill="{fill}" stroke="none">{escape(s)}</text>')

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = "#555", width: float = 1,
             arrow: bool = False, dashed: bool = False) -> None:
        self._reach(max(x1, x2), max(y1, y2))
        dash = ' stroke-dasharray="3,2"' if dashed else ""
        self.parts.append(f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{stroke}" '
                          f'stroke-width="{width:g}"{dash}/>')
        if arrow:
            self._arrowhead(x1, y1, x2, y2, stroke)

    def _arrowhead(self, x1: float, y1: float, x2: float, y2: float, fill: str, size: float = 6) -> None:
        angle = math.atan2(y2 - y1, x2 - x1)
        points = [(x2, y2)]
        for side in (-1, 1):
            a = angle + math.pi - side * 0.4
            points.append((x2 + size * math.cos(a), y2 + size * math.sin(a)))
        self.polygon(points, fill)

    def polygon(self, points, fill: str) -> None:
        for px, py in points:
            self._reach(px, py)
        coords = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        self.parts.append(f'<polygon points="{coords}" fill="{fill}" stroke="none"/>')

    def circle(self, cx: float, cy: float, r: float, fill: str, stroke: str = "#555") -> None:
        self._reach(cx + r, cy + r)
        self.parts.append(f'<circle cx="{cx:g}" cy="{cy:g}" r="{r:g}" fill="{fill}" stroke="{stroke}" '
                          f'stroke-width="0.8"/>')

    def document(self, title: str, min_width: float = 0) -> str:
        width = math.ceil(max(self.right, min_width) + self.margin)
        height = math.ceil(self.bottom + self.margin)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                f'viewBox="0 0 {width} {height}" font-family="{FONT}">'
                f'<title>{escape(title)}</title>'
                f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>'
                + "".join(self.parts) + "</svg>")
