"""The HTML report: one self-contained file (inline CSS, JS and SVG; nothing from the network).

It shows the quality-versus-cost chart that decides a swap, latency distributions per model,
the per-model figures with their 95% intervals and which candidates can be told apart, the human
review verdicts when there are any, a sortable per-test table, and per test the candidate's and the
reference's answers (text and tool calls) side by side with word-level differences. Everything
from the run is escaped by Jinja2's autoescape; the SVG charts escape their own labels (charts.py).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_slam.golden.fileformat import atomic_write
from pytest_slam.records import Call, Outcome, Pair, Score
from pytest_slam.report import charts, fmt
from pytest_slam.report.aggregate import (
    OutcomeLike,
    PerTestRow,
    Verdict,
    golden_pairs,
    latency_calls,
    sort_outcomes,
)
from pytest_slam.report.charts import Series
from pytest_slam.report.diffview import Segment, answer_text, diff_and_similarity
from pytest_slam.report.jsonreport import SCHEMA_ID
from pytest_slam.report.terminal import comparisons, gate_lines, notes

TEMPLATE = "report.html.j2"
MAX_PAIRS = 400  # answer pairs shown side by side; the JSON report keeps them all
Cell = tuple[str, str]  # (shown text, sort key); an empty key sorts last


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


@dataclass
class RowCells:
    """One per-test table row, a ``Cell`` per sortable column."""

    anchor: str
    test: Cell
    model: Cell
    outcome: Cell
    equivalence: Cell
    worst: Cell
    ttft: Cell
    e2e: Cell
    cost: Cell
    calls: Cell
    message: str


@dataclass
class PairView:
    """A candidate's answer beside the golden one; ``left``/``right`` are the word diff's sides."""

    key: str
    reference_model: str
    missing: bool
    equivalence: str
    scores: list[Score]
    error: str | None
    candidate_text: str
    similarity: str | None = None
    left: list[Segment] = field(default_factory=list)
    right: list[Segment] = field(default_factory=list)


@dataclass
class AnswerBlock:
    """One outcome's answer pairs, under its test and model."""

    anchor: str
    nodeid: str
    model: str
    outcome: str
    message: str
    pairs: list[PairView]


def write_html(
    path: str | os.PathLike[str], verdict: Verdict, outcomes: Iterable[OutcomeLike]
) -> Path:
    """Render and write the report atomically; returns the path written."""
    return atomic_write(path, render_html(verdict, outcomes))


def render_html(verdict: Verdict, outcomes: Iterable[OutcomeLike]) -> str:
    """The page as a string."""
    import jinja2  # a core dependency, imported only when a report is rendered
    from markupsafe import Markup

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    ordered = sort_outcomes(outcomes)
    answers, hidden = answer_pairs(ordered)
    context = {
        "schema": SCHEMA_ID,
        "verdict": verdict,
        "run": verdict.run,
        "fmt": fmt,
        "notes": notes(verdict, intervals=False) + gate_lines(verdict),
        "interval": interval,
        "comparisons": [
            c.describe() for m in ("equivalence", "pass rate") for c in comparisons(verdict, m)
        ],
        "review": human_review(verdict, ordered),
        "quality_chart": Markup(charts.quality_cost_svg(verdict.rows)),
        "latency_chart": Markup(charts.latency_svg(latency_series(verdict, ordered))),
        "tests": [row_cells(t) for t in verdict.tests],
        "answers": answers,
        "hidden_pairs": hidden,
    }
    return env.get_template(TEMPLATE).render(**context)


def interval(value: float | None, low: float | None, high: float | None) -> str:
    """``0.71 [0.64, 0.78]``: a figure with its 95% interval (the figure alone without one)."""
    if value is None or low is None or high is None:
        return fmt.score(value)
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


def human_review(verdict: Verdict, outcomes: list[Outcome]) -> HumanReview | None:
    """Win/tie/loss against the reference per candidate, with Wilson 95% intervals, from the
    ``slam review`` verdicts kept beside the run's golden files; None when there are none (or the
    golden files are no longer where the run read them)."""
    from pytest_slam.review.stats import LABELS, by_model
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
            ReviewRow(r.model, r.n,
                      [*(r.share(r.counts[v]) for v in VERDICTS), r.share(r.not_worse)])
            for r in rows
        ],
        reviewers=len({v.reviewer for v in found if v.model in models}),
        problems=problems,
    )  # fmt: skip


