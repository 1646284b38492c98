"""Small server-side SVG charts for the dashboard: no JavaScript, no CDN (the servers may be offline).

Each function returns markup ready for a template; every label passes through ``escape``. Colours come
from CSS classes in ``static/admin/admin.css``.
"""

from __future__ import annotations

from typing import Optional, Sequence

from markupsafe import Markup, escape

BAR = 18


def _svg(width: int, height: int, body: list[str], label: str) -> Markup:
    """Drawn at its natural size (so text stays readable) and shrunk by CSS only on narrow screens."""
    return Markup(
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">{"".join(body)}</svg>'
    )


def bars(rows: Sequence[tuple[str, int]], label: str, css: str = "bar", width: int = 520) -> Markup:
    """Horizontal bars with their counts and shares, largest first: a distribution at a glance."""
    rows = sorted(rows, key=lambda r: (-r[1], r[0]))
    total = sum(v for _, v in rows) or 1
    top = max((v for _, v in rows), default=0) or 1
    left, right = 130, 90
    body = []
    for i, (name, value) in enumerate(rows):
        y = 4 + i * (BAR + 6)
        length = (width - left - right) * value / top
        body.append(
            f'<text x="{left - 8}" y="{y + BAR - 5}" class="axis" text-anchor="end">{escape(name)}</text>'
            f'<rect x="{left}" y="{y}" width="{length:.1f}" height="{BAR}" class="{css}">'
            f'<title>{escape(name)}: {value}</title></rect>'
            f'<text x="{left + length + 6:.1f}" y="{y + BAR - 5}" class="value">{value} ({value / total:.0%})</text>'
        )
    return _svg(width, max(8 + len(rows) * (BAR + 6), 30), body, label)


def columns(points: Sequence[tuple[str, int]], label: str, every: int = 6, width: int = 1080) -> Markup:
    """Vertical columns over time (e.g. turns per hour); every ``every``-th point is labelled."""
    height, bottom, left = 180, 24, 36
    top = max((v for _, v in points), default=0) or 1
    step = (width - left) / max(len(points), 1)
    plot = height - bottom - 8
    body = [f'<text x="{left - 6}" y="14" class="axis" text-anchor="end">{top}</text>',
            f'<line x1="{left}" y1="{height - bottom}" x2="{width}" y2="{height - bottom}" class="grid"/>']
    for i, (name, value) in enumerate(points):
        h = plot * value / top
        x = left + i * step
        body.append(f'<rect x="{x + 1:.1f}" y="{height - bottom - h:.1f}" width="{max(step - 2, 1):.1f}" '
                     f'height="{h:.1f}" class="bar"><title>{escape(name)}: {value}</title></rect>')
        if i % every == 0:
            body.append(f'<text x="{x:.1f}" y="{height - 6}" class="axis">{escape(name)}</text>')
    return _svg(width, height, body, label)


def lines(series: dict[str, Sequence[tuple[str, float]]], label: str, marks: Sequence[tuple[float, str]] = (),
          order: Optional[Sequence[str]] = None, width: int = 520) -> Markup:
    """Rates between 0 and 1 over time, one line per series, with dashed threshold marks.

    The x axis runs in ``order`` (default: the x values sorted, right for ISO dates).
    """
    height, bottom, left, legend = 200, 24, 36, 150
    plot_w, plot_h = width - left - legend, height - bottom - 10
    xs = list(order) if order is not None else sorted({x for points in series.values() for x, _ in points})
    where = {x: left + (plot_w * i / max(len(xs) - 1, 1)) for i, x in enumerate(xs)}

    def y(value: float) -> float:
        return 10 + plot_h * (1 - value)

    body = []
    for value, name in ((0.0, "0%"), (0.5, "50%"), (1.0, "100%")):
        body.append(f'<line x1="{left}" y1="{y(value):.1f}" x2="{left + plot_w}" y2="{y(value):.1f}" class="grid"/>'
                    f'<text x="{left - 4}" y="{y(value) + 4:.1f}" class="axis" text-anchor="end">{name}</text>')
    for value, name in marks:
        body.append(f'<line x1="{left}" y1="{y(value):.1f}" x2="{left + plot_w}" y2="{y(value):.1f}" class="mark">'
                    f'<title>{escape(name)}</title></line>')
    for i, (name, points) in enumerate(series.items()):
        coords = " ".join(f"{where[x]:.1f},{y(v):.1f}" for x, v in points)
        body.append(f'<polyline points="{coords}" class="line s{i % 4}"/>')
        body.extend(f'<circle cx="{where[x]:.1f}" cy="{y(v):.1f}" r="3" class="dot s{i % 4}">'
                    f'<title>{escape(name)} {escape(x)}: {v:.0%}</title></circle>' for x, v in points)
        body.append(f'<rect x="{width - legend + 8}" y="{12 + i * 18}" width="10" height="10" class="dot s{i % 4}"/>'
                    f'<text x="{width - legend + 24}" y="{21 + i * 18}" class="axis">{escape(name)}</text>')
    if xs:
        body.append(f'<text x="{left}" y="{height - 6}" class="axis">{escape(xs[0])}</text>')
    if len(xs) > 1:
        body.append(f'<text x="{left + plot_w}" y="{height - 6}" class="axis" text-anchor="end">{escape(xs[-1])}</text>')
    return _svg(width, height, body, label)
