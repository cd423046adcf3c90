"""The cost plot: an inline SVG drawn here, so the page loads nothing from elsewhere.

Bars are the cost of each UTC day; the solid line is the cache read share billed, the
dashed one the share Salon expected (where they part, the cache broke more than it should).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

from salon.web.pages import money, share

__all__ = ["cost_plot"]

WIDTH, HEIGHT = 760, 220
LEFT, RIGHT, TOP, BOTTOM = 56, 44, 14, 30


def _days(rows: list[dict[str, Any]], days: int, today: datetime) -> list[dict[str, Any]]:
    """One row per day of the window, days without activity as zeros."""
    by_day = {r["day"]: r for r in rows}
    first = today - timedelta(days=days - 1)
    shown = []
    for offset in range(days):
        day = (first + timedelta(days=offset)).strftime("%Y-%m-%d")
        empty = {"activations": 0, "cost": 0.0, "read_share": None, "expected_read_share": None}
        shown.append({"day": day, **by_day.get(day, empty)})
    return shown


def _share_line(points: list[tuple[float, float | None]], css: str) -> str:
    """A polyline through the days that have a share; gaps where they have none."""
    runs: list[list[str]] = [[]]
    for x, value in points:
        if value is None:
            runs.append([])
            continue
        y = TOP + (1 - value) * (HEIGHT - TOP - BOTTOM)
        runs[-1].append(f"{x:.1f},{y:.1f}")
    return "".join(
        f'<polyline class="{css}" points="{" ".join(run)}"/>' for run in runs if len(run) > 1
    ) + "".join(
        f'<circle class="{css}" cx="{run[0].split(",")[0]}" cy="{run[0].split(",")[1]}" r="2.5"/>'
        for run in runs
        if len(run) == 1
    )


def _margin(label: str) -> float:
    """The left margin that holds the cost axis's widest label (about 6.5 units a
    character at the labels' size, in the widest of the usual sans fonts)."""
    return max(LEFT, 12 + math.ceil(6.5 * len(label)))


def _axes(top: str, left: float, plot_w: float, plot_h: float) -> list[str]:
    return [
        f'<line class="axis" x1="{left}" y1="{TOP + plot_h}" x2="{left + plot_w}" '
        f'y2="{TOP + plot_h}"/>',
        f'<text class="tick" x="{left - 6}" y="{TOP + 4}" text-anchor="end">{escape(top)}</text>',
        f'<text class="tick" x="{left - 6}" y="{TOP + plot_h}" text-anchor="end">$0</text>',
        f'<text class="tick share" x="{left + plot_w + 6}" y="{TOP + 4}">100%</text>',
        f'<text class="tick share" x="{left + plot_w + 6}" y="{TOP + plot_h}">0%</text>',
    ]


def cost_plot(rows: list[dict[str, Any]], *, days: int = 30, now: float | None = None) -> str:
    today = datetime.now(UTC) if now is None else datetime.fromtimestamp(now, UTC)
    shown = _days(rows, days, today)
    top = max((r["cost"] for r in shown), default=0.0) or 0.01
    left = _margin(money(top))
    plot_w, plot_h = WIDTH - left - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / len(shown)
    parts = [
        f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        'aria-label="cost and cache read share per day" xmlns="http://www.w3.org/2000/svg">',
        *_axes(money(top), left, plot_w, plot_h),
    ]
    for i, row in enumerate(shown):
        x = left + i * step
        h = plot_h * row["cost"] / top
        parts.append(
            f'<rect class="bar" x="{x + step * 0.15:.1f}" y="{TOP + plot_h - h:.1f}" '
            f'width="{step * 0.7:.1f}" height="{max(h, 0):.1f}"><title>{escape(_tip(row))}'
            "</title></rect>"
        )
        if i % 5 == 0 or i == len(shown) - 1:
            parts.append(
                f'<text class="tick" x="{x + step / 2:.1f}" y="{HEIGHT - 10}" '
                f'text-anchor="middle">{row["day"][5:]}</text>'
            )
    centres = [left + (i + 0.5) * step for i in range(len(shown))]
    for key, css in (("expected_read_share", "expected"), ("read_share", "billed")):
        shares = (r[key] for r in shown)
        parts.append(_share_line(list(zip(centres, shares, strict=True)), css))
    parts.append("</svg>")
    return "".join(parts)


def _tip(row: dict[str, Any]) -> str:
    return (
        f"{row['day']}: {money(row['cost'])}, {row['activations']} activations, "
        f"cache read {share(row['read_share'])} (expected {share(row['expected_read_share'])})"
    )
