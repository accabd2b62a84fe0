"""The run history chart of the HTML report: each metric a user compares, per model, across the runs
``--slm-baseline=auto`` saved, with their dates, this run last.

One chart a metric (``METRICS``): mean equivalence over every call (a failed call counted 0, as a
baseline compares it, so near misses that became runaways read as the drop they are), the pass
rate, the share of failed calls, the E2E p95 and the cost per call. A run is labelled by its
number and its UTC date; a saved report from before a metric existed simply has no point there
(equivalence falls back to the mean over scored pairs, what such a report compared).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any

from pytest_slam.report import fmt
from pytest_slam.report.charts import (
    BOTTOM,
    LEFT,
    RIGHT,
    TOP,
    H,
    W,
    axis_titles,
    grid_y,
    lin_scale,
    open_svg,
)

SERIES_COLORS = ("#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#57606a")
LABEL_PX = 96  # the room a run's tick label (number over date) takes: fewer labels when crowded


@dataclass(frozen=True)
class Metric:
    """A metric the history shows: its key in ``SavedRun.values``, its title and how a value
    reads; ``share``: a fraction in 0..1 (the axis ends at 1), else from 0 up to the largest."""

    key: str
    title: str
    show: Callable[[float], str]
    share: bool


METRICS = (
    Metric("equivalence", "mean equivalence, every call (a failed call counts 0)", fmt.score, True),
    Metric("pass_rate", "pass rate", fmt.pct, True),
    Metric("calls_failed", "failed calls (share of the model's calls)", fmt.pct, True),
    Metric("e2e_p95_ms", "E2E p95", fmt.ms, False),
    Metric("cost_per_call_usd", "cost per call", fmt.usd, False),
)


@dataclass(frozen=True)
class SavedRun:
    """One run of the history: ``label`` its number (``0003``) or ``now``, ``when`` its UTC
    date and time (``2026-12-07 02:43``, "" when unknown), ``values`` metric -> model -> value."""

    label: str
    when: str
    values: dict[str, dict[str, float]] = field(default_factory=dict)


History = list[SavedRun]


def row_values(row: Mapping[str, Any]) -> dict[str, float]:
    """A report's model row (its JSON form) as the history's metrics; unmeasured ones left out."""
    equivalence = row.get("equivalence_all_calls")
    if not _number(equivalence):
        equivalence = row.get("equivalence_mean")  # a report from before every call counted
    calls, errored = row.get("calls"), row.get("calls_errored")
    failed = errored / calls if _number(calls) and calls and _number(errored) else None
    found = {
        "equivalence": equivalence,
        "pass_rate": row.get("pass_rate"),
        "calls_failed": failed,
        "e2e_p95_ms": row.get("e2e_p95_ms"),
        "cost_per_call_usd": row.get("cost_per_call_usd"),
    }
    return {k: float(v) for k, v in found.items() if isinstance(v, int | float) and _number(v)}


def saved_run(label: str, when: str, rows: list[Any]) -> SavedRun | None:
    """A run from its report's model rows (JSON dicts); None when no row has a metric."""
    values: dict[str, dict[str, float]] = {}
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("model"), str):
            for key, value in row_values(row).items():
                values.setdefault(key, {})[row["model"]] = value
    return SavedRun(label, when, values) if values else None


def when(moment: str | None) -> str:
    """An ISO 8601 time (a report's ``run.started``) or a saved run's stamp (``20261207T024300Z``)
    as the chart writes it, UTC to the minute; "" when it cannot be read."""
    for form in ("%Y%m%dT%H%M%SZ", None):
        try:
            parsed = (
                dt.datetime.strptime(moment or "", form)
                if form
                else dt.datetime.fromisoformat((moment or "").replace("Z", "+00:00"))
            )
        except ValueError:
            continue
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(dt.UTC)
        return parsed.strftime("%Y-%m-%d %H:%M")
    return ""


def trend_svgs(history: History) -> list[str]:
    """One chart a metric that any run measured; none under two runs."""
    if len(history) < 2:
        return []
    return [trend_svg(history, m) for m in METRICS if any(r.values.get(m.key) for r in history)]


