"""The Markdown summary for $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

import report_helpers as synth

from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.baseline import BaselineDiff, Change
from pytest_slam.report.gate import Gate, apply_gate, evaluate
from pytest_slam.report.markdown import render_markdown


def test_table_rows_and_gate() -> None:
    verdict = aggregate(synth.outcomes(), synth.run_info())
    verdict = apply_gate(verdict, evaluate(Gate(min_pass_rate=0.5), verdict))
    lines = render_markdown(verdict).splitlines()
    assert lines[0] == "### pytest-slam swap verdict (reference: openai:gpt-4)"
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + 4  # header, alignment, three models, reference
    assert all(line.count("|") == table[0].count("|") for line in table)
    assert table[2].startswith(
        "| smollm2-135m | ❌ FAIL | 1/4 | 0.66 (1/5 failed) | 0.48 | 50 ms |"
    )  # the failed call beside the mean it is not in
    assert table[5].startswith("| *openai:gpt-4 (reference, as recorded)* | - | - | ref |")
    assert "**gate: FAIL**" in lines
    assert "- smollm2-135m: min\\_pass\\_rate: 25.0% is below the minimum 50.0%" in lines


def test_names_cannot_break_the_table() -> None:
    name = "evil|model<b>"
    outcomes = [{**o, "model": name} for o in synth.qwen_outcomes()]
    text = render_markdown(aggregate(outcomes, synth.run_info((name,))))
    assert "| evil\\|model\\<b\\> |" in text


def test_baseline_changes_come_before_the_gate() -> None:
    verdict = aggregate(synth.outcomes(), synth.run_info())
    diff = BaselineDiff("main.json", notes=["not in the baseline, not compared: gpt-4o-mini"])
    diff.regressions.append(Change(synth.QWEN, "equivalence_mean", 0.874, 0.5, "regressed"))
    verdict = apply_gate(verdict, evaluate(Gate(no_regression=True), verdict, diff))
    lines = render_markdown(verdict, diff).splitlines()
    start = lines.index("**Baseline main.json: 1 regression(s), 0 improvement(s)**")
    assert lines[start + 1 : start + 3] == [
        "- note: not in the baseline, not compared: gpt-4o-mini",
        "- ❌ qwen2.5-1.5b: equivalence\\_mean 0.87 -\\> 0.50",  # escaped: renders as ->
    ]
    assert lines.index("**gate: FAIL**") > start


def test_not_swapped_tests_are_counted_in_the_tests_cell() -> None:
    outcomes = synth.qwen_outcomes()
    outcomes[0] = {**outcomes[0], "outcome": "not_swapped", "calls": [], "pairs": []}
    text = render_markdown(aggregate(outcomes, synth.run_info((synth.QWEN,))))
    assert "| 3/3 (1 not swapped) |" in text
