"""The report's columns, declared once: the terminal, Markdown and HTML renderings read this table.

A model column names the ``ModelRow`` field it shows (``key``; SCHEMA.md says what the field
means, and a test keeps every key documented there), how its cell reads (``text``, built from
``fmt``), its alignment, and how each view shows it: ``Terminal`` (short header, long label for
the vertical layout, drop priority), ``Markdown`` (header) and ``Html`` (header with a second
line, a second line in the cell, the cell's class). A view left ``None`` does not show the column; a
view's own ``text`` replaces the column's where that view says more (the HTML's intervals).
``optional`` leaves the column out of that view when every one of its cells there is ``-``.

A per-test column is one figure of the HTML's per-(test, model) table: a ``PerTestRow`` field and
its formatter; the page sorts by the value and shows the text.

A new column is one entry here (and its test); a new metric also needs its ``ModelRow`` field
(``aggregate.py``), its SCHEMA.md row and the regenerated ``report.schema.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_slam.report import fmt
from pytest_slam.report.aggregate import VERDICT_STATES, ModelRow, PerTestRow
from pytest_slam.report.evidence import describe as describe_evidence

Text = Callable[[ModelRow], str]
Note = Callable[[ModelRow], str | None]
Align = Literal["left", "center", "right"]


@dataclass(frozen=True)
class Terminal:
    """The terminal table: a narrow header, the long label of the vertical layout, and how early
    the column is dropped on a narrow terminal (0: always kept; higher: dropped earlier)."""

    header: str
    label: str
    priority: int
    optional: bool = False
    text: Text | None = None  # the table's cell, where its width wants less than the column's
    legend: str = ""  # the line under the table saying what ``text`` abbreviates, when it does


@dataclass(frozen=True)
class Markdown:
    """The Markdown table (a step summary, a pull-request comment). ``text`` returns Markdown
    (escaped by itself); without it the column's text is escaped."""

    header: str
    text: Text | None = None
    optional: bool = False


@dataclass(frozen=True)
class Html:
    """The HTML page's model table: a header and its smaller second line, the cell's class, and
    a smaller second line in the cell (``note``, with its class ``note_css``)."""

    header: str
    sub: str = ""
    text: Text | None = None
    note: Note | None = None
    note_css: str = ""
    css: str | Text = ""  # the cell's class, or how a row picks it
    optional: bool = False


@dataclass(frozen=True)
class Column:
    """One column of the per-model table, in every view that shows it."""

    key: str  # the ModelRow field it shows (documented in SCHEMA.md)
    text: Text
    terminal: Terminal | None = None
    markdown: Markdown | None = None
    html: Html | None = None
    align: Align = "right"


def _name(row: ModelRow) -> str:
    return f"{row.model} (ref)" if row.is_reference else row.model


def _md_name(row: ModelRow) -> str:
    name = escape_markdown(row.model)
    return f"*{name} (reference, as recorded)*" if row.is_reference else name


def _md_gate(row: ModelRow) -> str:
    return {"PASS": "✅ PASS", "FAIL": "❌ FAIL"}.get(row.gate, "-")


def _md_tests(row: ModelRow) -> str:
    unswapped = f" ({row.tests_not_swapped} not swapped)" if row.tests_not_swapped else ""
    return fmt.tests(row) + unswapped


def _unswapped(row: ModelRow) -> str:
    return fmt.NA if row.is_reference or not row.tests_not_swapped else str(row.tests_not_swapped)


def _unscored(row: ModelRow) -> str | None:
    """The calls the mean leaves out because they failed: runaways, and the other failures, so a
    model that ran away on most tests does not read as its few scored answers' "1.00"."""
    if row.is_reference or not row.calls_errored:
        return None
    parts = [f"{row.calls_runaway}/{row.calls} runaway"] if row.calls_runaway else []
    others = row.calls_errored - row.calls_runaway
    parts += [f"{others}/{row.calls} failed"] if others else []
    return ", ".join(parts) or None