def trend_svg(history: History, metric: Metric) -> str:
    """``metric`` per model across the runs: one line a model, a point a run (its number, date
    and value on hover; ``data-run``, ``data-when``, ``data-y``)."""
    series = [r.values.get(metric.key, {}) for r in history]
    models = list(dict.fromkeys(m for values in series for m in values))
    sx = lin_scale(0, max(len(history) - 1, 1), LEFT + 20, W - RIGHT - 20)
    ticks = _y_ticks([v for values in series for v in values.values()], metric.share)
    sy = lin_scale(ticks[0], ticks[-1], H - BOTTOM, TOP)
    css_id = "trend" if metric is METRICS[0] else f"trend-{metric.key.replace('_', '-')}"
    parts = [open_svg(css_id, f"{metric.title} per model across saved runs")]
    parts[0] = parts[0].replace(' class="chart"', f' class="chart" data-metric="{metric.key}"', 1)
    parts += _y_grid(ticks, sy, metric)
    parts += _x_labels(history, sx)
    for n, model in enumerate(models):
        color = SERIES_COLORS[n % len(SERIES_COLORS)]
        points = [(i, values[model]) for i, values in enumerate(series) if model in values]
        parts.append(_series(model, color, points, history, metric, sx, sy))
    parts.append(axis_titles("run (--slm-baseline=auto, this run last; UTC)", metric.title))
    return "".join(parts) + "</svg>"


def _series(
    model: str,
    color: str,
    points: list[tuple[int, float]],
    history: History,
    metric: Metric,
    sx: Callable[[float], float],
    sy: Callable[[float], float],
) -> str:
    path = " ".join(f"{sx(i):.1f},{sy(v):.1f}" for i, v in points)
    dots = "".join(
        f'<circle cx="{sx(i):.1f}" cy="{sy(v):.1f}" r="4" fill="{color}" '
        f'data-run="{escape(history[i].label)}" data-when="{escape(history[i].when)}" '
        f'data-y="{v:.6g}"><title>'
        f"{escape(f'{model}, run {_run_name(history[i])}: {metric.title} {metric.show(v)}')}"
        "</title></circle>"
        for i, v in points
    )
    x, y = sx(points[-1][0]), sy(points[-1][1])
    return (
        f'<g class="series" data-model="{escape(model)}"><polyline fill="none" '
        f'stroke="{color}" stroke-width="2" points="{path}"/>{dots}'
        f'<text x="{x - 8:.1f}" y="{y - 10:.1f}" text-anchor="end" fill="{color}">'
        f"{escape(model)}</text></g>"
    )


def _run_name(run: SavedRun) -> str:
    return f"{run.label} ({run.when})" if run.when else run.label


def _x_labels(history: History, sx: Callable[[float], float]) -> list[str]:
    """Each run's number over its date; when they would overlap, every k-th run and the last
    (a k-th run closer to the last than k is not labelled: its label would cover the last's)."""
    room = (W - RIGHT - LEFT - 40) / max(len(history) - 1, 1)
    every = max(1, math.ceil(LABEL_PX / room))
    last = len(history) - 1
    shown = {i for i in range(0, last, every) if last - i >= every} | {last}
    out = []
    for i in sorted(shown):
        run, x = history[i], sx(i)
        date = f'<tspan x="{x:.1f}" dy="13">{escape(run.when)}</tspan>' if run.when else ""
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">'
            f'<tspan x="{x:.1f}">{escape(run.label)}</tspan>{date}</text>'
        )
    return out


def _y_grid(ticks: list[float], sy: Callable[[float], float], metric: Metric) -> list[str]:
    if metric.share:
        return grid_y(ticks, sy)
    out = []
    for t in ticks:
        y = sy(t)
        out.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}"/>')
        out.append(
            f'<text class="tick" x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(metric.show(t))}</text>"
        )
    return out


def _y_ticks(values: list[float], share: bool) -> list[float]:
    """A share: from a tenth below the lowest value (or 0) to 1, in quarters. Otherwise 0 up to
    a round step (1, 2 or 5 x 10^n) just above the largest value."""
    if share:
        lowest = min(values, default=0.0)
        floor = max(0.0, math.floor(lowest * 10) / 10 - 0.1)
        return [floor + (1.0 - floor) * i / 4 for i in range(5)]
    top = max(values, default=0.0)
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 4
    base = 10.0 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 5, 10) if m * base >= raw)
    return [step * i for i in range(math.ceil(top / step - 1e-9) + 1)]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
