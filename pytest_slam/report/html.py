"""The HTML report: one self-contained file (inline CSS, JS and SVG; nothing from the network).

It opens with the gate's verdict and its breaches, then shows the quality-versus-cost chart that
decides a swap, latency distributions per model, the per-model figures with their 95% intervals
and which candidates can be told apart, the human review verdicts when there are any, and every
(test, model) row: failures first, filtered by outcome, verdict, model and test, searched, sorted,
as a table or a test x model matrix, each row opening its answer pairs (text and tool calls) side
by side with word-level differences. Those rows and pairs travel packed (htmldata.py) and the
page's script draws a page of them at a time, as text (``textContent``), never as markup; the rest
is escaped by Jinja2's autoescape, and the SVG charts escape their own labels (charts.py).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_slam.records import Outcome, records
from pytest_slam.report import charts, fmt, trend
from pytest_slam.report.aggregate import (
    ModelRow,
    OutcomeLike,
    Verdict,
    golden_pairs,
    latency_calls,
)
from pytest_slam.report.charts import Series
from pytest_slam.report.columns import TEST_COLUMNS, HtmlCell, html_cell, shown
from pytest_slam.report.columns import Html as HtmlView
from pytest_slam.report.htmldata import headline, pack_table, table_data
from pytest_slam.report.jsonreport import SCHEMA_ID
from pytest_slam.report.terminal import comparisons, notes
from pytest_slam.util.files import atomic_write
from pytest_slam.util.gcpause import gc_paused

if TYPE_CHECKING:
    import jinja2

TEMPLATE = "report.html.j2"
PAGE_ROWS = 100  # rows (or matrix tests) the script draws at a time


@dataclass
class ReviewRow:
    """One candidate's human verdicts: how many, and each label's share with its interval."""

    model: str
    n: int
    shares: list[str]


@dataclass
class HumanReview:
    """The human review table: per candidate the shares of each verdict, and what went unread."""

    labels: list[str]
    rows: list[ReviewRow]
    reviewers: int
    problems: list[str]


def write_html(
    path: str | os.PathLike[str],
    verdict: Verdict,
    outcomes: Iterable[OutcomeLike],
    history: trend.History | None = None,
) -> Path:
    """Render and write the report atomically; returns the path written."""
    return atomic_write(path, render_html(verdict, outcomes, history))


def render_html(
    verdict: Verdict, outcomes: Iterable[OutcomeLike], history: trend.History | None = None
) -> str:
    """The page as a string; ``history``: the saved runs' metrics (``autosave.history``), drawn
    as one chart a metric with this run last."""
    with gc_paused():  # a burst of rows and lines, none of them a cycle (issue 53)
        return _render(verdict, outcomes, history)


def _render(
    verdict: Verdict, outcomes: Iterable[OutcomeLike], history: trend.History | None
) -> str:
    from markupsafe import Markup

    # by nodeid as written (a choice among equal golden keys that no worker's order moves): the
    # table puts each (test, model)'s runs in order itself, and the charts sort their values
    ordered = sorted(records(Outcome, outcomes), key=_nodeid)
    rows, pairs = pack_table(table_data(verdict, ordered))
    context = {
        "schema": SCHEMA_ID,
        "verdict": verdict,
        "run": verdict.run,
        "notes": notes(verdict, intervals=False),  # the gate is the headline
        "model_table": model_table(verdict.rows),
        "pass_counts": {r.model: fmt.pass_counts(r) for r in verdict.models},
        "test_columns": TEST_COLUMNS,
        "comparisons": [
            c.describe() for m in ("equivalence", "pass rate") for c in comparisons(verdict, m)
        ],
        "review": human_review(verdict, ordered),
        "quality_chart": Markup(charts.quality_cost_svg(verdict.rows)),
        "latency_chart": Markup(charts.latency_svg(latency_series(verdict, ordered))),
        "trend_charts": [Markup(c) for c in trend.trend_svgs(_with_this_run(history, verdict))],
        "headline": headline(verdict),
        "packed_rows": rows,
        "packed_pairs": pairs,
        "page_rows": PAGE_ROWS,
    }
    return _template().render(**context)


@functools.cache
def _template() -> jinja2.Template:
    """The page's template, compiled once a process (40-80 ms; a report rendered again, as
    ``slam report`` and the benches do, reuses it)."""
    import jinja2  # a core dependency, imported only when a report is rendered

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template(TEMPLATE)


@dataclass
class ModelTable:
    """The per-model table as the template writes it: headers, then each row's cells."""

    headers: list[HtmlView]
    rows: list[tuple[ModelRow, list[HtmlCell]]]


def model_table(rows: list[ModelRow]) -> ModelTable:
    columns = shown("html", rows)
    headers = [c.html for c in columns if c.html is not None]
    return ModelTable(headers, [(r, [html_cell(c, r) for c in columns]) for r in rows])


def human_review(verdict: Verdict, outcomes: list[Outcome]) -> HumanReview | None:
    """Win/tie/loss against the reference per candidate, with Wilson 95% intervals, from the
    ``slam review`` verdicts kept beside the run's golden files; None when there are none (or the
    golden files are no longer where the run read them)."""
    from pytest_slam.review.agreement import LABELS, by_model
    from pytest_slam.review.verdicts import (
        VERDICTS,
        HumanVerdict,
        ReviewError,
        read_verdicts,
        sidecar_path,
    )

    golden = {p.golden_file for o in outcomes for p in o.pairs if p.golden_file}
    found: list[HumanVerdict] = []
    problems: list[str] = []
    for name in sorted(golden):
        try:
            found += read_verdicts(sidecar_path(Path(name)))
        except (ReviewError, OSError) as exc:
            problems.append(f"human review not read: {exc}")
    models = [r.model for r in verdict.models]
    rows = [r for r in by_model(found) if r.model in models]
    if not rows and not problems:
        return None
    return HumanReview(
        labels=[*LABELS.values(), "not worse"],
        rows=[
            ReviewRow(
                r.model, r.n, [*(r.share(r.counts[v]) for v in VERDICTS), r.share(r.not_worse)]
            )
            for r in rows
        ],
        reviewers=len({v.reviewer for v in found if v.model in models}),
        problems=problems,
    )


def latency_series(verdict: Verdict, outcomes: list[Outcome]) -> list[tuple[str, Series]]:
    """Per model the measured E2E/TTFT values, then the reference's recorded ones."""
    series: list[tuple[str, Series]] = []
    for row in verdict.models:
        calls = [c for o in outcomes if o.model == row.model for c in o.candidate_calls()]
        measured = latency_calls(calls)
        series.append(
            (
                row.model,
                {
                    "e2e_ms": [c.e2e_ms for c in measured if c.e2e_ms is not None],
                    "ttft_ms": [c.ttft_ms for c in measured if c.ttft_ms is not None],
                },
            )
        )
    if verdict.reference is not None:
        golden = golden_pairs(outcomes)
        ref: Series = {
            "e2e_ms": [p.reference_e2e_ms for p in golden if p.reference_e2e_ms],
            "ttft_ms": [p.reference_ttft_ms for p in golden if p.reference_ttft_ms],
        }
        series.append((f"{verdict.reference.model} (recorded)", ref))
    return series


def _nodeid(outcome: Outcome) -> str:
    return outcome.nodeid


def _with_this_run(history: trend.History | None, verdict: Verdict) -> trend.History:
    """The saved runs, then this one ("now", dated by its start); nothing without saved runs."""
    if not history:
        return []
    now = trend.saved_run(
        "now", trend.when(verdict.run.started), [r.as_dict() for r in verdict.models]
    )
    return [*history, now] if now else list(history)