def _under_load(row: ModelRow) -> str:
    """The p95 under the run's own load, beside the alone one of ``E2E p95`` (``757 ms @16``);
    ``-`` where the run sent no call alone (``E2E p95`` is then the loaded figure itself)."""
    if row.e2e_p95_loaded_ms is None:
        return fmt.NA
    at = f" @{row.in_flight_max}" if row.in_flight_max else ""
    return fmt.ms(row.e2e_p95_loaded_ms) + at


def _equiv(row: ModelRow) -> str:
    if row.is_reference:
        return "ref"
    unscored = _unscored(row)
    mean = fmt.score(row.equivalence_mean)
    return f"{mean} ({unscored})" if unscored else mean


def _terminal_equiv(row: ModelRow) -> str:
    """The terminal table's cell: ``1.00 (10r 1f/12)``, explained by ``EQUIV_LEGEND`` under the
    table; the words (``10/12 runaway, 1/12 failed``) would push other columns out of 80, and
    the mean must not read alone for a model whose calls failed."""
    if row.is_reference or not row.calls_errored:
        return _equiv(row)
    others = row.calls_errored - row.calls_runaway
    parts = [f"{row.calls_runaway}r"] if row.calls_runaway else []
    parts += [f"{others}f"] if others else []
    return f"{fmt.score(row.equivalence_mean)} ({' '.join(parts)}/{row.calls})"


EQUIV_LEGEND = (
    "equiv (Nr Nf/calls): of the model's calls, N ran away (r) and N failed otherwise (f); "
    "the mean is of the answers scored"
)


def _equiv_interval(row: ModelRow) -> str:
    if row.is_reference:
        return "ref"
    return fmt.interval(row.equivalence_mean, row.equivalence_mean_low, row.equivalence_mean_high)


def _pass_note(row: ModelRow) -> str | None:
    """The pass rate's 95% interval under its counts (none for the reference)."""
    if row.is_reference or row.pass_rate_low is None or row.pass_rate_high is None:
        return None
    return f"[{row.pass_rate_low:.2f}, {row.pass_rate_high:.2f}]"


def _verdict_counts(row: ModelRow) -> tuple[int, int, int, int]:
    """A pair's four states, said once (``VERDICT_STATES``): every surface counts these."""
    return (row.pairs_equivalent, row.pairs_different, row.pairs_undecided, row.pairs_no_verdict)


def _verdicts(row: ModelRow) -> str:
    counts = _verdict_counts(row)
    if row.is_reference or not any(counts[:3]):
        return fmt.NA
    return "/".join(map(str, counts))


def _html_verdicts(row: ModelRow) -> str:
    if row.is_reference:
        return fmt.NA
    return " / ".join(map(str, _verdict_counts(row)))


def _evidence(row: ModelRow) -> str:
    """How the decided pairs were decided, with each evidence's measured error."""
    if row.is_reference or not row.verdict_evidence:
        return fmt.NA
    return describe_evidence(row.verdict_evidence)


def _verdict_interval(row: ModelRow) -> str | None:
    low, high = row.pass_rate_verdict_low, row.pass_rate_verdict_high
    if row.is_reference or low is None or high is None:
        return None
    return f"pass rate {fmt.pct(low)}-{fmt.pct(high)} counting them"


def _count(value: int, row: ModelRow) -> str:
    """A candidate's count; ``-`` for the reference (it ran nothing in this run)."""
    return fmt.NA if row.is_reference else str(value)


def _errored(row: ModelRow) -> str:
    """``errored/calls``; ``-`` when none errored (and for the reference, which made no call)."""
    return (
        fmt.NA if row.is_reference or not row.calls_errored else f"{row.calls_errored}/{row.calls}"
    )


def _ref_note(row: ModelRow) -> str | None:
    return "reference, as recorded" if row.is_reference else None


def _unswapped_note(row: ModelRow) -> str | None:
    return f"{row.tests_not_swapped} not swapped" if row.tests_not_swapped else None


def _per_1k_note(row: ModelRow) -> str | None:
    cost = row.cost_per_1000_calls_usd
    return None if cost is None else f"{fmt.usd(cost)} / 1k"


def _per_token_note(row: ModelRow) -> str | None:
    energy = row.energy_per_output_token_j
    return None if energy is None else f"{fmt.joules(energy)} / tok"


