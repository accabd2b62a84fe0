"""Small hand-written SVG charts for the HTML report: no plotting library, no network.

Two charts decide a swap: quality versus cost (each model a labelled point, the reference a
distinct diamond) and latency distributions (box plots of E2E and TTFT per model); the run
history is ``trend.py``, on the same frame. Every label is escaped here, because the result is
inserted into the page as markup.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from html import escape

from pytest_slam.metrics.stats import percentile
from pytest_slam.report import fmt
from pytest_slam.report.aggregate import ModelRow

W, H = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 30, 30, 60
COLORS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "-": "#0969da"}
REF_COLOR = "#8250df"

Scale = Callable[[float], float]  # a data value to an SVG coordinate
Show = Callable[[float], str]  # a data value as its tick or tooltip text
Series = dict[str, list[float]]  # metric ("e2e_ms", "ttft_ms") -> one model's values


@dataclass(frozen=True)
class Point:
    label: str
    x: float
    y: float
    reference: bool
    gate: str


def quality_cost_points(rows: list[ModelRow]) -> tuple[str, list[Point], list[str]]:
    """Pick the x metric (cost per 1k calls, else cost ratio); return it, points, unplotted."""
    priced = {a: sum(1 for r in rows if _x(r, a)) for a in ("cost_1k", "cost_ratio")}
    axis = "cost_1k" if priced["cost_1k"] >= priced["cost_ratio"] else "cost_ratio"
    points, skipped = [], []
    for row in rows:
        x, y = _x(row, axis), 1.0 if row.is_reference else row.equivalence_mean
        if x and y is not None:
            points.append(Point(row.model, x, y, row.is_reference, row.gate))
        else:
            skipped.append(row.model)
    return axis, points, skipped


def _x(row: ModelRow, axis: str) -> float | None:
    value = row.cost_per_1000_calls_usd if axis == "cost_1k" else row.cost_ratio
    return value if value is not None and value > 0 else None


def quality_cost_svg(rows: list[ModelRow]) -> str:
    """Mean equivalence (y, 0..1) against cost (x, log scale); upper left is the best swap."""
    axis, points, skipped = quality_cost_points(rows)
    title = "cost per 1,000 calls (log scale)" if axis == "cost_1k" else "cost / reference (log)"
    show = fmt.usd if axis == "cost_1k" else fmt.ratio
    lo, hi = _decades([p.x for p in points] or [1.0])
    sx = _log_scale(lo, hi, LEFT, W - RIGHT)
    y_ticks = _y_ticks(min((p.y for p in points), default=0.5) - 0.02)  # no point on the axis
    sy = lin_scale(y_ticks[0], 1.0, H - BOTTOM, TOP)
    parts = [open_svg("quality-cost", "Mean equivalence against cost per model")]
    parts += _grid_x([10.0**e for e in range(lo, hi + 1)], sx, show)
    parts += grid_y(y_ticks, sy)
    parts.append(axis_titles(title, "mean equivalence to reference"))
    parts += [_point(p, sx(p.x), sy(p.y), show) for p in points]
    unpriced = [r.model for r in rows if r.is_reference and r.model in skipped]
    if unpriced:  # a curated or unpriced reference is still the yardstick: its line at 1
        parts.append(_reference_line(unpriced[0], sy(1.0)))
        skipped = [m for m in skipped if m not in unpriced]
    if skipped:
        names = escape(", ".join(skipped))
        parts.append(f'<text x="{LEFT}" y="{H - 6}" class="note">not plotted: {names}</text>')
    return "\n".join([*parts, "</svg>"])


def _y_ticks(lowest: float) -> list[float]:
    """From 0.5 (or lower, to include every model) up to 1: the range where swaps differ."""
    lo = min(0.5, math.floor(lowest * 10) / 10)
    step = 0.1 if lo >= 0.5 else 0.2 if lo >= 0.2 else 0.25
    start = math.floor(lo / step + 1e-9) * step
    return [round(start + i * step, 2) for i in range(round((1 - start) / step) + 1)]


def _decades(values: list[float]) -> tuple[int, int]:
    """Whole decades around the values, with a margin so no point sits on the plot's edge."""
    lo = math.floor(math.log10(min(values)) - 0.1)
    hi = math.ceil(math.log10(max(values)) + 0.1)
    return (lo, hi if hi > lo else lo + 1)


def _log_scale(lo_exp: int, hi_exp: int, out_lo: float, out_hi: float) -> Scale:
    span = hi_exp - lo_exp
    return lambda v: out_lo + (math.log10(v) - lo_exp) / span * (out_hi - out_lo)


def lin_scale(lo: float, hi: float, out_lo: float, out_hi: float) -> Scale:
    return lambda v: out_lo + (v - lo) / (hi - lo) * (out_hi - out_lo)


def open_svg(css_id: str, label: str, height: int = H) -> str:
    return (
        f'<svg id="{css_id}" class="chart" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {W} {height}" role="img" aria-label="{escape(label)}">'
    )


def _grid_x(ticks: list[float], sx: Scale, show: Show) -> list[str]:
    out = []
    for t in ticks:
        x = sx(t)
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - BOTTOM}"/>')
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{H - BOTTOM + 16}" '
            f'text-anchor="middle">{escape(show(t))}</text>'
        )
    return out


