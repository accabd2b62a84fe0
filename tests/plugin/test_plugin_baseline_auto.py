"""``--slm-baseline=auto``: each run's report saved in .slam/runs, the next run compared with it.

Real pytest runs (pytester) of a product suite; the GPT-4 reference and the candidate are FakeOpenAI
servers on loopback, and a regression is made by changing what the candidate answers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from slam_helpers import MINI_PYPROJECT, PRODUCT, REPORTED_TESTS, Answers

from pytest_slam.run.inputs.options import EXIT_GATE_FAILED
from pytest_slam.testing import FakeOpenAI

PYPROJECT = (
    MINI_PYPROJECT
    + """
[tool.slam.baseline]
latency_increase_ms = 60000  # loopback timings on a busy shared machine are noise, not a change
"""
)


@pytest.fixture
def project(pytester: pytest.Pytester, fake_gpt4: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("COLUMNS", "200")  # each summary line on one line
    answers = Answers()
    with FakeOpenAI(answers, model="gpt-4o-mini-2024-07-18") as candidate:
        pytester.makepyfile(product=PRODUCT, test_product=REPORTED_TESTS)
        pytester.makefile(".toml", pyproject=PYPROJECT.format(
            reference=fake_gpt4.base_url, candidate=candidate.base_url))  # fmt: skip
        yield pytester, answers


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "--slm-baseline=auto", *args)


def saved(pytester: pytest.Pytester) -> list[str]:
    return sorted(p.name for p in (pytester.path / ".slam" / "runs").iterdir())


def test_second_run_compares_with_the_first_and_catches_a_regression(project) -> None:
    pytester, answers = project
    first = run(pytester, "--slm-record=new")
    assert first.ret == 0, first.stdout.str()
    [one] = saved(pytester)
    assert one.startswith("0001_") and one.endswith("Z.json")
    first.stdout.fnmatch_lines([
        f"baseline auto: no earlier run to compare with; this run saved as .slam/runs/{one}"])  # fmt: skip
    assert "regressions:" not in first.stdout.str()
    assert (
        json.loads((pytester.path / ".slam/runs" / one).read_text())["models"][0]["model"] == "mini"
    )

    answers.good = False  # the same suite, replayed; the candidate now answers unlike GPT-4
    second = run(pytester)
    second.assert_outcomes(passed=2)  # the product's own assertions still hold
    assert second.ret == EXIT_GATE_FAILED
    one_, two = saved(pytester)
    assert one_ == one and two.startswith("0002_")
    second.stdout.fnmatch_lines([
        f"baseline: .slam/runs/{one}",
        "regressions: 3",
        "  - mini: equivalence_all_calls 1.00 -> *",
        f"baseline auto: this run saved as .slam/runs/{two}",
        "gate: FAIL*",
    ])  # fmt: skip

    third = run(pytester)  # the same answers: compared with the second run, nothing moved
    assert third.ret == 0, third.stdout.str()
    third.stdout.fnmatch_lines([f"baseline: .slam/runs/{two}", "regressions: 0"])
    assert (pytester.path / ".slam" / ".gitignore").is_file()  # never shows in git status


def test_under_xdist_only_the_controller_saves(project) -> None:
    pytester, _ = project
    assert run(pytester, "--slm-record=new").ret == 0
    result = run(pytester, "-n", "2")
    assert result.ret == 0, result.stdout.str()
    one, two = saved(pytester)
    result.stdout.fnmatch_lines([f"baseline: .slam/runs/{one}", "regressions: 0",
                                 f"baseline auto: this run saved as .slam/runs/{two}"])  # fmt: skip


NOISY_PYPROJECT = MINI_PYPROJECT  # the default tolerances: 50 ms and 20%, p95 from 20 calls a side


@pytest.fixture
def noisy(pytester: pytest.Pytester, fake_gpt4: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A candidate whose answers never change and whose speed does, as a loaded machine's would
    (set ``latency_s`` between runs: the noise is chosen, not measured, so no verdict hangs on
    this machine's speed)."""
    monkeypatch.setenv("COLUMNS", "200")
    with FakeOpenAI(Answers(), model="gpt-4o-mini-2024-07-18") as candidate:
        pytester.makepyfile(product=PRODUCT, test_product=REPORTED_TESTS)
        pytester.makefile(".toml", pyproject=NOISY_PYPROJECT.format(
            reference=fake_gpt4.base_url, candidate=candidate.base_url))  # fmt: skip
        yield pytester, candidate


def test_two_identical_runs_of_a_noisy_candidate_are_no_regression(noisy) -> None:
    pytester, candidate = noisy
    assert run(pytester, "--slm-record=new").ret == 0
    candidate.latency_s = 0.4  # one call a test, each ~400 ms slower: +>50 ms and +>20%
    second = run(pytester)
    assert second.ret == 0, second.stdout.str()
    second.stdout.fnmatch_lines([
        "note: E2E p95 not compared for 3 row(s) with fewer than 20 measured calls on a side*",
        "regressions: 0",
        "gate: PASS",
    ])  # fmt: skip


def test_the_latency_rule_still_counts_once_it_has_its_samples(noisy) -> None:
    pytester, candidate = noisy
    pyproject = pytester.path / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text() + "\n[tool.slam.baseline]\nlatency_min_samples = 1\n"
    )
    assert run(pytester, "--slm-record=new").ret == 0
    candidate.latency_s = 0.4
    second = run(pytester)
    assert second.ret == EXIT_GATE_FAILED, second.stdout.str()
    second.stdout.fnmatch_lines(["regressions: 3", "  - mini: e2e_p95_ms * -> *", "gate: FAIL*"])