MODEL_COLUMNS: tuple[Column, ...] = (
    Column(
        "model",
        _name,
        Terminal("model", "model", 0),
        Markdown("model", _md_name),
        Html("model", text=lambda r: r.model, note=_ref_note),
        align="left",
    ),
    Column(
        "gate",
        lambda r: r.gate,
        Terminal("gate", "gate", 0),
        Markdown("gate", _md_gate),
        Html("gate", css=lambda r: r.gate),
        align="center",
    ),
    Column(
        "tests_passed",
        fmt.tests,
        Terminal("tests", "tests passed", 2),
        Markdown("tests passed", _md_tests),
        Html("tests passed", note=_unswapped_note, note_css="not_swapped"),
    ),
    Column(
        "tests_not_swapped",
        _unswapped,
        Terminal("not swapped", "tests not swapped", 0, optional=True),
    ),
    Column(
        "pass_rate",
        lambda r: fmt.pct(r.pass_rate),
        Terminal("pass", "pass rate", 7),
        html=Html("pass rate", "95% interval", fmt.pass_counts, _pass_note, css="pass-rate"),
    ),
    Column(
        "equivalence_mean",
        _equiv,
        Terminal("equiv", "mean equivalence", 1, text=_terminal_equiv, legend=EQUIV_LEGEND),
        Markdown("mean equiv."),
        Html("mean equiv.", "95% interval", _equiv_interval, _unscored, "unscored", "equivalence"),
    ),
    Column(
        "pairs_equivalent",
        _verdicts,
        Terminal("eq/diff/und/none", "pairs " + "/".join(VERDICT_STATES), 1, optional=True),
        html=Html("pairs", " / ".join(VERDICT_STATES), _html_verdicts, css="verdicts"),
    ),
    Column(
        "verdict_evidence",
        _evidence,
        html=Html(
            "verdict evidence",
            "measured error per evidence",
            note=_verdict_interval,
            css="evidence",
            optional=True,
        ),
        align="left",
    ),
    Column(
        "equivalence_worst",
        lambda r: fmt.score(r.equivalence_worst),
        Terminal("worst", "worst equivalence", 4),
        Markdown("worst"),
        Html("worst"),
    ),
    Column(
        "ttft_p50_ms",
        lambda r: fmt.ms(r.ttft_p50_ms),
        Terminal("TTFT p50", "TTFT p50", 4),
        Markdown("TTFT p50"),
        Html("TTFT p50"),
    ),
    Column(
        "e2e_p50_ms",
        lambda r: fmt.ms(r.e2e_p50_ms),
        Terminal("E2E p50", "E2E p50", 6),
        Markdown("E2E p50"),
        Html("E2E p50"),
    ),
    Column(
        "e2e_p95_ms",
        lambda r: fmt.ms(r.e2e_p95_ms),
        Terminal("E2E p95", "E2E p95", 2),
        Markdown("E2E p95"),
        Html("E2E p95"),
    ),
    Column(
        "e2e_p95_loaded_ms",
        lambda r: _under_load(r),
        Terminal("p95 load", "E2E p95 under the run's own load", 5, optional=True),
        Markdown("E2E p95 under load", optional=True),
        Html("E2E p95", sub="under the run's load", optional=True),
    ),
    Column(
        "e2e_cv",
        lambda r: fmt.pct(r.e2e_cv),
        Terminal("CV", "E2E consistency (CV)", 6),
        Markdown("E2E CV"),
        Html("E2E CV"),
    ),
    Column(
        "output_tokens_per_s",
        lambda r: fmt.rate(r.output_tokens_per_s),
        Terminal("out tok/s", "output tokens/s", 7),
        Markdown("output tok/s"),
        Html("output tok/s"),
    ),
    Column(
        "cost_per_1000_calls_usd",
        lambda r: fmt.usd(r.cost_per_1000_calls_usd),
        Terminal("$/1k calls", "cost per 1,000 calls", 3),
        Markdown("$ / 1k calls"),
        Html("$ / call", "per 1k calls", lambda r: fmt.usd(r.cost_per_call_usd), _per_1k_note),
    ),
    Column(
        "cost_ratio",
        lambda r: fmt.ratio(r.cost_ratio),
        Terminal("vs ref $", "cost ratio to reference", 1),
        Markdown("cost vs ref"),
        Html("cost vs ref"),
    ),
    Column(
        "energy_per_output_token_j",
        lambda r: fmt.joules(r.energy_per_output_token_j),
        Terminal("J/out tok", "energy per output token", 5),
        Markdown("J / output token"),
        Html(
            "J / call", "J / out token", lambda r: fmt.joules(r.energy_per_call_j), _per_token_note
        ),
    ),
    Column(
        "cold_starts",
        lambda r: _count(r.cold_starts, r),
        Terminal("cold", "cold starts", 8),
        Markdown("cold starts"),
        Html("cold starts"),
    ),
    Column(
        "calls_errored",
        _errored,
        Terminal("calls err", "calls errored", 8, optional=True),
        Markdown("calls errored", optional=True),
        Html("calls errored", "of all calls", optional=True),
    ),
    Column(
        "prompt_tokens",
        fmt.tokens,
        Terminal("tokens in+out", "tokens (prompt+completion)", 9),
        html=Html("tokens in+out"),
    ),
)


