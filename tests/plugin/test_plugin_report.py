"""The swap verdict end to end: real pytest runs (pytester) write the table, the JSON, the gate.

The candidate and the GPT-4 reference are FakeOpenAI servers on loopback, so an inner run takes
about a second and the candidate's answers are ours to change: a run that regresses is made by
changing what the candidate answers, never by editing a report.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from html_helpers import report_data, sides
from report_helpers import read_report
from slam_helpers import MINI_PYPROJECT, PRODUCT, SLAM, TESTS

from pytest_slam.report.jsonreport import load_report
from pytest_slam.run.inputs.options import EXIT_GATE_FAILED
from pytest_slam.testing import FakeOpenAI

PYPROJECT = (
    MINI_PYPROJECT.replace('model = "gpt-4o-mini"', 'model = "{mini_id}"')
    + """
[tool.slam.models.other]
base_url = "{candidate}"
model = "gpt-4o-mini"

[tool.slam.models.newcomer]
base_url = "{candidate}"
model = "gpt-4o-mini"
"""
)
BAD = "Sorry, I am unable to help with this request today."
TIMING = {"generated_at", "started", "finished", "duration_s", "started_at", "distributions",
          "digest",  # the digest (seal.py) is of the outcomes, timings included
          # the concurrency a call met: which answers were fetched ahead, how many were in flight
          "fetched_ahead", "in_flight", "in_flight_p50", "in_flight_max", "waited_for",
          # which calls were sent alone: each worker's limiter sends its own first call alone
          "alone", "latency_alone", "latency_samples"}  # fmt: skip


class Candidate:
    """The cheaper model's answers: the reference's own while ``good``, else a useless one."""

    good = True

    def __call__(self, request: dict[str, Any]) -> str:
        return "GPT-4 says: " + request["messages"][-1]["content"] if self.good else BAD


@pytest.fixture
def candidate() -> Any:
    answers = Candidate()
    with FakeOpenAI(answers, model="gpt-4o-mini-2024-07-18") as fake:
        fake.answers = answers  # type: ignore[attr-defined]
        yield fake


@pytest.fixture
def project(pytester: pytest.Pytester, candidate: Any, fake_gpt4: Any) -> pytest.Pytester:
    """A product suite opted in to pytest-slam; the first run records the goldens."""
    pytester.makepyfile(product=PRODUCT, test_product=TESTS)
    configure(pytester, candidate, fake_gpt4, "gpt-4o-mini")
    return pytester


def configure(pytester: pytest.Pytester, candidate: Any, reference: Any, mini_id: str) -> None:
    text = PYPROJECT.format(reference=reference.base_url, candidate=candidate.base_url,
                            mini_id=mini_id)  # fmt: skip
    pytester.makefile(".toml", pyproject=text)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def record(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    result = run(project, "--slm-record=new", *args)
    assert result.ret == 0, result.stdout.str()
    return result


def slam_section(result: pytest.RunResult) -> list[str]:
    """The lines under pytest-slam's own ``=== pytest-slam ===`` separator."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if line.strip("= ") == "pytest-slam")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("===")), len(lines))
    return [line for line in lines[start + 1 : end] if line]


def said(result: pytest.RunResult) -> str:
    """pytest-slam's section as one line: long lines wrap to the terminal's width."""
    return " ".join(" ".join(slam_section(result)).split())


def load(path: Path) -> dict[str, Any]:
    return read_report(path)


