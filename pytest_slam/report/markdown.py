"""The verdict as GitHub Markdown, for ``$GITHUB_STEP_SUMMARY`` or a pull-request comment."""

from __future__ import annotations

from pytest_slam.report import fmt
from pytest_slam.report.aggregate import ModelRow, Verdict
from pytest_slam.report.baseline import BaselineDiff
from pytest_slam.report.terminal import gate_lines, notes

HEADERS = (
    ("model", "left"),
    ("gate", "center"),
    ("tests passed", "right"),
    ("mean equiv.", "right"),
    ("worst", "right"),
    ("TTFT p50", "right"),
    ("E2E p50", "right"),
    ("E2E p95", "right"),
    ("E2E CV", "right"),
    ("output tok/s", "right"),
    ("$ / 1k calls", "right"),
    ("cost vs ref", "right"),
    ("J / output token", "right"),
    ("cold starts", "right"),
)
ALIGN = {"left": ":---", "center": ":---:", "right": "---:"}


def render_markdown(verdict: Verdict, diff: BaselineDiff | None = None) -> str:
    """A heading, the per-model table, the same footnotes as the terminal, the baseline, the gate."""
    lines = [f"### pytest-slam swap verdict (reference: {_cell(verdict.run.reference or '-')})", ""]
    lines.append("| " + " | ".join(h for h, _ in HEADERS) + " |")
    lines.append("| " + " | ".join(ALIGN[a] for _, a in HEADERS) + " |")
    lines.extend("| " + " | ".join(_cells(row)) + " |" for row in verdict.rows)
    footnotes = notes(verdict)
    if footnotes:
        lines.append("")
        lines.extend(f"- {_cell(n)}" for n in footnotes)
    if diff is not None:
        lines.extend(["", *_baseline(diff)])
    gate = gate_lines(verdict)
    if gate:
        lines.extend(["", f"**{_cell(gate[0])}**", *(f"- {_cell(g.strip())}" for g in gate[1:])])
    return "\n".join(lines) + "\n"


def _baseline(diff: BaselineDiff) -> list[str]:
    """The comparison with the baseline: counts, then each change, worst first."""
    head = (
        f"**Baseline {_cell(diff.baseline)}: {len(diff.regressions)} regression(s), "
        f"{len(diff.improvements)} improvement(s)**"
    )
    lines = [head, *(f"- note: {_cell(n)}" for n in diff.notes)]
    lines.extend(f"- ❌ {_cell(c.describe())}" for c in diff.regressions)
    lines.extend(f"- ✅ {_cell(c.describe())}" for c in diff.improvements)
    return lines


def _cells(row: ModelRow) -> list[str]:
    name = (
        f"*{_cell(row.model)} (reference, as recorded)*" if row.is_reference else _cell(row.model)
    )
    gate = {"PASS": "✅ PASS", "FAIL": "❌ FAIL"}.get(row.gate, "-")
    equiv = "ref" if row.is_reference else fmt.score(row.equivalence_mean)
    return [
        name,
        gate,
        fmt.tests(row)
        + (f" ({row.tests_not_swapped} not swapped)" if row.tests_not_swapped else ""),
        equiv,
        fmt.score(row.equivalence_worst),
        fmt.ms(row.ttft_p50_ms),
        fmt.ms(row.e2e_p50_ms),
        fmt.ms(row.e2e_p95_ms),
        fmt.pct(row.e2e_cv),
        fmt.rate(row.output_tokens_per_s),
        fmt.usd(row.cost_per_1000_calls_usd),
        fmt.ratio(row.cost_ratio),
        fmt.joules(row.energy_per_output_token_j),
        "-" if row.is_reference else str(row.cold_starts),
    ]


def _cell(text: str) -> str:
    """Escape what would break a table cell or render as markup."""
    for char in ("\\", "|", "*", "_", "`", "<", ">", "[", "]"):
        text = text.replace(char, "\\" + char)
    return text.replace("\n", " ")