def latency_series(verdict: Verdict, outcomes: list[Outcome]) -> list[tuple[str, Series]]:
    """Per model the measured E2E/TTFT values, then the reference's recorded ones."""
    series: list[tuple[str, Series]] = []
    for row in verdict.models:
        calls = [c for o in outcomes if o.model == row.model for c in o.candidate_calls()]
        measured = latency_calls(calls)
        series.append((row.model, {
            "e2e_ms": [c.e2e_ms for c in measured if c.e2e_ms is not None],
            "ttft_ms": [c.ttft_ms for c in measured if c.ttft_ms is not None],
        }))  # fmt: skip
    if verdict.reference is not None:
        golden = golden_pairs(outcomes)
        ref: Series = {
            "e2e_ms": [p.reference_e2e_ms for p in golden if p.reference_e2e_ms],
            "ttft_ms": [p.reference_ttft_ms for p in golden if p.reference_ttft_ms],
        }
        series.append((f"{verdict.reference.model} (recorded)", ref))
    return series


def row_cells(row: PerTestRow) -> RowCells:
    """One table row: ``(shown text, sort key)`` per column; an empty key sorts last."""
    return RowCells(
        anchor=_anchor(row.test, row.model),
        test=(row.test, row.test),
        model=(row.model, row.model),
        outcome=(row.outcome.replace("_", " "), row.outcome),  # "not swapped", class not_swapped
        equivalence=(fmt.score(row.equivalence_mean), _key(row.equivalence_mean)),
        worst=(fmt.score(row.equivalence_worst), _key(row.equivalence_worst)),
        ttft=(fmt.ms(row.ttft_p50_ms), _key(row.ttft_p50_ms)),
        e2e=(fmt.ms(row.e2e_p95_ms), _key(row.e2e_p95_ms)),
        cost=(fmt.usd(row.cost_usd), _key(row.cost_usd)),
        calls=(str(row.calls), str(row.calls)),
        message=row.message or "",
    )


def _key(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def _anchor(test: str, model: str) -> str:
    """A stable element id for a (test, model) answer block."""
    return "t-" + hashlib.sha1(f"{test}\0{model}".encode()).hexdigest()[:12]


def answer_pairs(outcomes: list[Outcome]) -> tuple[list[AnswerBlock], int]:
    """Side-by-side blocks per outcome, at most ``MAX_PAIRS`` pairs; returns (blocks, hidden)."""
    blocks: list[AnswerBlock] = []
    shown, hidden = 0, 0
    for outcome in outcomes:
        pairs = outcome.pairs
        room = max(MAX_PAIRS - shown, 0)
        hidden += max(len(pairs) - room, 0)
        if not pairs or not room:
            continue
        items = [_pair_view(outcome, p) for p in pairs[:room]]
        shown += len(items)
        blocks.append(_block(outcome, items))
    return blocks, hidden


def _block(outcome: Outcome, items: list[PairView]) -> AnswerBlock:
    anchor = _anchor(outcome.test, outcome.model)
    return AnswerBlock(anchor, outcome.nodeid, outcome.model, outcome.outcome,
                       outcome.message or "", items)  # fmt: skip


def _pair_view(outcome: Outcome, pair: Pair) -> PairView:
    calls = outcome.calls
    index = pair.call_index
    call: Call | None = calls[index] if 0 <= index < len(calls) else None
    candidate = answer_text(call.text, call.tool_calls) if call is not None else ""
    reference = pair.reference_text
    if reference is not None:  # a golden answer that only called tools has the text ""
        reference = answer_text(reference, pair.reference_tool_calls)
    view = PairView(
        key=pair.key,
        reference_model=pair.reference_model or "reference",
        missing=pair.missing or reference is None,
        equivalence=fmt.score(pair.equivalence),
        scores=pair.scores,
        error=call.error if call is not None else None,
        candidate_text=candidate,
    )
    if reference is not None and not pair.missing:
        view.left, view.right, ratio = diff_and_similarity(reference, candidate)
        view.similarity = f"{ratio:.0%}"
    return view