def test_regression_against_a_baseline_fails_the_gate(project, candidate, monkeypatch) -> None:
    record(project, "--slm-report=base.json")
    base = load(project.path / "base.json")
    assert base["models"][0]["equivalence_mean"] == 1.0 and base["gate"]["configured"] is False
    candidate.answers.good = False  # the same suite; the candidate now answers unlike GPT-4
    monkeypatch.setenv("COLUMNS", "100")
    result = run(project, "--slm-baseline=base.json", "--slm-report=new.json")
    result.assert_outcomes(passed=3)  # the product's own assertions still hold
    assert result.ret == EXIT_GATE_FAILED
    section = slam_section(result)
    assert max(map(len, section)) <= 100
    # the E2E p95 of the calls sent alone, and beside it under the run's own load (issue 49)
    assert section[1].split() == ["model", "gate", "tests", "equiv", "worst", "TTFT", "p50",
                                  "E2E", "p95", "p95", "load", "$/1k", "calls", "vs", "ref", "$",
                                  "J/out", "tok"]  # fmt: skip
    assert "regressions: 4" in section  # the answers, never the latency of one call a test
    assert "  - mini: equivalence_all_calls 1.00 -> 0.38" in section
    assert "  - mini test_product.py::test_refund: equivalence_all_calls 1.00 -> 0.38" in section
    assert "gate: FAIL" in section
    assert section[-1] == "exit status 6: the tests passed, the gate did not pass"
    new = load(project.path / "new.json")
    assert new["gate"]["passed"] is False and new["models"][0]["gate"] == "FAIL"
    (breach,) = new["gate"]["models"][0]["breaches"]
    assert breach["rule"] == "no_regression" and breach["measured"] == 4
    without = run(project)  # the same regressed run, with no baseline to compare against
    without.assert_outcomes(passed=3)
    assert without.ret == 0 and not any("gate:" in line for line in slam_section(without))


def test_slam_report_cli_renders_html_and_diffs(project, candidate) -> None:
    record(project, "--slm-report=base.json")
    candidate.answers.good = False
    assert run(project, "--slm-report=new.json").ret == 0
    diff = project.run(*SLAM, "report", "diff", "base.json", "new.json")
    assert diff.ret == 1
    diff.stdout.fnmatch_lines(["baseline: base.json", "regressions: 4",
                               "  - mini: equivalence_all_calls 1.00 -> 0.38"])  # fmt: skip
    same = project.run(*SLAM, "report", "diff", "base.json", "base.json")
    assert same.ret == 0 and "regressions: 0" in same.stdout.lines
    render = project.run(*SLAM, "report", "new.json")
    assert render.ret == 0
    assert render.stdout.lines == ["slam report render: wrote new.html"]
    page = (project.path / "new.html").read_text(encoding="utf-8")
    assert '<g class="point" data-model="mini"' in page
    assert '<tr class="candidate" data-model="mini">' in page
    _, pairs = report_data(page)  # the word diff of every pair, drawn by the page's script
    assert len(pairs) == 3 and any(
        sides(p)[1].endswith("I <ins>am unable to help with this request today.</ins>")
        for p in pairs
    )