def grid_y(ticks: list[float], sy: Scale) -> list[str]:
    out = []
    for t in ticks:
        y = sy(t)
        out.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}"/>')
        out.append(
            f'<text class="tick" x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{t:.2f}</text>'
        )
    return out


def axis_titles(x_title: str, y_title: str) -> str:
    cx, cy = (LEFT + W - RIGHT) / 2, (TOP + H - BOTTOM) / 2
    return (
        f'<text class="axis" x="{cx}" y="{H - BOTTOM + 38}" text-anchor="middle">'
        f"{escape(x_title)}</text>"
        f'<text class="axis" transform="translate(18 {cy}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_title)}</text>'
    )


def _point(p: Point, x: float, y: float, show: Show) -> str:
    label = escape(p.label + (" (reference)" if p.reference else ""))
    tip = escape(f"{p.label}: equivalence {p.y:.3f}, cost {show(p.x)}")
    if p.reference:
        mark = (
            f'<path d="M{x:.1f} {y - 9:.1f} L{x + 9:.1f} {y:.1f} L{x:.1f} {y + 9:.1f} '
            f'L{x - 9:.1f} {y:.1f} Z" fill="{REF_COLOR}"/>'
        )
    else:
        mark = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="7" fill="{COLORS.get(p.gate, "#0969da")}"/>'
    anchor, dx = ("end", -12) if x > W * 0.7 else ("start", 12)
    return (
        f'<g class="point{" reference" if p.reference else ""}" data-model="{escape(p.label)}" '
        f'data-x="{p.x:.6g}" data-y="{p.y:.4f}"><title>{tip}</title>{mark}'
        f'<text x="{x + dx:.1f}" y="{y + 4:.1f}" text-anchor="{anchor}">{label}</text></g>'
    )


def _reference_line(model: str, y: float) -> str:
    label = escape(f"{model} (reference, no cost recorded)")
    return (
        f'<g class="reference-line" data-model="{escape(model)}">'
        f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="{REF_COLOR}" '
        f'stroke-width="2" stroke-dasharray="6 4"/><text x="{W - RIGHT - 6}" y="{y + 16:.1f}" '
        f'text-anchor="end" fill="{REF_COLOR}">{label}</text></g>'
    )


def latency_svg(series: list[tuple[str, Series]]) -> str:
    """Box plots (min, quartiles, median, max) of E2E and TTFT, one band per model."""
    rows = [(m, k, sorted(v[k])) for m, v in series for k in ("e2e_ms", "ttft_ms") if v.get(k)]
    height = TOP + BOTTOM + 26 * max(len(rows), 1)
    top = max((vals[-1] for _, _, vals in rows), default=1.0)
    ticks = _nice_ticks(top)
    sx = lin_scale(0.0, ticks[-1], 190, W - RIGHT)
    parts = [open_svg("latency", "Latency distribution per model", height)]
    for t in ticks:
        x = sx(t)
        parts.append(
            f'<line class="grid" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" '
            f'y2="{height - BOTTOM}"/><text class="tick" x="{x:.1f}" '
            f'y="{height - BOTTOM + 16}" text-anchor="middle">{fmt.ms(t)}</text>'
        )
    for i, (model, metric, values) in enumerate(rows):
        parts.append(_box(model, metric, values, sx, TOP + 26 * i + 13))
    parts.append(
        f'<text class="axis" x="{(190 + W - RIGHT) / 2}" y="{height - BOTTOM + 38}" '
        'text-anchor="middle">latency per call, ms (box: quartiles; line: median; '
        "whiskers: min-max)</text></svg>"
    )
    return "\n".join(parts)


def _box(model: str, metric: str, values: list[float], sx: Scale, y: float) -> str:
    q1, med, q3 = (percentile(values, q) for q in (25, 50, 75))
    lo, hi = sx(values[0]), sx(values[-1])
    cls = "e2e" if metric == "e2e_ms" else "ttft"
    name = escape(f"{model} {'E2E' if cls == 'e2e' else 'TTFT'}")
    tip = escape(
        f"{model} {metric}: n={len(values)}, median {med:.0f} ms, "
        f"IQR {q1:.0f}-{q3:.0f} ms, max {values[-1]:.0f} ms"
    )
    return (
        f'<g class="box {cls}" data-model="{escape(model)}" data-metric="{metric}" '
        f'data-median="{med:.1f}"><title>{tip}</title>'
        f'<text x="182" y="{y + 4:.1f}" text-anchor="end">{name}</text>'
        f'<line x1="{lo:.1f}" y1="{y}" x2="{hi:.1f}" y2="{y}" class="whisker"/>'
        f'<rect x="{sx(q1):.1f}" y="{y - 8}" width="{max(sx(q3) - sx(q1), 1):.1f}" '
        f'height="16"/><line x1="{sx(med):.1f}" y1="{y - 8}" x2="{sx(med):.1f}" '
        f'y2="{y + 8}" class="median"/></g>'
    )


def _nice_ticks(top: float) -> list[float]:
    """0 and round steps (1, 2 or 5 x 10^n) up to just above ``top``."""
    raw = max(top, 1.0) / 5
    base = 10.0 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 5, 10) if m * base >= raw)
    return [step * i for i in range(math.ceil(top / step) + 1 if top > 0 else 2)]
