"""The verdict as a terminal table: one row per model plus the reference, within ``width``.

Columns carry a priority; on a narrow terminal the least important go first, then the model
name is shortened, and when even the essential columns do not fit each model is printed as a
short vertical block instead.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pytest_slam.report import fmt
from pytest_slam.report.aggregate import (
    CAUSES,
    FIXES,
    NO_CALLS,
    NOT_SWAPPED,
    ModelRow,
    Verdict,
)
from pytest_slam.report.columns import Column, Terminal, shown
from pytest_slam.report.evidence import describe as describe_evidence

if TYPE_CHECKING:
    import pytest

    from pytest_slam.compare.uncertainty import Comparison

GAP = "  "
MIN_NAME = 12
MAX_NAME = 28
SHOWN_TESTS = 5  # tests named in a note; the JSON and HTML reports list them all
ESSENTIAL = 2  # columns of priority <= ESSENTIAL must fit, or the layout turns vertical


def render_table(verdict: Verdict, width: int = 100) -> list[str]:
    """Lines of the verdict table, none longer than ``width``."""
    rows = verdict.rows
    title = _clip(
        f"pytest-slam swap verdict: {len(verdict.models)} model(s) vs "
        f"{verdict.run.reference or 'the reference'}",
        width,
    )
    if not rows:
        return [title, "no model results"]
    columns = shown("terminal", rows)
    cells = {c.key: [(_view(c).text or c.text)(r) for r in rows] for c in columns}
    layout = _fit(columns, cells, width)
    if layout is None:  # one block per model, each value in the column's own words, wrapped
        words = {c.key: [c.text(r) for r in rows] for c in columns}
        body, legends = _vertical(columns, words, len(rows), width), []
    else:
        body = _table(layout, cells, len(rows))
        legends = [_view(c).legend for c, _ in layout if _abbreviated(c, rows, cells[c.key])]
    lines = [*legends, *notes(verdict)]
    return [title, *body, *(line for n in lines for line in _wrap(n, width))]


def _abbreviated(column: Column, rows: list[ModelRow], cells: list[str]) -> bool:
    """Whether the table's cells of ``column`` abbreviate its words: its legend is printed."""
    return bool(_view(column).legend) and cells != [column.text(r) for r in rows]


def _view(column: Column) -> Terminal:
    assert column.terminal is not None  # ``shown`` lists only the columns the terminal shows
    return column.terminal


def _widths(columns: list[Column], cells: dict[str, list[str]]) -> dict[str, int]:
    out = {c.key: max(len(_view(c).header), *(len(v) for v in cells[c.key])) for c in columns}
    out["model"] = min(out["model"], MAX_NAME)
    return out


def _fit(
    columns: list[Column], cells: dict[str, list[str]], width: int
) -> list[tuple[Column, int]] | None:
    """The widest set of columns that fits, each with its width, or None to go vertical."""
    widths = _widths(columns, cells)
    kept = list(columns)
    while _total(kept, widths) > width:
        droppable = [c for c in kept if _view(c).priority > ESSENTIAL]
        if not droppable:
            break
        worst = max(droppable, key=lambda c: (_view(c).priority, kept.index(c)))
        kept.remove(worst)
    overflow = _total(kept, widths) - width
    if overflow > 0:
        widths["model"] = max(MIN_NAME, widths["model"] - overflow)
    names = [_clip_middle(name, widths["model"]) for name in cells["model"]]
    if _total(kept, widths) > width or len(set(names)) < len(names):
        return None  # too narrow, or shortened names would look alike: go vertical
    return [(c, widths[c.key]) for c in kept]


def _total(columns: list[Column], widths: dict[str, int]) -> int:
    return sum(widths[c.key] for c in columns) + len(GAP) * (len(columns) - 1)


def _table(layout: list[tuple[Column, int]], cells: dict[str, list[str]], n: int) -> list[str]:
    header = GAP.join(_pad(_view(c).header, w, c.align == "left") for c, w in layout)
    lines = [header, "-" * len(header)]
    for i in range(n):
        lines.append(GAP.join(_pad(cells[c.key][i], w, c.align == "left") for c, w in layout))
    return [line.rstrip() for line in lines]