def normalised(report: dict[str, Any]) -> Any:
    """The report without what differs between two runs of the same suite: clocks and timings."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not _timing(k)}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(report)


def _timing(key: str) -> bool:
    return key in TIMING or key.endswith(("_ms", "tokens_per_s", "_cv"))


def test_xdist_writes_the_same_report_as_a_serial_run(project) -> None:
    record(project)
    serial = run(project, "--slm-report=report.json", "-p", "no:xdist")
    assert serial.ret == 0
    one = load(project.path / "report.json")  # the same path: run.settings holds it
    parallel = run(project, "-n", "2", "--slm-report=report.json", "--junitxml=junit.xml")
    assert parallel.ret == 0
    parallel.stdout.fnmatch_lines(["*2 workers*", "*pytest-slam*", "mini * 3/3 *"])
    two = load(project.path / "report.json")
    assert len(two["outcomes"]) == 3 and one["models"][0]["latency_samples"] == 1
    assert 1 <= two["models"][0]["latency_samples"] <= 2  # a worker's first call, sent alone
    assert normalised(one) == normalised(two)
    cases = list(ET.parse(project.path / "junit.xml").iter("testcase"))  # sent home by workers
    assert [_properties(case)["slam_model"] for case in cases] == ["mini"] * 3


# Each time an outcome line holds, and the decimals it is kept and written to (records.in_ms, to_us)
PLACES = {"ttft_ms": 3, "e2e_ms": 3, "started_at": 6, "duration_s": 6}


def test_times_are_written_to_the_microsecond_and_read_back_as_written(project) -> None:
    """A run keeps its times to the microsecond, not a float's 16 digits (about 40 bytes a case,
    issue 53): a call's ``ttft_ms`` and ``e2e_ms`` to 3 decimals, its ``started_at`` and its test's
    ``duration_s`` to 6; a reader loads the numbers written."""
    record(project)
    assert run(project, "--slm-report=report.json").ret == 0
    text = (project.path / "report.json").read_text(encoding="utf-8")
    written = {key: re.findall(rf'"{key}":([0-9][0-9.e+-]*)', text) for key in PLACES}
    assert all(len(found) >= 3 for found in written.values()), written  # a call a test
    for key, found in written.items():
        assert [round(float(n), PLACES[key]) for n in found] == [float(n) for n in found], key
    outcomes = load_report(project.path / "report.json").outcomes
    calls = [c for o in outcomes for c in o.calls]
    assert [o.duration_s for o in outcomes] == [float(n) for n in written["duration_s"]]
    for key in ("ttft_ms", "e2e_ms", "started_at"):
        assert [getattr(c, key) for c in calls] == [float(n) for n in written[key]], key


def _properties(case: ET.Element) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in case.iter("property")}  # type: ignore[misc]


def test_junit_properties_and_github_step_summary(project, monkeypatch, tmp_path) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("## earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    record(project, "--junitxml=junit.xml")
    cases = {c.get("name"): c for c in ET.parse(project.path / "junit.xml").iter("testcase")}
    props = _properties(cases["test_refund[mini]"])
    assert props["slam_model"] == "mini" and props["slam_calls"] == "1"
    assert props["slam_equivalence_mean"] == "1.0" and props["slam_score_fuzzy"] == "1.0"
    assert float(props["slam_ttft_ms"]) > 0 and float(props["slam_e2e_ms"]) > 0
    # FakeOpenAI counts words and marks: "GPT-4 says: How do I get a refund for order 1182?"
    assert (props["slam_prompt_tokens"], props["slam_completion_tokens"]) == ("17", "15")
    assert float(props["slam_cost_usd"]) == pytest.approx((17 * 0.15 + 15 * 0.60) / 1e6)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## earlier step\n### pytest-slam swap verdict (reference: gpt-4)\n")
    assert "| mini | - | 3/3 | 1.00 | 1.00 |" in text
    assert "| *gpt-4 (reference, as recorded)* | - | - | ref | - |" in text


def test_missing_or_older_baseline_is_said_and_compares_nothing(project) -> None:
    record(project)
    missing = run(project, "--slm-baseline=nope.json")
    assert missing.ret == EXIT_GATE_FAILED  # a check that could not happen is never a pass
    assert ("note: baseline not compared: pytest-slam report not found: nope.json; write one "
            "with `pytest --slm-report=nope.json` regressions: 0") in said(missing)  # fmt: skip
    assert "session: no_regression: baseline nope.json could not be read" in said(missing)
    old = {"schema": "pytest-slam/report/0", "models": [{"model": "mini"}]}
    (project.path / "old.json").write_text(json.dumps(old), encoding="utf-8")
    older = run(project, "--slm-baseline=old.json")
    assert older.ret == EXIT_GATE_FAILED
    assert ("note: baseline not compared: old.json uses the older schema pytest-slam/report/0; "
            "this pytest-slam reads pytest-slam/report/3. Re-run the tests with --slm-report to "
            "write a current report regressions: 0") in said(older)  # fmt: skip


def test_baseline_of_other_models_compares_what_both_ran(project, candidate, fake_gpt4) -> None:
    record(project, "--slm-models=mini,other", "--slm-report=base.json")
    configure(project, candidate, fake_gpt4, "gpt-4.1-mini")  # mini is now a dearer model
    result = run(project, "--slm-models=mini,newcomer", "--slm-baseline=base.json")
    result.assert_outcomes(passed=6)
    assert result.ret == EXIT_GATE_FAILED
    joined = said(result)
    for note in ("not in the baseline, not compared: newcomer",
                 "in the baseline only, not compared: other",
                 "mini was endpoint:gpt-4o-mini in the baseline and is endpoint:gpt-4.1-mini now: "
                 "compared by name"):  # fmt: skip
        assert f"note: {note}" in joined
    section = slam_section(result)
    assert "  - mini: cost_per_call_usd $0.000011 -> $0.000029" in section
    assert "regressions: 4" in section and "  newcomer: " not in joined


def test_unwritable_report_path_is_a_usage_error_before_any_call(project, candidate) -> None:
    (project.path / "afile").write_text("not a folder", encoding="utf-8")
    (project.path / "adir").mkdir()
    result = run(project, "--slm-record=new", "--slm-report=afile/run.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-slam: --slm-report=afile/run.json: cannot write "
                                 "there (*); choose a writable path."])  # fmt: skip
    html = run(project, "--slm-record=new", "--slm-html=adir")
    assert html.ret == pytest.ExitCode.USAGE_ERROR
    html.stderr.fnmatch_lines(
        ["ERROR: pytest-slam: --slm-html=adir is a directory; give a file path."]
    )
    assert candidate.hits == 0 and not (project.path / "__slam__").exists()


def test_terminal_summary_degrades_on_a_narrow_terminal(project, candidate, monkeypatch) -> None:
    record(project, "--slm-report=base.json")
    candidate.answers.good = False
    monkeypatch.setenv("COLUMNS", "60")
    section = slam_section(run(project, "--slm-baseline=base.json"))
    assert max(map(len, section)) <= 60
    assert section[1].split() == ["model", "gate", "tests", "equiv", "E2E", "p95", "vs", "ref", "$"]
    assert section[3].split()[:4] == ["mini", "FAIL", "3/3", "0.38"]
    breach = section.index("gate: FAIL") + 1
    assert section[breach].startswith("  mini: no_regression: 4 regression(s) vs")
    assert section[breach + 1].startswith("    ")  # the long breach wraps under its indent


STRICT_TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("order", range(6))
def test_refund_names_gpt4(order):
    assert product.ask(f"Refund for order {order}?").startswith("GPT-4 says")
"""