def test_an_unreadable_last_run_fails_the_gate_in_one_line(project) -> None:
    pytester, _ = project
    assert run(pytester, "--slm-record=new").ret == 0
    [one] = saved(pytester)
    (pytester.path / ".slam" / "runs" / one).write_text('{"schema": "pytest-slam/rep')  # cut off
    second = run(pytester)
    second.assert_outcomes(passed=2)
    assert second.ret == EXIT_GATE_FAILED, second.stdout.str()
    out = second.stdout.str()
    assert "gate: PASS" not in out and "Traceback" not in out
    assert f"  session: no_regression: baseline .slam/runs/{one} could not be read" in out
    assert "replace or delete it" in out
    assert out.splitlines()[-1] == (
        f"pytest-slam gate: FAIL (session: no_regression: baseline .slam/runs/{one} could not be read)"
    )


ONE_CALL = """
import os, openai, pytest

pytestmark = pytest.mark.slm

def test_x():
    openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "hi"}])
    assert not os.path.exists("broken")
"""


def one_candidate(base_url: str) -> str:
    """A project with one candidate at ``base_url``, no reference, no [tool.slam.baseline]."""
    return f"""
[tool.slam]
reference = "none"
candidates = ["mini"]

[tool.slam.models.mini]
base_url = "{base_url}"
"""


def test_a_baseline_run_with_no_gate_does_not_say_pass_beside_failed_tests(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A baseline given, no [tool.slam.gate]: nothing regressed (the test failed in the baseline
    run too), but it failed, so the last line says so instead of "gate: PASS" over exit 1."""
    monkeypatch.setenv("COLUMNS", "200")
    pytester.makepyfile(test_x=ONE_CALL)
    with FakeOpenAI("hello") as fake:
        pytester.makefile(
            ".toml",
            pyproject=one_candidate(fake.base_url)
            + "\n[tool.slam.baseline]\nlatency_increase_ms = 60000\n",
        )
        (pytester.path / "broken").write_text("")
        first = run(pytester)
        first.assert_outcomes(failed=1)
        second = run(pytester)  # compared with the first: nothing moved
    second.assert_outcomes(failed=1)
    assert second.ret == 1
    last = second.stdout.lines[-1]
    assert not last.startswith("pytest-slam gate: PASS"), last
    assert last == (
        "pytest-slam gate: no breach of its rules (a baseline alone checks only regressions), "
        "but 1 test(s) failed: the run fails"
    )


def test_a_latency_percentage_on_the_command_line_has_no_silent_ms_floor(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--slm-baseline-fail=p95_e2e_ms:1%`` means 1%: the 50 ms default floor no longer applies
    unseen (the tolerances line says what was used); given with an ms limit, both apply."""
    monkeypatch.setenv("COLUMNS", "200")
    pytester.makepyfile(test_x=ONE_CALL)
    with FakeOpenAI("hello") as fake:
        pytester.makefile(".toml", pyproject=one_candidate(fake.base_url))
        assert run(pytester).ret == 0
        percent = run(pytester, "--slm-baseline-fail=p95_e2e_ms:1%")
        both = run(pytester, "--slm-baseline-fail=p95_e2e_ms:1%,p95_e2e_ms:30")
    percent.stdout.fnmatch_lines(["tolerances: *E2E p95 up > 1% and > 0 ms*"])
    both.stdout.fnmatch_lines(["tolerances: *E2E p95 up > 1% and > 30 ms*"])


def test_the_html_report_draws_the_saved_runs_as_a_trend(project) -> None:
    """With --slm-baseline=auto the HTML report charts each model's mean equivalence across the
    saved runs, this run last, each run dated: a drop shows as the line's last point; the pass
    rate, failed calls and p95 have their own charts."""
    import re

    pytester, answers = project
    first = run(pytester, "--slm-record=new", "--slm-html=r.html")
    assert first.ret == 0, first.stdout.str()
    assert 'id="trend"' not in (pytester.path / "r.html").read_text(encoding="utf-8")  # no runs
    assert run(pytester).ret == 0
    answers.good = False
    run(pytester, "--slm-html=r.html")
    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    chart = re.search(r'<svg id="trend".*?</svg>', page, re.S)
    assert chart is not None, "no trend chart"
    series = re.search(r'<g class="series" data-model="mini">(.*?)</g>', chart.group(0), re.S)
    assert series is not None, chart.group(0)
    points = re.findall(
        r'data-run="([^"]+)" data-when="([^"]*)" data-y="([\d.]+)"', series.group(1)
    )
    assert [run_ for run_, _, _ in points] == ["0001", "0002", "now"]
    assert float(points[0][2]) == float(points[1][2]) == 1.0 > float(points[2][2])
    # each run dated (UTC, from its saved name; this run from its start)
    stamps = [p.name.split("_")[1] for p in sorted((pytester.path / ".slam/runs").iterdir())]
    assert [w for _, w, _ in points[:2]] == [
        f"{s[:4]}-{s[4:6]}-{s[6:8]} {s[9:11]}:{s[11:13]}" for s in stamps[:2]
    ]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", points[2][1])
    # and the other metrics a user compares, one chart each
    for chart_id in ("trend-pass-rate", "trend-calls-failed", "trend-e2e-p95-ms"):
        assert f'id="{chart_id}"' in page, chart_id
