"""The verdict as GitHub Markdown, for ``$GITHUB_STEP_SUMMARY`` or a pull-request comment."""

from __future__ import annotations

from pytest_slam.report.aggregate import Verdict
from pytest_slam.report.baseline import BaselineDiff
from pytest_slam.report.columns import Column, escape_markdown, markdown_cell, shown
from pytest_slam.report.columns import Markdown as MarkdownView
from pytest_slam.report.terminal import gate_lines, notes

ALIGN = {"left": ":---", "center": ":---:", "right": "---:"}


def render_markdown(verdict: Verdict, diff: BaselineDiff | None = None) -> str:
    """A heading, the per-model table, the same footnotes as the terminal, the baseline, the gate."""
    lines = [
        f"### pytest-slam swap verdict (reference: {escape_markdown(verdict.run.reference or '-')})",
        "",
    ]
    columns = shown("markdown", verdict.rows)
    lines.append("| " + " | ".join(_view(c).header for c in columns) + " |")
    lines.append("| " + " | ".join(ALIGN[c.align] for c in columns) + " |")
    lines.extend(
        "| " + " | ".join(markdown_cell(c, row) for c in columns) + " |" for row in verdict.rows
    )
    footnotes = notes(verdict)
    if footnotes:
        lines.append("")
        lines.extend(f"- {escape_markdown(n)}" for n in footnotes)
    if diff is not None:
        lines.extend(["", *_baseline(diff)])
    gate = gate_lines(verdict)
    if gate:
        lines.extend(
            [
                "",
                f"**{escape_markdown(gate[0])}**",
                *(f"- {escape_markdown(g.strip())}" for g in gate[1:]),
            ]
        )
    return "\n".join(lines) + "\n"


def _baseline(diff: BaselineDiff) -> list[str]:
    """The comparison with the baseline: counts, then each change, worst first."""
    head = (
        f"**Baseline {escape_markdown(diff.baseline)}: {len(diff.regressions)} regression(s), "
        f"{len(diff.improvements)} improvement(s)**"
    )
    lines = [head, *(f"- note: {escape_markdown(n)}" for n in diff.notes)]
    lines.extend(f"- ❌ {escape_markdown(c.describe())}" for c in diff.regressions)
    lines.extend(f"- ✅ {escape_markdown(c.describe())}" for c in diff.improvements)
    return lines


def _view(column: Column) -> MarkdownView:
    assert column.markdown is not None  # ``shown`` lists only the columns Markdown shows
    return column.markdown
