"""The cost plot: an inline SVG drawn here, so the page loads nothing from elsewhere.

Bars are the cost of each UTC day; the solid line is the cache read share billed, the
dashed one the share Salon expected (where they part, the cache broke more than it should).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

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
    for x, share in points:
        if share is None:
            runs.append([])
            continue
        y = TOP + (1 - share) * (HEIGHT - TOP - BOTTOM)
        runs[-1].append(f"{x:.1f},{y:.1f}")
    return "".join(
        f'<polyline class="{css}" points="{" ".join(run)}"/>' for run in runs if len(run) > 1
    ) + "".join(
        f'<circle class="{css}" cx="{run[0].split(",")[0]}" cy="{run[0].split(",")[1]}" r="2.5"/>'
        for run in runs
        if len(run) == 1
    )


def cost_plot(rows: list[dict[str, Any]], *, days: int = 30, now: float | None = None) -> str:
    today = datetime.now(UTC) if now is None else datetime.fromtimestamp(now, UTC)
    shown = _days(rows, days, today)
    top = max((r["cost"] for r in shown), default=0.0) or 0.01
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / len(shown)
    parts = [
        f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        'aria-label="cost and cache read share per day" xmlns="http://www.w3.org/2000/svg">',
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" '
        f'y2="{TOP + plot_h}"/>',
        f'<text class="tick" x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">${top:.4g}</text>',
        f'<text class="tick" x="{LEFT - 6}" y="{TOP + plot_h}" text-anchor="end">$0</text>',
        f'<text class="tick share" x="{LEFT + plot_w + 6}" y="{TOP + 4}">100%</text>',
        f'<text class="tick share" x="{LEFT + plot_w + 6}" y="{TOP + plot_h}">0%</text>',
    ]
    for i, row in enumerate(shown):
        x = LEFT + i * step
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
    centres = [LEFT + (i + 0.5) * step for i in range(len(shown))]
    parts.append(
        _share_line(
            list(zip(centres, (r["expected_read_share"] for r in shown), strict=True)), "expected"
        )
    )
    parts.append(
        _share_line(list(zip(centres, (r["read_share"] for r in shown), strict=True)), "billed")
    )
    parts.append("</svg>")
    return "".join(parts)


def _tip(row: dict[str, Any]) -> str:
    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    return (
        f"{row['day']}: ${row['cost']:.4f}, {row['activations']} activations, "
        f"cache read {share(row['read_share'])} (expected {share(row['expected_read_share'])})"
    )