def escape_markdown(text: str) -> str:
    """Escape what would break a table cell or render as markup."""
    for char in ("\\", "|", "*", "_", "`", "<", ">", "[", "]"):
        text = text.replace(char, "\\" + char)
    return text.replace("\n", " ")


def markdown_cell(column: Column, row: ModelRow) -> str:
    """A Markdown cell: the view's own Markdown, or the column's text escaped."""
    assert column.markdown is not None
    view = column.markdown
    return view.text(row) if view.text is not None else escape_markdown(column.text(row))


@dataclass(frozen=True)
class HtmlCell:
    """One cell of the HTML model table, as the template writes it (autoescaped)."""

    text: str
    css: str
    note: str | None
    note_css: str


def html_cell(column: Column, row: ModelRow) -> HtmlCell:
    assert column.html is not None
    view = column.html
    return HtmlCell(
        text=(view.text or column.text)(row),
        css=view.css if isinstance(view.css, str) else view.css(row),
        note=view.note(row) if view.note is not None else None,
        note_css=view.note_css,
    )


def shown(view: Literal["terminal", "markdown", "html"], rows: Sequence[ModelRow]) -> list[Column]:
    """The columns ``view`` shows for these rows, in table order: an optional column only where
    some row has a value in that view's cell."""
    out = []
    for column in MODEL_COLUMNS:
        spec: Terminal | Markdown | Html | None = getattr(column, view)
        if spec is None:
            continue
        if spec.optional and all(_cell(column, spec, row) == fmt.NA for row in rows):
            continue
        out.append(column)
    return out


def _cell(column: Column, spec: Terminal | Markdown | Html, row: ModelRow) -> str:
    own = None if isinstance(spec, Terminal) else spec.text
    return (own or column.text)(row)


@dataclass(frozen=True)
class PerTestColumn:
    """One figure of the HTML per-(test, model) table: the ``PerTestRow`` field it shows, its
    header, and its formatter; the page shows the text and sorts by the value (``key`` is the
    column's name in the page's address: ``#sort=e2e:desc``)."""

    key: str
    header: str
    field: str  # the PerTestRow field (documented in SCHEMA.md)
    text: Callable[[float | None], str] | None = None  # None: a count, shown as it is

    def value(self, row: PerTestRow) -> float | int | None:
        found: float | int | None = getattr(row, self.field)
        return found


TEST_COLUMNS: tuple[PerTestColumn, ...] = (
    PerTestColumn("equivalence", "mean equiv.", "equivalence_mean", fmt.score),
    PerTestColumn("worst", "worst", "equivalence_worst", fmt.score),
    PerTestColumn("ttft", "TTFT p50", "ttft_p50_ms", fmt.ms),
    PerTestColumn("e2e", "E2E p95", "e2e_p95_ms", fmt.ms),
    PerTestColumn("cost", "$ / call", "cost_usd", fmt.usd),
    PerTestColumn("calls", "calls", "calls"),
)