def test_the_gates_verdict_is_the_terminals_last_line(project, candidate) -> None:
    """With failures, pytest's FAILED lines and its ``N failed`` line come after the pytest-slam
    section: the gate's verdict comes after all of them, in one line."""
    project.makepyfile(test_strict=STRICT_TESTS)
    with (project.path / "pyproject.toml").open("a", encoding="utf-8") as fh:
        fh.write("\n[tool.slam.gate]\nmin_pass_rate = 0.9\n")
    record(project)
    candidate.answers.good = False
    result = run(project, "-rf")
    result.assert_outcomes(passed=3, failed=6)
    lines = [line for line in result.stdout.lines if line.strip()]
    failed = [i for i, line in enumerate(lines) if line.startswith("FAILED test_strict.py::")]
    stats = next(i for i, line in enumerate(lines) if "6 failed, 3 passed" in line)
    assert len(failed) == 6 and max(failed) < stats == len(lines) - 2
    assert (
        lines[-1]
        == "pytest-slam gate: FAIL (mini: min_pass_rate: 33.3% is below the minimum 90.0%)"
    )
    assert "gate: FAIL" in slam_section(result)  # the breaches stay listed in the section too
    candidate.answers.good = True
    passed = run(project)
    assert passed.ret == 0 and passed.stdout.lines[-1] == "pytest-slam gate: PASS"


def test_the_last_line_says_when_no_gate_is_configured(project) -> None:
    record(project)
    result = run(project, "-q")
    assert result.ret == 0
    assert result.stdout.lines[-1] == (
        "pytest-slam gate: not configured (no [tool.slam.gate] rule; 0 test(s) failed)"
    )
