"""The JSON report: versioned schema, atomic write, round trip, clear errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import report_helpers as synth
from report_helpers import expanded

from pytest_slam.compare.uncertainty import Comparison
from pytest_slam.metrics.stats import Summary
from pytest_slam.records import ModelSpec, Outcome, records
from pytest_slam.report.aggregate import Verdict, aggregate
from pytest_slam.report.gate import Gate, apply_gate, evaluate
from pytest_slam.report.gate_result import Breach, GateResult
from pytest_slam.report.jsonreport import (
    SCHEMA_ID,
    ReportError,
    load_report,
    report_dict,
    report_text,
    write_json,
)
from pytest_slam.report.seal import digest_of
from pytest_slam.util.files import atomic_write

SCHEMA_MD = os.path.join(
    os.path.dirname(__file__), "..", "..", "pytest_slam", "report", "SCHEMA.md"
)


@pytest.fixture()
def written(tmp_path):
    outcomes = synth.outcomes()
    verdict = aggregate(outcomes, synth.run_info())
    path = write_json(tmp_path / "out" / "slam.json", verdict, list(reversed(outcomes)))
    return path, verdict, outcomes


def test_round_trip_keeps_verdict_and_outcomes(written) -> None:
    path, verdict, outcomes = written
    report = load_report(path)
    assert report.schema == SCHEMA_ID == "pytest-slam/report/3"
    assert report.verdict.as_dict() == verdict.as_dict()
    written_back = [o.as_dict() for o in report.outcomes]
    assert written_back == sorted(outcomes, key=lambda o: o["nodeid"])  # canonical order
    assert aggregate(report.outcomes, report.verdict.run).as_dict() == verdict.as_dict()


def test_sub_documents_read_back_as_records(tmp_path) -> None:
    """Models, comparisons, distributions and the gate are records again once read."""
    outcomes = synth.outcomes()
    verdict = aggregate(outcomes, synth.run_info())
    apply_gate(verdict, evaluate(Gate(min_pass_rate=0.99), verdict))
    read = load_report(write_json(tmp_path / "slam.json", verdict, outcomes)).verdict
    assert read.as_dict() == verdict.as_dict()
    assert isinstance(read.run.models[0], ModelSpec)
    assert read.run.model_names == verdict.run.model_names
    row = read.models[0]
    assert isinstance(row.comparisons[0], Comparison)
    assert isinstance(row.distributions["e2e_ms"], Summary)
    assert isinstance(read.gate, GateResult) and read.gate.passed is False
    assert all(isinstance(b, Breach) for m in read.gate.models for b in m.breaches)


def test_an_older_gate_without_status_still_loads() -> None:
    old = {"passed": False, "configured": True, "session_breaches": ["over budget"], "notes": [],
           "models": [{"model": "m", "passed": True}]}  # fmt: skip
    gate = Verdict.from_dict({"run": {"models": [{"name": "m"}]}, "gate": old}).gate
    assert gate is not None and gate.models[0].breaches == []
    assert (gate.status, gate.incomplete) == ("", None)


def test_document_layout(written) -> None:
    path, _, _ = written
    data = json.loads(path.read_text())
    assert list(data) == ["schema", "generated_at", "run", "models", "reference", "tests", "gate",
                          "notes", "visits", "outcomes", "digest", "signature"]  # fmt: skip
    assert data["digest"] == digest_of(data["visits"], data["outcomes"])  # seal.py
    assert data["reference"]["role"] == "reference"
    assert data["models"][1]["distributions"]["e2e_ms"]["p95"] == pytest.approx(640.0)
    with_calls = next(o for o in data["outcomes"] if o.get("calls"))
    assert "tpot_ms" not in with_calls["calls"][0]  # derived: made again when read
    assert Outcome.from_dict(with_calls).calls[0].tpot_ms is not None
    assert not [p for p in path.parent.iterdir() if p.name != "slam.json"]  # no temp left


def test_an_outcome_line_leaves_out_each_field_at_its_default(written) -> None:
    """Issue 53: a field at its default (None, False, an empty list) is not written; the line is
    read back as the whole record, and is the shorter for it."""
    path, _, outcomes = written
    lines = {json.loads(line.strip().rstrip(","))["nodeid"]: line.strip().rstrip(",")
             for line in path.read_text().splitlines() if line.startswith('    {"nodeid"')}  # fmt: skip
    assert len(lines) == len(outcomes)
    for outcome in records(Outcome, outcomes):
        line = lines[outcome.nodeid]
        assert Outcome.from_dict(json.loads(line)).as_dict() == outcome.as_dict()
        value = json.loads(line)
        assert line == json.dumps(value, separators=(",", ":"))  # no spaces, ASCII
        calls = [c for c in value.get("calls", [])]
        assert not [k for c in calls for k, v in c.items() if v is None or v is False or v == []]
        assert not [k for c in calls for k in ("tpot_ms", "tokens_per_s", "cut_by_cap") if k in c]
        assert len(line) < len(json.dumps(outcome.as_dict())) * 0.8


def test_one_line_per_outcome_and_the_same_document(written) -> None:
    """The file is the indented document, except that each outcome is one line (so a committed
    baseline's diff is a line per test), and it parses to exactly what was written."""
    path, verdict, outcomes = written
    text = path.read_text()
    lines = text.splitlines()
    start = lines.index('  "outcomes": [')
    rows = lines[start + 1 : start + 1 + len(outcomes)]
    assert [json.loads(row.strip().rstrip(",")) for row in rows] == json.loads(text)["outcomes"]
    digest = json.loads(text)["digest"]
    tail = ["  ],", f'  "digest": "{digest}",', '  "signature": null', "}"]  # no shard key
    assert lines[start + 1 + len(outcomes) :] == tail
    expected = {**report_dict(verdict, outcomes), "digest": digest}
    read = expanded(json.loads(text))  # each field at its default filled back in
    assert {**read, "generated_at": None} == {**expected, "generated_at": None}


def test_rows_made_once_are_the_document_s_outcomes_in_its_order() -> None:
    """The end of a run hands over the rows it made to scrub secrets: the document is the same
    as one that makes them again, and rows that do not match the outcomes are refused."""
    outcomes = records(Outcome, list(reversed(synth.outcomes())))
    verdict = aggregate(outcomes, synth.run_info())
    rows = [o.as_dict() for o in outcomes]
    made_again = report_dict(verdict, outcomes)
    handed = report_dict(verdict, outcomes, rows=rows)
    assert {**handed, "generated_at": None} == {**made_again, "generated_at": None}
    assert [o["nodeid"] for o in handed["outcomes"]] == sorted(o.nodeid for o in outcomes)
    assert all(any(row is r for r in rows) for row in handed["outcomes"])  # used, not copied
    with pytest.raises(ValueError, match="1 rows for"):
        report_dict(verdict, outcomes, rows=rows[:1])


def test_each_row_is_one_line_and_the_rest_is_json_indenting_encoder_s(written) -> None:
    """Each per-test row is one line, as each outcome (a committed baseline's diff is a line per
    test), whatever it holds (a non-empty egress list, a nested table, text that needs escapes);
    the rest is the indenting encoder's, and an empty report is exactly ``json.dumps(indent=2)``."""
    path, _, _ = written
    document = json.loads(path.read_text())
    rows = document["tests"]
    rows[0]["egress"] = ["api.example.com:443", "x:1"]
    rows[1]["message"] = 'a "quoted"\nline \u00e9\u2603'
    rows[2]["egress"] = [{"host": "h", "ports": [1, 2], "empty": {}}]
    rows.append({})
    rows.append({"test": "t", "model": "m", "runs": 2, "cost_usd": 1e-07, "ok": True, "x": None})
    text = report_text(document)
    assert json.loads(text)["tests"] == rows
    for row in rows:
        assert f"    {json.dumps(row, separators=(',', ':'))}" in text.splitlines()[:-1] or (
            f"    {json.dumps(row, separators=(',', ':'))}," in text.splitlines()
        )
    head = text[: text.index('  "tests": [\n')]
    expected = json.dumps({**document, "outcomes": []}, indent=2)
    assert head == expected[: expected.index('  "tests": [\n')]
    empty = {**document, "outcomes": [], "digest": digest_of(document["visits"], [])}
    no_rows = {**empty, "tests": []}
    assert report_text(no_rows) == json.dumps(no_rows, indent=2) + "\n"


def test_every_written_field_is_documented_in_schema_md(written) -> None:
    path, _, _ = written
    data = expanded(json.loads(path.read_text()))  # each field, at its default or not
    documented = Path(SCHEMA_MD).read_text(encoding="utf-8")
    fields = set(data) | set(data["run"]) | set(data["models"][0]) | set(data["tests"][0])
    outcome = next(o for o in data["outcomes"] if o["calls"] and o["pairs"])
    fields |= set(outcome) | set(outcome["calls"][0]) | set(outcome["pairs"][0])
    fields |= set(outcome["pairs"][0]["scores"][0]) | set(data["run"]["models"][0])
    distributions = data["models"][0]["distributions"]
    fields |= set(distributions) | set(distributions["e2e_ms"])
    missing = sorted(f for f in fields if f"`{f}`" not in documented)
    assert missing == []


def test_missing_file(tmp_path) -> None:
    with pytest.raises(ReportError, match=r"report not found: .*nope\.json; write one with"):
        load_report(tmp_path / "nope.json")


def test_not_json(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("<html>not json</html>")
    with pytest.raises(ReportError, match="is not a pytest-slam JSON report: not valid JSON"):
        load_report(bad)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("pytest-slam/report/0", "older schema pytest-slam/report/0; this pytest-slam reads"),
        ("pytest-slam/report/7", "newer schema pytest-slam/report/7.*Upgrade pytest-slam"),
        ("pytest-benchmark/4", "is not a pytest-slam report"),
        (None, "is not a pytest-slam report"),
    ],
)
def test_other_schemas_are_refused_with_the_reason(tmp_path, schema, message) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"schema": schema, "models": []}))
    with pytest.raises(ReportError, match=message):
        load_report(path)


def test_atomic_write_replaces_whole_file(tmp_path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old")
    atomic_write(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_nan_is_refused_rather_than_written(tmp_path) -> None:
    verdict = aggregate(synth.qwen_outcomes(), synth.run_info(models=(synth.QWEN,)))
    verdict.models[0].cost_ratio = float("nan")
    with pytest.raises(ValueError):
        write_json(tmp_path / "r.json", verdict, [])
    assert not (tmp_path / "r.json").exists()


def test_nan_in_a_streamed_outcome_leaves_no_file_and_no_temp(tmp_path) -> None:
    """Outcomes are written line by line: one JSON cannot hold, past the first, and the file is
    neither written nor left half-written (the temp file is removed)."""
    outcomes = synth.qwen_outcomes()
    verdict = aggregate(outcomes, synth.run_info(models=(synth.QWEN,)))
    outcomes[-1]["duration_s"] = float("nan")
    (tmp_path / "r.json").write_text("before", encoding="utf-8")
    with pytest.raises(ValueError):
        write_json(tmp_path / "r.json", verdict, outcomes)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
    assert (tmp_path / "r.json").read_text(encoding="utf-8") == "before"