def _pad(text: str, width: int, left: bool) -> str:
    text = _clip_middle(text, width) if left else _clip(text, width)
    return text.ljust(width) if left else text.rjust(width)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    """A footnote over several lines rather than cut: it says what the numbers mean."""
    lines = textwrap.wrap(
        text, width=max(width, 20), subsequent_indent=indent, break_on_hyphens=False
    )
    return [_clip(line, width) for line in lines] or [""]


def _clip_middle(text: str, width: int) -> str:
    """Keep both ends of a model name: ``FuseCh…-3B-Instruct`` still tells 1B from 3B."""
    if len(text) <= width:
        return text
    head = max(min(4, width - 2), (width - 1) // 3)  # the tail tells variants apart
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def _vertical(columns: list[Column], cells: dict[str, list[str]], n: int, width: int) -> list[str]:
    """One block per model: its name and gate, then ``label: value`` lines, a long one wrapped
    (``mean equivalence: 0.66 (1/5 failed)`` keeps its failed calls at 36 columns)."""
    lines: list[str] = []
    for i in range(n):
        lines.append(_clip(f"{cells['model'][i]}  [{cells['gate'][i]}]", width))
        for column in (c for c in columns if c.key not in ("model", "gate")):
            line = f"  {_view(column).label}: {cells[column.key][i]}"
            lines += [line] if len(line) <= width else _wrap(line, width, "    ")
    return lines


def concurrency_note(rows: Iterable[ModelRow]) -> str | None:
    """How the candidates' latency was measured: ``latency measured with calls in flight at once
    (mini: E2E p95 310 ms alone (3 calls), 757 ms at up to 16 in flight, median 9)``, the alone
    figure first where the run sent a sample alone (what budgets and the gate read); None when
    every call was measured alone."""
    parts = [_measured_at(r) for r in rows if _loaded(r)]
    if not parts:
        return None
    return (
        f"latency measured with calls in flight at once ({'; '.join(parts)}); "
        "--slm-concurrency 1 measures one call at a time"
    )


def _loaded(row: ModelRow) -> bool:
    return bool(
        not row.is_reference and row.in_flight_max and row.in_flight_max > 1 and row.in_flight_p50
    )


def _measured_at(row: ModelRow) -> str:
    at = f"up to {row.in_flight_max}, median {row.in_flight_p50:g}"
    if not row.latency_alone:
        return f"{row.model} {at}"
    return (
        f"{row.model}: E2E p95 {fmt.ms(row.e2e_p95_ms)} alone ({row.latency_alone} calls), "
        f"{fmt.ms(row.e2e_p95_loaded_ms)} at {at} in flight"
    )


def notes(verdict: Verdict, intervals: bool = True) -> list[str]:
    """Footnotes that keep the numbers honest: what was recorded, estimated or assumed.

    The gate's lines are apart (``gate_lines``): the plugin prints them after the baseline diff.
    ``intervals=False`` leaves out the interval and paired-comparison lines, for the HTML report,
    which shows them in its table and its own list.
    """
    run, out = verdict.run, []
    ref = verdict.reference
    if ref is not None and (ref.e2e_p95_ms is not None or ref.cost_per_call_usd is not None):
        out.append("reference latency and cost: as recorded with the golden answers")
    elif ref is not None:
        out.append(f"reference {ref.model}: its golden answers carry no latency or cost")
    line = concurrency_note(verdict.rows)
    if line:
        out.append(line)
    if any(r.tokens_estimated for r in verdict.rows):
        out.append("~ token counts partly estimated (server reported no usage)")
    if run.cost_assumption:
        out.append(f"cost: {run.cost_assumption}")
    if all(r.energy_per_call_j is None for r in verdict.models):
        out.append(f"energy: not measured; {run.gpu_telemetry or 'no GPU telemetry'}")
    missing = sum(r.missing_golden for r in verdict.models)
    if missing:
        out.append(f"{missing} call(s) had no golden answer and were not scored")
    out.extend(accounting_notes(verdict))
    out.extend(judge_notes(verdict))
    out.extend(verdict_notes(verdict))
    out.extend(verdict.notes)
    return out + (uncertainty_notes(verdict) if intervals else [])


def judge_notes(verdict: Verdict) -> list[str]:
    """The LLM judge's own calls over the whole run, in one line (none when no judge ran): its
    latency, tokens and cost are the run's, never a candidate's, so they are stated apart."""
    rows = [r for r in verdict.models if r.judge_calls]
    if not rows:
        return []
    costs = [r.judge_cost_usd for r in rows if r.judge_cost_usd is not None]
    cost = fmt.usd(sum(costs)) if costs else "cost unknown"
    if costs and len(costs) < len(rows):
        cost += " (partly unpriced)"
    p50 = sorted({r.judge_e2e_p50_ms for r in rows if r.judge_e2e_p50_ms is not None})
    latency = " to ".join(map(fmt.ms, p50[:: max(len(p50) - 1, 1)])) or fmt.NA  # a range per model
    text = (
        f"judge for {', '.join(r.model for r in rows)}: "
        f"{sum(r.judge_calls for r in rows)} call(s), {cost}, "
        f"{sum(r.judge_prompt_tokens for r in rows)}+"
        f"{sum(r.judge_completion_tokens for r in rows)} tokens, E2E p50 {latency}"
    )
    unjudged = sum(r.unjudged for r in rows)
    if unjudged:
        text += f"; {unjudged} pair(s) unjudged (no readable verdict after a retry; not scored 0)"
    return [text + "; not counted in the candidate figures"]


def verdict_notes(verdict: Verdict) -> list[str]:
    """Per model: its pairs by verdict, and what the cascade's judge did (asked, replayed from the
    golden files, saved because cheaper evidence decided first). None when no pair was decided."""
    out = []
    for row in verdict.models:
        counts = [
            (row.pairs_equivalent, "equivalent"),
            (row.pairs_different, "different"),
            (row.pairs_undecided, f"undecided ({_causes(row)})"),
        ]  # no verdict (similarity only): the run's note says it once, with how to get one
        if not any(n for n, _ in counts):
            continue
        text = f"verdicts for {row.model}: " + ", ".join(f"{n} {what}" for n, what in counts if n)
        text += f"; by evidence: {describe_evidence(row.verdict_evidence)}"
        text += verdict_interval(row)
        if row.judge_asked or row.judge_replayed or row.judge_saved:
            cost = fmt.usd(row.judge_cost_usd) if row.judge_cost_usd is not None else "unpriced"
            text += (
                f"; judge: {row.judge_asked} pair(s) asked ({row.judge_calls} call(s), "
                f"{cost}), {row.judge_replayed} replayed from the golden files, "
                f"{row.judge_saved} saved (decided before the judge)"
            )
            if row.judge_asked or row.judge_replayed:
                text += (
                    f", {row.judge_certified} decided at a measured error, "
                    f"{row.judge_left_undecided} left undecided (not certified)"
                )
        out.append(text)
    return out


def _causes(row: ModelRow) -> str:
    """``2 outside the calibrated domain, 1 no evidence``: why the undecided pairs are."""
    from pytest_slam.compare.policy import Cause

    causes = row.undecided_causes or {Cause.NO_EVIDENCE.value: row.pairs_undecided}
    return ", ".join(f"{n} {cause}" for cause, n in causes.items())


def verdict_interval(row: ModelRow) -> str:
    """``; pass rate 67% [21%-100%] counting the verdicts' errors`` (report/evidence.py)."""
    low, high = row.pass_rate_verdict_low, row.pass_rate_verdict_high
    if row.pass_rate is None or low is None or high is None:
        return ""
    unmeasured = f", {row.pairs_unmeasured} on unmeasured evidence" if row.pairs_unmeasured else ""
    return (
        f"; pass rate {fmt.pct(row.pass_rate)} [{fmt.pct(low)}-{fmt.pct(high)}] counting the "
        f"verdicts' errors{unmeasured}"
    )


def uncertainty_notes(verdict: Verdict) -> list[str]:
    """The intervals behind ``equiv`` and ``pass``, and which candidates can be told apart."""
    spans = [
        f"{r.model} {r.equivalence_mean_low:.2f}-{r.equivalence_mean_high:.2f}"
        for r in verdict.models
        if r.equivalence_mean_low is not None and r.equivalence_mean_high is not None
    ]
    out = [f"equivalence 95% interval (over requests): {'; '.join(spans)}"] if spans else []
    return out + [f"paired: {c.describe()}" for c in comparisons(verdict, "equivalence")]


def comparisons(verdict: Verdict, metric: str) -> list[Comparison]:
    """Each pair of candidates compared on ``metric`` once (the earlier in run order as ``a``)."""
    order = [r.model for r in verdict.models]
    return [
        c
        for row in verdict.models
        for c in row.comparisons
        if c.metric == metric and c.b in order and order.index(c.b) > order.index(row.model)
    ]


def gate_lines(verdict: Verdict) -> list[str]:
    """The gate's outcome in one line per breach (empty when no gate was applied).

    A run that did not run to its end says so even without gate rules: it never reads as passed.
    """
    gate = verdict.gate
    if gate and gate.incomplete:
        return [f"gate: INCOMPLETE ({gate.incomplete})"]
    if not gate or not gate.configured:
        return []
    lines = [f"gate: {'PASS' if gate.passed else 'FAIL'}"]
    for model in gate.models:
        lines.extend(f"  {model.model}: {b.message}" for b in model.breaches)
    lines.extend(f"  session: {b}" for b in gate.session_breaches)
    return lines


def final_line(verdict: Verdict, width: int = 100) -> str:
    """The gate's verdict in one line, printed last (after pytest's FAILED lines): the breaches'
    gist as many as fit in ``width``, then how many more the summary above lists."""
    gate = verdict.gate
    if gate is None:
        return ""
    head = f"pytest-slam gate: {gate.word}"
    why = [gate.incomplete] if gate.incomplete else gate.gists()
    if not gate.configured and not gate.incomplete:
        why = [f"no [tool.slam.gate] rule; {gate.tests_failed} test(s) failed"]
    elif gate.passed and gate.tests_failed:  # "PASS" beside failed tests (exit 1) misleads
        return (
            f"pytest-slam gate: no breach of its rules (a baseline alone checks only regressions), "
            f"but {gate.tests_failed} test(s) failed: the run fails"
        )
    for n in range(len(why), 0, -1):
        more = f"; {len(why) - n} more above" if n < len(why) else ""
        line = f"{head} ({'; '.join(why[:n])}{more})"
        if len(line) <= width or n == 1:
            return line
    return head


def fit_lines(lines: list[str], width: int) -> list[str]:
    """Wrap long summary lines (gate breaches, baseline changes) under their own indent.

    Words are never split, so a file path or a test id stays whole and can be copied.
    """
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        wrapped = textwrap.wrap(
            line,
            width=max(width, 20),
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        out.extend(wrapped or [line])
    return out


def terminal_width(config: pytest.Config, default: int = 100) -> int:
    """The width pytest's terminal writer uses (``COLUMNS`` or the tty); ``default`` without one."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    return config.get_terminal_writer().fullwidth if reporter is not None else default


def _shown(tests: list[str]) -> str:
    more = len(tests) - SHOWN_TESTS
    return ", ".join(tests[:SHOWN_TESTS]) + (f" and {more} more" if more > 0 else "")


def accounting_notes(verdict: Verdict) -> list[str]:
    """Tests that are no evidence (not swapped), and connections that left the machine."""
    from pytest_slam.swap.egress import summary_line

    out = []
    unswapped = [f"{t.test} ({t.model})" for t in verdict.tests if t.outcome == NOT_SWAPPED]
    if unswapped:
        out.append(
            f"not swapped: {len(unswapped)} test(s) passed with no call the candidate "
            f"answered, so they count for no model: {_shown(unswapped)}; {CAUSES}; "
            f"{FIXES}"
        )
    no_calls = sorted({t.test for t in verdict.tests if t.outcome == NO_CALLS})
    if no_calls:
        out.append(
            f"no calls: {len(no_calls)} opted-in test(s) made no model call, so they are "
            f"counted apart (not in the pass rate, not gated): {_shown(no_calls)}"
        )
    line = summary_line([(f"{t.test} ({t.model})", t.egress) for t in verdict.tests if t.egress])
    return out + ([line] if line else [])
