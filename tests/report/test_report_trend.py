"""The run history charts (report/trend.py): the metrics a user compares, dated, with every call
counted, from saved reports' model rows as ``--slm-baseline=auto`` writes them."""

from __future__ import annotations

import itertools
import re

import pytest
import report_helpers as synth
from review_helpers import Browser
from slam_helpers import needs_chromium

from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.html import write_html
from pytest_slam.report.trend import METRICS, saved_run, trend_svgs, when


def _row(equivalence: float, failed: int, p95: float = 420.0) -> dict[str, object]:
    return {
        "model": "mini",
        "equivalence_mean": 1.0,  # the pairs left: what the old chart drew
        "equivalence_all_calls": equivalence,
        "calls": 3,
        "calls_errored": failed,
        "pass_rate": 1 / 3,
        "e2e_p95_ms": p95,
        "cost_per_call_usd": 2e-6,
    }


def _points(svg: str) -> list[tuple[str, str, float]]:
    found = re.findall(r'data-run="([^"]+)" data-when="([^"]*)" data-y="([^"]+)"', svg)
    return [(run, moment, float(y)) for run, moment, y in found]


def _chart(svgs: list[str], metric: str) -> str:
    return next(s for s in svgs if f'data-metric="{metric}"' in s)


def test_near_misses_that_became_runaways_drop_and_the_failed_calls_rise() -> None:
    history = [
        saved_run("0001", when("20261207T024300Z"), [_row(0.67, 0)]),
        saved_run("now", when("2026-12-07T03:10:05Z"), [_row(1 / 3, 2, p95=900.0)]),
    ]
    svgs = trend_svgs([r for r in history if r is not None])
    assert [re.findall(r'data-metric="(\w+)"', s)[0] for s in svgs] == [m.key for m in METRICS]
    assert _points(_chart(svgs, "equivalence")) == [
        ("0001", "2026-12-07 02:43", 0.67),
        ("now", "2026-12-07 03:10", 0.333333),
    ]
    assert [y for *_, y in _points(_chart(svgs, "calls_failed"))] == [0.0, 0.666667]
    assert [y for *_, y in _points(_chart(svgs, "e2e_p95_ms"))] == [420.0, 900.0]
    p95 = _chart(svgs, "e2e_p95_ms")
    assert ">1000 ms<" in p95 and "mini, run now (2026-12-07 03:10): E2E p95 900 ms" in p95
    assert "<tspan" in p95 and "2026-12-07 02:43</tspan>" in p95  # the date under its number


def test_a_report_from_before_every_call_counted_shows_its_mean() -> None:
    older = {"model": "mini", "equivalence_mean": 0.8, "pass_rate": 1.0}
    history = [saved_run("0001", "", [older]), saved_run("0002", "", [older])]
    svgs = trend_svgs([r for r in history if r is not None])
    assert [y for *_, y in _points(_chart(svgs, "equivalence"))] == [0.8, 0.8]
    assert not any('data-metric="calls_failed"' in s for s in svgs)  # not measured: no chart
    assert saved_run("0003", "", [{"model": "mini"}]) is None


def test_thirty_runs_label_every_few_and_the_last() -> None:
    runs = [saved_run(f"{i:04d}", f"2026-12-{i:02d} 10:00", [_row(0.9, 0)]) for i in range(1, 31)]
    svg = trend_svgs([r for r in runs if r is not None])[0]
    labels = re.findall(r'<tspan x="[\d.]+">(\d{4})</tspan>', svg)
    assert 5 <= len(labels) < 30 and labels[0] == "0001" and labels[-1] == "0030"
    assert len(_points(svg)) == 30  # every run still a point


def test_when_reads_a_saved_stamp_and_an_iso_time() -> None:
    assert when("20261207T024300Z") == when("2026-12-07T02:43:59+00:00") == "2026-12-07 02:43"
    assert when("2026-12-07T04:43:00+02:00") == "2026-12-07 02:43"
    assert when(None) == when("soon") == ""


@needs_chromium
@pytest.mark.parametrize("runs", [3, 30])
def test_chromium_draws_each_metric_dated_and_no_run_label_over_another(tmp_path, runs) -> None:
    """In a real browser (issue 52 item 5): the history section holds one drawn chart per metric,
    each run's label is its number over its UTC date, and no two labels on an axis overlap, also
    at 30 runs where only some are labelled (the last always)."""
    outcomes = synth.outcomes()
    verdict = aggregate(outcomes, synth.run_info())
    saved = [
        saved_run(f"{i:04d}", f"2025-10-{i:02d} 10:00", [_row(0.9 - i / 100, i % 3)])
        for i in range(1, runs)
    ]
    page = write_html(tmp_path / "report.html", verdict, outcomes, [r for r in saved if r])
    browser = Browser(tmp_path / "profile")
    try:
        browser.open(page.as_uri())
        charts = browser.js(
            """[...document.querySelectorAll('#history + p + .charts svg')].map(svg => {
                const box = svg.getBoundingClientRect();
                const ticks = [...svg.querySelectorAll('text.tick')].filter(t => t.querySelector('tspan'))
                  .map(t => { const r = t.getBoundingClientRect();
                              return [t.textContent, r.left, r.right, r.top, r.bottom]; });
                return {metric: svg.dataset.metric, width: box.width, height: box.height, ticks};
            })"""
        )
    finally:
        browser.close()
    assert [c["metric"] for c in charts] == [m.key for m in METRICS]
    for chart in charts:
        assert chart["width"] > 200 and chart["height"] > 100, chart["metric"]  # drawn, not hidden
        labels = [t for t in chart["ticks"] if re.fullmatch(r"(\d{4}|now)[\d-]{10} [\d:]{5}", t[0])]
        assert labels[0][0] == "00012025-10-01 10:00" and labels[-1][0].startswith("now")
        assert 2 <= len(labels) <= runs
        for (a, *ra), (b, *rb) in itertools.pairwise(labels):
            assert ra[1] <= rb[0], f"{chart['metric']}: {a!r} overlaps {b!r}"
