"""The column table (report/columns.py) drives the terminal, Markdown and HTML renderings.

``calls_errored`` is the worked example of a column added by one entry in the table: each view
shows it where some model had a call end in an error, and none shows it otherwise.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import report_helpers as synth
from html_helpers import report_data

from pytest_slam.report.aggregate import ModelRow, PerTestRow, aggregate
from pytest_slam.report.columns import MODEL_COLUMNS, TEST_COLUMNS
from pytest_slam.report.html import render_html
from pytest_slam.report.markdown import render_markdown
from pytest_slam.report.terminal import render_table

SCHEMA_MD = Path(__file__).resolve().parents[2] / "pytest_slam" / "report" / "SCHEMA.md"


def _section(title: str) -> str:
    """One ``## `` section of SCHEMA.md: the fields it documents."""
    text = SCHEMA_MD.read_text(encoding="utf-8")
    return text.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def _html_models(page: str) -> tuple[list[str], dict[str, list[str]]]:
    """The HTML model table's headers and each model's cells, as text."""
    table = page.split('<table id="models">', 1)[1].split("</table>", 1)[0]
    headers = [
        " ".join(re.sub(r"<.*?>", " ", h).split()) for h in re.findall(r"<th>(.*?)</th>", table)
    ]
    rows = re.findall(r'<tr class="\w+" data-model="([^"]+)">(.*?)</tr>', table, re.S)
    cells = {m: [re.sub(r"<.*?>", " ", c).split()[0] for c in re.findall(r"<td[^>]*>(.*?)</td>", body)]
             for m, body in rows}  # fmt: skip
    return headers, cells


def _term_cell(lines: list[str], header: str, model: str) -> str:
    """The terminal table's cell under ``header`` (right-aligned) in ``model``'s row."""
    head = lines[1]
    end = head.index(header) + len(header)
    row = next(line for line in lines if line.startswith(model))
    return row[:end].split()[-1]


@pytest.fixture(scope="module")
def errored():
    """The synthetic run: smollm2 made five candidate calls, one refused (connection error)."""
    return aggregate(synth.outcomes(), synth.run_info())


def test_calls_errored_is_shown_by_every_view_when_a_call_errored(errored) -> None:
    smol = errored.row(synth.SMOL)
    assert smol is not None and (smol.calls_errored, smol.calls) == (1, 5)
    lines = render_table(errored, width=240)
    assert _term_cell(lines, "calls err", synth.SMOL) == "1/5"
    assert _term_cell(lines, "calls err", synth.QWEN) == "-"  # none errored
    assert _term_cell(lines, "calls err", synth.REFERENCE) == "-"
    narrow = render_table(errored, width=30)  # the vertical layout names it in full
    assert "  calls errored: 1/5" in narrow

    table = [line for line in render_markdown(errored).splitlines() if line.startswith("|")]
    headers = [h.strip() for h in table[0].strip("|").split("|")]
    smol_md = [c.strip() for c in table[2].strip("|").split("|")]
    assert smol_md[headers.index("calls errored")] == "1/5"

    headers, cells = _html_models(render_html(errored, synth.outcomes()))
    at = headers.index("calls errored of all calls")
    assert cells[synth.SMOL][at] == "1/5" and cells[synth.MINI][at] == "-"
    assert all(len(row) == len(headers) for row in cells.values())


def test_no_view_shows_calls_errored_when_no_call_errored() -> None:
    outcomes = synth.qwen_outcomes()
    verdict = aggregate(outcomes, synth.run_info((synth.QWEN,)))
    assert all(r.calls_errored == 0 for r in verdict.rows)
    assert "calls err" not in render_table(verdict, width=300)[1]
    assert "calls errored" not in render_markdown(verdict)
    assert "calls errored" not in render_html(verdict, outcomes)


def test_every_model_column_shows_a_documented_model_row_field() -> None:
    fields = {f.name for f in dataclasses.fields(ModelRow)}
    documented = _section("Model rows")
    keys = [c.key for c in MODEL_COLUMNS]
    assert len(set(keys)) == len(keys)
    assert [k for k in keys if k not in fields] == []
    assert [k for k in keys if f"`{k}`" not in documented] == []


def test_every_per_test_column_shows_a_documented_per_test_field() -> None:
    fields = {f.name for f in dataclasses.fields(PerTestRow)}
    documented = _section("Per-test rows")
    assert [c.field for c in TEST_COLUMNS if c.field not in fields] == []
    assert [c.field for c in TEST_COLUMNS if f"`{c.field}`" not in documented] == []
    assert len({c.key for c in TEST_COLUMNS}) == len(TEST_COLUMNS)


@pytest.mark.parametrize("view", ["terminal", "markdown", "html"])
def test_headers_are_unique_within_each_view(view: str) -> None:
    specs = [getattr(c, view) for c in MODEL_COLUMNS if getattr(c, view) is not None]
    headers = [(s.header, getattr(s, "sub", "")) for s in specs]
    assert len(set(headers)) == len(headers)


def test_the_per_test_table_draws_the_table_s_figures_in_order(errored) -> None:
    page = render_html(errored, synth.outcomes())
    head = page.split('<table id="tests"', 1)[1].split("</thead>", 1)[0]
    keys = re.findall(r'data-key="(\w+)"', head)
    assert keys == [
        "test",
        "model",
        "outcome",
        *(c.key for c in TEST_COLUMNS),
        "verdict",
        "message",
    ]
    rows, _ = report_data(page)
    qwen = rows["models"].index(synth.QWEN)
    reply = next(r for r in rows["rows"]
                 if rows["tests"][r[0]].endswith("test_reply") and r[1] == qwen)  # fmt: skip
    expected = next(
        t for t in errored.tests if t.test.endswith("test_reply") and t.model == synth.QWEN
    )
    figures = reply[9:-2]  # then the verdict note (htmldata.row_note) and "different" (differs)
    assert len(figures) == len(TEST_COLUMNS)
    for column, figure in zip(TEST_COLUMNS, figures, strict=True):
        value = column.value(expected)
        assert figure == (value if column.text is None else [column.text(value), figure[1]])
    assert figures[[c.key for c in TEST_COLUMNS].index("e2e")] == ["700 ms", 700.0]
